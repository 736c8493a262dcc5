"""The data pass: planning, partition tasks, lanes of series, executors, schedulers and checkpoints."""
