"""What a pass computes for every row: its fold, its class cell, its coded targets.

:class:`PassSpec` holds the pass's options (folds, classes, targets, non-finite rows,
feature map); :func:`prepare_rows` turns a block of rows into what a kernel accumulates
(rows, coded targets, cell ids, weights), the same in every layout of the pass;
:func:`spec_dict` describes a spec for checkpoint fingerprints.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from streamridge.errors import InputError, NonFiniteError
from streamridge.folds.schemes import FoldScheme


@dataclass(frozen=True)
class PassSpec:
    """What a pass computes for every row: fold, class, targets.

    Parameters
    ----------
    scheme : FoldScheme
    classes : tuple or None
        Sorted class labels of a classifier: rows of class c go to class cell c
        and get target +1 in column c, -1 elsewhere (one column, +1 for
        classes[1], for two classes).  None for regression.
    n_targets : int
    skip_nonfinite : bool
        Drop rows with NaN/inf in X, y or weights instead of failing (they keep
        their row index, so folds do not shift).
    features : FeatureMap or None
        A fitted feature map applied to X chunk by chunk before the statistics
        (see :mod:`streamridge.datapass.mapped` and :mod:`streamridge.datapass.plan`).
    features_state : any
        State of a stateful map at the first row (``partial_fit`` continuing a
        series); None: every series starts from rest.  The state after the last
        row comes back in ``PassReport.extra["features_state"]``.
    open_end : bool
        The last series may go on after the pass's last row (``partial_fit``): a washout that
        leaves out every row of the pass is not refused before it.
    """

    scheme: FoldScheme
    classes: tuple[Any, ...] | None
    n_targets: int
    skip_nonfinite: bool = False
    features: Any = None
    features_state: Any = None
    open_end: bool = False

    @property
    def n_classes(self) -> int:
        """Number of class cells (1 for regression)."""
        return 1 if self.classes is None else len(self.classes)


def code_targets(y: np.ndarray, classes: tuple[Any, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Class index and +1/-1 target coding of labels ``y``.

    Returns
    -------
    cls : array of int64 of shape (m,)
    Y : array of float64 of shape (m, 1) for two classes, (m, C) otherwise
    """
    labels = np.asarray(classes)
    y = np.asarray(y).reshape(-1)
    cls = np.searchsorted(labels, y)
    cls = np.clip(cls, 0, len(labels) - 1)
    unknown = labels[cls] != y
    if np.any(unknown):
        raise InputError(
            f"labels {np.unique(y[unknown])[:5].tolist()} are not among classes "
            f"{labels.tolist()}; pass all classes (classes=) on the first partial_fit"
        )
    if len(labels) == 2:
        return cls, np.where(cls == 1, 1.0, -1.0)[:, None]
    Y = -np.ones((y.shape[0], len(labels)))
    Y[np.arange(y.shape[0]), cls] = 1.0
    return cls, Y


def _nonfinite_rows(name: str, a: np.ndarray) -> np.ndarray | None:
    if a.dtype.kind not in "fc":
        return None
    ok = np.isfinite(a)
    if ok.all():
        return None
    return ~ok.reshape(a.shape[0], -1).all(axis=1)


def prepare_rows(
    X: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray | None,
    weights: np.ndarray | None,
    row_start: int,
    spec: PassSpec,
    drop: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Rows ``row_start ..`` as the kernel takes them: X, coded targets Y, flat cell ids, weights.

    Fold ids come from the scheme (row index / group), class ids from the
    labels; rows with NaN/inf are dropped when ``spec.skip_nonfinite``;
    ``drop`` marks rows left out on purpose (a feature map's washout).

    Raises
    ------
    NonFiniteError
        If X, y or the weights hold NaN/inf and ``spec.skip_nonfinite`` is off.
    InputError
        A negative weight, or a label outside the classes.
    """
    m = X.shape[0]
    folds = spec.scheme.assign(row_start, m, None if groups is None else np.asarray(groups).reshape(-1))
    keep = np.ones(m, dtype=bool) if drop is None else ~np.asarray(drop, dtype=bool)
    for name, a in (("X", X), ("y", y), ("sample_weight", weights)):
        if a is None:
            continue
        bad = _nonfinite_rows(name, np.asarray(a))
        if bad is None:
            continue
        if not spec.skip_nonfinite:
            rows = (np.flatnonzero(bad)[:5] + row_start).tolist()
            raise NonFiniteError(
                f"{name} has NaN or inf in {int(bad.sum())} row(s) of the chunk of rows "
                f"{row_start}-{row_start + m - 1}, first at rows {rows}; clean the data or "
                "skip those rows (skip_nonfinite=True, --skip-nonfinite)"
            )
        keep &= ~bad
    w = None
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64).reshape(-1)
        if np.any(w[keep] < 0):
            r = int(np.flatnonzero((w < 0) & keep)[0]) + row_start
            raise InputError(f"sample_weight must be non-negative; got a negative weight at row {r}")
    if not keep.all():
        X, y, folds = X[keep], np.asarray(y)[keep], folds[keep]
        w = None if w is None else w[keep]
    if spec.classes is None:
        Y = np.asarray(y)
        Y = Y[:, None] if Y.ndim == 1 else Y  # (also when every row of the chunk was dropped)
        cells = folds
    else:
        cls, Y = code_targets(np.asarray(y), spec.classes)
        cells = folds * spec.n_classes + cls
    return np.asarray(X), Y, cells, w


def spec_dict(spec: PassSpec) -> dict[str, Any]:
    """JSON description of a pass spec (checkpoint fingerprints)."""
    return {
        "scheme": spec.scheme.to_dict(),
        "classes": None if spec.classes is None else [str(c) for c in spec.classes],
        "n_targets": spec.n_targets,
        "skip_nonfinite": spec.skip_nonfinite,
        **({} if spec.features is None else {"features": features_fingerprint(spec.features)}),
    }


def features_fingerprint(fmap: Any) -> str:
    """Digest of a fitted map's description and arrays (checkpoints of a pass with a map)."""
    import hashlib
    import json

    from streamridge.features import encode

    obj, arrays = encode(fmap)
    h = hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode())
    for k in sorted(arrays):
        h.update(k.encode() + np.ascontiguousarray(arrays[k]).tobytes())
    return h.hexdigest()
