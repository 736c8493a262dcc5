"""Incremental forward selection: bordered inverses (Schur complements) of ``At_S + lambda I``.

For one fold and one lambda let ``G = (At_S + lambda I)^-1`` for the selected
set S, ``W = G Bt_S`` and, for every candidate j outside S, ``a_j = At[S, j]``,
``z_j = G a_j``.  Adding j borders ``At_S`` by one row and column (the rank-2
Woodbury update of Buteneers et al. 2013, section 3.2, written as a Schur
complement):

.. code-block:: text

    s_j   = At_jj + lambda - a_j' z_j                     (Schur complement)
    delta = (Bt_j - a_j' W) / s_j                         (new coefficient row)
    W_+j  = [W - z_j delta; delta] = [W; 0] + v_j delta',  v_j = [-z_j; 1]
    SSE_+j = SSE + 2 delta (e_j - z_j' E_S) + delta^2 (q_j - 2 r_j + Av_jj)

with ``E = Av[:, S] W - Bv`` (all features), ``q_j = z_j' Av_SS z_j`` and
``r_j = z_j' Av[S, j]``.  G itself is never needed: the engine keeps, per
lambda and fold, ``Z = [z_j]`` (n_s x m for m candidates), ``s``, ``q``, ``r``,
``Z' E_S`` and ``W``.  Adding p, with ``rho = (At[p, C] - a_p' Z) / s_p``,

.. code-block:: text

    Z' = [Z - z_p rho'; rho']            s' = s - s_p rho^2
    q' = q - 2 rho (Av_SS z_p)'Z + rho^2 q_p + 2 rho (Av[p,S] Z) - 2 rho^2 Av[p,S] z_p + Av_pp rho^2
    r' = r - rho (z_p' Av[S, C]) + rho Av[p, C]

and ``Z' E'`` follows from one batched product ``Z' [E'_S, Av_SS z_p, Av[S,p], At[S,p]]``.
A step costs O(R K m n_s) -- a product with Z and an in-place rank-1 update
(BLAS ger) -- against O(R K n_s^3) per candidate for a fresh solve.  When the
state ``R K n_s m`` doubles exceeds the memory budget, the engine rebuilds it
by lambda batches at every step until it fits again.
"""

from __future__ import annotations

import numpy as np

from streamridge.forms.build import Forms
from streamridge.parallel import map_folds, n_cpus
from streamridge.selection._common import (
    DOUBLE,
    GridMin,
    inverse_stack,
    lambda_batches,
    left,
    rank1_update,
    sse,
)
from streamridge.solvers.eigen import fold_errors_eigen


