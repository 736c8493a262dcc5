"""Shared pieces of the selection engines: the min-over-grid criterion, lambda batches, memory sizes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import numpy as np
from scipy.linalg.blas import dger as ger

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
    """``(A + lambda I)^-1`` for every lambda from one eigendecomposition, shape (R, n, n).

    Eigenvalues are clipped at zero as in :mod:`streamridge.solvers.eigen`.
    """
    n = A.shape[0]
    if n == 0:
        return np.zeros((alphas.shape[0], 0, 0))
    d, C = np.linalg.eigh(A)
    np.maximum(d, 0.0, out=d)
    w = 1.0 / (d[None, :] + alphas[:, None])  # (R, n)
    Ct = np.ascontiguousarray(C.T)
    out = np.empty((alphas.shape[0], n, n))
    for r in range(alphas.shape[0]):  # one gemm each: faster than a broadcast matmul
        np.matmul(C * w[r], Ct, out=out[r])
    return out


def left(A: np.ndarray, X: np.ndarray) -> np.ndarray:
    """``A @ X[r]`` for every r as one gemm; A of shape (p, n), X of shape (R, n, T) -> (R, p, T)."""
    R, n, T = X.shape
    Y = A @ X.transpose(1, 0, 2).reshape(n, R * T)
    return np.ascontiguousarray(Y.reshape(A.shape[0], R, T).transpose(1, 0, 2))


def rank1_update(M: np.ndarray, x: np.ndarray, y: np.ndarray) -> None:
    """``M[r] -= x[r] y[r]'`` in place for every r (BLAS ger; M of shape (R, p, q) C-contiguous per r)."""
    if not all(M[r].flags.c_contiguous for r in range(M.shape[0])):
        M -= x[:, :, None] * y[:, None, :]
        return
    for r in range(M.shape[0]):
        ger(-1.0, y[r], x[r], a=M[r].T, overwrite_a=1)


def sse(W: np.ndarray, AvW: np.ndarray, Bv: np.ndarray, cv: np.ndarray) -> np.ndarray:
    """``W' Av W - 2 W' Bv + cv`` per lambda and target, for W and Av W of shape (R, n, T)."""
    return np.einsum("rnt,rnt->rt", W, AvW) - 2.0 * np.einsum("rnt,nt->rt", W, Bv) + cv[None, :]
