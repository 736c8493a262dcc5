"""The data pass: one driver runs a kernel over the rows of a source, in partitions or in lanes of series."""