class _State:
    """Forward state of all folds for a batch of lambdas (arrays of shape (K, R_b, ...)).

    ``Z`` lives in a buffer of shape (K, R_b, rows, cols): rows ``[0, ns)`` are
    the selected features, columns ``[0, m)`` the live candidates (a chosen
    candidate's column is replaced by the last live one); full-width rows keep
    every per-lambda block contiguous for the in-place BLAS update.
    """

    __slots__ = ("W", "Z", "ZtE", "m", "ns", "q", "r", "s", "sse")

    def __init__(
        self, forms: Forms, sel: np.ndarray, cand: np.ndarray, alphas: np.ndarray, rows: int
    ) -> None:
        K, R, T = forms.n_folds, alphas.shape[0], forms.Bt.shape[2]
        ns, m = sel.size, cand.size
        self.ns, self.m = ns, m
        At, Av = forms.At, forms.Av
        AtSC, AvSC = At[:, sel[:, None], cand[None, :]], Av[:, sel[:, None], cand[None, :]]
        AvSS = Av[:, sel[:, None], sel[None, :]]
        self.Z = np.zeros((K, R, max(rows, ns + 1), m))
        if ns:
            G = inverse_stack(At[:, sel[:, None], sel[None, :]], alphas)
            np.matmul(G, AtSC[:, None], out=self.Z[:, :, :ns])
            self.W = np.matmul(G, forms.Bt[:, None, sel])
        else:
            self.W = np.zeros((K, R, 0, T))
        Z = self.Z[:, :, :ns]
        AvW = left(AvSS, self.W)
        self.sse = sse(self.W, AvW, forms.Bv[:, sel], forms.cv)
        self.ZtE = np.matmul(Z.transpose(0, 1, 3, 2), AvW - forms.Bv[:, None, sel])
        diag = np.einsum("kjj->kj", At)[:, cand]
        self.s = diag[:, None, :] + alphas[None, :, None] - np.einsum("kij,krij->krj", AtSC, Z)
        self.q = np.einsum("krij,krij->krj", Z, np.matmul(AvSS[:, None], Z))
        self.r = np.einsum("kij,krij->krj", AvSC, Z)

    def candidate_errors(self, forms: Forms, sel: np.ndarray, cand: np.ndarray) -> np.ndarray:
        """SSE of every one-feature addition summed over folds, shape (R_b, m, T)."""
        ix = (slice(None), cand[:, None], sel[None, :])
        delta = (forms.Bt[:, None, cand] - left(forms.At[ix], self.W)) / self.s[..., None]
        e = left(forms.Av[ix], self.W) - forms.Bv[:, None, cand]
        curv = self.q - 2.0 * self.r + np.einsum("kjj->kj", forms.Av)[:, None, cand]
        return (self.sse[:, :, None, :] + delta * (2.0 * (e - self.ZtE) + delta * curv[..., None])).sum(
            axis=0
        )

    def add(self, forms: Forms, sel: np.ndarray, cand: np.ndarray, ip: int) -> None:
        """Update for adding the candidate at position ip of ``cand`` (sets before the addition)."""
        At, Av = forms.At, forms.Av
        p, ns, m, T = int(cand[ip]), self.ns, self.m, self.W.shape[3]
        Z = self.Z
        zp, sp = Z[:, :, :ns, ip].copy(), self.s[..., ip].copy()  # (K, R, ns), (K, R)
        dp = (forms.Bt[:, None, p] - np.einsum("kn,krnt->krt", At[:, p, sel], self.W)) / sp[..., None]
        W = np.concatenate([self.W - zp[..., None] * dp[..., None, :], dp[..., None, :]], axis=2)
        sel2 = np.append(sel, p)
        BvS2 = forms.Bv[:, sel2]
        AvW = left(Av[:, sel2[:, None], sel2[None, :]], W)
        self.sse = sse(W, AvW, BvS2, forms.cv)
        self.W = W
        E2 = AvW - BvS2[:, None]
        K, R = zp.shape[0], zp.shape[1]
        rhs = np.empty((K, R, ns, T + 3))
        rhs[..., :T] = E2[:, :, :ns]
        rhs[..., T] = np.matmul(zp, Av[:, sel[:, None], sel[None, :]])  # (Av_SS z_p)', Av symmetric
        rhs[..., T + 1] = Av[:, None, sel, p]
        rhs[..., T + 2] = At[:, None, sel, p]
        M = np.matmul(Z[:, :, :ns, :m].transpose(0, 1, 3, 2), rhs)  # (K, R, m, T + 3)
        rho = np.zeros((K, R, Z.shape[3]))
        rho[..., :m] = (At[:, None, p, cand] - M[..., T + 2]) / sp[..., None]
        rm = rho[..., :m]
        alpha, beta = M[..., T], M[..., T + 1]
        qp, bp = self.q[..., ip].copy(), beta[..., ip].copy()
        self.q += rm * (2.0 * (beta - alpha) + rm * (qp - 2.0 * bp + Av[:, None, p, p])[..., None])
        self.r += rm * (Av[:, None, p, cand] - np.matmul(zp, Av[:, sel[:, None], cand[None, :]]))
        self.s -= sp[..., None] * rm * rm
        self.ZtE = M[..., :T] + rm[..., None] * (E2[:, :, ns, None, :] - M[:, :, ip, None, :T])
        rank1_update(Z[:, :, :ns], zp, rho)
        Z[:, :, ns] = rho
        last = m - 1
        Z[:, :, : ns + 1, ip] = Z[:, :, : ns + 1, last]
        Z[:, :, : ns + 1, last] = 0.0
        for a in (self.s, self.q, self.r):
            a[..., ip] = a[..., last]
        self.ZtE[..., ip, :] = self.ZtE[..., last, :]
        self.s, self.q, self.r = (
            self.s[..., :last].copy(),
            self.q[..., :last].copy(),
            self.r[..., :last].copy(),
        )
        self.ZtE = self.ZtE[..., :last, :].copy()
        self.ns, self.m = ns + 1, last

    def resize(self, rows: int) -> None:
        """Reallocate Z with room for ``rows`` selected features and only the live columns."""
        Z = np.zeros((*self.Z.shape[:2], max(rows, self.ns + 1), self.m))
        Z[:, :, : self.ns] = self.Z[:, :, : self.ns, : self.m]
        self.Z = Z


