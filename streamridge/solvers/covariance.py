"""The covariance method (Buteneers et al. 2013, section 2.1): one solve per lambda and fold.

.. code-block:: text

    W = (At + lambda I)^-1 Bt        (Cholesky; symmetric solve if not positive definite)
    SSE_v = W' Av W - 2 W' Bv + cv

O(R K N^3); kept as a selectable solver and as the reference of the eigen method.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla

from ..forms import Forms
from ..parallel import map_folds


def ridge_solve(A: np.ndarray, B: np.ndarray, alpha: float) -> np.ndarray:
    """Solve ``(A + alpha I) W = B`` for symmetric PSD ``A``."""
    M = A + alpha * np.eye(A.shape[0])
    try:
        return sla.cho_solve(sla.cho_factor(M, lower=True, check_finite=False), B, check_finite=False)
    except np.linalg.LinAlgError:
        return sla.solve(M, B, assume_a="sym", check_finite=False)


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
        return np.stack(
            [validation_sse(ridge_solve(forms.At[k], forms.Bt[k], float(a)), forms.Av[k], forms.Bv[k], forms.cv[k]) for a in alphas]
        )

    return np.stack(map_folds(one, forms.n_folds), axis=1)
