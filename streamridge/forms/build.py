"""Per-fold training and validation quadratic forms from :class:`FoldStats`.

This module owns centering, class weights (CRRR) and standardization.  For
training part t (all folds but k) and validation part v (fold k), the weighted
ridge problem with unpenalized intercept

.. code-block:: text

    min_{W,b}  sum_{i in t} w_i ||y_i - b - W' x_i||^2 + lambda ||W||^2

has ``W = (At + lambda I)^{-1} Bt`` with ``At = Sxx_t`` and ``Bt = Sxy_t``
(centered about the training means) and ``b = ybar_t - W' xbar_t``.  Its
validation error is, with ``dx = xbar_v - xbar_t`` and ``dy = ybar_v - ybar_t``,

.. code-block:: text

    SSE_v(W) = syy_v - 2 W' Sxy_v + W' Sxx_v W + n_v (dy - W' dx)^2
             = cv - 2 W' Bv + W' Av W

with ``Av = Sxx_v + n_v dx dx'``, ``Bv = Sxy_v + n_v dx dy'``,
``cv = syy_v + n_v dy^2``: centered validation statistics plus their mean
offset, never a difference of large raw moments (Buteneers et al., eq. 4).
Without intercept the means are not removed: ``At = Sxx_t + n_t xbar_t xbar_t'``
and ``dx = xbar_v``.  Standardization divides feature j by the training
part's weighted standard deviation ``s_j`` (ddof=0, 1 where it is zero), i.e.
``A -> S^-1 A S^-1``, ``B -> S^-1 B``; coefficients are reported as ``W / s``.

Class reweighting (``class_weight="balanced"``): in every part, each row of
class c gets weight ``n_part / (C n_part,c)``, applied to the cells before they
are merged.  ``n`` are sample-weight sums (row counts when unweighted), as in
scikit-learn's ``compute_class_weight(..., sample_weight=)``: a row of integer
weight w counts as w rows, a row of weight 0 as none.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streamridge.errors import FoldError
from streamridge.forms.parts import (
    add_outer,
    add_training_between,
    cell_group,
    exclusive_sums,
    training_within,
)
from streamridge.parallel import map_folds
from streamridge.stats.foldstats import FoldStats
from streamridge.stats.magnitudes import check_finite, check_stats_range


@dataclass
class Forms:
    """Quadratic forms of K (training, validation) pairs.

    Attributes
    ----------
    At : array of shape (K, N, N)
    Bt : array of shape (K, N, T)
    Av : array of shape (K, N, N)
    Bv : array of shape (K, N, T)
    cv : array of shape (K, T)
    x_offset : array of shape (K, N)
        Training mean of X (zeros without intercept).
    y_offset : array of shape (K, T)
    scale : array of shape (K, N)
        Feature scale (ones unless standardize).
    n_train, n_val : arrays of shape (K,)
        Weight sums of each part (after class weights).
    """

    At: np.ndarray
    Bt: np.ndarray
    Av: np.ndarray
    Bv: np.ndarray
    cv: np.ndarray
    x_offset: np.ndarray
    y_offset: np.ndarray
    scale: np.ndarray
    n_train: np.ndarray
    n_val: np.ndarray

    @property
    def n_folds(self) -> int:
        """Number of folds K."""
        return int(self.At.shape[0])

    def subset(self, features: np.ndarray) -> Forms:
        """Forms restricted to a subset of features (rows/columns of the quadratic forms)."""
        f = np.asarray(features)
        return Forms(
            self.At[:, f[:, None], f],
            self.Bt[:, f],
            self.Av[:, f[:, None], f],
            self.Bv[:, f],
            self.cv,
            self.x_offset[:, f],
            self.y_offset,
            self.scale[:, f],
            self.n_train,
            self.n_val,
        )


@dataclass
class FullForm:
    """Training form of all data: the final model is ``W = (A + alpha I)^-1 B``."""

    A: np.ndarray
    B: np.ndarray
    x_offset: np.ndarray
    y_offset: np.ndarray
    scale: np.ndarray
    n: float


def class_factors(weight: np.ndarray, balanced: bool | np.ndarray) -> np.ndarray:
    """Per-class row weights of one part, given its per-class weight sums of shape (C,).

    ``balanced=True`` gives ``n / (C n_c)`` with ``n_c`` the weight sum of
    class c (its row count when unweighted), as scikit-learn's
    ``compute_class_weight(..., sample_weight=)``; an array gives fixed
    per-class weights (a user's ``class_weight`` dict); False gives ones.
    """
    C = weight.shape[0]
    if isinstance(balanced, np.ndarray):
        return balanced.astype(np.float64)
    if not balanced or C == 1:
        return np.ones(C)
    n = weight.sum()
    return np.where(weight > 0, n / (C * np.where(weight > 0, weight, 1.0)), 0.0)


def part_factors(stats: FoldStats, balanced: bool | np.ndarray, *, forward: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Class factors of every training part and every validation part, two arrays of shape (K, C).

    Class totals are weight sums; a training part's are exclusive prefix/suffix
    sums (prefix only with ``forward``), never a subtraction.
    """
    weight = stats.weight
    train = exclusive_sums(weight, np.empty_like(weight), forward=forward)
    ft = np.stack([class_factors(train[k], balanced) for k in range(stats.n_folds)])
    fv = np.stack([class_factors(weight[k], balanced) for k in range(stats.n_folds)])
    return ft, fv


#: folds' forms are built on threads from this many features: below it a form is a few memory-bound
#: passes over N x N doubles (0.3-0.5 ms at N = 200) and two threads only contend for memory and page
#: faults (K = 23, N = 200: 13-14 ms on 2 threads against 10-11 ms on one; K = 10, N = 1000: equal)
PARALLEL_FORMS_N = 512


def _scale_of(sxx_diag: np.ndarray, n: float) -> np.ndarray:
    var = sxx_diag / max(n, np.finfo(float).tiny)
    s = np.sqrt(np.maximum(var, 0.0))
    # as sklearn.preprocessing._data._handle_zeros_in_scale: (near-)constant features keep scale 1
    return np.where(s < 10 * np.finfo(float).eps * np.maximum(1.0, np.abs(s)), 1.0, s)


def _finish_training(A: np.ndarray, B: np.ndarray, xbar: np.ndarray, ybar: np.ndarray, n: float, fit_intercept: bool, standardize: bool):  # type: ignore[no-untyped-def]
    """Turn centered moments (A, B, modified in place) into the training form; returns (x_offset, y_offset, scale)."""
    scale = _scale_of(np.diag(A), n) if standardize else np.ones(A.shape[0])
    if not fit_intercept:
        add_outer(A, n, xbar, xbar)  # BLAS: overflow gives inf silently, refused by the callers
        with np.errstate(over="ignore", invalid="ignore"):
            B += n * np.outer(xbar, ybar)
        xbar, ybar = np.zeros_like(xbar), np.zeros_like(ybar)
    if standardize:
        A /= np.outer(scale, scale)
        B /= scale[:, None]
    return xbar, ybar, scale


def build_forms(
    stats: FoldStats,
    *,
    fit_intercept: bool = True,
    standardize: bool = False,
    balanced: bool | np.ndarray = False,
    train_only: int = 0,
    forward: bool = False,
) -> Forms:
    """Training and validation quadratic forms of every validated fold (see module docstring).

    Parameters
    ----------
    stats : FoldStats
    fit_intercept, standardize : bool
    balanced : bool or array of shape (n_classes,)
        Class weights (see :func:`class_factors`).
    train_only : int
        Leading folds that are never validated (rows of no test set of explicit
        splits); they are part of every training part.
    forward : bool
        Train fold k on folds ``0 .. k-1`` only (forward chaining, as
        scikit-learn's TimeSeriesSplit) instead of on all other folds.

    Raises
    ------
    FoldError
        If a fold (training or validation part) has no rows or zero weight.
    ScaleError
        If the statistics or the forms overflowed or underflowed float64.
    """
    check_folds(stats, balanced=balanced)
    check_stats_range(stats)
    N, T = stats.n_features, stats.n_targets
    ft, fv = part_factors(stats, balanced, forward=forward)
    folds = list(range(train_only, stats.n_folds))
    for k in folds:
        if float((stats.weight[:k] if forward else np.delete(stats.weight, k, axis=0)).sum()) <= 0:
            raise FoldError(f"the training part of fold {k} has zero total weight; use other folds")
    within = training_within(stats, ft, forward=forward)
    At, Bt = within[0][train_only:], within[1][train_only:]
    K = len(folds)
    Av, Bv, cv = np.empty((K, N, N)), np.empty((K, N, T)), np.empty((K, T))
    xo, yo, sc, n_train, n_val = np.empty((K, N)), np.empty((K, T)), np.empty((K, N)), np.empty(K), np.empty(K)

    def one(i: int) -> None:
        k = folds[i]
        mx, my, n_train[i] = add_training_between(stats, k, ft[k], *(w[k] for w in within), forward=forward)
        xo[i], yo[i], sc[i] = _finish_training(At[i], Bt[i], mx, my, float(n_train[i]), fit_intercept, standardize)
        cells = np.zeros(stats.weight.shape, dtype=bool)
        cells[k] = True
        v = cell_group(stats, cells, fv[k])
        n_val[i] = n_v = float(v.n[0])
        dx, dy = v.mean_x[0] - xo[i], v.mean_y[0] - yo[i]
        Av[i] = v.sxx[0]
        add_outer(Av[i], n_v, dx, dx)  # BLAS: overflow gives inf silently, refused below
        with np.errstate(over="ignore", invalid="ignore"):  # overflow: ScaleError after the forms are built
            Bv[i] = v.sxy[0]
            Bv[i] += n_v * np.outer(dx, dy)
            cv[i] = v.syy[0] + n_v * dy * dy
        if standardize:
            Av[i] /= np.outer(sc[i], sc[i])
            Bv[i] /= sc[i][:, None]

    map_folds(one, K, workers=1 if N < PARALLEL_FORMS_N else None)
    # PSD forms: off-diagonal entries are bounded by the diagonal ones, which are checked
    for a in (np.diagonal(At, axis1=1, axis2=2), Bt, np.diagonal(Av, axis1=1, axis2=2), Bv, cv):
        check_finite(a, "per-fold quadratic forms")
    return Forms(At, Bt, Av, Bv, cv, xo, yo, sc, n_train, n_val)


def build_full_form(
    stats: FoldStats,
    *,
    fit_intercept: bool = True,
    standardize: bool = False,
    balanced: bool | np.ndarray = False,
) -> FullForm:
    """Training form of all rows (all folds merged) for the final model."""
    if float(stats.weight.sum()) <= 0:
        raise FoldError("no rows with positive weight; nothing to fit")
    check_stats_range(stats)
    whole = cell_group(stats, np.ones(stats.weight.shape, dtype=bool), class_factors(stats.weight.sum(axis=0), balanced))
    A, B, n = whole.sxx[0], whole.sxy[0], float(whole.n[0])
    if np.shares_memory(A, stats.sxx):  # a single cell comes back as views; the form is modified in place
        A, B = A.copy(), B.copy()
    xbar, ybar, scale = _finish_training(A, B, whole.mean_x[0], whole.mean_y[0], n, fit_intercept, standardize)
    check_finite(A, "training form of all rows")
    check_finite(B, "training form of all rows")
    return FullForm(A, B, xbar, ybar, scale, n)


def check_folds(stats: FoldStats, *, balanced: bool | np.ndarray = False) -> None:
    """Raise a one-line :class:`FoldError` if a fold or a class would be empty."""
    per_fold = stats.count.sum(axis=1)
    empty = np.flatnonzero(per_fold == 0)
    if len(empty):
        raise FoldError(
            f"fold(s) {empty.tolist()} of {stats.n_folds} received no rows "
            f"({stats.n_rows} rows in all); use fewer folds or more data"
        )
    wsum = stats.weight.sum(axis=1)
    zero = np.flatnonzero(wsum <= 0)
    if len(zero):
        raise FoldError(f"fold(s) {zero.tolist()} have zero total sample weight; use fewer folds")
    if stats.weight.sum() - wsum.max() <= 0:
        raise FoldError("a training part has zero total weight: all weight sits in one fold")
    if balanced is True and stats.n_classes > 1:
        per_class = stats.count.sum(axis=0)
        for c in np.flatnonzero(per_class == 0):
            labels = stats.meta.get("classes")
            name = repr(labels[int(c)]) if labels is not None and int(c) < len(labels) else f"index {int(c)}"
            raise FoldError(
                f"class {name} has no rows; class_weight='balanced' weights every class by its rows and cannot "
                "weight an empty one: drop the class from classes=, or give it rows, or drop class_weight='balanced'"
            )
