"""Feature maps applied chunk by chunk inside the data pass (never written to disk).

=====================  =====================================================================
``RandomHidden``       ELM hidden layer (tanh, sigmoid, relu, rbf); ``direct=True``: RVFL
``EchoStateNetwork``   leaky reservoir, drawn or given, state carried within each series (stateful)
``Nystroem``           kernel features from sampled or given basis rows (rbf, laplacian, polynomial)
``Distances``          distances to sampled or given reference points
``Delays``             time-delay embedding within each series (stateful)
``Concat``             several maps side by side
``Candidates``         candidate maps run in one pass, each its own model (``FeatureMap.grid``)
``Pipeline``           maps in sequence
=====================  =====================================================================

Every map is a scikit-learn transformer and is described by JSON-able parameters
plus arrays (``to_dict`` / :func:`from_dict`, :func:`encode` / :func:`decode`).
The pass calls the pure ``apply_chunk(X, row_start, groups, state) -> (features, state)``.

Example
-------
>>> import streamridge as sr
>>> from streamridge.features import EchoStateNetwork
>>> model = sr.StreamRidgeCV(cv="groups", features=EchoStateNetwork(500, washout=100),
...                          feature_prefixes=[100, 200, 500])          # doctest: +SKIP
>>> model.fit(u, y, groups=series_id).predict(u_new)                    # doctest: +SKIP
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the maps import scikit-learn: loaded on first use, so `info` and `--help` stay light
    from streamridge.features._base import FeatureMap, check_features, fitted_problem, sample_rows
    from streamridge.features._candidates import Candidates
    from streamridge.features._compose import Concat, Pipeline
    from streamridge.features._delays import Delays
    from streamridge.features._kernel import Distances, Nystroem
    from streamridge.features._random import RandomHidden
    from streamridge.features._registry import (
        MAPS,
        decode,
        describe,
        encode,
        from_dict,
        from_json,
        make_map,
        map_class,
        read_features_file,
        to_json,
    )
    from streamridge.features._reservoir import EchoStateNetwork

_LAZY = {
    "Candidates": "streamridge.features._candidates",
    "Concat": "streamridge.features._compose",
    "Delays": "streamridge.features._delays",
    "Distances": "streamridge.features._kernel",
    "EchoStateNetwork": "streamridge.features._reservoir",
    "FeatureMap": "streamridge.features._base",
    "MAPS": "streamridge.features._registry",
    "Nystroem": "streamridge.features._kernel",
    "Pipeline": "streamridge.features._compose",
    "RandomHidden": "streamridge.features._random",
    "check_features": "streamridge.features._base",
    "decode": "streamridge.features._registry",
    "describe": "streamridge.features._registry",
    "encode": "streamridge.features._registry",
    "fitted_problem": "streamridge.features._base",
    "from_dict": "streamridge.features._registry",
    "from_json": "streamridge.features._registry",
    "make_map": "streamridge.features._registry",
    "map_class": "streamridge.features._registry",
    "read_features_file": "streamridge.features._registry",
    "sample_rows": "streamridge.features._base",
    "to_json": "streamridge.features._registry",
}

__all__ = [
    "MAPS",
    "Candidates",
    "Concat",
    "Delays",
    "Distances",
    "EchoStateNetwork",
    "FeatureMap",
    "Nystroem",
    "Pipeline",
    "RandomHidden",
    "check_features",
    "decode",
    "describe",
    "encode",
    "fitted_problem",
    "from_dict",
    "from_json",
    "make_map",
    "map_class",
    "read_features_file",
    "sample_rows",
    "to_json",
]


def __getattr__(name: str) -> Any:
    """The public names, imported from their module on first use."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
