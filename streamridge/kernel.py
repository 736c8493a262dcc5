"""The chunk kernel: accumulate rows into per-cell statistics in place.

One :class:`CellAccumulator` per partition of the pass.  Every sub-block of
rows is gathered by cell once (a stable sort of the cell ids), centered per
cell in float64 and added into that cell's accumulator with a rank-m BLAS
``syrk`` followed by the rank-1 Chan, Golub & LeVeque correction

.. code-block:: text

    n    = n_a + n_b,   d = mean_b - mean_a
    S   += S_b + (n_a n_b / n) d d'
    mean = mean_a + d n_b / n

so no per-sub-block statistics are allocated and merged, only the cells that
occur are touched, and an offset of 1e6 in the data costs no accuracy.  Only
the lower triangle of ``Sxx`` is updated until :meth:`CellAccumulator.result`.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import blas

from .stats import FoldStats


class CellAccumulator:
    """Running statistics of ``n_cells`` cells, updated in place.

    Parameters
    ----------
    n_cells : int
    n_features, n_targets : int
    """

    def __init__(self, n_cells: int, n_features: int, n_targets: int) -> None:
        C, N, T = n_cells, n_features, n_targets
        self.weight = np.zeros(C)
        self.count = np.zeros(C, dtype=np.int64)
        self.mean_x = np.zeros((C, N))
        self.mean_y = np.zeros((C, T))
        self.sxx = np.zeros((C, N, N))  # lower triangle only until result()
        self.sxy = np.zeros((C, N, T))
        self.syy = np.zeros((C, T))

    def add(self, X: np.ndarray, Y: np.ndarray, cells: np.ndarray, weights: np.ndarray | None = None) -> None:
        """Add rows ``X`` (m, N), targets ``Y`` (m, T) of flat cell ids ``cells`` (m,).

        Parameters
        ----------
        X : array of shape (m, n_features), any real dtype
        Y : array of shape (m, n_targets)
        cells : array of int of shape (m,)
        weights : array of shape (m,) or None
            Non-negative sample weights.
        """
        if X.shape[0] == 0:
            return
        # float64 overflow of the co-moments is reported once, as a ScaleError, by the solve stage;
        # worker processes do not inherit the driver's warning filters, so the kernel stays silent itself
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            self._add(X, Y, np.asarray(cells, dtype=np.int64), weights)

    def _add(self, X: np.ndarray, Y: np.ndarray, cells: np.ndarray, weights: np.ndarray | None) -> None:
        first = int(cells[0])
        if self.weight.shape[0] == 1 or bool(np.all(cells == first)):
            self._add_cell(first, X, Y, weights)
            return
        order = np.argsort(cells, kind="stable")
        sorted_cells = cells[order]
        starts = np.concatenate([[0], np.flatnonzero(np.diff(sorted_cells)) + 1])
        wg = None if weights is None else weights[order]
        # one gather of the sub-block (input dtype), then every cell's rows are contiguous
        self._add_sorted(sorted_cells[starts], starts, X[order], Y[order], wg)

    def _add_sorted(
        self, ids: np.ndarray, starts: np.ndarray, X: np.ndarray, Y: np.ndarray, w: np.ndarray | None
    ) -> None:
        """Rows sorted by cell: cell ``ids[g]`` holds rows ``starts[g] .. starts[g + 1] - 1``.

        Means, centering and the Chan corrections are computed for all cells at
        once; only the rank-k and rank-1 updates of ``Sxx`` and the ``Sxy``
        product run per cell.
        """
        m = X.shape[0]
        counts = np.diff(np.append(starts, m))
        self.count[ids] += counts
        W = counts.astype(np.float64) if w is None else np.add.reduceat(w, starts)
        safe = np.where(W > 0, W, 1.0)
        Xc, mx = _centered_segments(X, w, starts, counts, safe)
        Yc, my = _centered_segments(Y, w, starts, counts, safe)
        if w is not None:
            s = np.sqrt(w)[:, None]
            Xc *= s
            Yc *= s
        ok = W > 0
        n_a = self.weight[ids]
        n = n_a + W
        f = np.where(ok & (n_a > 0), n_a * W / np.where(n > 0, n, 1.0), 0.0)
        dx = mx - self.mean_x[ids]
        dy = my - self.mean_y[ids]
        bounds = np.append(starts, m)
        for g in np.flatnonzero(ok).tolist():
            c, lo, hi = int(ids[g]), int(bounds[g]), int(bounds[g + 1])
            S = self.sxx[c].T  # Fortran view: its upper triangle is the lower triangle of sxx[c]
            _syrk_into(Xc[lo:hi], S)
            if f[g] > 0:
                _syr_into(float(f[g]), dx[g], S)
            self.sxy[c] += Xc[lo:hi].T @ Yc[lo:hi]
        k = ids[ok]
        fk, dxk, dyk = f[ok], dx[ok], dy[ok]
        self.sxy[k] += fk[:, None, None] * dxk[:, :, None] * dyk[:, None, :]
        self.syy[k] += np.add.reduceat(Yc * Yc, starts)[ok] + fk[:, None] * dyk * dyk
        share = (W / np.where(n > 0, n, 1.0))[ok][:, None]
        first = (n_a[ok] == 0)[:, None]
        self.mean_x[k] = np.where(first, mx[ok], self.mean_x[k] + dxk * share)
        self.mean_y[k] = np.where(first, my[ok], self.mean_y[k] + dyk * share)
        self.weight[k] = n[ok]

    def _add_cell(self, c: int, X: np.ndarray, Y: np.ndarray, w: np.ndarray | None) -> None:
        m = X.shape[0]
        self.count[c] += m
        W = float(m) if w is None else float(w.sum())
        if W <= 0:
            return
        Xc, mx = _centered(X, w, W)
        Yc, my = _centered(Y, w, W)
        if w is not None:
            s = np.sqrt(w)[:, None]
            Xc *= s
            Yc *= s
        S = self.sxx[c].T  # Fortran view: its upper triangle is the lower triangle of sxx[c]
        _syrk_into(Xc, S)
        self.sxy[c] += Xc.T @ Yc
        self.syy[c] += np.einsum("ij,ij->j", Yc, Yc)
        n_a = self.weight[c]
        n = n_a + W
        if n_a > 0:
            f = n_a * W / n
            dx = mx - self.mean_x[c]
            dy = my - self.mean_y[c]
            _syr_into(f, dx, S)
            self.sxy[c] += (f * dx)[:, None] * dy[None, :]
            self.syy[c] += f * dy * dy
            self.mean_x[c] += dx * (W / n)
            self.mean_y[c] += dy * (W / n)
        else:
            self.mean_x[c] = mx
            self.mean_y[c] = my
        self.weight[c] = n

    def result(self, n_folds: int, n_classes: int) -> FoldStats:
        """The statistics as a :class:`FoldStats` of shape (n_folds, n_classes, ...); ends accumulation."""
        for S in self.sxx:  # the upper triangle is still zero: add the strict lower one, transposed
            S += np.tril(S, -1).T
        arrays = (self.weight, self.count, self.mean_x, self.mean_y, self.sxx, self.sxy, self.syy)
        return FoldStats.from_arrays([a.reshape((n_folds, n_classes, *a.shape[1:])) for a in arrays])


def _centered(A: np.ndarray, w: np.ndarray | None, W: float) -> tuple[np.ndarray, np.ndarray]:
    """A float64 copy of ``A`` minus its (weighted) column means, and the means.

    One pass converts to float64 (so the mean is accumulated in float64
    whatever the input dtype), one sums, one subtracts.  Centering about a
    mean that is off by ``d`` changes the co-moment by ``n d d'`` only, second
    order in the rounding error, so no re-centering pass is needed; the
    returned mean gets the first-order correction.
    """
    Ac = np.array(A, dtype=np.float64)  # a float64 copy: one conversion pass, no buffered casts
    mean = (Ac.sum(axis=0) if w is None else w @ Ac) / W
    Ac -= mean
    mean += (Ac.sum(axis=0) if w is None else w @ Ac) / W
    return Ac, mean


def _centered_segments(
    A: np.ndarray, w: np.ndarray | None, starts: np.ndarray, counts: np.ndarray, W: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_centered` for every run of rows ``starts[g] ..`` at once: float64 centered rows and means.

    ``A`` is the caller's own gathered copy; a float64 ``A`` is centered in place.
    """
    Ac = np.asarray(A, dtype=np.float64)  # one conversion pass (no buffered casts later)
    total = np.add.reduceat(Ac if w is None else w[:, None] * Ac, starts, axis=0)
    mean = total / W[:, None]
    for g, (lo, m) in enumerate(zip(starts.tolist(), counts.tolist())):  # in place: no m x N temporary
        Ac[lo : lo + m] -= mean[g]
    mean += np.add.reduceat(Ac if w is None else w[:, None] * Ac, starts, axis=0) / W[:, None]
    return Ac, mean


def _syrk_into(Xc: np.ndarray, S: np.ndarray) -> None:
    """``S += Xc' Xc`` on the upper triangle of the Fortran-ordered ``S``, in place."""
    A = Xc.T if Xc.flags.c_contiguous else np.asfortranarray(Xc.T)
    out = blas.dsyrk(1.0, A, beta=1.0, c=S, trans=0, lower=0, overwrite_c=1)
    if out is not S and not np.shares_memory(out, S):  # pragma: no cover - BLAS wrapper copied
        S[...] = out


def _syr_into(alpha: float, x: np.ndarray, S: np.ndarray) -> None:
    """``S += alpha x x'`` on the upper triangle of the Fortran-ordered ``S``, in place."""
    out = blas.dsyr(alpha, x, lower=0, a=S, overwrite_a=1)
    if out is not S and not np.shares_memory(out, S):  # pragma: no cover - BLAS wrapper copied
        S[...] = out
