"""Shared pieces of the selection engines: the min-over-grid criterion, lambda batches, memory sizes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import numpy as np
from scipy.linalg.blas import dger as ger

from streamridge.parallel import map_folds

#: candidates whose criterion is within this relative distance of the best are tied
#: (the lowest feature index wins); it absorbs the rounding difference between the
#: incremental updates and a fresh solve
TIE_RTOL = 1e-9

DOUBLE = 8


class Engine(Protocol):
    """What the path driver needs from a selection engine (incremental or brute force)."""

    def candidates(self) -> np.ndarray:
        """Feature indices that may be added or removed next, shape (m,)."""
        ...

    def scores(self, per_target: bool) -> np.ndarray:
        """Criterion (min over the grid of the fold-summed error) of every candidate set, shape (m,)."""
        ...

    def apply(self, feature: int) -> None:
        """Add or remove ``feature``."""
        ...

    def fold_errors(self) -> np.ndarray:
        """Validation error of the current set, shape (R, K, T)."""
        ...


def criterion(summed: np.ndarray, per_target: bool) -> np.ndarray:
    """Min over the grid (axis 0) of errors summed over folds, then summed over targets (last axis).

    Parameters
    ----------
    summed : array of shape (R, ..., T)
        Errors already summed over folds.
    per_target : bool
        Minimise each target's error over the grid separately (else the sum).

    Returns
    -------
    array of shape (...)
    """
    if per_target:
        return np.asarray(summed.min(axis=0).sum(axis=-1))
    return np.asarray(summed.sum(axis=-1).min(axis=0))


class GridMin:
    """Running min over lambda batches of candidate errors, reduced as :func:`criterion`."""

    def __init__(self, per_target: bool) -> None:
        self.per_target = per_target
        self.best: np.ndarray | None = None

    def add(self, summed: np.ndarray) -> None:
        """Fold in one batch of errors of shape (R_b, m, T) summed over folds."""
        part = summed.min(axis=0) if self.per_target else summed.sum(axis=-1).min(axis=0)
        self.best = part if self.best is None else np.minimum(self.best, part)

    def result(self) -> np.ndarray:
        """Criterion of every candidate, shape (m,)."""
        assert self.best is not None
        return self.best.sum(axis=-1) if self.per_target else self.best


def pick_candidate(scores: np.ndarray, features: np.ndarray) -> int:
    """The candidate of lowest criterion; ties (within :data:`TIE_RTOL`) go to the lowest index."""
    best = float(scores.min())
    ok = scores <= best + TIE_RTOL * abs(best)
    return int(features[ok].min())


def lambda_batches(R: int, per_lambda_bytes: int, budget: int) -> Iterator[slice]:
    """Slices of the grid whose state fits in ``budget`` bytes (at least one lambda each)."""
    size = max(1, min(R, budget // max(per_lambda_bytes, 1)))
    for start in range(0, R, size):
        yield slice(start, min(R, start + size))


def inverse_stack(A: np.ndarray, alphas: np.ndarray) -> np.ndarray:
    """``(A[k] + lambda I)^-1`` for every fold and lambda, shape (K, R, n, n).

    One eigendecomposition per fold, eigenvalues clipped at zero as in
    :mod:`streamridge.solvers.eigen`, then one gemm per lambda.
    """
    K, n = A.shape[0], A.shape[1]
    out = np.empty((K, alphas.shape[0], n, n))
    if n == 0:
        return out

    def one_fold(k: int) -> None:
        d, C = np.linalg.eigh(A[k])
        np.maximum(d, 0.0, out=d)
        w = 1.0 / (d[None, :] + alphas[:, None])  # (R, n)
        Ct = np.ascontiguousarray(C.T)
        for r in range(alphas.shape[0]):  # one gemm each: faster than a broadcast matmul
            np.matmul(C * w[r], Ct, out=out[k, r])

    map_folds(one_fold, K)  # compute-bound gemms: folds on all cores
    return out


def left(A: np.ndarray, X: np.ndarray) -> np.ndarray:
    """``A[k] @ X[k, r]`` for every fold k and lambda r as K gemms.

    A of shape (K, p, n), X of shape (K, R, n, T); returns shape (K, R, p, T).
    """
    K, R, n, T = X.shape
    Y = np.matmul(A, X.transpose(0, 2, 1, 3).reshape(K, n, R * T))
    return np.ascontiguousarray(Y.reshape(K, A.shape[1], R, T).transpose(0, 2, 1, 3))


def rank1_update(M: np.ndarray, x: np.ndarray, y: np.ndarray) -> None:
    """``M[i] -= x[i] y[i]'`` in place over all leading axes (BLAS ger when M[i] is C-contiguous)."""
    if M.size == 0:
        return
    lead = list(np.ndindex(M.shape[:-2]))
    if not all(M[i].flags.c_contiguous for i in lead[:1]):
        M -= x[..., :, None] * y[..., None, :]
        return
    for i in lead:
        ger(-1.0, y[i], x[i], a=M[i].T, overwrite_a=1)


def product_then_downdate(G: np.ndarray, rhs: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``Y = G @ rhs`` with the old G, then ``G -= u v'`` in place, one matrix at a time.

    G of shape (K, R, n, n) C-contiguous, rhs of shape (K, R, n, p), u and v of
    shape (K, R, n).  Doing both while ``G[k, r]`` sits in cache halves the
    memory traffic of a separate batched product and update.
    """
    Y = np.empty(rhs.shape)
    if not G.flags.c_contiguous or G.size == 0:
        np.matmul(G, rhs, out=Y)
        G -= u[..., :, None] * v[..., None, :]
        return Y
    for k in range(G.shape[0]):  # plain loops over pre-bound views: ~8 % less overhead than ndindex
        Gk, rk, Yk, uk, vk = G[k], rhs[k], Y[k], u[k], v[k]
        for r in range(Gk.shape[0]):
            g = Gk[r]
            np.matmul(g, rk[r], out=Yk[r])
            ger(-1.0, vk[r], uk[r], a=g.T, overwrite_a=1)
    return Y


def sse(W: np.ndarray, AvW: np.ndarray, Bv: np.ndarray, cv: np.ndarray) -> np.ndarray:
    """``W' Av W - 2 W' Bv + cv`` per fold, lambda and target.

    W and Av W of shape (K, R, n, T), Bv of shape (K, n, T), cv of shape (K, T);
    returns shape (K, R, T).
    """
    return np.einsum("krnt,krnt->krt", W, AvW) - 2.0 * np.einsum("krnt,knt->krt", W, Bv) + cv[:, None, :]
