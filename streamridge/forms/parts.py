"""Merging the (fold, class) cells of :class:`FoldStats` into training and validation parts.

A part is a set of cells, cell ``(j, c)`` weighted by a class factor ``g_c``
(``class_weight``).  With ``v_jc = g_c n_jc`` and the part's mean
``m = sum v_jc m_jc / sum v_jc``, its centered co-moment is exactly

.. code-block:: text

    S = sum g_c S_jc  +  sum v_jc (m_jc - m)(m_jc - m)'        (within + between)

the K-part form of the pairwise update of Chan, Golub & LeVeque: only sums of
positive semi-definite terms and differences of means, never a difference of
co-moments (no cancellation, an offset of 1e6 costs no accuracy).  The within
sums of the K training parts (all folds but k) are exclusive prefix + suffix
sums (2K additions of N x N matrices for all K parts, no subtraction); the
between term of a part is one product ``D' D`` of its (cells x N) matrix of
weighted mean deviations.  The whole construction touches each N x N matrix a
few times, allocates only the outputs and runs in BLAS.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import blas

from streamridge.blas_nogil import gemm_tn
from streamridge.parallel import map_columns
from streamridge.stats.foldstats import FoldStats


@dataclass
class Parts:
    """Centered moments of K parts (or one), the arrays stacked on a leading axis.

    Attributes
    ----------
    sxx : array of shape (P, N, N)
    sxy : array of shape (P, N, T)
    syy : array of shape (P, T)
    mean_x : array of shape (P, N)
    mean_y : array of shape (P, T)
    n : array of shape (P,)
        Weight sums (after class factors).
    """

    sxx: np.ndarray
    sxy: np.ndarray
    syy: np.ndarray
    mean_x: np.ndarray
    mean_y: np.ndarray
    n: np.ndarray


def add_gram(out: np.ndarray, D: np.ndarray, alpha: float = 1.0) -> None:
    """``out += alpha D' D`` in place (one BLAS gemm with beta = 1; out of shape (N, N) or (N, T))."""
    if D.shape[0] == 0:
        return
    if out.flags.c_contiguous:
        Dc = np.ascontiguousarray(D)
        gemm_tn(Dc, Dc, out.T, alpha)  # the GIL released: folds' forms are built on threads
        return
    r = blas.dgemm(alpha, D, D, beta=1.0, c=out.T, trans_a=1, overwrite_c=1)  # pragma: no cover
    if not np.shares_memory(r, out):  # pragma: no cover - out not contiguous: BLAS worked on a copy
        out[...] = r.T


def add_outer(out: np.ndarray, alpha: float, x: np.ndarray, y: np.ndarray) -> None:
    """``out += alpha x y'`` in place (one BLAS ger)."""
    r = blas.dger(alpha, y, x, a=out.T, overwrite_a=1)
    if not np.shares_memory(r, out):  # pragma: no cover - out not contiguous: BLAS worked on a copy
        out[...] = r.T


def exclusive_sums(S: np.ndarray, out: np.ndarray, *, forward: bool = False) -> np.ndarray:
    """``out[k] = sum_{j != k} S[j]`` by a prefix and a suffix pass (no subtraction); returns ``out``.

    With ``forward`` only the prefix: ``out[k] = sum_{j < k} S[j]`` (forward chaining).
    """
    K = S.shape[0]
    out[0] = 0.0
    for k in range(1, K):
        np.add(out[k - 1], S[k - 1], out=out[k])
    if K > 1 and not forward:
        run = S[K - 1].copy()
        for k in range(K - 2, -1, -1):
            out[k] += run
            if k:
                run += S[k]
    return out


def _weighted_within(arr: np.ndarray, factors: np.ndarray, out: np.ndarray, forward: bool = False) -> None:
    """``out[k] = sum_{j != k} sum_c factors[k, c] arr[j, c]`` for arr of shape (K, C, ...) (``j < k`` with ``forward``)."""
    C = factors.shape[1]
    tail = (slice(None),) + (None,) * (arr.ndim - 2)
    if C == 1:
        exclusive_sums(arr[:, 0], out, forward=forward)
        if not np.all(factors == 1.0):
            out *= factors[tail]
        return
    out[...] = 0.0
    tmp = np.empty_like(out)
    for c in range(C):
        exclusive_sums(arr[:, c], tmp, forward=forward)
        tmp *= factors[(slice(None), c, *tail[1:])]
        out += tmp


