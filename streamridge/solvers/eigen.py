"""The eigen method (Buteneers et al. 2013, section 2.2).

One eigendecomposition ``At = C D C'`` per training fold; then for every lambda

.. code-block:: text

    W(lambda) = C (D + lambda I)^-1 C' Bt
    SSE_v     = W' Av W - 2 W' Bv + cv

costs O(N^2) per lambda and target.  Eigenvalues are clipped at zero (rounding
can make those of a singular PSD matrix slightly negative), which plays the
role of the paper's shift by lambda_max: (d + lambda) stays positive and the
result is the exact solution of a matrix within eps ||At|| of At, as accurate
as a Cholesky solve of (At + lambda I).
"""

from __future__ import annotations

import numpy as np

from ..forms import Forms, FullForm
from ..parallel import map_folds

#: scoring batches hold at most this many doubles (N x R x T_batch)
SCORE_BUDGET = 1 << 24


def _errors_one_fold(d: np.ndarray, C: np.ndarray, Bt: np.ndarray, Av: np.ndarray, Bv: np.ndarray, cv: np.ndarray, alphas: np.ndarray) -> np.ndarray:
    """Validation SSE of shape (R, T) for one fold."""
    N, T = Bt.shape
    R = alphas.shape[0]
    Bc = C.T @ Bt  # (N, T)
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
        d, C = np.linalg.eigh(forms.At[k])
        np.maximum(d, 0.0, out=d)
        return _errors_one_fold(d, C, forms.Bt[k], forms.Av[k], forms.Bv[k], forms.cv[k], alphas)

    return np.stack(map_folds(one, forms.n_folds), axis=1)


def solve_full(full: FullForm, alpha: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Final coefficients of the full training form in original units.

    Parameters
    ----------
    full : FullForm
    alpha : float or array of shape (T,)
        One lambda for all targets or one per target.

    Returns
    -------
    coef : array of shape (T, N)
    intercept : array of shape (T,)
    """
    d, C = np.linalg.eigh(full.A)
    np.maximum(d, 0.0, out=d)
    T = full.B.shape[1]
    a = np.broadcast_to(np.asarray(alpha, dtype=np.float64), (T,))
    Wc = (C.T @ full.B) / (d[:, None] + a[None, :])
    W = (C @ Wc) / full.scale[:, None]  # (N, T), original units
    intercept = full.y_offset - full.x_offset @ W
    return W.T.copy(), intercept
