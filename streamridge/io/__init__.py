"""Files: model and statistics file schemas, and the rule for writing outputs."""
