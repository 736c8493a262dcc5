"""``cv=`` given as a scikit-learn splitter or as (train, test) index arrays.

The splits become one fold id per row (:func:`streamridge.folds.schemes.folds_from_splits`
checks that they are usable).  Contiguous folds are stored as runs and computed
from the row index; other ids replace the source's groups column, so they
travel with the rows through the pass, through shards (``rows=``) and
checkpoints like group ids do.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamridge.errors import ParameterError
from streamridge.folds import schemes as folds
from streamridge.folds.schemes import FoldScheme, folds_from_splits

CV_KINDS = (
    "an int >= 2, 'groups', 'blocks', a scikit-learn splitter or an iterable of (train, test) index arrays"
)


def is_splits(cv: Any) -> bool:
    """Whether ``cv`` is a scikit-learn splitter or an iterable of (train, test) pairs."""
    if isinstance(cv, (str, bytes, bool, np.bool_, int, np.integer)):
        return False
    return hasattr(cv, "split") or hasattr(cv, "__iter__")


def check_cv(cv: Any) -> None:
    """One-line :class:`ParameterError` unless ``cv`` is a form that ``fit`` accepts."""
    if is_splits(cv):
        return
    ok = (isinstance(cv, (int, np.integer)) and not isinstance(cv, (bool, np.bool_)) and cv >= 2) or (
        isinstance(cv, str) and cv in ("groups", "blocks")
    )
    if not ok:
        raise ParameterError(f"cv must be {CV_KINDS}; got cv={cv!r}")


def split_folds(cv: Any, src: Any, seed: int) -> tuple[FoldScheme, np.ndarray]:
    """Fold id per row from a splitter's ``split(X, y, groups)`` or from (train, test) pairs.

    The splitter sees X as the source's lazy array (the usual splitters read
    only its row count), 1-D y and the groups as NumPy columns.

    Parameters
    ----------
    cv : splitter (has ``split``) or iterable of (train, test) index arrays
    src : Source
        All rows of the fit (before any ``rows=`` shard is cut).
    seed : int
        ``random_state``, kept in the scheme.

    Returns
    -------
    scheme : FoldScheme
        Kind ``"splits"``.
    fold_ids : array of int32 of shape (n_rows,)

    Raises
    ------
    ParameterError
        If the splitter cannot split the rows or the splits are unusable.
    """
    n = int(src.X.shape[0])
    if hasattr(cv, "split"):
        y = src.y if src.y is None or src.y.ndim > 1 else np.asarray(src.y)
        groups = None if src.groups is None else np.asarray(src.groups)
        try:
            splits = list(cv.split(src.X, y, groups))
        except ValueError as exc:  # e.g. GroupKFold without groups, more splits than rows
            raise ParameterError(
                f"cv={cv!r} cannot split {n} sample(s): {str(exc).splitlines()[0]}"
            ) from None
    else:
        splits = cv
    ids, scheme = folds_from_splits(splits, n, seed=seed)
    return scheme, ids


def with_folds(src: Any, scheme: FoldScheme, ids: np.ndarray, *, series: bool = False) -> Any:
    """The source whose pass sees the fold ids.

    When the scheme stores the ids' runs (contiguous folds: KFold without
    shuffling, TimeSeriesSplit, ...) the folds are a function of the row index:
    the source is returned unchanged (its groups stay series ids for a feature
    map; no column is shipped to workers).  Otherwise the groups column is
    replaced by the fold ids (chunked like the rows), which a stateful feature
    map (``series=True``) would read as series ids: refused in one line.
    """
    import dataclasses

    import dask.array as da

    if scheme.runs is not None:
        return src
    if series:
        raise ParameterError(
            f"cv splits whose folds are not contiguous (more than {folds.MAX_RUNS} runs, as KFold(shuffle=True) makes) "
            "cannot be combined with a stateful feature map, which reads the groups as series ids; use contiguous "
            "splits (KFold without shuffling, TimeSeriesSplit, GroupKFold of whole series) or cv=K"
        )
    col = da.from_array(ids, chunks=(src.X.chunks[0],))
    if dataclasses.is_dataclass(src):
        return dataclasses.replace(src, groups=col)  # type: ignore[type-var]
    return type(src)(**{**vars(src), "groups": col})
