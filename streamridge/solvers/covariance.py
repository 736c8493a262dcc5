"""The covariance method (Buteneers et al. 2013, section 2.1): one solve per lambda and fold.

.. code-block:: text

    W = (At + lambda I)^-1 Bt        (Cholesky; symmetric solve if not positive definite)
    SSE_v = W' Av W - 2 W' Bv + cv

O(R K N^3); kept as a selectable solver and as the reference of the eigen method.

Lambdas where ``At + lambda I`` is ill-conditioned (``rcond < RCOND_MIN``) are solved through the
fold's eigendecomposition with the numerical null space removed, as the eigen
method does (:class:`~streamridge.solvers.linalg.RidgeSolver`), so lambda -> 0
gives the minimum-norm least-squares solution.
"""

from __future__ import annotations

import numpy as np

from streamridge.forms.build import Forms
from streamridge.parallel import map_folds
from streamridge.solvers.linalg import RidgeSolver, ridge_solve

__all__ = ["fold_errors_covariance", "ridge_solve", "validation_sse"]


def validation_sse(W: np.ndarray, Av: np.ndarray, Bv: np.ndarray, cv: np.ndarray) -> np.ndarray:
    """``diag(W' Av W) - 2 diag(W' Bv) + cv`` for W of shape (N, T)."""
    return np.einsum("nt,nt->t", W, Av @ W) - 2.0 * np.einsum("nt,nt->t", W, Bv) + cv


def fold_errors_covariance(forms: Forms, alphas: np.ndarray) -> np.ndarray:
    """Validation squared error of every lambda, fold and target by one solve each.

    Returns
    -------
    array of shape (R, K, T)
    """
    alphas = np.asarray(alphas, dtype=np.float64)

    def one(k: int) -> np.ndarray:
        solve = RidgeSolver(forms.At[k], forms.Bt[k])
        return np.stack(
            [validation_sse(solve(float(a)), forms.Av[k], forms.Bv[k], forms.cv[k]) for a in alphas]
        )

    return np.stack(map_folds(one, forms.n_folds), axis=1)
