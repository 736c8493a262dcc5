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

from collections.abc import Iterator
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
class ValidationMoments:
    """Weighted moments of each validation fold about its own means.

    Attributes
    ----------
    n : array of shape (K,)
        Weight sums (after class weights).
    mean_x : array of shape (K, N)
    mean_y : array of shape (K, T)
    syy : array of shape (K, T)
        ``sum_i w_i (y_i - mean_y)²``: the denominator of R².
    """

    n: np.ndarray
    mean_x: np.ndarray
    mean_y: np.ndarray
    syy: np.ndarray

    def subset(self, features: np.ndarray) -> ValidationMoments:
        """The moments of a subset of features."""
        return ValidationMoments(self.n, self.mean_x[:, np.asarray(features)], self.mean_y, self.syy)


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
    moments : ValidationMoments or None
        The validation folds' own moments (R² and correlation need them), when built ``with_moments``.
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
    moments: ValidationMoments | None = None

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
            None if self.moments is None else self.moments.subset(f),
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


def part_factors(
    stats: FoldStats, balanced: bool | np.ndarray, *, forward: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Class factors of every training part and every validation part, two arrays of shape (K, C).

    Class totals are weight sums; a training part's are exclusive prefix/suffix
    sums (prefix only with ``forward``), never a subtraction.
    """
    weight = stats.weight
    train = exclusive_sums(weight, np.empty_like(weight), forward=forward)
    ft = np.stack([class_factors(train[k], balanced) for k in range(stats.n_folds)])
    fv = np.stack([class_factors(weight[k], balanced) for k in range(stats.n_folds)])
    return ft, fv


def validation_moments(
    stats: FoldStats, *, balanced: bool | np.ndarray = False, train_only: int = 0
) -> ValidationMoments:
    """Means and centered ``syy`` of every validated fold, weighted as :func:`~streamridge.forms.build.build_forms` weighs them.

    Parameters
    ----------
    stats : FoldStats
    balanced : bool or array of shape (n_classes,)
        Class weights, as given to ``build_forms``.
    train_only : int
        Leading folds that are never validated, as given to ``build_forms``.

    Returns
    -------
    ValidationMoments
        One row per validated fold, in the order of the forms.

    Notes
    -----
    A fold is the cells (k, c) of its classes, cell c weighted by the class
    factor ``g_c``.  With ``v_c = g_c n_c`` and ``mean = sum v_c mean_c / sum v_c``
    its centered ``syy`` is ``sum g_c syy_c + sum v_c (mean_c - mean)²``
    (:mod:`streamridge.forms.parts`): sums of non-negative terms, no cancellation.
    """
    _, fv = part_factors(stats, balanced)
    v = (stats.weight * fv)[train_only:]  # (K, C)
    n = v.sum(axis=1)
    safe = np.where(n > 0, n, 1.0)[:, None]
    mean_x = np.einsum("kc,kcn->kn", v, stats.mean_x[train_only:]) / safe
    mean_y = np.einsum("kc,kct->kt", v, stats.mean_y[train_only:]) / safe
    dev = stats.mean_y[train_only:] - mean_y[:, None, :]
    within = np.einsum("kc,kct->kt", fv[train_only:], stats.syy[train_only:])
    syy = within + np.einsum("kc,kct->kt", v, dev * dev)
    return ValidationMoments(n, mean_x, mean_y, syy)


#: folds' forms are built on threads from this many features: below it a form is a few memory-bound
#: passes over N x N doubles (0.3-0.5 ms at N = 200) and two threads only contend for memory and page
#: faults (K = 23, N = 200: 13-14 ms on 2 threads against 10-11 ms on one; K = 10, N = 1000: equal)
PARALLEL_FORMS_N = 512


def _scale_of(sxx_diag: np.ndarray, n: float) -> np.ndarray:
    var = sxx_diag / max(n, np.finfo(float).tiny)
    s = np.sqrt(np.maximum(var, 0.0))
    # as sklearn.preprocessing._data._handle_zeros_in_scale: (near-)constant features keep scale 1
    return np.where(s < 10 * np.finfo(float).eps * np.maximum(1.0, np.abs(s)), 1.0, s)


def _finish_training(
    A: np.ndarray,
    B: np.ndarray,
    xbar: np.ndarray,
    ybar: np.ndarray,
    n: float,
    fit_intercept: bool,
    standardize: bool,
):  # type: ignore[no-untyped-def]
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
    with_moments: bool = False,
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
    with_moments : bool
        Also the validation folds' own moments (:func:`validation_moments`).

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
    xo, yo, sc, n_train, n_val = (
        np.empty((K, N)),
        np.empty((K, T)),
        np.empty((K, N)),
        np.empty(K),
        np.empty(K),
    )

    def one(i: int) -> None:
        k = folds[i]
        mx, my, n_train[i] = add_training_between(stats, k, ft[k], *(w[k] for w in within), forward=forward)
        xo[i], yo[i], sc[i] = _finish_training(
            At[i], Bt[i], mx, my, float(n_train[i]), fit_intercept, standardize
        )
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
    moments = validation_moments(stats, balanced=balanced, train_only=train_only) if with_moments else None
    return Forms(At, Bt, Av, Bv, cv, xo, yo, sc, n_train, n_val, moments)


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
    whole = cell_group(
        stats, np.ones(stats.weight.shape, dtype=bool), class_factors(stats.weight.sum(axis=0), balanced)
    )
    A, B, n = whole.sxx[0], whole.sxy[0], float(whole.n[0])
    if np.shares_memory(A, stats.sxx):  # a single cell comes back as views; the form is modified in place
        A, B = A.copy(), B.copy()
    xbar, ybar, scale = _finish_training(
        A, B, whole.mean_x[0], whole.mean_y[0], n, fit_intercept, standardize
    )
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


def select_targets(stats: FoldStats, cols: slice) -> FoldStats:
    """The statistics of the targets ``cols`` only (views of the arrays, no copy)."""
    return FoldStats(
        stats.weight,
        stats.count,
        stats.mean_x,
        stats.mean_y[..., cols],
        stats.sxx,
        stats.sxy[..., cols],
        stats.syy[..., cols],
        stats.meta,
    )


def target_batch_width(n_folds: int, n_features: int, max_bytes: int) -> int:
    """Targets per batch whose forms fit ``max_bytes``: ``Bt``, ``Bv`` (K x N each) and the full form's ``B`` (N)."""
    per_target = 8 * ((2 * n_folds + 1) * n_features + 4 * n_folds + 2)
    return max(1, int(max_bytes) // per_target)


class TargetBatches:
    """The forms of the statistics' targets, built one batch of target columns at a time.

    The forms of T targets take ``2 K N T`` doubles (``Bt`` and ``Bv``) beside
    the statistics' own ``K N T``; built in batches of ``width`` targets, the
    model selection and the final solve hold one batch's forms at a time.
    ``At``, ``Av`` and ``A`` depend on the features only and are the same in
    every batch.

    Parameters
    ----------
    stats : FoldStats
    width : int
        Targets per batch.
    fit_intercept, standardize, balanced, train_only, forward, with_moments
        As :func:`build_forms` takes them.

    A single batch is built once and kept.
    """

    def __init__(
        self,
        stats: FoldStats,
        *,
        width: int,
        fit_intercept: bool = True,
        standardize: bool = False,
        balanced: bool | np.ndarray = False,
        train_only: int = 0,
        forward: bool = False,
        with_moments: bool = False,
    ) -> None:
        self.stats = stats
        self.width = max(1, int(width))
        self.fit_intercept, self.standardize, self.balanced = bool(fit_intercept), bool(standardize), balanced
        self.train_only, self.forward, self.with_moments = int(train_only), bool(forward), bool(with_moments)
        self._kept: Forms | None = None

    @property
    def n_targets(self) -> int:
        """Number of targets T."""
        return self.stats.n_targets

    @property
    def n_folds(self) -> int:
        """Number of validated folds."""
        return self.stats.n_folds - self.train_only

    def slices(self) -> list[slice]:
        """The target columns of every batch, in order."""
        T = self.n_targets
        return [slice(s, min(T, s + self.width)) for s in range(0, max(T, 1), self.width)]

    @property
    def n_features(self) -> int:
        """Number of features N."""
        return self.stats.n_features

    def forms(self, cols: slice = slice(None)) -> Forms:
        """:func:`build_forms` of the targets ``cols``."""
        if self._kept is not None and cols == self.slices()[0]:
            return self._kept
        forms = build_forms(
            select_targets(self.stats, cols), fit_intercept=self.fit_intercept, standardize=self.standardize,
            balanced=self.balanced, train_only=self.train_only, forward=self.forward, with_moments=self.with_moments,
        )  # fmt: skip
        if len(self.slices()) == 1 and cols == self.slices()[0]:
            self._kept = forms
        return forms

    def batches(self) -> Iterator[tuple[slice, Forms]]:
        """The target columns and forms of every batch, one batch in memory at a time."""
        for cols in self.slices():
            yield cols, self.forms(cols)

    def full(self, cols: slice = slice(None)) -> FullForm:
        """:func:`build_full_form` of the targets ``cols``."""
        return build_full_form(
            select_targets(self.stats, cols), fit_intercept=self.fit_intercept, standardize=self.standardize,
            balanced=self.balanced,
        )  # fmt: skip


def each_batch(forms: Forms | TargetBatches) -> Iterator[tuple[slice, Forms]]:
    """The target columns and forms of every batch: the forms themselves, or :meth:`TargetBatches.batches`."""
    if isinstance(forms, Forms):
        yield slice(0, int(forms.Bt.shape[2])), forms
    else:
        yield from forms.batches()


def n_targets_of(forms: Forms | TargetBatches) -> int:
    """Number of targets of forms or target batches."""
    return int(forms.Bt.shape[2]) if isinstance(forms, Forms) else forms.n_targets
