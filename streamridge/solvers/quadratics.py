"""Validation quadratics of every lambda and target of one fold, through a factor of the validation form.

For one fold with training form ``(At, Bt)``, validation form ``(Av, Bv)`` and
validation mean offset ``dx`` (see :mod:`streamridge.forms.build`), the ridge
coefficients and the three numbers every validation score is made of are

.. code-block:: text

    W(lambda) = (At + lambda I)^+ Bt                  (N, T)
    q = diag(W' Av W)     c = diag(W' Bv)     m = W' dx      (T,) each

(squared error ``q - 2 c + cv``; R² and correlation in
:mod:`streamridge.solvers.target_scores`).  With ``At = C D C'``
(:func:`~streamridge.solvers.linalg.psd_eigh`, only its n eigenpairs above the
rank tolerance: along the others the coefficients are 0) and
``Wc = (D + lambda)^-1 C' Bt`` (Buteneers et al. 2013, eq. 6-7), ``c`` and
``m`` are one product of the (R, n) matrix of ``1 / (d + lambda)`` with
``C'Bt * C'Bv`` and with ``C'Bt``, for all lambdas at once, O(R n T).
``q = diag(Wc' P Wc)`` with ``P = C' Av C`` is the cost that grows with
n² T per lambda; it is taken through a pivoted Cholesky factor
``P[pi, pi] = L L'`` (LAPACK ``pstrf``), ``L`` of shape (n, r), r the
numerical rank of ``Av`` -- at most the validation fold's row count:

.. code-block:: text

    q = || L' (D + lambda)^-1 C' Bt ||²   column by column

``L'`` is upper trapezoidal (row j is zero left of column j), so its product is
taken in row panels, each from its own diagonal on, skipping the zero triangle:
``(r² (1 + 1 / n_panels) / 2 + r (n - r)) T`` multiply-adds per lambda against
``N² T`` for ``P @ Wc`` of the eigen solver -- about half when ``Av`` has full
rank, less when the fold has fewer rows than features (``n < N`` when the
training part has).  ``scripts/bench_banded.py --kernel-only`` times the two
and splits the time into the decompositions, the rotations ``C'Bt``, ``C'Bv``
(4 N n T per fold) and the per-lambda products.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from scipy.linalg import lapack

from streamridge.solvers.linalg import psd_eigh

__all__ = [
    "DEFAULT_MAX_BYTES",
    "FoldQuadratics",
    "ValidationFactor",
    "fold_factor",
    "fold_quadratics",
    "validation_factor",
]

#: working memory of one fold's target batch (bytes); the batch width follows from it
DEFAULT_MAX_BYTES = 1 << 27

#: row panels of the trapezoidal factor are at least this tall (shorter ones run GEMM below its rate)
PANEL_ROWS = 128

#: at most this many row panels: past it the triangle saved is under 1/16 of the product
MAX_PANELS = 8


@dataclass
class FoldQuadratics:
    """``q``, ``c`` and ``m`` of every lambda and target of one fold (see the module docstring).

    Attributes
    ----------
    q : array of shape (R, T)
        ``diag(W' Av W)``.
    c : array of shape (R, T)
        ``diag(W' Bv)``.
    m : array of shape (R, T) or None
        ``W' dx``; None when no ``dx`` was given.
    """

    q: np.ndarray
    c: np.ndarray
    m: np.ndarray | None


@dataclass
class ValidationFactor:
    """The training eigendecomposition and the pivoted factor of the rotated validation form of one fold.

    Only the range of ``At`` is kept: along its numerical null space the
    coefficients are 0 (:mod:`streamridge.solvers.linalg`), so those
    directions add nothing to ``q``, ``c`` or ``m``.

    Attributes
    ----------
    d : array of shape (n,)
        The n eigenvalues of ``At`` above its rank tolerance (:func:`~streamridge.solvers.linalg.psd_eigh`).
    C : array of shape (N, n)
        Their eigenvectors.
    piv : array of int of shape (n,)
        Pivot order: ``P[piv][:, piv] = L L'`` with ``P = C' Av C``.
    Lt : array of shape (r, n)
        ``L'``, upper trapezoidal in the pivoted order.
    """

    d: np.ndarray
    C: np.ndarray
    piv: np.ndarray
    Lt: np.ndarray

    @property
    def rank(self) -> int:
        """Numerical rank r of the validation form."""
        return int(self.Lt.shape[0])


def validation_factor(At: np.ndarray, Av: np.ndarray) -> ValidationFactor:
    """Eigendecomposition of ``At`` on its range and pivoted Cholesky factor of ``C' Av C``.

    Parameters
    ----------
    At, Av : arrays of shape (N, N)
        Symmetric positive semi-definite training and validation forms.

    Returns
    -------
    ValidationFactor

    Notes
    -----
    ``pstrf`` stops at the first pivot at or below ``n eps max(diag P)`` (the
    rank tolerance of :func:`~streamridge.solvers.linalg.psd_eigh`); the
    discarded Schur complement is positive semi-definite with diagonal below
    that bound, so ``q`` changes by at most ``(n - r) n eps max(diag P) ||Wc||²``.
    """
    d, C, null = psd_eigh(At)
    if null.any():  # fewer training rows than features, or collinear features: the range only
        d, C = d[~null], C[:, ~null]
    n = d.shape[0]
    P = C.T @ (Av @ C)
    top = float(np.max(np.diagonal(P))) if n else 0.0
    if not top > 0.0:  # no validation variance along any direction: q = 0
        return ValidationFactor(d, C, np.arange(n), np.zeros((0, n)))
    c, piv, rank, info = lapack.dpstrf(P, tol=n * np.finfo(np.float64).eps * top, lower=1)
    if info < 0:  # pragma: no cover - an argument LAPACK refuses
        raise RuntimeError(f"LAPACK dpstrf failed (info={info})")
    Lt = np.ascontiguousarray(np.tril(c)[:, :rank].T)
    return ValidationFactor(d, C, piv.astype(np.intp) - 1, Lt)


def panel_edges(rank: int) -> np.ndarray:
    """Row boundaries of the panels of an (r, N) trapezoidal factor, shape (n_panels + 1,)."""
    n = int(np.clip(rank // PANEL_ROWS, 1, MAX_PANELS))
    return np.linspace(0, rank, n + 1).astype(np.intp)


def batch_width(n_features: int, rank: int, n_alphas: int, max_bytes: int) -> int:
    """Targets per batch: ``C'Bt``, ``C'Bv``, their product, the pivoted copy, a panel's products for every
    lambda and the outputs fit ``max_bytes``."""
    panel = n_alphas * int(np.max(np.diff(panel_edges(rank)))) if rank else 0
    per_target = 8 * (4 * n_features + rank + 3 * n_alphas + panel)
    return max(1, int(max_bytes) // per_target)


def fold_factor(At: np.ndarray, Av: np.ndarray, gains: np.ndarray | None = None) -> ValidationFactor:
    """:func:`validation_factor` of one fold's forms, of the features scaled by ``gains`` (see :func:`fold_quadratics`).

    It depends on the features only, not on the targets: one factor serves every
    batch of targets of the fold (``factor=`` of :func:`fold_quadratics`).
    """
    active = _active(gains, At.shape[0])
    if active is not None:
        rows, g = active
        At = At[np.ix_(rows, rows)] * np.outer(g, g)
        Av = Av[np.ix_(rows, rows)] * np.outer(g, g)
    return validation_factor(At, Av)


def fold_quadratics(
    At: np.ndarray,
    Bt: np.ndarray,
    Av: np.ndarray,
    Bv: np.ndarray,
    alphas: np.ndarray,
    *,
    dx: np.ndarray | None = None,
    gains: np.ndarray | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    factor: ValidationFactor | None = None,
) -> FoldQuadratics:
    """``q``, ``c`` and ``m`` of every lambda and target of one fold (module docstring).

    Parameters
    ----------
    At, Av : arrays of shape (N, N)
    Bt, Bv : arrays of shape (N, T)
    alphas : array of shape (R,)
    dx : array of shape (N,) or None
        Validation mean minus training mean of the features (as the forms see them).
    gains : array of shape (N,) or None
        Non-negative factors of the features: the forms of the features
        ``g_j x_j`` (``A -> G A G``, ``B -> G B``, ``dx -> G dx``), taken one
        batch of targets at a time (``Bt`` and ``Bv`` are never copied whole).
        Features of gain 0 drop out: their coefficients are 0.
    max_bytes : int
        Working memory of one batch of targets.
    factor : ValidationFactor or None
        :func:`fold_factor` of ``At``, ``Av`` and ``gains``, when already computed
        (for another batch of targets of the same fold).

    Returns
    -------
    FoldQuadratics
    """
    alphas = np.asarray(alphas, dtype=np.float64)
    active = _active(gains, At.shape[0])
    fac = fold_factor(At, Av, gains) if factor is None else factor
    if active is not None and dx is not None:
        rows, g = active
        dx = dx[rows] * g
    N, T = fac.C.shape[0], Bt.shape[1]
    R = alphas.shape[0]
    inv = 1.0 / (fac.d[None, :] + alphas[:, None])  # (R, n)
    p = None if dx is None else fac.C.T @ dx
    q, c = np.empty((R, T)), np.empty((R, T))
    m = None if p is None else np.empty((R, T))
    tb = batch_width(N, fac.rank, R, max_bytes)
    for s in range(0, T, tb):
        cols = slice(s, min(T, s + tb))
        Bc = fac.C.T @ _scaled(Bt, active, cols)
        c[:, cols] = inv @ (Bc * (fac.C.T @ _scaled(Bv, active, cols)))
        if m is not None and p is not None:
            m[:, cols] = (inv * p[None, :]) @ Bc
        q[:, cols] = _squared_norms(fac, inv, Bc)
    return FoldQuadratics(q, c, m)


def _active(gains: np.ndarray | None, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Rows of the features of positive gain and their gains (None without gains)."""
    if gains is None:
        return None
    g = np.asarray(gains, dtype=np.float64)
    if g.shape != (n,):
        raise ValueError(f"gains must have shape ({n},); got {g.shape}")
    rows = np.flatnonzero(g > 0)
    return rows, g[rows]


def _scaled(B: np.ndarray, active: tuple[np.ndarray, np.ndarray] | None, cols: slice) -> np.ndarray:
    """``G B[rows, cols]`` of the active rows (a view of ``B[:, cols]`` without gains)."""
    if active is None:
        return B[:, cols]
    rows, g = active
    out = B[rows, cols]  # fancy rows: a copy
    out *= g[:, None]
    return out


def _squared_norms(fac: ValidationFactor, inv: np.ndarray, Bc: np.ndarray) -> np.ndarray:
    """``|| L' diag(inv_r) Bc ||²`` per column for every row ``inv_r`` of inv (R, n): shape (R, tb).

    Panel by panel of ``L'``, the panel scaled by every lambda's ``inv_r`` is
    stacked into one (R x rows, n - lo) matrix: one product per panel for all
    lambdas (a taller GEMM runs nearer the machine's rate than R short ones).
    """
    R, tb = inv.shape[0], Bc.shape[1]
    out = np.zeros((R, tb))
    if fac.rank == 0:
        return out
    Bp = Bc[fac.piv]
    invp = inv[:, fac.piv]
    edges = panel_edges(fac.rank)
    Z = np.empty((R * int(np.max(np.diff(edges))), tb))
    for lo, hi in itertools.pairwise(edges):
        h = hi - lo
        stacked = (fac.Lt[None, lo:hi, lo:] * invp[:, None, lo:]).reshape(R * h, -1)
        z = Z[: R * h]
        np.matmul(stacked, Bp[lo:], out=z)
        z *= z
        out += z.reshape(R, h, tb).sum(axis=1)
    return out
