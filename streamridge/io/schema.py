"""Schemas of the two file formats: every header field of a model file and every meta field of a
statistics file is checked (type, range, shape consistent with the arrays) before it is used.

A file that fails gets one line, ``not a valid streamridge model file: PATH: PROBLEM`` (resp.
``statistics file``), instead of a traceback from deep inside the loader.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from streamridge.errors import ModelFileError, ParameterError
from streamridge.stats.series_spans import check_spans

MAX_FEATURES = 2**24
"""More features than this is not a real model (N x N float64 statistics would take 2 PiB)."""
MAX_CELLS = 2**20
"""Upper bound on folds, classes, targets and lambdas, each."""

Check = Callable[[Any], str | None]


class _Invalid(Exception):
    pass


# ---------------------------------------------------------------------- field checks
def _int(lo: int, hi: int, *, none: bool = False) -> Check:
    def check(v: Any) -> str | None:
        if v is None and none:
            return None
        if isinstance(v, bool) or not isinstance(v, int):
            return f"must be an integer; got {_kind(v)}"
        return None if lo <= v <= hi else f"must be in [{lo}, {hi}]; got {v}"

    return check


def _type(types: tuple[type, ...], name: str, *, none: bool = False) -> Check:
    def check(v: Any) -> str | None:
        if v is None and none:
            return None
        return (
            None
            if isinstance(v, types) and not (bool not in types and isinstance(v, bool))
            else (f"must be {name}; got {_kind(v)}")
        )

    return check


def _str_list(*, none: bool = True) -> Check:
    def check(v: Any) -> str | None:
        if v is None and none:
            return None
        if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
            return f"must be a list of strings; got {_kind(v)}"
        return None

    return check


def _timings(v: Any) -> str | None:
    if v is None:
        return None
    if not isinstance(v, dict):
        return f"must be an object; got {_kind(v)}"
    bad = [
        k for k, x in v.items() if x is not None and (isinstance(x, bool) or not isinstance(x, (int, float)))
    ]
    return f"values must be numbers; {bad[0]!r} is not" if bad else None


def _scheme(v: Any) -> str | None:
    if not isinstance(v, dict):
        return f"must be an object; got {_kind(v)}"
    problems = [
        ("n_folds", _int(1, MAX_CELLS)(v.get("n_folds"))),
        ("seed", _int(-(2**63), 2**64, none=True)(v.get("seed", 0))),
        ("n_rows", _int(0, 2**62, none=True)(v.get("n_rows"))),
        ("group_values", _type((list,), "a list", none=True)(v.get("group_values"))),
    ]
    for key, problem in problems:
        if problem:
            return f"field {key} {problem}"
    from streamridge.folds.schemes import FoldScheme

    try:
        FoldScheme.from_dict(v)
    except (KeyError, TypeError, ValueError) as exc:
        return f"is not a fold scheme ({' '.join(str(exc).split())})"
    return None


_CANDIDATE_KEYS = {"params", "alpha", "cv_error", "std_error", "within_1se", "chosen"}


def _candidates(v: Any) -> str | None:
    """None, or one object per candidate map (``candidates_``) with exactly one chosen."""
    if v is None:
        return None
    if not isinstance(v, list) or not v:
        return f"must be a non-empty list of candidates; got {_kind(v)}"
    for i, row in enumerate(v):
        if not isinstance(row, dict) or set(row) != _CANDIDATE_KEYS:
            return f"candidate {i} must be an object with the keys {sorted(_CANDIDATE_KEYS)}"
        if not isinstance(row["params"], dict):
            return f"candidate {i}: params must be an object; got {_kind(row['params'])}"
        for key in ("cv_error", "std_error"):
            if isinstance(row[key], bool) or not isinstance(row[key], (int, float)):
                return f"candidate {i}: {key} must be a number; got {_kind(row[key])}"
        if not all(isinstance(row[k], bool) for k in ("within_1se", "chosen")):
            return f"candidate {i}: within_1se and chosen must be true or false"
    if sum(row["chosen"] for row in v) != 1:
        return "exactly one candidate must be chosen"
    return None


def _kind(v: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(v), f"{type(v).__name__} {v!r}"[:60])


_MODEL_FIELDS: dict[str, Check] = {
    "format": _type((str,), "a string"),
    "format_version": _int(1, 2**31),
    "streamridge_version": _type((str,), "a string", none=True),
    "estimator": _type((str,), "a string"),
    "params": _type((dict,), "an object"),
    "params_dropped": _str_list(),
    "task": lambda v: (
        None
        if v in ("regression", "classification", None)
        else f"must be regression or classification; got {v!r}"
    ),
    "n_features_in": _int(1, MAX_FEATURES),
    "n_targets": _int(1, MAX_CELLS),
    "feature_names": _str_list(),
    "target_names": _str_list(),
    "y_1d": _type((bool,), "a boolean"),
    "classes": _type((list,), "a list", none=True),
    "classes_dtype": _type((str,), "a string", none=True),
    "pass_classes": _type((list,), "a list", none=True),
    "scheme": _scheme,
    "n_folds": _int(1, MAX_CELLS),
    "n_rows": _int(0, 2**62, none=True),
    "timings": _timings,
    "selection_path": _type((dict, list), "an object", none=True),
    "has_stats": _type((bool,), "a boolean", none=True),
    "stats_meta": _type((dict,), "an object", none=True),
    "cv_summary": _type((dict,), "an object", none=True),
    "selected_features": lambda v: (
        None
        if v is None
        or (isinstance(v, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in v))
        else f"must be a list of feature indices; got {_kind(v)}"
    ),
    "selection_best_step": _int(0, 2**31, none=True),
    "features": _type((dict,), "an object", none=True),  # a feature map (streamridge.features.encode)
    "n_model_features": _int(1, MAX_FEATURES),  # coef width when a feature map widens the raw inputs
    "prefixes": _type((dict,), "an object", none=True),
    "nested_summary": _type((dict,), "an object", none=True),
    "candidates": _candidates,  # candidate feature maps' results (candidates_)
    "score_summary": _type((dict,), "an object", none=True),
    "band_names": _str_list(),  # a banded model's bands (streamridge.io.band_arrays)
    "band_summary": _type((dict,), "an object", none=True),
}
_MODEL_REQUIRED = (
    "estimator",
    "params",
    "n_features_in",
    "n_targets",
    "y_1d",
    "classes",
    "scheme",
    "n_folds",
)

_STATS_FIELDS: dict[str, Check] = {
    "format": _type((str,), "a string"),
    "format_version": _int(1, 2**31),
    "scheme": _scheme,
    "classes": _type((list,), "a list", none=True),
    "n_features": _int(1, MAX_FEATURES),
    "n_targets": _int(1, MAX_CELLS),
    "task": lambda v: (
        None if v in ("regression", "classification") else f"must be regression or classification; got {v!r}"
    ),
    "feature_names": _str_list(),
    "target_names": _str_list(),
    "y_1d": _type((bool,), "a boolean"),
    "classes_encoded": _type((bool,), "a boolean"),
    "streamridge_version": _type((str,), "a string", none=True),
    "row_ranges": lambda v: (
        None
        if v is None
        or (
            isinstance(v, list)
            and all(
                isinstance(r, list)
                and len(r) == 2
                and all(isinstance(i, int) and not isinstance(i, bool) for i in r)
                for r in v
            )
        )
        else f"must be a list of [start, stop] pairs; got {_kind(v)}"
    ),
    "rows_seen": _int(0, 2**62),
    "checkpoint": _type((dict,), "an object"),
    "features": _type((dict,), "an object", none=True),  # a fitted feature map (streamridge.features.to_json)
    "series_spans": check_spans,  # the rows of each series of a stateful map (streamridge.stats.series_spans)
}


def _fields(doc: Mapping[str, Any], schema: dict[str, Check], required: tuple[str, ...]) -> None:
    for key in required:
        if key not in doc:
            raise _Invalid(f"header has no field {key!r}")
    for key, check in schema.items():
        if key in doc:
            problem = check(doc[key])
            if problem:
                raise _Invalid(f"{key} {problem}")


# ---------------------------------------------------------------------- arrays
def _shape(
    arrays: Mapping[str, np.ndarray], name: str, allowed: list[tuple[int, ...]], kinds: str = "fiu"
) -> None:
    if name not in arrays:
        return
    a = arrays[name]
    if a.dtype.kind not in kinds:
        raise _Invalid(f"array {name} has dtype {a.dtype}, expected a numeric array")
    if tuple(a.shape) not in allowed:
        shapes = " or ".join(str(s) for s in allowed)
        raise _Invalid(f"array {name} has shape {tuple(a.shape)}, expected {shapes}")


def _model_arrays(h: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
    n, t, k = h.get("n_model_features", h["n_features_in"]), h["n_targets"], h["n_folds"]
    n_alphas = int(arrays["alphas"].shape[0]) if arrays["alphas"].ndim == 1 else -1
    if n_alphas < 1:
        raise _Invalid(f"array alphas has shape {arrays['alphas'].shape}, expected (n_alphas,)")
    _shape(arrays, "coef", [(n,), (t, n)])
    _shape(arrays, "intercept", [(), (1,), (t,)])
    _shape(arrays, "alpha", [(), (t,)])
    _shape(arrays, "cv_errors", [(n_alphas,), (n_alphas, t)])
    _shape(arrays, "fold_errors", [(n_alphas, k, t)])
    _shape(arrays, "support", [(n,)], kinds="b")
    if h.get("feature_names") is not None and len(h["feature_names"]) != n:
        raise _Invalid(f"feature_names has {len(h['feature_names'])} names for {n} features")
    classes = h.get("classes")
    if "fold_weight" in arrays:
        c = 1 if classes is None else len(classes)
        scheme = h.get("scheme")
        cells = k + (
            int(scheme.get("train_only", 0)) if isinstance(scheme, dict) else 0
        )  # + a train-only fold
        _shape(arrays, "fold_weight", [(cells, c)])
    if h.get("selected_features") is not None and any(not 0 <= i < n for i in h["selected_features"]):
        raise _Invalid(f"selected_features has indices outside [0, {n})")
    _score_arrays(arrays, n_alphas, k, t, 1 if classes is None else len(classes))
    _band_arrays(h, arrays, n, n_alphas, k, t)
    if h.get("has_stats"):
        missing = [a for a in _STATS_NAMES if f"stats_{a}" not in arrays]
        if missing:
            raise _Invalid(f"has_stats is true but arrays {['stats_' + a for a in missing]} are missing")
        _stats_arrays({a: arrays[f"stats_{a}"] for a in _STATS_NAMES}, h.get("stats_meta") or {})


def _score_arrays(arrays: Mapping[str, np.ndarray], n_alphas: int, k: int, t: int, c: int) -> None:
    """Arrays of nested CV and of ``scoring`` / ``rescore`` (streamridge.model_selection.nested, streamridge.model_selection.scoring)."""
    _shape(arrays, "nested_cv_errors", [(k,), (k, t)])
    _shape(arrays, "cv_scores", [(n_alphas, k), (n_alphas, k, t)])
    _shape(arrays, "cv_confusion", [(k, c, c)])
    if "rescore_steps" in arrays:
        r = arrays["rescore_steps"].shape[:1]
        _shape(arrays, "rescore_steps", [r], kinds="iu")
        _shape(arrays, "rescore_scores", [r])


def _band_arrays(
    h: Mapping[str, Any], arrays: Mapping[str, np.ndarray], n: int, n_alphas: int, k: int, t: int
) -> None:
    """A banded model's arrays (streamridge.io.band_arrays): present with ``band_names``, shapes of its bands."""
    names = h.get("band_names")
    present = [a for a in arrays if a.startswith("band_")]
    if names is None:
        if present:
            raise _Invalid(f"arrays {sorted(present)} of a banded model but no band_names")
        return
    nb = len(names)
    if nb < 1 or "band_index" not in arrays:
        raise _Invalid("band_names is given but the array band_index (the band of every feature) is missing")
    _shape(arrays, "band_index", [(n,)], kinds="iu")
    index = arrays["band_index"]
    if index.size and (int(index.min()) < 0 or int(index.max()) >= nb):
        raise _Invalid(f"band_index holds bands outside [0, {nb}) for {nb} band_names")
    if "band_weight_candidates" in arrays:
        c = arrays["band_weight_candidates"]
        _shape(
            arrays, "band_weight_candidates", [(c.shape[0], nb)] if c.ndim == 2 and c.shape[0] else [(1, nb)]
        )
        s = int(c.shape[0])
        _shape(arrays, "band_scores", [(s,), (s, t)])
        _shape(arrays, "band_fold_scores", [(s, n_alphas, k, t)])
    _shape(arrays, "band_weights", [(nb,), (t, nb)])
    _shape(arrays, "band_cv_r2", [(nb,), (nb, t)])