def _between(
    v: np.ndarray, mx: np.ndarray, my: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Mean, weighted deviation rows and weight sum of cells with weights v (cells,), means mx (cells, N), my (cells, T)."""
    n = float(v.sum())
    m_x = v @ mx / n
    m_y = v @ my / n
    s = np.sqrt(v)[:, None]
    return m_x, m_y, s * (mx - m_x), s * (my - m_y)


def training_within(
    stats: FoldStats, factors: np.ndarray, *, forward: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Within sums ``sum_{j != k} sum_c factors[k, c] S_jc`` of the K training parts: sxx (K, N, N), sxy (K, N, T), syy (K, T).

    With ``forward`` the training part of fold k is folds ``j < k`` (forward chaining).
    """
    K, N, T = stats.n_folds, stats.n_features, stats.n_targets
    sxx, sxy, syy = np.empty((K, N, N)), np.empty((K, N, T)), np.empty((K, T))
    _weighted_within(stats.sxx, factors, sxx, forward)
    map_columns(lambda cols: _weighted_within(stats.sxy[..., cols], factors, sxy[..., cols], forward), T)
    _weighted_within(stats.syy, factors, syy, forward)
    return sxx, sxy, syy


def add_training_between(
    stats: FoldStats,
    k: int,
    factors: np.ndarray,
    sxx: np.ndarray,
    sxy: np.ndarray,
    syy: np.ndarray,
    *,
    forward: bool = False,
) -> tuple[np.ndarray, np.ndarray, float]:
    """Add the between term of training part k (cells of all folds but k, class factors (C,)) to its within sums in place.

    With ``forward`` the part is the cells of folds ``j < k``.

    Returns
    -------
    mean_x : array of shape (N,)
    mean_y : array of shape (T,)
    n : float
        The part's means and weight sum.
    """
    K, N, T = stats.n_folds, stats.n_features, stats.n_targets
    others = np.arange(K) < k if forward else np.arange(K) != k
    v = (stats.weight[others] * factors).reshape(-1)
    mean_x, mean_y, Dx, Dy = _between(
        v, stats.mean_x[others].reshape(-1, N), stats.mean_y[others].reshape(-1, T)
    )
    add_gram(sxx, Dx)
    sxy += Dx.T @ Dy
    syy += np.einsum("ct,ct->t", Dy, Dy)
    return mean_x, mean_y, float(v.sum())


def training_parts(stats: FoldStats, factors: np.ndarray) -> Parts:
    """Centered moments of the K training parts (all folds but k), cell (j, c) weighted by ``factors[k, c]``.

    Parameters
    ----------
    stats : FoldStats
    factors : array of shape (K, C)
        Class factors of each training part.
    """
    K, N, T = stats.n_folds, stats.n_features, stats.n_targets
    sxx, sxy, syy = training_within(stats, factors)
    mean_x, mean_y, n = np.empty((K, N)), np.empty((K, T)), np.empty(K)
    for k in range(K):
        mean_x[k], mean_y[k], n[k] = add_training_between(stats, k, factors[k], sxx[k], sxy[k], syy[k])
    return Parts(sxx, sxy, syy, mean_x, mean_y, n)


def cell_group(stats: FoldStats, cells: np.ndarray, factors: np.ndarray) -> Parts:
    """Centered moments (P = 1) of the cells selected by a boolean mask of shape (K, C), weighted by ``factors`` (C,).

    A single cell with factor 1 is returned as views of ``stats`` (do not modify them).
    """
    N, T = stats.n_features, stats.n_targets
    g = np.broadcast_to(factors, cells.shape)[cells]
    v = stats.weight[cells] * g
    if v.shape[0] == 1:  # one cell: its own moments (scaled), no between term
        (k,), (c,) = np.nonzero(cells)
        f = float(g[0])
        if f == 1.0:  # views: callers copy what they modify
            return Parts(
                stats.sxx[k, c][None],
                stats.sxy[k, c][None],
                stats.syy[k, c][None],
                stats.mean_x[k, c][None],
                stats.mean_y[k, c][None],
                v.copy(),
            )
        return Parts(
            (stats.sxx[k, c] * f)[None],
            (stats.sxy[k, c] * f)[None],
            (stats.syy[k, c] * f)[None],
            stats.mean_x[k, c][None],
            stats.mean_y[k, c][None],
            v.copy(),
        )
    G = np.where(cells, np.broadcast_to(factors, cells.shape), 0.0)  # (K, C): no copy of the selected cells
    sxx = np.tensordot(G, stats.sxx, axes=2)
    sxy = np.tensordot(G, stats.sxy, axes=2)
    syy = np.tensordot(G, stats.syy, axes=2)
    m_x, m_y, Dx, Dy = _between(v, stats.mean_x[cells].reshape(-1, N), stats.mean_y[cells].reshape(-1, T))
    add_gram(sxx, Dx)
    sxy += Dx.T @ Dy
    syy += np.einsum("ct,ct->t", Dy, Dy)
    return Parts(sxx[None], sxy[None], syy[None], m_x[None], m_y[None], np.array([v.sum()]))
