"""What an estimator's pass writes into the metadata of its statistics, and what a fit from statistics reads back.

:func:`pass_meta` describes the statistics of a pass (folds, classes, features, names,
the fitted feature map); :func:`read_stats_meta` recovers from them what
:meth:`~streamridge.StreamRidgeCV.fit_stats` needs to select and use a model without rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from streamridge._version import __version__
from streamridge.datapass.driver import PassSpec
from streamridge.errors import ParameterError
from streamridge.folds.schemes import FoldScheme, plain
from streamridge.stats.foldstats import FoldStats


def pass_meta(spec: PassSpec, src: Any, *, labels: Any, classifier: bool, y_1d: bool) -> dict[str, Any]:
    """Metadata of a pass's statistics (with a feature map: the fitted map, so a model fitted from them has it).

    Parameters
    ----------
    spec : PassSpec
        The pass's folds, classes, targets and feature map.
    src : Source
        The rows of the pass (feature and target names, description).
    labels : array or None
        A classifier's class labels, in the order of ``spec.classes``.
    classifier, y_1d : bool
        The task; whether y is 1-D.
    """
    fmap = spec.features
    meta = {
        "scheme": spec.scheme.to_dict(),
        "classes": None if spec.classes is None else [plain(c) for c in labels],
        "n_features": src.n_features() if fmap is None else fmap.n_features_out_,
        "n_targets": spec.n_targets,
        "task": "classification" if classifier else "regression",
        "feature_names": (list(src.feature_names) if getattr(src, "feature_names", None) else None)
        if fmap is None
        else [str(n) for n in fmap.get_feature_names_out()],
        "target_names": list(src.target_names) if getattr(src, "target_names", None) else None,
        "y_1d": bool(y_1d),
        "streamridge_version": __version__,
    }
    if fmap is not None:
        from streamridge.features import to_json

        meta["features"] = to_json(fmap)
    meta["source"] = str(getattr(src, "description", "") or "") or None
    return meta


@dataclass
class StatsModel:
    """What statistics tell a fit from them (see :func:`read_stats_meta`).

    Attributes
    ----------
    spec : PassSpec
        Folds, class codes and targets of the statistics.
    labels : array or None
        A classifier's class labels.
    y_1d : bool
    n_features_in : int
        Inputs of the model: the statistics' features, or the inputs of their feature map.
    feature_names : array of str or None
    features : FeatureMap or None
        The fitted map the statistics were accumulated with (the model applies it).
    """

    spec: PassSpec
    labels: np.ndarray | None
    y_1d: bool
    n_features_in: int
    feature_names: np.ndarray | None
    features: Any


def read_stats_meta(stats: FoldStats, *, classifier: bool) -> StatsModel:
    """The model-facing facts of ``stats``; statistics of the other task are refused.

    Raises
    ------
    ParameterError
        Statistics of a classifier fitted by the regressor, or the reverse.
    """
    meta = stats.meta
    task = meta.get("task", "regression")
    if (task == "classification") != classifier:
        fix = (
            "StreamRidgeClassifierCV (--classify)"
            if task == "classification"
            else "StreamRidgeCV (no --classify)"
        )
        raise ParameterError(f"these statistics are for {task}; fit them with {fix}")
    classes = meta.get("classes")
    scheme = FoldScheme.from_dict(meta["scheme"]) if "scheme" in meta else FoldScheme("hash", stats.n_folds)
    if classes is None:
        codes = None
    else:
        codes = tuple(range(len(classes))) if meta.get("classes_encoded", True) else tuple(classes)
    features = None
    if meta.get("features") is not None:  # statistics of a map's features: the model applies the map
        from streamridge.features import from_json

        features = from_json(meta["features"])
    return StatsModel(
        spec=PassSpec(scheme, codes, stats.n_targets),
        labels=None if classes is None else np.asarray(classes),
        y_1d=bool(meta.get("y_1d", stats.n_targets == 1)),
        n_features_in=stats.n_features if features is None else int(features.n_features_in_),
        feature_names=np.asarray(meta["feature_names"], dtype=object) if meta.get("feature_names") else None,
        features=features,
    )
