"""Model files: one self-describing ``.npz`` per fitted estimator, no pickle.

Layout of a model file (``np.savez``, read back with ``allow_pickle=False``):

.. code-block:: text

    header_json        uint8 bytes of a UTF-8 JSON object (see below)
    coef               (n_features,) or (n_targets, n_features)
    intercept          () or (n_targets,)
    alpha              () or (n_targets,)
    alphas             (n_alphas,)
    cv_errors          (n_alphas,) or (n_alphas, n_targets)
    fold_errors        (n_alphas, n_folds, n_targets)
    support            (n_features,) bool
    fold_weight        (n_folds, n_classes) weight of every (fold, class) cell
    classes            (n_classes,) classifier labels (int, float, bool or str)
    selected_features  (n_selected,) when a feature selection ran
    selection_path     (n_steps,) structured array of the selection steps, when a selection ran
    nested_cv_errors   (n_folds,) or (n_folds, n_targets), with nested=True (summary in the header)
    cv_scores          (n_alphas, n_folds[, n_targets]) metric per lambda and fold, with scoring
    cv_confusion       (n_folds, n_classes, n_classes) a classifier's confusion counts at the chosen lambda
    rescore_steps, rescore_scores  (rescore,) with rescore
    band_*             a banded model's bands, weights and scores (:mod:`streamridge.io.band_arrays`)
    stats_<name>       the FoldStats arrays, with ``include_stats=True``

The header holds ``format`` ("streamridge-model"), ``format_version``, the
streamridge version, the estimator class and its JSON-safe parameters, feature
and target names, ``n_features_in_``, the fold scheme, timings, the selection
path, the ``y_1d`` flag, the classes and (optional) the data ``source`` and the
row count of every (fold, class) cell ``fold_count``; a banded model's ``band_names`` and
``band_summary``.  A reader of a newer format version
refuses the file instead of guessing.
"""

from __future__ import annotations

import json
import os
import zipfile
from typing import Any

import numpy as np

from streamridge._version import __version__
from streamridge.datapass.spec import PassSpec
from streamridge.errors import ModelFileError
from streamridge.folds.schemes import FoldScheme
from streamridge.io.band_arrays import band_arrays, load_bands
from streamridge.io.model_json import UNSAFE, decode_path, encode_path, json_safe
from streamridge.io.schema import check_model, not_an_npz
from streamridge.report.summary import band_summary, estimator_summary
from streamridge.stats.foldstats import STATS_FORMAT, FoldStats, atomic_write_npz

MODEL_FORMAT = "streamridge-model"
MODEL_VERSION = 1
_STATS_ARRAYS = ("weight", "count", "mean_x", "mean_y", "sxx", "sxy", "syy")
_SCORE_ARRAYS = ("cv_scores", "cv_confusion", "rescore_steps", "rescore_scores")
_CORE_ARRAYS = ("coef", "intercept", "alpha", "alphas", "cv_errors", "fold_errors", "support")


def _params(estimator: Any) -> tuple[dict[str, Any], list[str]]:
    """JSON-safe ``get_params()`` and the names of the parameters that had to be dropped."""
    kept: dict[str, Any] = {}
    dropped: list[str] = []
    for name, value in estimator.get_params(deep=False).items():
        # cv given as splits: the header's fold scheme records the folds (digest, runs), not O(rows) index lists
        safe = UNSAFE if name == "cv" and not isinstance(value, (int, np.integer, str)) else json_safe(value)
        if safe is UNSAFE:
            dropped.append(name)
        else:
            kept[name] = safe
    return kept, dropped


