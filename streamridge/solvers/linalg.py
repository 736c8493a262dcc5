"""Ridge solves of one symmetric PSD form ``(A + lambda I) W = B``, shared by the solvers.

Two routes, and the rule that picks one:

* :func:`psd_eigh` + :func:`spectral_solve`: eigendecomposition with the
  eigenvalues at or below ``N eps max(d)`` (the rank tolerance of
  ``numpy.linalg.matrix_rank``) treated as exact zeros.  Their eigenvectors
  span the numerical null space of the rows, where ``B = X' y`` has no
  component in exact arithmetic; the coefficient along them is zero (dividing
  their rounding-level ``C' B`` by ``d + lambda`` would amplify noise by
  1 / lambda), so lambda -> 0 gives the minimum-norm least-squares solution.
* :func:`cholesky_solve`: one Cholesky factorization of ``A + lambda I``,
  O(N^3 / 3).  It keeps the rounding-level null-space component of ``B``
  divided by lambda: its relative error is about ``eps / rcond(A + lambda I)``.
  :class:`RidgeSolver` uses it when LAPACK's condition estimate (``pocon``,
  O(N^2)) gives ``rcond >= RCOND_MIN`` (error below ~2e-11), the spectral
  route otherwise.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import lapack

#: Cholesky solves are used when the reciprocal condition number of (A + lambda I) is at least this
RCOND_MIN = 1e-5

Eig = tuple[np.ndarray, np.ndarray, np.ndarray]


def psd_eigh(A: np.ndarray) -> Eig:
    """Eigendecomposition of a symmetric PSD matrix with its numerical null space marked.

    Parameters
    ----------
    A : array of shape (N, N)

    Returns
    -------
    d : array of shape (N,)
        Eigenvalues (ascending); those at or below ``N eps max(d)`` set to 0
        (rounding makes those of a singular matrix slightly negative, too).
    C : array of shape (N, N)
        Orthonormal eigenvectors (columns).
    null : array of bool of shape (N,)
        True for the eigenvalues treated as zero.
    """
    d, C = np.linalg.eigh(
        A
    )  # LAPACK syevd, like scipy's driver="evd", but without holding the GIL (folds run on threads)
    N = d.shape[0]
    top = float(d[-1]) if N else 0.0
    null = d <= N * np.finfo(np.float64).eps * max(top, 0.0)
    d[null] = 0.0
    return d, C, null


def range_coordinates(C: np.ndarray, null: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``C' B`` with the null-space rows set to zero (the projection of B on the range of A)."""
    Bc = C.T @ B
    Bc[null] = 0.0
    return Bc


def spectral_solve(eig: Eig, B: np.ndarray, alpha: float | np.ndarray) -> np.ndarray:
    """``C (D + alpha)^+ C' B`` from :func:`psd_eigh`; alpha a float or one per column of B."""
    d, C, null = eig
    a = np.broadcast_to(np.asarray(alpha, dtype=np.float64), (B.shape[1],))
    return C @ (range_coordinates(C, null, B) / (d[:, None] + a[None, :]))


def cholesky_solve(
    A: np.ndarray, B: np.ndarray, alpha: float, *, rcond_min: float = RCOND_MIN
) -> np.ndarray | None:
    """``(A + alpha I)^-1 B`` by Cholesky, or None if ``A + alpha I`` is not numerically positive definite
    or its estimated reciprocal condition number is below ``rcond_min``."""
    M = A + alpha * np.eye(A.shape[0])
    anorm = float(np.abs(M).sum(axis=0).max())
    c, info = lapack.dpotrf(M, lower=1, clean=0, overwrite_a=1)
    if info != 0:
        return None
    rcond, info = lapack.dpocon(c, anorm, uplo="L")
    if info != 0 or not rcond >= rcond_min:
        return None
    W, info = lapack.dpotrs(c, B, lower=1)
    return W if info == 0 else None


def ridge_solve(A: np.ndarray, B: np.ndarray, alpha: float) -> np.ndarray:
    """``(A + alpha I)^+ B`` for symmetric PSD ``A``: Cholesky where well conditioned, else spectral."""
    return RidgeSolver(A, B)(alpha)


class RidgeSolver:
    """Ridge solutions of one form for any lambda: Cholesky where ``rcond(A + lambda I) >= RCOND_MIN``, else spectral.

    The eigendecomposition is made once, only if some lambda needs it.
    """

    def __init__(self, A: np.ndarray, B: np.ndarray) -> None:
        self.A, self.B = A, B
        self._eig: Eig | None = None

    def __call__(self, alpha: float, columns: np.ndarray | slice = slice(None)) -> np.ndarray:
        """``(A + alpha I)^+ B[:, columns]``."""
        B = np.ascontiguousarray(self.B[:, columns])
        W = cholesky_solve(self.A, B, alpha)
        if W is not None:
            return W
        if self._eig is None:
            self._eig = psd_eigh(self.A)
        return spectral_solve(self._eig, B, alpha)