def state_bytes(rows: int, m: int, K: int, T: int) -> int:
    """Bytes of forward state per lambda (Z with ``rows`` rows, m candidates) with work space."""
    per_fold = rows * m + m * (2 * T + 8) + rows * (2 * T + 3)
    return DOUBLE * K * per_fold


class ForwardEngine:
    """Forward selection over all folds and lambdas; see the module docstring.

    Parameters
    ----------
    forms : Forms
    alphas : array of shape (R,)
    start : sequence of int
        Features selected at the start (the forced ones).
    memory_budget : int
        Bytes the per-lambda state may take.
    max_features : int or None
        Largest set the path will reach (bounds the row capacity of Z).
    """

    #: reallocate Z when the live candidates drop to this fraction of its columns
    COMPACT = 0.75

    def __init__(
        self,
        forms: Forms,
        alphas: np.ndarray,
        start: tuple[int, ...],
        memory_budget: int,
        max_features: int | None = None,
    ) -> None:
        self.forms = forms
        self.alphas = alphas
        self.budget = memory_budget
        N = forms.At.shape[1]
        self.max_rows = N if max_features is None else max_features
        self.sel = np.array(start, dtype=np.int64)
        mask = np.ones(N, dtype=bool)
        mask[list(start)] = False
        self.cand = np.flatnonzero(mask)
        self.state: _State | None = None  # parts[0] while the whole grid's state is held
        self.parts: list[_State] = []
        self.batches: list[slice] = []
        self._plan()

    def _rows(self) -> int:
        ns = self.sel.size
        return min(self.max_rows, ns + 1 + max(4, ns // 4))

    def _plan(self) -> None:
        """Hold the state of all lambdas while it fits the budget, else rebuild it by batches per step."""
        R, K, T = self.alphas.shape[0], self.forms.n_folds, self.forms.Bt.shape[2]
        st = self.state
        grow = st is not None and (st.ns + 1 > st.Z.shape[2] or st.m <= self.COMPACT * st.Z.shape[3])
        rows = st.Z.shape[2] if st is not None and not grow else self._rows()
        cols = st.Z.shape[3] if st is not None and not grow else self.cand.size
        per = state_bytes(rows, cols, K, T)
        if per * R > self.budget:
            self.state = None
            self.parts = []
            self.batches = list(lambda_batches(R, per, self.budget))
            return
        if st is None:
            # one state per slice of the grid, one slice per core: updated concurrently
            n = min(R, n_cpus())
            self.batches = [slice(i * R // n, (i + 1) * R // n) for i in range(n)]
            self.parts = map_folds(lambda i: self._build(self.batches[i]), len(self.batches))
            self.state = self.parts[0]
        elif grow:
            map_folds(lambda i: self.parts[i].resize(rows), len(self.parts))

    def _build(self, sl: slice) -> _State:
        return _State(self.forms, self.sel, self.cand, self.alphas[sl], self._rows())

    def candidates(self) -> np.ndarray:
        return self.cand

    def scores(self, per_target: bool) -> np.ndarray:
        acc = GridMin(per_target)
        if self.state is not None:
            for errors in map_folds(
                lambda i: self.parts[i].candidate_errors(self.forms, self.sel, self.cand), len(self.parts)
            ):
                acc.add(errors)
            return acc.result()
        for sl in self.batches:
            acc.add(self._build(sl).candidate_errors(self.forms, self.sel, self.cand))
        return acc.result()

    def apply(self, feature: int) -> None:
        ip = int(np.flatnonzero(self.cand == feature)[0])
        if self.state is not None:
            map_folds(lambda i: self.parts[i].add(self.forms, self.sel, self.cand, ip), len(self.parts))
        self.sel = np.append(self.sel, feature)
        self.cand[ip] = self.cand[-1]
        self.cand = self.cand[:-1].copy()
        if self.cand.size:
            self._plan()

    def fold_errors(self) -> np.ndarray:
        if self.state is None:
            if self.sel.size == 0:
                R = self.alphas.shape[0]
                return np.broadcast_to(self.forms.cv[None], (R, *self.forms.cv.shape)).copy()
            return fold_errors_eigen(self.forms.subset(self.sel), self.alphas)
        return np.concatenate([p.sse for p in self.parts], axis=1).transpose(1, 0, 2).copy()
