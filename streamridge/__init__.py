"""streamridge: exact K-fold ridge regression and feature selection from one streamed pass.

One pass over the rows accumulates per-(fold, class) sufficient statistics;
lambda search and feature selection then work on N x N matrices only, at a
cost independent of the number of rows (Buteneers et al., 2013).
"""

from __future__ import annotations

__version__ = "0.1.0"

from typing import TYPE_CHECKING, Any

from .errors import StreamRidgeError

if TYPE_CHECKING:  # imported on first use: `import streamridge` stays fast (no scikit-learn, dask, zarr)
    from .estimators import StreamRidgeClassifierCV, StreamRidgeCV
    from .stats import FoldStats, load_stats, merge, save_stats

_LAZY = {
    "StreamRidgeCV": ".estimators",
    "StreamRidgeClassifierCV": ".estimators",
    "FoldStats": ".stats",
    "load_stats": ".stats",
    "merge": ".stats",
    "save_stats": ".stats",
}

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
