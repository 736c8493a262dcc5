"""Brute-force selection engine: every candidate set refitted by one solve per lambda and fold.

O(m R K n^3) per step.  It shares the path driver (stopping rules, ties,
final choice) with the fast engines and is the reference they are tested
against.
"""

from __future__ import annotations

import numpy as np

from streamridge.forms.build import Forms
from streamridge.selection._common import criterion
from streamridge.solvers.covariance import fold_errors_covariance


def subset_errors(forms: Forms, alphas: np.ndarray, features: np.ndarray) -> np.ndarray:
    """Fold errors of shape (R, K, T) of the model on ``features`` (intercept only if empty)."""
    if features.size == 0:
        return np.broadcast_to(forms.cv[None], (alphas.shape[0], *forms.cv.shape)).copy()
    return fold_errors_covariance(forms.subset(np.sort(features)), alphas)


class BruteForceEngine:
    """Refit-everything engine with the interface of the incremental ones.

    Parameters
    ----------
    forms : Forms
    alphas : array of shape (R,)
    direction : {"forward", "backward"}
    fixed : tuple of int
        Forced features (the start of forward, never removed by backward).
    """

    def __init__(self, forms: Forms, alphas: np.ndarray, direction: str, fixed: tuple[int, ...]) -> None:
        self.forms, self.alphas, self.direction = forms, alphas, direction
        N = forms.At.shape[1]
        self.fixed = np.zeros(N, dtype=bool)
        self.fixed[list(fixed)] = True
        self.inset = self.fixed.copy() if direction == "forward" else np.ones(N, dtype=bool)

    def candidates(self) -> np.ndarray:
        if self.direction == "forward":
            return np.flatnonzero(~self.inset)
        return np.flatnonzero(self.inset & ~self.fixed)

    def scores(self, per_target: bool) -> np.ndarray:
        out = []
        for j in self.candidates():
            trial = self.inset.copy()
            trial[j] = not trial[j]
            E = subset_errors(self.forms, self.alphas, np.flatnonzero(trial))
            out.append(float(criterion(E.sum(axis=1), per_target)))
        return np.array(out)

    def apply(self, feature: int) -> None:
        self.inset[feature] = not self.inset[feature]

    def fold_errors(self) -> np.ndarray:
        return subset_errors(self.forms, self.alphas, np.flatnonzero(self.inset))
