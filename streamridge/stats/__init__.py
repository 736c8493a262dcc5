"""Per-(fold, class) sufficient statistics: the accumulator kernel, merging, files, memory and magnitude checks."""

from streamridge.stats.foldstats import FoldStats, load_stats, merge, merge_all, save_stats

__all__ = ["FoldStats", "load_stats", "merge", "merge_all", "save_stats"]
