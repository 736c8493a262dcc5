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
A step costs O(R K m n_s) -- one pass over Z -- against O(R K n_s^3) per
candidate for a fresh solve.  When the state ``R K n_s m`` doubles exceeds the
memory budget, the engine rebuilds it by lambda batches at every step until it
fits again.
"""

from __future__ import annotations

import numpy as np

from ..forms import Forms
from ..solvers.eigen import fold_errors_eigen
from ._common import DOUBLE, GridMin, inverse_stack, lambda_batches, sse


class _FoldState:
    """Forward state of one fold for a batch of lambdas (leading lambda axis)."""

    __slots__ = ("W", "Z", "ZtE", "q", "r", "s", "sse")

    def __init__(self, forms: Forms, k: int, sel: np.ndarray, cand: np.ndarray, alphas: np.ndarray) -> None:
        At, Av = forms.At[k], forms.Av[k]
        R, T = alphas.shape[0], forms.Bt.shape[2]
        G = inverse_stack(At[np.ix_(sel, sel)], alphas)
        AtSC, AvSC = At[np.ix_(sel, cand)], Av[np.ix_(sel, cand)]
        self.Z = np.matmul(G, AtSC) if sel.size else np.zeros((R, 0, cand.size))
        self.W = np.matmul(G, forms.Bt[k][sel]) if sel.size else np.zeros((R, 0, T))
        AvSS, BvS = Av[np.ix_(sel, sel)], forms.Bv[k][sel]
        AvW = np.matmul(AvSS, self.W)
        self.sse = sse(self.W, AvW, BvS, forms.cv[k])
        self.ZtE = np.matmul(self.Z.transpose(0, 2, 1), AvW - BvS)
        self.s = np.diag(At)[cand][None, :] + alphas[:, None] - np.einsum("ij,rij->rj", AtSC, self.Z)
        self.q = np.einsum("rij,rij->rj", self.Z, np.matmul(AvSS, self.Z))
        self.r = np.einsum("ij,rij->rj", AvSC, self.Z)

    def candidate_errors(self, forms: Forms, k: int, sel: np.ndarray, cand: np.ndarray) -> np.ndarray:
        """SSE of every one-feature addition, shape (R_b, m, T)."""
        At, Av = forms.At[k], forms.Av[k]
        delta = (forms.Bt[k][cand][None] - np.matmul(At[np.ix_(cand, sel)], self.W)) / self.s[:, :, None]
        e = np.matmul(Av[np.ix_(cand, sel)], self.W) - forms.Bv[k][cand][None]
        curv = self.q - 2.0 * self.r + np.diag(Av)[cand][None, :]
        return self.sse[:, None, :] + delta * (2.0 * (e - self.ZtE) + delta * curv[:, :, None])

    def add(self, forms: Forms, k: int, sel: np.ndarray, cand: np.ndarray, ip: int, alphas: np.ndarray) -> None:
        """Update for adding the candidate at position ip of ``cand`` (sets before the addition)."""
        At, Av = forms.At[k], forms.Av[k]
        p, ns, T = int(cand[ip]), sel.size, self.W.shape[2]
        zp, sp = self.Z[:, :, ip].copy(), self.s[:, ip].copy()
        dp = (forms.Bt[k][p][None] - np.matmul(At[p, sel], self.W)) / sp[:, None]  # (R, T)
        W = np.concatenate([self.W - zp[:, :, None] * dp[:, None, :], dp[:, None, :]], axis=1)
        sel2 = np.append(sel, p)
        BvS2 = forms.Bv[k][sel2]
        AvW = np.matmul(Av[np.ix_(sel2, sel2)], W)
        self.sse = sse(W, AvW, BvS2, forms.cv[k])
        E2 = AvW - BvS2
        self.W = W
        R = zp.shape[0]
        rhs = np.empty((R, ns, T + 3))
        rhs[:, :, :T] = E2[:, :ns]
        rhs[:, :, T] = np.matmul(zp, Av[np.ix_(sel, sel)])  # (Av_SS z_p)', Av symmetric
        rhs[:, :, T + 1] = Av[sel, p][None]
        rhs[:, :, T + 2] = At[sel, p][None]
        M = np.matmul(self.Z.transpose(0, 2, 1), rhs)  # (R, m, T + 3)
        rho = (At[p, cand][None] - M[:, :, T + 2]) / sp[:, None]
        alpha, beta = M[:, :, T], M[:, :, T + 1]
        qp, bp = self.q[:, ip].copy(), beta[:, ip].copy()
        self.q += rho * (-2.0 * alpha + 2.0 * beta + rho * (qp - 2.0 * bp + Av[p, p])[:, None])
        self.r += rho * (Av[p, cand][None] - np.matmul(zp, Av[np.ix_(sel, cand)]))
        self.s -= sp[:, None] * rho * rho
        self.ZtE = M[:, :, :T] + rho[:, :, None] * (E2[:, ns, :] - M[:, ip, :T])[:, None, :]
        m, last = cand.size, cand.size - 1
        Z = self.Z
        Z[:, :, ip] = Z[:, :, last]
        for a in (self.s, self.q, self.r, rho):
            a[:, ip] = a[:, last]
        self.ZtE[:, ip] = self.ZtE[:, last]
        Zn = np.empty((R, ns + 1, m - 1))
        np.multiply(zp[:, :, None], rho[:, None, : m - 1], out=Zn[:, :ns])
        np.subtract(Z[:, :, : m - 1], Zn[:, :ns], out=Zn[:, :ns])
        Zn[:, ns] = rho[:, : m - 1]
        self.Z = Zn
        self.s = np.ascontiguousarray(self.s[:, :last])
        self.q = np.ascontiguousarray(self.q[:, :last])
        self.r = np.ascontiguousarray(self.r[:, :last])
        self.ZtE = np.ascontiguousarray(self.ZtE[:, :last])


def state_bytes(ns: int, m: int, K: int, T: int) -> int:
    """Bytes of forward state per lambda (n_s selected, m candidates), with one fold of work space."""
    per_fold = ns * m + m * (T + 3) + ns * T + T
    return DOUBLE * (K * per_fold + 2 * (ns + 1) * m + m * (T + 3) + (ns + 1) * (T + 3))


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
    """

    def __init__(self, forms: Forms, alphas: np.ndarray, start: tuple[int, ...], memory_budget: int) -> None:
        self.forms = forms
        self.alphas = alphas
        self.budget = memory_budget
        N = forms.At.shape[1]
        self.sel = np.array(start, dtype=np.int64)
        mask = np.ones(N, dtype=bool)
        mask[list(start)] = False
        self.cand = np.flatnonzero(mask)
        self.states: list[_FoldState] | None = None
        self.batches: list[slice] = []
        self._plan()

    def _plan(self) -> None:
        """Hold the state of all lambdas while it fits the budget, else rebuild it by batches per step."""
        R, K, T = self.alphas.shape[0], self.forms.n_folds, self.forms.Bt.shape[2]
        per = state_bytes(self.sel.size + 1, self.cand.size, K, T)
        if per * R <= self.budget:
            self.batches = [slice(0, R)]
            if self.states is None:
                self.states = self._build(slice(0, R))
        else:
            self.states = None
            self.batches = list(lambda_batches(R, per, self.budget))

    def _build(self, sl: slice) -> list[_FoldState]:
        a = self.alphas[sl]
        return [_FoldState(self.forms, k, self.sel, self.cand, a) for k in range(self.forms.n_folds)]

    def candidates(self) -> np.ndarray:
        return self.cand

    def scores(self, per_target: bool) -> np.ndarray:
        acc = GridMin(per_target)
        for sl in self.batches:
            states = self.states if self.states is not None else self._build(sl)
            total = states[0].candidate_errors(self.forms, 0, self.sel, self.cand)
            for k, st in enumerate(states[1:], start=1):
                total += st.candidate_errors(self.forms, k, self.sel, self.cand)
            acc.add(total)
        return acc.result()

    def apply(self, feature: int) -> None:
        ip = int(np.flatnonzero(self.cand == feature)[0])
        if self.states is not None:
            for k, st in enumerate(self.states):
                st.add(self.forms, k, self.sel, self.cand, ip, self.alphas)
        self.sel = np.append(self.sel, feature)
        self.cand[ip] = self.cand[-1]
        self.cand = self.cand[:-1].copy()
        if self.cand.size:
            self._plan()

    def fold_errors(self) -> np.ndarray:
        if self.states is None:
            if self.sel.size == 0:
                R = self.alphas.shape[0]
                return np.broadcast_to(self.forms.cv[None], (R,) + self.forms.cv.shape).copy()
            return fold_errors_eigen(self.forms.subset(self.sel), self.alphas)
        return np.stack([st.sse for st in self.states], axis=1)
