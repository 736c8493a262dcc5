"""Per-fold training and validation quadratic forms built from the statistics."""
