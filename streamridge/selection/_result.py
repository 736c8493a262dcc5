"""The selection path record (:class:`Step`, :class:`SelectionResult`) and the choice of the final set."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from streamridge.selection._common import criterion
from streamridge.solvers.grid import choose

#: relative tolerance under which two path errors count as equal (fewer features win)
STEP_TIE_RTOL = 1e-9


@dataclass(frozen=True)
class Step:
    """One point of a selection path.

    Attributes
    ----------
    feature : int
        Feature added (forward) or removed (backward); -1 for the starting set.
    n_features : int
        Size of the set after the step.
    alpha : float or array of shape (T,)
        Lambda chosen for this set by :func:`streamridge.solvers.grid.choose` (per target
        if ``alpha_per_target``).
    cv_error : float
        K-fold validation squared error summed over folds and targets, minimised
        over the lambda grid (per target if ``alpha_per_target``).
    fold_errors : array of shape (K,)
        Validation error of each fold at the chosen lambda, summed over targets.
    """

    feature: int
    n_features: int
    alpha: float | np.ndarray
    cv_error: float
    fold_errors: np.ndarray

    @property
    def std_error(self) -> float:
        """Standard error of ``cv_error`` over folds (``sqrt(K) * std(fold_errors, ddof=1)``)."""
        K = self.fold_errors.shape[0]
        return float(np.sqrt(K) * np.std(self.fold_errors, ddof=1)) if K > 1 else 0.0


@dataclass
class SelectionResult:
    """Outcome of a feature-selection path.

    Attributes
    ----------
    direction : {"forward", "backward", "op-rr"}
    steps : list of Step
        ``steps[0]`` is the starting set (forward: the forced features or the
        empty set, whose error is the intercept-only ``sum(cv)``; backward: all
        features); ``steps[i]`` is the set after the i-th addition/removal.
    best_step : int
        Index into ``steps`` of the final set.
    support : array of bool of shape (N,)
        Mask of the final set.
    selected : array of int
        Indices of the final set, most important first: forward and OP-RR in
        order of entry (forced features first); backward: features never
        removed (ascending), then the others in reverse order of removal.
    alphas : array of shape (R,)
        The lambda grid searched.
    """

    direction: str
    steps: list[Step]
    best_step: int
    support: np.ndarray
    selected: np.ndarray
    alphas: np.ndarray = field(repr=False)

    @property
    def alpha(self) -> float | np.ndarray:
        """Lambda of the final set."""
        return self.steps[self.best_step].alpha

    @property
    def cv_error(self) -> float:
        """CV error of the final set."""
        return self.steps[self.best_step].cv_error

    @property
    def features(self) -> np.ndarray:
        """Feature changed at every step (-1 at step 0), shape (n_steps,)."""
        return np.array([s.feature for s in self.steps], dtype=np.int64)

    @property
    def n_features(self) -> np.ndarray:
        """Set size after every step, shape (n_steps,)."""
        return np.array([s.n_features for s in self.steps], dtype=np.int64)

    @property
    def cv_errors(self) -> np.ndarray:
        """CV error after every step, shape (n_steps,)."""
        return np.array([s.cv_error for s in self.steps])

    def as_table(self) -> np.ndarray:
        """Steps as a structured array with fields feature, n_features, cv_error, std_error."""
        dt = np.dtype([("feature", "i8"), ("n_features", "i8"), ("cv_error", "f8"), ("std_error", "f8")])
        rows = [(s.feature, s.n_features, s.cv_error, s.std_error) for s in self.steps]
        return np.array(rows, dtype=dt)


def make_step(
    feature: int, n_features: int, errors: np.ndarray, alphas: np.ndarray, per_target: bool
) -> Step:
    """Record the set reached by a step from its fold errors of shape (R, K, T)."""
    idx = choose(errors, alphas, per_target=per_target)
    cv_error = float(criterion(errors.sum(axis=1), per_target))
    if per_target:
        T = errors.shape[2]
        at_best = errors[idx, :, np.arange(T)].sum(axis=0)  # (T, K) -> (K,)
        alpha: float | np.ndarray = alphas[idx].copy()
    else:
        at_best = errors[int(idx)].sum(axis=1)
        alpha = float(alphas[int(idx)])
    return Step(int(feature), int(n_features), alpha, cv_error, np.asarray(at_best, dtype=np.float64))


def best_step(steps: list[Step], lo: int, hi: int, one_se: bool) -> int:
    """Index of the final set among steps with ``lo <= n_features <= hi``.

    The lowest CV error wins, ties (relative :data:`STEP_TIE_RTOL`) to fewer
    features; with ``one_se`` the smallest set whose error is within one
    standard error of that minimum.
    """
    ok = [i for i, s in enumerate(steps) if lo <= s.n_features <= hi]
    if not ok:
        ok = list(range(len(steps)))
    err = np.array([steps[i].cv_error for i in ok])
    i_min = ok[int(np.argmin(err))]
    bound = steps[i_min].cv_error
    if one_se:
        bound += steps[i_min].std_error
    bound += STEP_TIE_RTOL * abs(bound)
    within = [i for i in ok if steps[i].cv_error <= bound]
    return min(within, key=lambda i: (steps[i].n_features, steps[i].cv_error, i))
