"""streamridge: exact K-fold ridge regression and feature selection from one streamed pass.

One pass over the rows accumulates per-(fold, class) sufficient statistics;
lambda search and feature selection then work on N x N matrices only, at a
cost independent of the number of rows (Buteneers et al., 2013).
"""

from __future__ import annotations

__version__ = "0.1.0"

from .errors import StreamRidgeError
from .estimators import StreamRidgeClassifierCV, StreamRidgeCV
from .stats import FoldStats, load_stats, merge, save_stats

__all__ = [
    "FoldStats",
    "StreamRidgeCV",
    "StreamRidgeClassifierCV",
    "StreamRidgeError",
    "__version__",
    "load_stats",
    "merge",
    "save_stats",
]


def load_model(path: str):  # type: ignore[no-untyped-def]
    """Load a fitted estimator from a model file (no pickle); see :mod:`streamridge.model_io`."""
    from .model_io import load_model as _load

    return _load(path)


__all__.append("load_model")
