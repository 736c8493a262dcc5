"""The eigen method (Buteneers et al. 2013, section 2.2).

One eigendecomposition ``At = C D C'`` per training fold; then for every lambda

.. code-block:: text

    W(lambda) = C (D + lambda I)^+ C' Bt
    SSE_v     = W' Av W - 2 W' Bv + cv

costs O(N^2) per lambda and target.

Eigenvalues at or below the rounding noise of the decomposition,
``d_i <= N eps max(d)`` (the default rank tolerance of ``numpy.linalg.matrix_rank``),
are treated as exact zeros of a singular ``At``: their directions are the null
space of the training rows, where ``Bt = X' y`` has no component in exact
arithmetic, so the coefficient along them is zero (dividing their rounding-level
``C' Bt`` by ``d + lambda`` would amplify noise by 1 / lambda).  With this,
lambda -> 0 gives the minimum-norm least-squares solution, as ``pinv``;
full-rank problems are unchanged.  Rounding can make the eigenvalues of a
singular PSD matrix slightly negative; they are below the floor and also zero.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla

from ..forms import Forms, FullForm
from ..parallel import map_folds

#: scoring batches hold at most this many doubles (N x R x T_batch)
SCORE_BUDGET = 1 << 24


def psd_eigh(A: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Eigendecomposition of a symmetric PSD matrix with its numerical null space marked.

    Parameters
    ----------
    A : array of shape (N, N)

    Returns
    -------
    d : array of shape (N,)
        Eigenvalues (ascending); those at or below ``N eps max(d)`` set to 0.
    C : array of shape (N, N)
        Orthonormal eigenvectors (columns).
    null : array of bool of shape (N,)
        True for the eigenvalues treated as zero.
    """
    d, C = sla.eigh(A, driver="evd", check_finite=False)
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


def _errors_one_fold(
    d: np.ndarray,
    C: np.ndarray,
    null: np.ndarray,
    Bt: np.ndarray,
    Av: np.ndarray,
    Bv: np.ndarray,
    cv: np.ndarray,
    alphas: np.ndarray,
) -> np.ndarray:
    """Validation SSE of shape (R, T) for one fold."""
    N, T = Bt.shape
    R = alphas.shape[0]
    Bc = range_coordinates(C, null, Bt)  # (N, T)
    inv = 1.0 / (d[:, None] + alphas[None, :])  # (N, R)
    out = np.empty((R, T))
    tb = max(1, min(T, SCORE_BUDGET // max(N * R, 1)))
    rotate = R * tb < N  # cheap path: go back to feature space instead of rotating Av
    if not rotate:
        Acv = C.T @ Av @ C
        Bcv = C.T @ Bv
    for s in range(0, T, tb):
        e = min(T, s + tb)
        Wc = inv[:, :, None] * Bc[:, None, s:e]  # (N, R, tb)
        if rotate:
            W = (C @ Wc.reshape(N, -1)).reshape(N, R, e - s)
            AW = (Av @ W.reshape(N, -1)).reshape(N, R, e - s)
            cross = np.einsum("nrt,nt->rt", W, Bv[:, s:e])
        else:
            W = Wc
            AW = (Acv @ Wc.reshape(N, -1)).reshape(N, R, e - s)
            cross = np.einsum("nrt,nt->rt", Wc, Bcv[:, s:e])
        out[:, s:e] = np.einsum("nrt,nrt->rt", W, AW) - 2.0 * cross + cv[None, s:e]
    return out


def fold_errors_eigen(forms: Forms, alphas: np.ndarray) -> np.ndarray:
    """Validation squared error of every lambda, fold and target by the eigen method.

    Parameters
    ----------
    forms : Forms
    alphas : array of shape (R,)

    Returns
    -------
    array of shape (R, K, T)
    """
    alphas = np.asarray(alphas, dtype=np.float64)

    def one(k: int) -> np.ndarray:
        d, C, null = psd_eigh(forms.At[k])
        return _errors_one_fold(d, C, null, forms.Bt[k], forms.Av[k], forms.Bv[k], forms.cv[k], alphas)

    return np.stack(map_folds(one, forms.n_folds), axis=1)


def solve_full(
    full: FullForm, alpha: float | np.ndarray, *, eig: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Final coefficients of the full training form in original units.

    Parameters
    ----------
    full : FullForm
    alpha : float or array of shape (T,)
        One lambda for all targets or one per target.
    eig : (d, C, null) or None
        :func:`psd_eigh` of ``full.A`` if already computed.

    Returns
    -------
    coef : array of shape (T, N)
    intercept : array of shape (T,)
    """
    d, C, null = psd_eigh(full.A) if eig is None else eig
    T = full.B.shape[1]
    a = np.broadcast_to(np.asarray(alpha, dtype=np.float64), (T,))
    Wc = range_coordinates(C, null, full.B) / (d[:, None] + a[None, :])
    W = (C @ Wc) / full.scale[:, None]  # (N, T), original units
    intercept = full.y_offset - full.x_offset @ W
    return W.T.copy(), intercept