# ---------------------------------------------------------------------- save
def save_model(estimator: Any, path: str | os.PathLike[str], *, include_stats: bool = False) -> None:
    """Write a fitted estimator to one ``.npz`` model file, atomically.

    Parameters
    ----------
    estimator : StreamRidgeCV or StreamRidgeClassifierCV
        Fitted.
    path : str or path-like
        The file to write (replaced if it exists; any suffix is kept as given).
    include_stats : bool
        Also store the :class:`~streamridge.stats.foldstats.FoldStats`, so that the loaded
        model can be re-selected with ``fit_stats(model.stats_)``.

    Raises
    ------
    ModelFileError
        If the estimator is not fitted, or ``include_stats`` without statistics.
    """
    if not hasattr(estimator, "coef_") or not hasattr(estimator, "_spec"):
        raise ModelFileError(
            f"{getattr(estimator, '_model_name', type(estimator).__name__)} is not fitted; call fit before save_model"
        )
    stats: FoldStats | None = getattr(estimator, "stats_", None)
    if include_stats and stats is None:
        raise ModelFileError(
            "include_stats=True but the estimator has no stats_ (it was loaded without them)"
        )
    arrays = _model_arrays(estimator, stats)
    header = _header(estimator, stats, include_stats=include_stats)
    if include_stats and stats is not None:
        for name in _STATS_ARRAYS:
            arrays[f"stats_{name}"] = np.asarray(getattr(stats, name))
    _add_features(estimator, header, arrays)
    arrays["header_json"] = np.frombuffer(json.dumps(header, allow_nan=False).encode(), dtype=np.uint8)
    atomic_write_npz(path, arrays)


