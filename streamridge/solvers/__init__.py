"""Lambda-search solvers working on per-fold quadratic forms (never on rows).

Each solver maps ``(forms, alphas)`` to the validation squared error of every
lambda, fold and target, an array of shape (R, K, T).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from streamridge.errors import ParameterError
from streamridge.forms.build import Forms
from streamridge.solvers.covariance import fold_errors_covariance
from streamridge.solvers.eigen import fold_errors_eigen, solve_full

SolverFn = Callable[..., np.ndarray]

SOLVERS: dict[str, SolverFn] = {
    "eigen": fold_errors_eigen,
    "covariance": fold_errors_covariance,
}


def fold_errors(forms: Forms, alphas: np.ndarray, *, solver: str = "eigen") -> np.ndarray:
    """Dispatch to a registered solver; see :data:`SOLVERS`."""
    try:
        fn = SOLVERS[solver]
    except KeyError:
        raise ParameterError(f"unknown solver {solver!r}; use one of {sorted(SOLVERS)}") from None
    return fn(forms, alphas)


__all__ = ["SOLVERS", "fold_errors", "fold_errors_covariance", "fold_errors_eigen", "solve_full"]
