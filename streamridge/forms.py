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
class c gets weight ``n_part / (C n_part,c)`` (row counts), applied to the
cells before they are merged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import FoldError
from .magnitudes import check_finite, check_stats_range
from .parallel import map_folds
from .stats import FoldStats, merge

_FIELDS = ("weight", "count", "mean_x", "mean_y", "sxx", "sxy", "syy")


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


def class_factors(count: np.ndarray, balanced: bool | np.ndarray) -> np.ndarray:
    """Per-class row weights of one part, given its row counts of shape (C,).

    ``balanced=True`` gives ``n / (C n_c)``; an array gives fixed per-class
    weights (a user's ``class_weight`` dict); False gives ones.
    """
    C = count.shape[0]
    if isinstance(balanced, np.ndarray):
        return balanced.astype(np.float64)
    if not balanced or C == 1:
        return np.ones(C)
    n = count.sum()
    return np.where(count > 0, n / (C * np.maximum(count, 1)), 0.0)


def _merge_classes(stats: FoldStats, factors: np.ndarray) -> FoldStats:
    """Merge the C class cells of a 1 x C stats object into one cell, class c scaled by factors[c]."""
    s = stats.scaled(factors[None, :])
    out = FoldStats.from_arrays([getattr(s, a)[:, :1] for a in _FIELDS])
    for c in range(1, stats.n_classes):
        out = merge(out, FoldStats.from_arrays([getattr(s, a)[:, c : c + 1] for a in _FIELDS]))
    return out


def _fold_rows(stats: FoldStats, k: int) -> FoldStats:
    return FoldStats.from_arrays([getattr(stats, a)[k : k + 1] for a in _FIELDS])


def training_parts(stats: FoldStats) -> list[FoldStats]:
    """For each fold k, the merged statistics (1 x C) of all other folds.

    Uses prefix and suffix merges, so K training parts cost O(K) merges and no
    subtraction of co-moments (no cancellation).
    """
    K = stats.n_folds
    folds = [_fold_rows(stats, k) for k in range(K)]
    prefix: list[FoldStats | None] = [None] * K
    suffix: list[FoldStats | None] = [None] * K
    for k in range(1, K):
        prev = prefix[k - 1]
        prefix[k] = folds[k - 1] if prev is None else merge(prev, folds[k - 1])
    for k in range(K - 2, -1, -1):
        nxt = suffix[k + 1]
        suffix[k] = folds[k + 1] if nxt is None else merge(folds[k + 1], nxt)
    parts: list[FoldStats] = []
    for k in range(K):
        p, s = prefix[k], suffix[k]
        if p is None or s is None:
            one = p if s is None else s
            assert one is not None
            parts.append(one)
        else:
            parts.append(merge(p, s))
    return parts


def _scale_of(sxx_diag: np.ndarray, n: float) -> np.ndarray:
    var = sxx_diag / max(n, np.finfo(float).tiny)
    s = np.sqrt(np.maximum(var, 0.0))
    # as sklearn.preprocessing._data._handle_zeros_in_scale: (near-)constant features keep scale 1
    return np.where(s < 10 * np.finfo(float).eps * np.maximum(1.0, np.abs(s)), 1.0, s)


def _training_form(part: FoldStats, balanced: bool | np.ndarray, fit_intercept: bool, standardize: bool):  # type: ignore[no-untyped-def]
    """(A, B, xbar, ybar, scale, n, class factors) of one training part (1 x C stats)."""
    g = class_factors(part.count[0], balanced)
    t = _merge_classes(part, g)
    n = float(t.weight[0, 0])
    xbar, ybar = t.mean_x[0, 0], t.mean_y[0, 0]
    A, B = t.sxx[0, 0].copy(), t.sxy[0, 0].copy()
    scale = _scale_of(np.diag(A), n) if standardize else np.ones(A.shape[0])
    if not fit_intercept:
        with np.errstate(over="ignore", invalid="ignore"):  # overflow: ScaleError after the forms are built
            A += n * np.outer(xbar, xbar)
            B += n * np.outer(xbar, ybar)
        xbar, ybar = np.zeros_like(xbar), np.zeros_like(ybar)
    if standardize:
        A /= np.outer(scale, scale)
        B /= scale[:, None]
    return A, B, xbar, ybar, scale, n


def build_forms(
    stats: FoldStats,
    *,
    fit_intercept: bool = True,
    standardize: bool = False,
    balanced: bool | np.ndarray = False,
) -> Forms:
    """Training and validation quadratic forms of every fold (see module docstring).

    Raises
    ------
    FoldError
        If a fold (training or validation part) has no rows or zero weight.
    """
    check_folds(stats, balanced=balanced)
    check_stats_range(stats)
    parts = training_parts(stats)

    def one(k: int) -> tuple:
        A, B, xbar_t, ybar_t, scale, n_t = _training_form(parts[k], balanced, fit_intercept, standardize)
        vpart = _fold_rows(stats, k)
        v = _merge_classes(vpart, class_factors(vpart.count[0], balanced))
        n_v = float(v.weight[0, 0])
        dx = (v.mean_x[0, 0] - xbar_t) / scale
        dy = v.mean_y[0, 0] - ybar_t
        with np.errstate(over="ignore", invalid="ignore"):  # overflow: ScaleError after the forms are built
            Av = v.sxx[0, 0] / np.outer(scale, scale)
            Av += n_v * np.outer(dx, dx)
            Bv = v.sxy[0, 0] / scale[:, None] + n_v * np.outer(dx, dy)
            cv = v.syy[0, 0] + n_v * dy * dy
        return A, B, Av, Bv, cv, xbar_t, ybar_t, scale, n_t, n_v

    cols = list(zip(*map_folds(one, stats.n_folds)))
    At, Bt, Av, Bv, cv, xo, yo, sc = (np.stack(c) for c in cols[:8])
    for a in (At, Bt, Av, Bv, cv):
        check_finite(a, "per-fold quadratic forms")
    return Forms(At, Bt, Av, Bv, cv, xo, yo, sc, np.array(cols[8]), np.array(cols[9]))


def build_full_form(
    stats: FoldStats,
    *,
    fit_intercept: bool = True,
    standardize: bool = False,
    balanced: bool | np.ndarray = False,
) -> FullForm:
    """Training form of all rows (all folds merged) for the final model."""
    whole = _fold_rows(stats, 0)
    for k in range(1, stats.n_folds):
        whole = merge(whole, _fold_rows(stats, k))
    if float(whole.weight.sum()) <= 0:
        raise FoldError("no rows with positive weight; nothing to fit")
    check_stats_range(whole)
    A, B, xbar, ybar, scale, n = _training_form(whole, balanced, fit_intercept, standardize)
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
            raise FoldError(f"class index {int(c)} has no rows; class_weight='balanced' needs every class")
