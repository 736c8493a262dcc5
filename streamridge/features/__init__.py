"""Feature maps applied chunk by chunk inside the data pass (never written to disk).

=====================  =====================================================================
``RandomHidden``       ELM hidden layer (tanh, sigmoid, relu, rbf); ``direct=True``: RVFL
``EchoStateNetwork``   leaky reservoir, drawn or given, state carried within each series (stateful)
``Nystroem``           kernel features from sampled or given basis rows (rbf, laplacian, polynomial)
``Distances``          distances to sampled or given reference points
``Delays``             time-delay embedding within each series (stateful)
``Concat``             several maps side by side
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

from streamridge.features._base import FeatureMap, check_features, fitted_problem, sample_rows
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

__all__ = [
    "MAPS",
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
