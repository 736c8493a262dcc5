"""Incremental backward elimination: Sherman-Morrison downdates of ``(At_S + lambda I)^-1``.

For one fold and one lambda let ``G = (At_S + lambda I)^-1``, ``W = G Bt_S``,
``E = Av_S W - Bv_S``, ``Q = G E`` and ``h = diag(G Av_S G)``.  Removing the
feature at position j is the limit of an infinite ridge on it (Buteneers et
al. 2013, section 3.1):

.. code-block:: text

    u = G e_j,  g = G_jj,  c = W_j / g                     (c: one value per target)
    W_-j   = W - u c'
    SSE_-j = SSE - 2 c Q_j + c^2 h_j                       (per target)

so every candidate is scored from ``diag(G)``, ``W``, ``Q`` and ``h`` in
O(n T) -- all candidates, lambdas and folds at once with array operations.
After choosing j, with ``y = G Av_S u`` (one batched mat-vec),

.. code-block:: text

    G' = G - u u' / g          h' = h - 2 y u / g + u^2 y_j / g^2
    Q' = G E' - u (G E')_j / g (E' from W_-j; G E' shares the pass over G with y)

then row and column j of G are zeroed; the arrays are compacted when a fifth
of their positions are dead.  The product with G and the rank-1 update run
one lambda and fold at a time (BLAS gemm then ger) so that G is read from
memory once per step.  A step costs O(R K n^2) for n features in the set,
after an O(R K N^3) start; the paper's eigenbasis update scores each
candidate in O(N^2), O(R K N^3) per step.

Accuracy: a downdate subtracts ``u_i^2 / g`` from ``G_ii``; when that cancels a
diagonal entry to below ``REFRESH`` (1e-6) of its value -- a removed feature
nearly collinear with a kept one, at a tiny lambda -- the state is rebuilt
from a fresh eigendecomposition.  Without that, paths at cond(At) ~ 1e22 with
lambda = 1e-12 of the mean eigenvalue drift from a fresh solve by 2 %; with
it, by 4e-11 (tests/selection/test_selection.py::test_longer_ill_conditioned_path).
At lambda >= 1e-10 of the mean eigenvalue no rebuild was triggered.

State is ``R K n^2`` doubles.  When that exceeds the memory budget the engine
works in lambda batches and rebuilds each batch's state for every step
(O(R K n^3) per step) until the set is small enough for the state to fit.
"""

from __future__ import annotations

import numpy as np

from streamridge.forms.build import Forms
from streamridge.parallel import map_folds
from streamridge.selection._common import (
    DOUBLE,
    GridMin,
    inverse_stack,
    lambda_batches,
    left,
    product_then_downdate,
    sse,
)
from streamridge.solvers.eigen import fold_errors_eigen


class _State:
    """G, W, Q, h and SSE of all folds for a batch of lambdas: arrays of shape (K, R_b, ...).

    Arrays are indexed by the positions of ``pos`` (the features at the last
    compaction); removed positions stay as exact zeros of G, W, Q and h until
    the next compaction, so every update runs on contiguous arrays.
    """

    __slots__ = ("Av", "Bv", "G", "Q", "W", "cv", "diag", "h", "sse")

    def __init__(self, forms: Forms, pos: np.ndarray, alphas: np.ndarray) -> None:
        ix = (slice(None), pos[:, None], pos[None, :])
        self.Av, self.Bv, self.cv = forms.Av[ix], forms.Bv[:, pos], forms.cv
        G = inverse_stack(forms.At[ix], alphas)
        self.G = G
        self.diag = np.einsum("krii->kri", G).copy()  # kept up to date: no strided reads per step
        self.W = np.matmul(G, forms.Bt[:, None, pos])
        AvW = left(self.Av, self.W)
        self.sse = sse(self.W, AvW, self.Bv, self.cv)
        self.Q = np.matmul(G, AvW - self.Bv[:, None])
        self.h = np.empty(G.shape[:3])

        def one_fold(k: int) -> None:  # diag(G Av G) per lambda: compute-bound, folds on all cores
            AvG = np.empty(G.shape[2:])
            for r in range(G.shape[1]):
                np.matmul(self.Av[k], G[k, r], out=AvG)
                self.h[k, r] = np.einsum("ij,ij->j", G[k, r], AvG)

        map_folds(one_fold, G.shape[0])

    def candidate_errors(self, alive: np.ndarray) -> np.ndarray:
        """SSE of every one-feature removal summed over folds, shape (R_b, n_c, T).

        Entries of removed positions are meaningless.
        """
        g = np.where(alive, self.diag, 1.0)
        c = self.W / g[..., None]
        return (self.sse[:, :, None, :] + c * (c * self.h[..., None] - 2.0 * self.Q)).sum(axis=0)

    def remove(self, j: int) -> float:
        """Downdate for removing position j.

        Returns
        -------
        float
            Smallest ratio new / old of a remaining diagonal entry of G: the
            fraction of significant digits the downdate's subtraction kept.
        """
        G, W = self.G, self.W
        u = G[..., j, :].copy()  # row j (= column j, G symmetric): contiguous, (K, R, n)
        g = u[..., j].copy()
        before = self.diag
        c = W[..., j, :] / g[..., None]
        W -= u[..., None] * c[..., None, :]
        W[..., j, :] = 0.0
        AvW = left(self.Av, W)
        self.sse = sse(W, AvW, self.Bv, self.cv)
        rhs = np.concatenate(
            [np.matmul(u, self.Av)[..., None], AvW - self.Bv[:, None]], axis=3
        )  # Av symmetric
        Y = product_then_downdate(G, rhs, u, u / g[..., None])
        y, GE = Y[..., 0], Y[..., 1:]
        self.Q = GE - u[..., None] * (GE[..., j, :] / g[..., None])[..., None, :]
        self.h += u * ((u * (y[..., j] / g)[..., None] - 2.0 * y) / g[..., None])
        G[..., j, :] = 0.0
        G[..., :, j] = 0.0
        self.Q[..., j, :] = 0.0
        self.h[..., j] = 0.0
        after = before - u * (u / g[..., None])  # the diagonal of the rank-1 downdate
        after[..., j] = 0.0
        self.diag = after
        live = before > 0
        live[..., j] = False
        return float(np.min(after[live] / before[live], initial=1.0))

    def compact(self, keep: np.ndarray) -> None:
        """Keep only the positions ``keep`` (ascending)."""
        K, R, n = self.G.shape[:3]
        flat = (keep[:, None] * n + keep[None, :]).ravel()
        self.G = np.take(self.G.reshape(K, R, n * n), flat, axis=2).reshape(K, R, keep.size, keep.size)
        self.W = np.ascontiguousarray(self.W[:, :, keep])
        self.Q = np.ascontiguousarray(self.Q[:, :, keep])
        self.h = np.ascontiguousarray(self.h[:, :, keep])
        self.diag = np.ascontiguousarray(self.diag[:, :, keep])
        self.Av = self.Av[:, keep[:, None], keep[None, :]]
        self.Bv = self.Bv[:, keep]


