"""The eigen method (Buteneers et al. 2013, section 2.2).

One eigendecomposition ``At = C D C'`` per training fold; then for every lambda

.. code-block:: text

    W(lambda) = C (D + lambda I)^+ C' Bt
    SSE_v     = W' Av W - 2 W' Bv + cv

costs O(N^2) per lambda and target.

Eigenvalues at or below the rounding noise of the decomposition,
``d_i <= N eps max(d)``, are treated as exact zeros of a singular ``At``
(:func:`~streamridge.solvers.linalg.psd_eigh`): the coefficient along their
directions is zero, so lambda -> 0 gives the minimum-norm least-squares
solution, as ``pinv``; full-rank problems are unchanged.
"""

from __future__ import annotations

import numpy as np

from streamridge.forms.build import Forms, FullForm
from streamridge.parallel import map_folds
from streamridge.solvers.linalg import Eig, RidgeSolver, psd_eigh, range_coordinates, spectral_solve

__all__ = ["fold_errors_eigen", "psd_eigh", "solve_full"]

#: scoring batches hold at most this many doubles (N x R x T_batch)
SCORE_BUDGET = 1 << 24

#: the final solve uses Cholesky when the targets have at most this many distinct lambdas
MAX_CHOLESKY = 3


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
    full: FullForm, alpha: float | np.ndarray, *, eig: Eig | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Final coefficients of the full training form in original units.

    One Cholesky solve per distinct lambda (at most a few), else one
    eigendecomposition; both remove the numerical null space of ``full.A``
    (:mod:`streamridge.solvers.linalg`).

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
    T = full.B.shape[1]
    a = np.broadcast_to(np.asarray(alpha, dtype=np.float64), (T,))
    distinct = np.unique(a)
    if eig is None and distinct.shape[0] <= MAX_CHOLESKY:
        solve = RidgeSolver(full.A, full.B)
        W = np.empty_like(full.B)
        for v in distinct:
            cols = np.flatnonzero(a == v)
            W[:, cols] = solve(float(v), cols)
    else:
        W = spectral_solve(psd_eigh(full.A) if eig is None else eig, full.B, a)
    W /= full.scale[:, None]  # original units
    intercept = full.y_offset - full.x_offset @ W
    return W.T.copy(), intercept