_STATS_NAMES = ("weight", "count", "mean_x", "mean_y", "sxx", "sxy", "syy")


def _stats_arrays(arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> None:
    w = arrays["weight"]
    if w.ndim != 2 or w.dtype.kind not in "fiu":
        raise _Invalid(f"array weight has shape {w.shape}, expected (n_folds, n_classes)")
    k, c = (int(s) for s in w.shape)
    mx, my = arrays["mean_x"], arrays["mean_y"]
    if mx.ndim != 3 or my.ndim != 3:
        raise _Invalid(f"arrays mean_x, mean_y have shapes {mx.shape}, {my.shape}, expected 3-D")
    n, t = int(mx.shape[2]), int(my.shape[2])
    for name, shape in (("count", (k, c)), ("mean_x", (k, c, n)), ("mean_y", (k, c, t)),
                        ("sxx", (k, c, n, n)), ("sxy", (k, c, n, t)), ("syy", (k, c, t))):  # fmt: skip
        _shape(arrays, name, [shape])
    for key, value in (("n_features", n), ("n_targets", t)):
        if key in meta and meta[key] != value:
            raise _Invalid(f"{key} is {meta[key]} but the arrays hold {value}")
    scheme = meta.get("scheme")
    if isinstance(scheme, dict) and scheme.get("n_folds") != k:
        raise _Invalid(f"scheme has {scheme.get('n_folds')} folds but the arrays hold {k}")
    classes = meta.get("classes")
    if classes is not None and len(classes) != c:
        raise _Invalid(f"classes has {len(classes)} labels but the arrays hold {c}")


# ---------------------------------------------------------------------- feature maps
def _model_feature_map(h: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
    """The model's feature map: readable, its arrays as its parameters say, its widths the header's."""
    if not h.get("features"):
        return
    from streamridge.features import decode  # only model files with a map import the maps (scikit-learn)

    try:
        fmap = decode(h["features"], dict(arrays))
    except KeyError as exc:
        raise _Invalid(f"feature map array {exc} is missing") from None
    except (ModelFileError, ParameterError, TypeError, ValueError, AttributeError) as exc:
        raise _Invalid(f"the feature map is not readable ({' '.join(str(exc).split())})") from None
    _fitted_map(fmap)
    n_in, n_out = fmap.n_features_in_, fmap.n_features_out_
    if n_in != h["n_features_in"]:
        raise _Invalid(
            f"feature map {fmap.name} takes {n_in} inputs but n_features_in is {h['n_features_in']}"
        )
    width = h.get("n_model_features", h["n_features_in"])
    if n_out != width:
        raise _Invalid(f"feature map {fmap.name} makes {n_out} features but n_model_features is {width}")


def _stats_feature_map(meta: Mapping[str, Any]) -> None:
    """The feature map saved with statistics (inline JSON): readable, its arrays as its parameters say."""
    if not meta.get("features"):
        return
    from streamridge.features import from_json

    try:
        fmap = from_json(meta["features"])
    except (ModelFileError, ParameterError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise _Invalid(f"the feature map is not readable ({' '.join(str(exc).split())})") from None
    _fitted_map(fmap)


def _fitted_map(fmap: Any) -> None:
    from streamridge.features import fitted_problem

    problem = fitted_problem(fmap)
    if problem:
        raise _Invalid(problem)


# ---------------------------------------------------------------------- what a file is
_MAGIC = (
    (b"\x93NUMPY", "a .npy array"),
    (b"\x89HDF\r\n\x1a\n", "an HDF5 file"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"%PDF", "a PDF document"),
)


def not_an_npz(path: str) -> str | None:
    """What a file is when it is not a zip archive (the container of ``.npz`` files), else None.

    Returns
    -------
    str or None
        ``"an empty file"``, ``"a .npy array"``, ``"an HDF5 file"``, ``"a PNG image"``,
        ``"a PDF document"``, ``"a text file"`` or ``"binary data"``; None for a zip archive
        or a file that cannot be read (the reader then names the reason).
    """
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return None
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):  # a zip archive, or an empty one
        return None
    if not head:
        return "an empty file"
    for magic, what in _MAGIC:
        if head.startswith(magic):
            return what
    return "a text file" if _is_text(head) else "binary data"


def _is_text(head: bytes) -> bool:
    """Whether a file's first bytes are UTF-8 text (the last character may be cut off)."""
    if b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(head) - 3 and exc.reason == "unexpected end of data"
    return True


# ---------------------------------------------------------------------- entry points
def check_model(header: Any, arrays: Mapping[str, np.ndarray], name: str) -> None:
    """Validate a model file's header and arrays; raise one-line :class:`ModelFileError`."""
    try:
        if not isinstance(header, dict):
            raise _Invalid(f"the header is {_kind(header)}, not an object")
        _fields(header, _MODEL_FIELDS, _MODEL_REQUIRED)
        if isinstance(header.get("stats_meta"), dict):
            _fields(header["stats_meta"], _STATS_FIELDS, ())
        _model_arrays(header, arrays)
        _model_feature_map(header, arrays)
    except _Invalid as exc:
        raise ModelFileError(f"not a valid streamridge model file: {name}: {exc}") from None


def check_stats(meta: Any, arrays: Mapping[str, np.ndarray], name: str) -> None:
    """Validate a statistics file's meta and arrays; raise one-line :class:`ModelFileError`."""
    try:
        if not isinstance(meta, dict):
            raise _Invalid(f"the meta header is {_kind(meta)}, not an object")
        _fields(meta, _STATS_FIELDS, ())
        _stats_arrays(arrays, meta)
        weight = np.asarray(arrays["weight"], dtype=np.float64)
        if not np.all(np.isfinite(weight)) or np.any(weight < 0):
            raise _Invalid("array weight holds negative or non-finite weights")
        _stats_feature_map(meta)
    except _Invalid as exc:
        raise ModelFileError(f"not a valid streamridge statistics file: {name}: {exc}") from None