def state_bytes(n: int, K: int, T: int) -> int:
    """Bytes of backward state per lambda for a set of n features (with one fold of work space)."""
    return DOUBLE * (K * (n * n + 2 * n * T + n + T) + 3 * n * n + 2 * n * (T + 1))


class BackwardEngine:
    """Backward elimination over all folds and lambdas; see the module docstring.

    Parameters
    ----------
    forms : Forms
    alphas : array of shape (R,)
    keep : sequence of int
        Features that are never removed.
    memory_budget : int
        Bytes the per-lambda state may take.
    """

    #: compact the state when the live positions drop to this fraction of the arrays
    COMPACT = 0.8
    #: rebuild the state when a downdate cancels a diagonal entry of G below this fraction
    REFRESH = 1e-6

    def __init__(self, forms: Forms, alphas: np.ndarray, keep: tuple[int, ...], memory_budget: int) -> None:
        self.forms = forms
        self.alphas = alphas
        self.budget = memory_budget
        N = forms.At.shape[1]
        self.pos = np.arange(N)  # feature of each array position
        self.alive = np.ones(N, dtype=bool)
        self.removable = np.ones(N, dtype=bool)
        self.removable[list(keep)] = False
        self.state: _State | None = None
        self.batches: list[slice] = []
        self._plan()

    def _plan(self) -> None:
        """Hold the state of all lambdas once it fits; until then, rebuild it by batches every step."""
        if self.state is not None:
            return
        R, K, T = self.alphas.shape[0], self.forms.n_folds, self.forms.Bt.shape[2]
        self.pos = self.pos[self.alive]
        self.alive = np.ones(self.pos.size, dtype=bool)
        per = state_bytes(self.pos.size, K, T)
        if per * R <= self.budget:
            self.batches = [slice(0, R)]
            self.state = self._build(slice(0, R))
        else:
            self.batches = list(lambda_batches(R, per, self.budget))

    def _build(self, sl: slice) -> _State:
        return _State(self.forms, self.pos, self.alphas[sl])

    def _mask(self) -> np.ndarray:
        return self.alive & self.removable[self.pos]

    def candidates(self) -> np.ndarray:
        return self.pos[self._mask()]

    def scores(self, per_target: bool) -> np.ndarray:
        mask = self._mask()
        acc = GridMin(per_target)
        for sl in self.batches:
            state = self.state if self.state is not None else self._build(sl)
            acc.add(state.candidate_errors(self.alive)[:, mask])
        return acc.result()

    def apply(self, feature: int) -> None:
        j = int(np.flatnonzero(self.pos == feature)[0])
        self.alive[j] = False
        if self.state is None:
            self._plan()
            return
        kept = self.state.remove(j)
        if kept < self.REFRESH:  # cancellation: rebuild from a fresh eigendecomposition
            self.state = None
            self._plan()
        elif self.alive.sum() <= self.COMPACT * self.alive.size:
            keep = np.flatnonzero(self.alive)
            self.state.compact(keep)
            self.pos, self.alive = self.pos[keep], np.ones(keep.size, dtype=bool)

    def fold_errors(self) -> np.ndarray:
        if self.state is None:  # no state held: one eigendecomposition per fold
            return fold_errors_eigen(self.forms.subset(self.pos[self.alive]), self.alphas)
        return self.state.sse.transpose(1, 0, 2).copy()
