"""Prefix selection: the number of leading features and lambda chosen jointly by exact K-fold CV.

For maps whose features come in a fixed order (random hidden units, reservoir
units, basis vectors), the statistics of the first n features are the leading
n x n sub-blocks of the statistics of all of them, so one pass serves every
prefix size: the CV errors of prefix n are those of :func:`~streamridge.solvers.fold_errors`
on ``forms.subset(range(n))`` -- one eigendecomposition per (fold, prefix).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streamridge.errors import ParameterError
from streamridge.forms.build import Forms
from streamridge.solvers import fold_errors
from streamridge.solvers.grid import choose


@dataclass
class PrefixResult:
    """CV errors of every prefix size and the chosen one.

    Attributes
    ----------
    sizes : array of int of shape (n_prefixes,)
    fold_errors : list of arrays of shape (n_alphas, n_folds, n_targets), one per size
    alpha_index : list of int or arrays of shape (n_targets,), the chosen lambda per size
    errors : array of shape (n_prefixes,)
        CV error (summed over folds and targets) at the chosen lambda of each size.
    best : int
        Index into ``sizes`` of the chosen size (the smallest size among equal errors).
    """

    sizes: np.ndarray
    fold_errors: list[np.ndarray]
    alpha_index: list[np.ndarray]
    errors: np.ndarray
    best: int


def check_prefixes(prefixes: object, n_features: int) -> np.ndarray:
    """Sorted distinct prefix sizes, each an int in 1..n_features.

    Raises
    ------
    ParameterError
    """
    try:
        arr = np.asarray(prefixes).reshape(-1)
        ok = (
            arr.size > 0
            and arr.dtype.kind in "iu"
            and bool(np.all(arr >= 1))
            and bool(np.all(arr <= n_features))
        )
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ParameterError(
            f"feature_prefixes must be a list of ints in 1..{n_features} (the number of features); "
            f"got feature_prefixes={prefixes!r}"
        )
    return np.unique(arr.astype(np.int64))


def prefix_errors(
    forms: Forms,
    alphas: np.ndarray,
    sizes: np.ndarray,
    *,
    solver: str = "eigen",
    per_target: bool = False,
    one_se: bool = False,
) -> PrefixResult:
    """CV errors of the first n features for every n in ``sizes`` and the best (n, lambda).

    Parameters
    ----------
    forms : Forms of all features
    alphas : array of shape (n_alphas,)
    sizes : sorted array of int
    solver : {"eigen", "covariance"}
    per_target, one_se : as in :func:`streamridge.solvers.grid.choose`

    Returns
    -------
    PrefixResult
    """
    E_all, idx_all, errs = [], [], []
    for n in sizes:
        E = fold_errors(forms.subset(np.arange(int(n))), alphas, solver=solver)
        idx = choose(E, alphas, per_target=per_target, one_se=one_se)
        cv = E.sum(axis=1)  # (R, T)
        err = float(cv[idx, np.arange(cv.shape[1])].sum()) if np.ndim(idx) else float(cv[int(idx)].sum())
        E_all.append(E)
        idx_all.append(idx)
        errs.append(err)
    errors = np.asarray(errs)
    best = int(np.flatnonzero(errors <= errors.min() + 1e-12 * abs(errors.min()))[0])  # ties: fewer features
    return PrefixResult(np.asarray(sizes), E_all, idx_all, errors, best)
