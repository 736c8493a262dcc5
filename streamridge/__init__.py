"""streamridge: exact K-fold ridge regression and feature selection from one streamed pass.

One pass over the rows accumulates per-(fold, class) sufficient statistics;
lambda search and feature selection then work on N x N matrices only, at a
cost independent of the number of rows (Buteneers et al., 2013).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streamridge._version import __version__
from streamridge.errors import StreamRidgeError

if TYPE_CHECKING:  # imported on first use: `import streamridge` stays fast (no scikit-learn, dask, zarr)
    from streamridge.estimators.forecast import forecast, multistep_forecasts
    from streamridge.estimators.ridge import StreamRidgeClassifierCV, StreamRidgeCV
    from streamridge.stats.foldstats import FoldStats, load_stats, merge, save_stats

_LAZY = {
    "StreamRidgeCV": ".estimators.ridge",
    "StreamRidgeClassifierCV": ".estimators.ridge",
    "FoldStats": ".stats.foldstats",
    "load_stats": ".stats.foldstats",
    "merge": ".stats.foldstats",
    "save_stats": ".stats.foldstats",
    "forecast": ".estimators.forecast",
    "multistep_forecasts": ".estimators.forecast",
}

__all__ = [
    "FoldStats",
    "StreamRidgeCV",
    "StreamRidgeClassifierCV",
    "StreamRidgeError",
    "__version__",
    "forecast",
    "load_stats",
    "merge",
    "multistep_forecasts",
    "save_stats",
]


def load_model(path: str):  # type: ignore[no-untyped-def]
    """Load a fitted estimator from a model file (no pickle); see :mod:`streamridge.io.model_file`."""
    from streamridge.io.model_file import load_model as _load

    return _load(path)


__all__.append("load_model")


def __getattr__(name: str) -> Any:
    """Import the public classes and functions on first access (PEP 562)."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
