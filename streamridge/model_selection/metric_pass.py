"""The metric pass: apply fold k's models to the rows of fold k and tally a metric.

After the statistics pass and model selection, the per-fold models of every
lambda on the grid (and, with ``rescore``, of several feature sets) are known
from the statistics alone (:func:`fold_models`).  One more streamed pass
scores them: every row is assigned to its fold exactly as in the statistics
pass, fold k's M models are applied to fold k's rows only, and the rows'
:mod:`streamridge.model_selection.metrics` tally is added up.  Cost per row: M T N
multiply-adds (the statistics pass: N^2).

The pass is the statistics pass with another kernel (:class:`MetricKernel`, run by
:func:`streamridge.datapass.driver.run_pass`): the same partitions, each stored chunk read
once, large ones decoded in pieces, tallies merged by the same fixed tree on the
workers, so the result for a given partitioning does not depend on the scheduler or
the worker count, and memory does not grow with the row count.

With a feature map the models apply to the mapped rows, mapped as in the statistics
pass: a stateless map maps every block of a partition
(:class:`streamridge.datapass.mapped.MappedKernel`); a stateful one (state carried
along each series) runs the lanes of the statistics pass
(:mod:`streamridge.datapass.lane_task`: the same lanes, lane groups and warm-up
prefixes, so every row gets the features the statistics pass saw, washout rows left out).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from streamridge.datapass.spec import PassSpec, code_targets
from streamridge.forms.build import Forms
from streamridge.model_selection.metrics import AUC_BINS, ClassTally, RegressionTally
from streamridge.solvers.linalg import psd_eigh, range_coordinates
from streamridge.stats.foldstats import FoldStats, combine

Tally = RegressionTally | ClassTally

#: predictions held at once per chunk (doubles): rows are scored in sub-batches below it
PREDICTION_BUDGET = 1 << 22


@dataclass(frozen=True)
class MetricPlan:
    """The models a metric pass applies and what it tallies.

    Attributes
    ----------
    coef : array of shape (K, M, T, N)
        Model m of fold k in original units (zeros outside its feature set).
    intercept : array of shape (K, M, T)
    n_classes : int
        0 for regression, else the number of classes (rows' class index from the labels).
    bins : int
        Score histogram bins (two classes and ROC AUC), else 0.
    score_mean, score_sd : arrays of shape (K, M) or None
        Mean and standard deviation of the binary score on fold k (AUC bins).
    """

    coef: np.ndarray
    intercept: np.ndarray
    n_classes: int = 0
    bins: int = 0
    score_mean: np.ndarray | None = None
    score_sd: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, int, int]:
        """(K folds, M models, T targets)."""
        K, M, T, _ = self.coef.shape
        return K, M, T

    def empty(self) -> Tally:
        """The zero tally of this plan."""
        K, M, T = self.shape
        if self.n_classes:
            return ClassTally.zeros(K, M, self.n_classes, self.bins)
        return RegressionTally.zeros(K, M, T)


def fold_models(
    forms: Forms, alphas: np.ndarray, supports: Sequence[np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Per-fold ridge models of every (feature set, lambda), in original units.

    ``W = (At[S,S] + lambda I)^+ Bt[S]`` by one eigendecomposition per fold
    and set, numerical null space removed as in the solvers (:mod:`streamridge.solvers.linalg`).

    Parameters
    ----------
    forms : Forms
    alphas : array of shape (R,)
    supports : sequence of bool arrays of shape (N,)

    Returns
    -------
    coef : array of shape (K, len(supports) * R, T, N)
        Model index ``s * R + r`` for set s and lambda r.
    intercept : array of shape (K, len(supports) * R, T)
    """
    K, N, T = forms.Bt.shape
    R = len(alphas)
    coef = np.zeros((K, len(supports) * R, T, N))
    intercept = np.zeros((K, len(supports) * R, T))
    for s, support in enumerate(supports):
        S = np.flatnonzero(support)
        rows = slice(s * R, (s + 1) * R)
        intercept[:, rows] = forms.y_offset[:, None, :]
        if S.size == 0:
            continue
        for k in range(K):
            d, C, null = psd_eigh(forms.At[k][np.ix_(S, S)])
            Bc = range_coordinates(C, null, forms.Bt[k][S])  # (n, T), null space removed
            W = np.einsum("ni,irt->rtn", C, Bc[:, None, :] / (d[:, None, None] + alphas[None, :, None]))
            W /= forms.scale[k][S]
            coef[k, rows][..., S] = W
            intercept[k, rows] -= W @ forms.x_offset[k][S]
    return coef, intercept


def score_moments(stats: FoldStats, coef: np.ndarray, intercept: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation on every fold of the first target's score, each (K, M)."""
    K, M = coef.shape[:2]
    mu, sd = np.zeros((K, M)), np.ones((K, M))
    for k in range(K):
        mask = np.zeros(stats.weight.shape, dtype=bool)
        mask[k] = True
        cell = combine(stats, mask)
        n = float(cell.weight[0, 0])
        w = coef[k, :, 0]  # (M, N)
        mu[k] = w @ cell.mean_x[0, 0] + intercept[k, :, 0]
        var = np.einsum("mn,nj,mj->m", w, cell.sxx[0, 0], w, optimize=True) / max(n, np.finfo(float).tiny)
        s = np.sqrt(np.maximum(var, 0.0))
        sd[k] = np.where(s > 1e-12 * np.maximum(np.abs(mu[k]), 1.0), s, 1.0)
    return mu, sd


def make_plan(
    stats: FoldStats,
    forms: Forms,
    alphas: np.ndarray,
    supports: Sequence[np.ndarray],
    *,
    n_classes: int,
    auc: bool,
) -> MetricPlan:
    """The :class:`MetricPlan` of the fold models of ``supports`` x ``alphas``."""
    coef, intercept = fold_models(forms, np.asarray(alphas, dtype=np.float64), supports)
    if not (n_classes == 2 and auc):
        return MetricPlan(coef, intercept, n_classes)
    mu, sd = score_moments(stats, coef, intercept)
    return MetricPlan(coef, intercept, n_classes, AUC_BINS, mu, sd)


# ---------------------------------------------------------------------- the chunk kernel
def _finite_rows(*arrays: np.ndarray | None) -> np.ndarray | None:
    keep = None
    for a in arrays:
        if a is None or a.dtype.kind not in "fc":
            continue
        ok = np.isfinite(a).all(axis=tuple(range(1, a.ndim)))  # (also for no rows)
        keep = ok if keep is None else keep & ok
    return keep


class MetricKernel:
    """The metric pass's kernel: rows -> the tally of fold k's models on fold k's rows.

    The kernel protocol of :mod:`streamridge.datapass.driver`: ``start()``,
    ``add(acc, X, y, groups, weights, row_start, drop)`` (in place), ``finish(acc)``,
    ``merge(a, b)`` and ``result(total)``.  It takes the rows the models apply to (a
    feature map's outputs: the pass maps them, as in the statistics pass).

    Parameters
    ----------
    spec : PassSpec
        The statistics pass's (folds, classes, targets, non-finite rows).
    plan : MetricPlan
    """

    def __init__(self, spec: PassSpec, plan: MetricPlan) -> None:
        self.spec, self.plan = spec, plan

    @property
    def width(self) -> int:
        """Features per row the models take."""
        return int(self.plan.coef.shape[-1])

    @property
    def n_cells(self) -> int:
        """Folds the rows go to."""
        return int(self.spec.scheme.n_folds)

    def result_bytes(self) -> int:
        """Bytes of a tally's arrays."""
        return _tally_bytes(self.plan.empty())

    def start(self) -> Tally:
        """The zero tally."""
        return self.plan.empty()

    def add(
        self, acc: Tally, X: np.ndarray, y: Any, groups: Any, weights: Any, row_start: int, drop: Any = None
    ) -> None:
        """Add the rows ``row_start ..`` of one block (``drop``: rows left out, a map's washout)."""
        tally_rows(acc, X, y, groups, weights, row_start, self.spec, self.plan, drop)

    @staticmethod
    def finish(acc: Tally) -> Tally:
        """The task's tally."""
        return acc

    @staticmethod
    def merge(a: Tally, b: Tally) -> Tally:
        """Two tallies' merge (``a``'s rows before ``b``'s)."""
        return a.merge(b)  # type: ignore[arg-type]

    def result(self, total: Tally | None) -> Tally:
        """The pass's tally (zero without rows)."""
        return self.plan.empty() if total is None else total


def tally_rows(
    tally: Tally,
    X: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray | None,
    weights: np.ndarray | None,
    row_start: int,
    spec: PassSpec,
    plan: MetricPlan,
    drop: np.ndarray | None = None,
) -> None:
    """Add the rows ``row_start ..`` to ``tally`` (in place): fold k's models applied to fold k's rows.

    Parameters
    ----------
    tally : RegressionTally or ClassTally
        Of ``plan``.
    X : array of shape (m, N)
        The rows the models take (a feature map's outputs, if any).
    y : array of shape (m,) or (m, T)
    groups, weights : arrays of shape (m,) or None
    row_start : int
        Global index of the first row (fold assignment as in the statistics pass).
    spec : PassSpec
    plan : MetricPlan
    drop : bool array of shape (m,) or None
        Rows left out on purpose (a feature map's washout), as in the statistics pass.
    """
    m = X.shape[0]
    folds = spec.scheme.assign(row_start, m, None if groups is None else np.asarray(groups).reshape(-1))
    y = np.asarray(y)
    w = None if weights is None else np.asarray(weights, dtype=np.float64).reshape(-1)
    keep = None if drop is None else ~np.asarray(drop, dtype=bool)
    if spec.skip_nonfinite:
        ok = _finite_rows(X, y, w)
        keep = ok if keep is None else keep if ok is None else keep & ok
    if keep is not None and not keep.all():
        X, y, folds = X[keep], y[keep], folds[keep]
        w = None if w is None else w[keep]
    if X.shape[0] == 0:  # every row dropped (washout, or NaN rows skipped)
        return
    if plan.n_classes:
        target, _ = code_targets(y, spec.classes or tuple(range(plan.n_classes)))
    else:
        target = y.reshape(X.shape[0], -1).astype(np.float64)
    _, M, T = plan.shape
    step = max(1, PREDICTION_BUDGET // max(M * T, 1))
    for k in np.unique(folds):
        idx = np.flatnonzero(folds == k)
        for s in range(0, idx.size, step):
            rows = idx[s : s + step]
            Xk = np.asarray(X[rows], dtype=np.float64)
            P = (Xk @ plan.coef[k].reshape(M * T, -1).T).reshape(rows.size, M, T) + plan.intercept[k]
            wk = None if w is None else w[rows]
            if isinstance(tally, ClassTally):
                norm = (
                    None
                    if plan.score_mean is None or plan.score_sd is None
                    else (plan.score_mean[k], plan.score_sd[k])
                )
                tally.add_rows(int(k), target[rows], P, wk, norm)
            else:
                tally.add_rows(int(k), target[rows], P, wk)


# ---------------------------------------------------------------------- the pass
def metric_pass(
    source: Any,
    spec: PassSpec,
    plan: MetricPlan,
    *,
    row_offset: int = 0,
    scheduler: Any = None,
    window: int | None = None,
    memory_budget: int | None = None,
    partition_rows: int | None = None,
    progress: bool | Callable[[int], None] = False,
) -> Tally:
    """The metric pass over a :class:`~streamridge.sources.Source`: the tally of every fold and model.

    The layout of the statistics pass (:func:`streamridge.datapass.layouts.pass_layout`: the same
    partitions, each stored chunk read once, or with a stateful map in ``spec`` the same lanes, each
    series' state carried in row order), run by :func:`streamridge.datapass.driver.run_pass` with
    :class:`MetricKernel`; the kernel takes whole read blocks where they are not decoded in pieces
    (fewer, longer runs of each fold's rows).  ``progress`` shows a tqdm bar ("metric pass") or
    calls ``progress(rows_done)`` per task.
    """
    from streamridge.datapass.driver import run_pass
    from streamridge.datapass.layouts import pass_layout, x_shape

    if spec.features is not None:  # the raw inputs the map takes
        spec.features.check_width(x_shape(source)[1])
    layout = pass_layout(  # the statistics pass warned of the same stored chunks
        spec, partition_rows=partition_rows, memory_budget=memory_budget, whole_reads=True, warn=False
    )
    kernel = MetricKernel(spec, plan)
    tally: Tally = run_pass(
        source,
        kernel,
        layout,
        row_offset=row_offset,
        scheduler=scheduler,
        window=window,
        progress=progress,
        desc="metric pass",
    )
    return tally


def _tally_bytes(tally: Tally) -> int:
    """Bytes of a tally's arrays."""
    return sum(
        int(getattr(tally, f.name).nbytes)
        for f in dataclasses.fields(tally)
        if hasattr(getattr(tally, f.name), "nbytes")
    )
