"""The covariance method (Buteneers et al. 2013, section 2.1): one solve per lambda and fold.

.. code-block:: text

    W = (At + lambda I)^-1 Bt        (Cholesky; symmetric solve if not positive definite)
    SSE_v = W' Av W - 2 W' Bv + cv

O(R K N^3); kept as a selectable solver and as the reference of the eigen method.

Small lambdas: where ``lambda < CHOLESKY_MIN * trace(At)``, a Cholesky solve
would divide the rounding-level component of ``Bt`` along the numerical null
space of a singular ``At`` by lambda (relative error about ``eps ||At|| / lambda``);
those lambdas are solved through the fold's eigendecomposition with the
eigenvalues at or below ``N eps max(d)`` treated as zero, as the eigen method
does (one decomposition per fold, made only when some lambda needs it), so
lambda -> 0 gives the minimum-norm least-squares solution.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla

from ..forms import Forms
from ..parallel import map_folds
from .eigen import psd_eigh, range_coordinates

#: below this fraction of trace(A), lambdas are solved spectrally (null space removed) instead of by Cholesky
CHOLESKY_MIN = 1e-5


def ridge_solve(A: np.ndarray, B: np.ndarray, alpha: float) -> np.ndarray:
    """Solve ``(A + alpha I) W = B`` for symmetric PSD ``A`` (Cholesky; symmetric solve if that fails)."""
    M = A + alpha * np.eye(A.shape[0])
    try:
        return sla.cho_solve(sla.cho_factor(M, lower=True, check_finite=False), B, check_finite=False)
    except np.linalg.LinAlgError:
        return sla.solve(M, B, assume_a="sym", check_finite=False)


def spectral_solve(eig: tuple[np.ndarray, np.ndarray, np.ndarray], B: np.ndarray, alpha: float) -> np.ndarray:
    """``C (D + alpha)^+ C' B`` from :func:`~streamridge.solvers.eigen.psd_eigh` (null space removed)."""
    d, C, null = eig
    return C @ (range_coordinates(C, null, B) / (d + alpha)[:, None])


class _FoldSolver:
    """Ridge solutions of one training form for any lambda: Cholesky, or spectral for tiny lambdas."""

    def __init__(self, A: np.ndarray, B: np.ndarray) -> None:
        self.A, self.B = A, B
        self.small = CHOLESKY_MIN * max(float(np.trace(A)), 0.0)
        self._eig: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def __call__(self, alpha: float) -> np.ndarray:
        if alpha >= self.small:
            return ridge_solve(self.A, self.B, alpha)
        if self._eig is None:
            self._eig = psd_eigh(self.A)
        return spectral_solve(self._eig, self.B, alpha)


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
        solve = _FoldSolver(forms.At[k], forms.Bt[k])
        return np.stack(
            [validation_sse(solve(float(a)), forms.Av[k], forms.Bv[k], forms.cv[k]) for a in alphas]
        )

    return np.stack(map_folds(one, forms.n_folds), axis=1)
