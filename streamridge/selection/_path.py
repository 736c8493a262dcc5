"""The selection path driver and the public entry points :func:`select_features`, :func:`brute_force_path`.

BLAS threads: the engines call BLAS on one small matrix per lambda and fold
(ger, gemv, n x n gemm), where multi-threaded BLAS only adds synchronisation.
On the Table 1 shape (N=200, K=23, R=60; 2-core machine shared with other
jobs) a full backward path took 11 s with one BLAS thread and 132 s with two,
so the paths run inside ``threadpool_limits(1, "blas")``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from threadpoolctl import threadpool_limits

from streamridge.forms.build import Forms
from streamridge.selection._backward import BackwardEngine
from streamridge.selection._common import Engine, pick_candidate
from streamridge.selection._forward import ForwardEngine
from streamridge.selection._options import Options, check_options
from streamridge.selection._reference import BruteForceEngine
from streamridge.selection._result import SelectionResult, Step, best_step, make_step


def _stop_size(opts: Options) -> int:
    """Set size at which the path ends."""
    if opts.direction == "backward":
        return max(opts.min_features, len(opts.force))
    return opts.max_features


class _Patience:
    """Counts steps since the last improvement of the best error by more than ``tol`` (relative)."""

    def __init__(self, patience: int | None, tol: float, first: float) -> None:
        self.patience, self.tol, self.best, self.waited = patience, tol, first, 0

    def exhausted(self, err: float) -> bool:
        if err < self.best - self.tol * abs(self.best):
            self.best, self.waited = err, 0
        else:
            self.best = min(self.best, err)
            self.waited += 1
        return self.patience is not None and self.waited >= self.patience


def run_path(engine: Engine, alphas: np.ndarray, opts: Options, n_start: int) -> list[Step]:
    """Greedy path: score all candidates, take the best (ties to the lowest index), record, repeat."""
    per_target = opts.per_target
    steps = [make_step(-1, n_start, engine.fold_errors(), alphas, per_target)]
    wait = _Patience(opts.patience, opts.tol, steps[0].cv_error)
    sign = 1 if opts.direction == "forward" else -1
    n, stop = n_start, _stop_size(opts)
    while n != stop:
        cand = engine.candidates()
        if cand.size == 0:
            break
        j = pick_candidate(engine.scores(per_target), cand)
        engine.apply(j)
        n += sign
        steps.append(make_step(j, n, engine.fold_errors(), alphas, per_target))
        if wait.exhausted(steps[-1].cv_error):
            break
    return steps


def finish(
    direction: str, steps: list[Step], opts: Options, alphas: np.ndarray, start: Sequence[int]
) -> SelectionResult:
    """Choose the final set and build the result."""
    N = opts.n_features
    best = best_step(steps, opts.min_features, opts.max_features, opts.one_se)
    changed = [s.feature for s in steps[1:]]
    support = np.zeros(N, dtype=bool)
    if direction == "backward":
        support[:] = True
        support[changed[:best]] = False
        left = np.ones(N, dtype=bool)
        left[changed] = False
        order = list(np.flatnonzero(left)) + changed[::-1]
        selected = np.array([f for f in order if support[f]], dtype=np.int64)
    else:
        selected = np.array(list(start) + changed[:best], dtype=np.int64)
        support[selected] = True
    return SelectionResult(direction, steps, best, support, selected, alphas)


def _engine(forms: Forms, alphas: np.ndarray, opts: Options, brute: bool) -> Engine:
    if brute:
        return BruteForceEngine(forms, alphas, opts.direction, opts.force)
    if opts.direction == "forward":
        return ForwardEngine(forms, alphas, opts.force, opts.memory_budget, opts.max_features)
    return BackwardEngine(forms, alphas, opts.force, opts.memory_budget)


def _select(forms: object, alphas: object, brute: bool, **kw: object) -> SelectionResult:
    F, a, opts = check_options(forms, alphas, **kw)  # type: ignore[arg-type]
    n_start = len(opts.force) if opts.direction == "forward" else opts.n_features
    with threadpool_limits(limits=1, user_api="blas"):  # see the module docstring
        steps = run_path(_engine(F, a, opts, brute), a, opts, n_start)
    return finish(opts.direction, steps, opts, a, opts.force)


def select_features(
    forms: Forms,
    alphas: np.ndarray,
    *,
    direction: str,
    max_features: int | None = None,
    min_features: int | None = None,
    force: Sequence[int] = (),
    patience: int | None = None,
    tol: float = 0.0,
    one_se: bool = False,
    alpha_per_target: bool = False,
    memory_budget: int | None = None,
) -> SelectionResult:
    """Greedy forward or backward feature selection with lambda re-chosen for every set.

    Every candidate set is scored by its K-fold validation error minimised over
    the lambda grid; the best candidate (ties to the lowest feature index) is
    added or removed, and the final set is the path's best step.

    Parameters
    ----------
    forms : Forms
        Per-fold quadratic forms (:func:`streamridge.forms.build.build_forms`), N >= 2 features.
    alphas : array of shape (R,)
        Lambda grid (positive).
    direction : {"forward", "backward"}
        Forward starts from the forced features (or none) and adds; backward
        starts from all features and removes.
    max_features, min_features : int in [1, N] or None
        Forward stops at ``max_features`` (default N), backward at
        ``min_features`` (default 1); the final set is chosen among path sets
        whose size lies in ``[min_features, max_features]``.
    force : sequence of int
        Features always in the set.
    patience : int or None
        Stop after this many steps without improving the best CV error by more
        than ``tol`` (relative).  None: the full path.
    tol : float
        Relative improvement that resets ``patience``.
    one_se : bool
        Final set: the smallest set within one standard error (over folds) of
        the lowest CV error, instead of the lowest.
    alpha_per_target : bool
        Minimise each target's error over the grid separately (the criterion
        is then the sum over targets of per-target minima).
    memory_budget : int or None
        Bytes of per-lambda state the engine may hold (default 256 MiB).  Above
        it, lambdas are processed in batches and the state is rebuilt each step.

    Returns
    -------
    SelectionResult

    Raises
    ------
    ParameterError
        For an unknown direction, a size bound out of ``[1, N]``, a forced
        feature that does not exist, or fewer than two features.
    """
    return _select(
        forms,
        alphas,
        False,
        direction=direction,
        max_features=max_features,
        min_features=min_features,
        force=force,
        patience=patience,
        tol=tol,
        one_se=one_se,
        alpha_per_target=alpha_per_target,
        memory_budget=memory_budget,
    )


def brute_force_path(
    forms: Forms,
    alphas: np.ndarray,
    *,
    direction: str,
    max_features: int | None = None,
    min_features: int | None = None,
    force: Sequence[int] = (),
    patience: int | None = None,
    tol: float = 0.0,
    one_se: bool = False,
    alpha_per_target: bool = False,
    memory_budget: int | None = None,
) -> SelectionResult:
    """The same path as :func:`select_features` by refitting every candidate set (slow reference).

    Each candidate set costs one Cholesky solve per lambda and fold on the
    subset forms, O(R K n^3); a step costs m times that.  Arguments and result
    as :func:`select_features` (``memory_budget`` is accepted and unused).
    """
    return _select(
        forms,
        alphas,
        True,
        direction=direction,
        max_features=max_features,
        min_features=min_features,
        force=force,
        patience=patience,
        tol=tol,
        one_se=one_se,
        alpha_per_target=alpha_per_target,
        memory_budget=memory_budget,
    )
