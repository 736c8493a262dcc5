"""Checks of the estimators' input: X, y, labels, groups and weights, and the folds they allow.

Every function returns what it checked (the array to use, the labels, the fold scheme)
and raises a one-line :class:`~streamridge.errors.InputError`, ``FoldError`` or
``ParameterError``; none sets anything on the estimator.  In-memory arrays are checked
with scikit-learn's functions (imported where they run); data opened by
:func:`streamridge.sources.open_source` (what ``streamridge fit`` reads) is checked
without scikit-learn, with scikit-learn's messages.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamridge.errors import FoldError, InputError, ParameterError
from streamridge.folds.schemes import FoldScheme, make_scheme
from streamridge.folds.splits import is_splits, split_folds
from streamridge.stats.series_spans import describe_rows, find_clash

_UNKNOWN_LABELS = (
    "Unknown label type: {}. Maybe you are trying to fit a classifier, which expects discrete classes on a "
    "regression target with continuous values."
)


def is_lazy(a: Any) -> bool:
    """Data that goes through open_source (dask arrays, Sources, paths, zarr groups, h5py files/groups)."""
    storage = type(a).__module__.split(".")[0] in ("zarr", "h5py") and type(a).__name__ in ("Group", "File")
    return a is not None and (
        hasattr(a, "dask") or type(a).__name__ == "Source" or isinstance(a, str) or storage
    )


def check_n_features(n_features: int, expected: int, model_name: str) -> None:
    """Refuse X with another number of features than the fit's, in scikit-learn's words."""
    if n_features != expected:
        raise InputError(
            f"X has {n_features} features, but {model_name} is expecting {expected} features as input"
        )


def validate_X(estimator: Any, X: Any, *, reset: bool, **kw: Any) -> Any:
    """In-memory X checked as scikit-learn does (``n_features_in_``, feature names where it can).

    The public estimators use ``validate_data`` (which sets ``n_features_in_`` and
    ``feature_names_in_`` on them with ``reset``); the classes of
    :mod:`streamridge.estimators.core` (no scikit-learn tags) get the same array checks
    and feature count, and their ``n_features_in_`` is set here with ``reset``.

    Returns
    -------
    array of shape (n_samples, n_features)
    """
    from sklearn.utils.validation import check_array, validate_data

    if hasattr(estimator, "__sklearn_tags__"):
        return validate_data(estimator, X, reset=reset, dtype="numeric", **kw)
    X = check_array(X, dtype="numeric", **kw)
    if reset:
        estimator.n_features_in_ = int(X.shape[1])
    else:
        check_n_features(X.shape[1], estimator.n_features_in_, estimator._model_name)
    return X


def check_targets(X: np.ndarray, y: Any, *, classifier: bool, model_name: str) -> np.ndarray:
    """In-memory y for the rows of X: numeric for a regressor, 1-D labels for a classifier.

    Finiteness is checked chunk by chunk in the pass (errors name the rows; ``skip_nonfinite`` drops them).
    """
    from sklearn.utils.validation import check_array, check_consistent_length, column_or_1d

    if y is None:
        raise ValueError(f"{model_name} requires y to be passed, but the target y is None")
    y = check_array(
        y,
        ensure_2d=False,
        dtype=None if classifier else "numeric",
        ensure_all_finite=False,
        input_name="y",
        ensure_min_samples=0,
    )
    check_consistent_length(X, y)
    if y.ndim > 2:
        raise InputError(f"y must be 1-D or 2-D (n_samples, n_targets); got shape {y.shape}")
    if classifier:
        y = column_or_1d(y, warn=True)
        check_label_type(y)
    return y


def check_sample_weight(sample_weight: Any, n_rows: int) -> np.ndarray | None:
    """One float64 weight per row (a scalar is every row's weight); None stays None."""
    if sample_weight is None:
        return None
    sample_weight = np.asarray(sample_weight, dtype=np.float64)
    if sample_weight.ndim == 0:
        sample_weight = np.full(n_rows, float(sample_weight))
    if sample_weight.shape != (n_rows,):
        raise InputError(
            f"sample_weight has shape {sample_weight.shape}; expected ({n_rows},), one weight per row"
        )
    return sample_weight


def check_groups(groups: Any, n_rows: int) -> np.ndarray | None:
    """One group id per row; None stays None."""
    if groups is None:
        return None
    groups = np.asarray(groups).reshape(-1)
    if groups.shape[0] != n_rows:
        raise InputError(f"groups has {groups.shape[0]} entries for {n_rows} rows of X")
    return groups


def check_label_type(y: np.ndarray) -> None:
    """Refuse continuous (or otherwise unknown) in-memory labels in one line, as scikit-learn does."""
    from sklearn.utils.multiclass import check_classification_targets

    try:
        check_classification_targets(y)
    except ValueError as exc:
        raise InputError(" ".join(str(exc).split())) from None


def check_distinct_labels(labels: np.ndarray) -> None:
    """Refuse the distinct values of a lazy y that are not class labels, without scikit-learn.

    The distinct values' type is the labels' type, so this is scikit-learn's
    ``check_classification_targets`` on 1-D labels, with its messages: non-integral
    (or non-finite) floats, complex numbers, bytes, objects that are not strings.
    scikit-learn's warning for more distinct labels than half the rows does not
    apply here (every value occurs at least once in the distinct values).
    """
    kind = labels.dtype.kind
    if kind == "S" or (kind == "O" and labels.size and isinstance(labels.flat[0], bytes)):
        raise InputError(
            "Support for labels represented as bytes is not supported. Convert the labels to a string or integer format."
        )
    if kind == "c":
        raise InputError("Complex data not supported; class labels must be integers or strings")
    if kind == "O" and labels.size and not isinstance(labels.flat[0], str):
        raise InputError(_UNKNOWN_LABELS.format("unknown"))
    if kind == "f":
        if not np.all(np.isfinite(labels)):
            what = "NaN" if np.any(np.isnan(labels)) else "infinity or a value too large for dtype('float64')"
            raise InputError(f"Input y contains {what}.")
        if np.any(labels != labels.astype(np.int64).astype(labels.dtype)):
            raise InputError(_UNKNOWN_LABELS.format("continuous"))


def class_labels(values: Any) -> np.ndarray:
    """The sorted distinct labels of ``values`` (the labels of y, or ``classes=``): at least two."""
    labels = np.unique(np.asarray(values))
    if labels.shape[0] < 2:
        raise InputError(f"y has only one class ({labels.tolist()}); a classifier needs at least two classes")
    return labels


def encode_labels(y: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Integer codes of in-memory labels among ``labels`` (sorted); unknown labels are refused."""
    codes = np.clip(np.searchsorted(labels, y), 0, len(labels) - 1)
    unknown = labels[codes] != y
    if np.any(unknown):
        raise InputError(
            f"labels {np.unique(y[unknown])[:5].tolist()} are not among classes {labels.tolist()}; "
            "pass all classes (classes=) on the first partial_fit"
        )
    return codes


def splits_scheme(cv: Any, src: Any, *, seed: int, partial: bool) -> tuple[FoldScheme, np.ndarray]:
    """The fold scheme and the fold id of every row of explicit splits (``cv=`` a splitter or pairs)."""
    if partial:
        raise ParameterError(
            "cv given as splits fixes the fold of every row of one data set; partial_fit cannot add "
            "rows to it; use fit, or cv=K with partial_fit"
        )
    return split_folds(cv, src, seed)


def rule_scheme(cv: Any, src: Any, *, seed: int, n_blocks: int, partial: bool, batch: bool) -> FoldScheme:
    """The fold scheme of ``cv=K``, ``"groups"`` or ``"blocks"`` for the rows of ``src``.

    A ``batch`` (a ``partial_fit`` call or a shard) may hold a single series: its
    folds are checked when the model is selected, not here.
    """
    n = src.n_rows()
    has_groups = src.shape("groups") is not None
    if cv == "blocks" and partial:
        raise ParameterError("cv='blocks' needs the row count up front; partial_fit takes cv=K")
    K = n_blocks if cv == "blocks" else (None if cv == "groups" else int(cv))
    if cv != "groups" and K is not None and n < K:
        raise FoldError(
            f"got {n} sample(s) but cv={cv} needs at least {K} rows, one per fold; use fewer folds"
        )
    gv = None
    if cv == "groups":
        if not has_groups:
            raise ParameterError("cv='groups' needs groups (one id per row)")
        gv = src.distinct("groups")
    scheme = make_scheme(
        cv,
        seed=seed,
        has_groups=has_groups,
        n_rows=n,
        group_values=gv,
        n_blocks=n_blocks,
        min_groups=1 if batch else 2,
    )
    if scheme.kind == "group" and not batch:
        n_groups = len(src.distinct("groups"))
        if n_groups < scheme.n_folds:
            raise FoldError(
                f"got {n_groups} distinct groups but cv={cv} needs at least {scheme.n_folds}; use fewer folds"
            )
    return scheme


def fold_scheme(
    cv: Any, src: Any, *, seed: int, n_blocks: int, partial: bool, shard: bool
) -> tuple[FoldScheme, np.ndarray | None]:
    """The fold scheme of ``cv`` for ``src`` and, for explicit splits, the fold id of every row."""
    if is_splits(cv):
        return splits_scheme(cv, src, seed=seed, partial=partial)
    return rule_scheme(cv, src, seed=seed, n_blocks=n_blocks, partial=partial, batch=partial or shard), None


def continued_spans(src: Any, offset: int, earlier: list[list[Any]]) -> list[list[Any]]:
    """The series spans of a ``partial_fit`` call with a stateful map, its rows starting at global row ``offset``.

    Parameters
    ----------
    src : Source
        The call's rows.
    offset : int
        The global index of its first row.
    earlier : list of [series, start, stop]
        The spans of the earlier calls (their statistics' ``series_spans``).

    Raises
    ------
    InputError
        A series of the call came in an earlier call and did not end it (the map would
        restart it from rest).
    """
    from streamridge.estimators.mapped import series_spans

    spans = series_spans(src, offset)
    clash = find_clash(earlier, spans, continues=True)
    if clash is not None:
        series, early, late = clash
        raise InputError(
            f"series {series!r} starts again at row {late[1]} ({describe_rows(late)} of this partial_fit "
            f"call) after its {describe_rows(early)} in an earlier call; a stateful feature map carries "
            "only the series that ended the previous call into the next and would restart this one from "
            "rest; give each series' rows contiguously and in time order (sort the data by series, then time)"
        )
    return spans