def _add_features(estimator: Any, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """The feature map (JSON description + ``fmap.*`` arrays) and the prefix curve, when there are any."""
    fmap = getattr(estimator, "features_", None)
    if fmap is not None:
        from streamridge.features import encode

        header["features"], fmap_arrays = encode(fmap)
        header["n_model_features"] = int(
            fmap.n_features_out_
        )  # width of coef (n_features_in is the raw width)
        arrays.update(fmap_arrays)
    if hasattr(estimator, "prefix_sizes_"):
        header["prefixes"] = json_safe(
            {
                "sizes": estimator.prefix_sizes_,
                "errors": estimator.prefix_errors_,
                "alphas": estimator.prefix_alphas_,
                "n_features_selected": estimator.n_features_selected_,
            }
        )


def _load_features(est: Any, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> int:
    """Set ``features_`` and the prefix attributes; return the width of ``coef_``."""
    p = header.get("prefixes")
    if p:
        est.prefix_sizes_ = np.asarray(p["sizes"], dtype=np.int64)
        est.prefix_errors_ = np.asarray(p["errors"], dtype=np.float64)
        est.prefix_alphas_ = np.asarray(p["alphas"], dtype=np.float64)
        est.n_features_selected_ = int(p["n_features_selected"])
    if not header.get("features"):
        return int(header["n_features_in"])
    from streamridge.features import decode

    est.features_ = decode(header["features"], arrays)
    est.features = est.features_
    return int(est.features_.n_features_out_)


def _model_arrays(estimator: Any, stats: FoldStats | None) -> dict[str, np.ndarray]:
    arrays = {
        "coef": np.asarray(estimator.coef_, dtype=np.float64),
        "intercept": np.asarray(estimator.intercept_, dtype=np.float64),
        "alpha": np.asarray(estimator.alpha_, dtype=np.float64),
        "alphas": np.asarray(estimator.alphas_, dtype=np.float64),
        "cv_errors": np.asarray(estimator.cv_errors_, dtype=np.float64),
        "fold_errors": np.asarray(estimator.fold_errors_, dtype=np.float64),
        "support": np.asarray(estimator.support_, dtype=bool),
    }
    fold_weight = stats.weight if stats is not None else getattr(estimator, "_fold_weight", None)
    if fold_weight is not None:
        arrays["fold_weight"] = np.asarray(fold_weight, dtype=np.float64)
    if estimator._spec.classes is not None:
        labels = np.asarray(estimator.classes_)
        if labels.dtype.kind not in "biufU":
            labels = labels.astype(str)
        arrays["classes"] = labels
    path = getattr(estimator, "selection_path_", None)
    if isinstance(path, np.ndarray) and path.dtype.kind != "O" and not path.dtype.hasobject:
        arrays["selection_path"] = path
    if hasattr(estimator, "selected_features_"):
        arrays["selected_features"] = np.asarray(estimator.selected_features_, dtype=np.int64)
    if hasattr(estimator, "nested_cv_errors_"):
        arrays["nested_cv_errors"] = np.asarray(estimator.nested_cv_errors_, dtype=np.float64)
    for name in _SCORE_ARRAYS:
        if hasattr(estimator, name + "_"):
            arrays[name] = np.asarray(getattr(estimator, name + "_"))
    arrays.update(band_arrays(estimator))
    return arrays


def _header(estimator: Any, stats: FoldStats | None, *, include_stats: bool) -> dict[str, Any]:
    params, dropped = _params(estimator)
    spec: PassSpec = estimator._spec
    labels = None if spec.classes is None else np.asarray(estimator.classes_)
    meta = {} if stats is None else stats.meta
    names = getattr(estimator, "feature_names_in_", getattr(estimator, "feature_names_", None))
    target_names = meta.get("target_names", getattr(estimator, "target_names_", None))
    path = getattr(estimator, "selection_path_", None)
    header: dict[str, Any] = {
        "format": MODEL_FORMAT,
        "format_version": MODEL_VERSION,
        "streamridge_version": __version__,
        "estimator": getattr(estimator, "_model_name", type(estimator).__name__),
        "params": params,
        "params_dropped": dropped,
        "task": "classification" if spec.classes is not None else "regression",
        "n_features_in": int(estimator.n_features_in_),
        "n_targets": int(spec.n_targets),
        "feature_names": None if names is None else [str(n) for n in names],
        "target_names": None if target_names is None else [str(n) for n in target_names],
        "y_1d": bool(estimator._y_1d),
        "classes": None if labels is None else json_safe(labels.tolist(), str),
        "classes_dtype": None if labels is None else labels.dtype.str,
        "pass_classes": None if spec.classes is None else json_safe(list(spec.classes), str),
        "scheme": spec.scheme.to_dict(),
        "n_folds": int(estimator.n_folds_),
        "n_rows": None if stats is None else stats.n_rows,
        "timings": json_safe(dict(getattr(estimator, "timings_", {}) or {})),
        "selection_path": None,
        "has_stats": bool(include_stats),
        "stats_meta": json_safe(meta) if include_stats else None,
    }
    previous = getattr(estimator, "_model_header", {})
    if header["n_rows"] is None:
        header["n_rows"] = previous.get("n_rows")
    # optional since 0.1 (readers must not require them): the data source and per-(fold, class) row counts
    header["source"] = meta.get("source", previous.get("source"))
    header["fold_count"] = stats.count.tolist() if stats is not None else previous.get("fold_count")
    header["cv_summary"] = (
        previous.get("cv_summary") if stats is None and previous else estimator_summary(estimator)
    )
    selected = getattr(estimator, "selected_features_", None)
    header["selected_features"] = None if selected is None else [int(i) for i in selected]
    if path is not None:
        header["selection_path"] = encode_path(path)
    best = getattr(estimator, "selection_best_step_", None)
    header["selection_best_step"] = None if best is None else int(best)
    header["nested_summary"] = json_safe(getattr(estimator, "nested_summary_", None))
    header["candidates"] = json_safe(getattr(estimator, "candidates_", None))
    from streamridge.model_selection.scoring import (
        score_summary,  # the metric pass's modules (scipy): not for `streamridge info`
    )

    header["score_summary"] = json_safe(score_summary(estimator))
    names = getattr(estimator, "band_names_", None)
    header["band_names"] = None if names is None else [str(n) for n in names]
    header["band_summary"] = json_safe(band_summary(estimator))
    if header["stats_meta"] is UNSAFE:
        header["stats_meta"] = json_safe(meta, str)
    return header


# ---------------------------------------------------------------------- load
def read_model(path: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Read and check the header and the arrays of a model file (no estimator is built).

    Returns
    -------
    header : dict
    arrays : dict of str to ndarray

    Raises
    ------
    ModelFileError
        Missing file, not a streamridge model, corrupted, or a newer format version.
    """
    name = os.fspath(path)
    if not os.path.exists(name):
        raise ModelFileError(f"model file {name!r} does not exist")
    if os.path.isdir(name):
        raise ModelFileError(f"{name!r} is a directory, not a streamridge model file")
    what = not_an_npz(name)
    if what is not None:
        raise ModelFileError(
            f"{name!r} is not a readable streamridge model file: it is {what}, not a .npz archive"
        )
    try:
        with np.load(name, allow_pickle=False) as z:
            if "header_json" not in z.files:
                kind = "statistics file" if "meta_json" in z.files else "file"
                raise ModelFileError(f"{name!r} is a .npz {kind} but not a streamridge model (no header)")
            header = json.loads(bytes(z["header_json"]).decode())
            _check_header(header, name)
            arrays = {k: np.array(z[k]) for k in z.files if k != "header_json"}
    except ModelFileError:
        raise
    except (zipfile.BadZipFile, ValueError, OSError, KeyError, EOFError, UnicodeDecodeError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ModelFileError(f"{name!r} is not a readable streamridge model file ({reason})") from exc
    missing = [k for k in _CORE_ARRAYS if k not in arrays]
    if missing:
        raise ModelFileError(f"model file {name!r} is corrupted: missing arrays {missing}")
    check_model(header, arrays, name)
    return header, arrays


def _check_header(header: Any, name: str) -> None:
    if not isinstance(header, dict):
        raise ModelFileError(f"{name!r} is not a streamridge model file (bad header)")
    fmt = header.get("format")
    if fmt == STATS_FORMAT:
        raise ModelFileError(
            f"{name!r} is a statistics file, not a model; fit one with `streamridge fit --stats`"
        )
    if fmt != MODEL_FORMAT:
        raise ModelFileError(f"{name!r} is not a streamridge model file (format {fmt!r})")
    version = header.get("format_version")
    if not isinstance(version, int) or version < 1:
        raise ModelFileError(f"{name!r} has an invalid model format version {version!r}")
    if version > MODEL_VERSION:
        raise ModelFileError(
            f"{name!r} has model format {version}, newer than this streamridge "
            f"({__version__}, format {MODEL_VERSION}); upgrade streamridge to read it"
        )


def load_model(path: str | os.PathLike[str]) -> Any:
    """Rebuild a fitted estimator from a file written by :func:`save_model`.

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    StreamRidgeCV or StreamRidgeClassifierCV
        ``predict``, ``decision_function`` and ``score`` give the same outputs
        as the estimator that was saved.  ``stats_`` is present only if the file
        was written with ``include_stats=True``.

    Raises
    ------
    ModelFileError
        Missing file, not a streamridge model, corrupted, or a newer format version.
    """
    return _load(path, core=False)


def load_model_core(path: str | os.PathLike[str]) -> Any:
    """:func:`load_model` as the scikit-learn-free classes of :mod:`streamridge.estimators.core`.

    What ``streamridge predict`` uses: it predicts from sources (dask arrays), never
    validates in-memory input, so it does not import scikit-learn.
    """
    return _load(path, core=True)


def _load(path: str | os.PathLike[str], *, core: bool) -> Any:
    header, arrays = read_model(path)
    name = os.fspath(path)
    try:
        est = _build(header, arrays, core=core)
    except ModelFileError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelFileError(f"model file {name!r} is corrupted ({type(exc).__name__}: {exc})") from exc
    return est


def _estimator_class(name: str, *, core: bool = False) -> type:
    classes: dict[str, type]
    if core:
        from streamridge.estimators.core import RidgeClassifierCVCore, RidgeCVCore

        classes = {"StreamRidgeCV": RidgeCVCore, "StreamRidgeClassifierCV": RidgeClassifierCVCore}
    else:
        from streamridge.estimators.ridge import StreamRidgeClassifierCV, StreamRidgeCV

        classes = {"StreamRidgeCV": StreamRidgeCV, "StreamRidgeClassifierCV": StreamRidgeClassifierCV}
    if name not in classes:
        raise ModelFileError(
            f"unknown estimator class {name!r} in model file; expected one of {sorted(classes)}"
        )
    return classes[name]


def _build(header: dict[str, Any], arrays: dict[str, np.ndarray], *, core: bool = False) -> Any:
    cls = _estimator_class(str(header["estimator"]), core=core)
    allowed = set(cls().get_params(deep=False))
    params = {k: v for k, v in header["params"].items() if k in allowed}
    est = cls(**params)
    classifier = header["classes"] is not None
    y_1d = bool(header["y_1d"])
    n_features = _load_features(est, header, arrays)
    coef = arrays["coef"]
    if coef.shape[-1] != n_features or arrays["support"].shape != (n_features,):
        raise ModelFileError(
            f"model file is inconsistent: coef has shape {coef.shape} for {n_features} features"
        )
    pass_classes = None
    if classifier:
        est._labels = _labels(header["classes"], header.get("classes_dtype"))
        pass_classes = tuple(header.get("pass_classes") or est._labels.tolist())
    est._spec = PassSpec(FoldScheme.from_dict(header["scheme"]), pass_classes, int(header["n_targets"]))
    est._y_1d = y_1d
    est.n_features_in_ = int(header["n_features_in"])
    if header.get("feature_names"):
        est.feature_names_ = np.asarray(header["feature_names"], dtype=object)
    one = y_1d and not classifier
    est.coef_ = coef
    intercept = arrays["intercept"]
    est.intercept_ = (
        float(intercept.reshape(-1)[0]) if one and intercept.ndim <= 1 and intercept.size == 1 else intercept
    )
    alpha = arrays["alpha"]
    est.alpha_ = float(alpha) if alpha.ndim == 0 else alpha
    est.alphas_ = arrays["alphas"]
    est.cv_errors_ = arrays["cv_errors"]
    est.fold_errors_ = arrays["fold_errors"]
    est.support_ = arrays["support"].astype(bool)
    est.n_folds_ = int(header["n_folds"])
    est.timings_ = {k: (float("nan") if v is None else v) for k, v in (header.get("timings") or {}).items()}
    if "selection_path" in arrays:
        est.selection_path_ = arrays["selection_path"]
    elif header.get("selection_path") is not None:
        est.selection_path_ = decode_path(header["selection_path"])
    if header.get("selection_best_step") is not None:
        est.selection_best_step_ = int(header["selection_best_step"])
    if "selected_features" in arrays:
        est.selected_features_ = arrays["selected_features"]
    if header.get("has_stats"):
        parts = {a: arrays[f"stats_{a}"] for a in _STATS_ARRAYS}
        est.stats_ = FoldStats(**parts, meta=dict(header.get("stats_meta") or {}))
    if header.get("candidates") is not None:
        est.candidates_ = header["candidates"]
    if "nested_cv_errors" in arrays and header.get("nested_summary") is not None:
        est.nested_cv_errors_ = arrays["nested_cv_errors"]
        est.nested_summary_ = header["nested_summary"]
    for name in _SCORE_ARRAYS:
        if name in arrays:
            setattr(est, name + "_", arrays[name])
    load_bands(est, header, arrays)
    if "fold_weight" in arrays:
        est._fold_weight = arrays["fold_weight"]
    est._model_header = header
    return est


def _labels(values: list[Any], dtype: str | None) -> np.ndarray:
    """Class labels as the array ``classes_`` returns (the original dtype where it is plain)."""
    if dtype is not None and np.dtype(dtype).kind in "biufU":
        return np.asarray(values, dtype=dtype)
    return np.asarray(values)
