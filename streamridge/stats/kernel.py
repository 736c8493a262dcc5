"""The chunk kernel: accumulate rows into per-cell statistics in place.

One :class:`CellAccumulator` per partition of the pass.  The rows of a
sub-block are grouped by cell (a stable radix sort of the cell ids; a cell
whose rows form one contiguous run is read in place, others are gathered),
and each cell's rows are processed in cache-sized *tiles*: a tile is copied to
float64 once, centered about its own (weighted) mean and added into the cell's
accumulator with a rank-k BLAS ``syrk`` (and a GEMV/GEMM for ``Sxy``) while it
is still in cache, so the data crosses memory once and no sub-block-sized
copy is made.  The tiles' means are folded in later, a few hundred at a time
per cell, with the cell's previous state, by the exact between-group term of
the co-moment

.. code-block:: text

    n = n_0 + sum_t n_t,   m = (n_0 m_0 + sum_t n_t m_t) / n
    S = S_0 + sum_t S_t + sum_{t=0..} n_t (m_t - m)(m_t - m)'

as one more rank-k ``syrk`` of the rows ``sqrt(n_t) (m_t - m)`` -- the Chan,
Golub & LeVeque pairwise update applied to many groups at once.  Only the
cells that occur are touched, and an offset of 1e6 in the data costs no
accuracy (every tile is centered before its products).  Only the lower
triangle of ``Sxx`` is updated until :meth:`CellAccumulator.result`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamridge.blas_nogil import gemm_tn, syrk_upper
from streamridge.stats.foldstats import STATS_ARRAYS, FoldStats

TILE_BYTES = 2 * 2**20  # float64 bytes of one tile (X and Y parts): stays in L2/L3 between its passes
MIN_TILE_ROWS = 256  # rank-k updates below this are BLAS-inefficient
MAX_TILE_ROWS = 4096
MIRROR_BLOCK = 64  # columns per strip when the lower triangle is mirrored (an n x 64 strip stays in L2)
MAX_PENDING = 256  # tiles of a cell whose means wait for one rank-k fold (also: at most ~1/8 of its N x N)


_Run = tuple[
    int, np.ndarray, np.ndarray, "np.ndarray | None", "np.ndarray | None"
]  # a cell's rows of a sub-block
_STATE = ("weight", "count", "mean_x", "mean_y", "sxx", "sxy", "syy")  # the running moments (see snapshot)


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
        self.tile_rows = int(np.clip(TILE_BYTES // (8 * max(1, N + T)), MIN_TILE_ROWS, MAX_TILE_ROWS))
        self._bx = np.empty((self.tile_rows, N))
        self._by = np.empty((self.tile_rows, T))
        self._ones = np.ones(self.tile_rows)
        self._pool: Any = None  # threads sharing the cells of a sub-block (see use_threads)
        self._tiles: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        # pending tile means of a cell stay below ~1/8 of its N x N statistics (Python object overhead included)
        self._max_pending = int(np.clip(N * N // (8 * (N + T + 32)), 2, MAX_PENDING))
        # per cell: weights and means of tiles added since its last fold (see _fold)
        self._pending: dict[int, tuple[list[float], list[np.ndarray], list[np.ndarray]]] = {}

    def use_threads(self, pool: Any, n: int) -> None:
        """Share the cells of every sub-block with ``n`` threads of ``pool`` (``n`` <= 1: no threads).

        Each cell's rows are still added by one thread, in the order they
        come, so the statistics are bit for bit those of one thread; the
        threads only take different cells of the same sub-block (each with
        tile buffers of its own), and :meth:`add` returns when all are done.
        """
        if n <= 1:
            self._pool, self._tiles = None, []
            return
        self._pool = pool
        N, T = self._bx.shape[1], self._by.shape[1]
        self._tiles = [(self._bx, self._by, self._ones)] + [
            (np.empty((self.tile_rows, N)), np.empty((self.tile_rows, T)), np.ones(self.tile_rows))
            for _ in range(n - 1)
        ]

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
        m = X.shape[0]
        if m == 0:
            return
        # float64 overflow of the co-moments is reported once, as a ScaleError, by the solve stage;
        # worker processes do not inherit the driver's warning filters, so the kernel stays silent itself
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            cells = np.asarray(cells).reshape(-1)
            first = int(cells[0])
            if self.weight.shape[0] == 1 or bool(np.all(cells == first)):
                self._add_run(first, X, Y, None, weights)
                return
            small = cells.astype(np.int16) if self.weight.shape[0] < 2**15 else cells.astype(np.int64)
            order = np.argsort(small, kind="stable")  # a radix sort for 16-bit keys
            sc = small[order]
            bounds = np.concatenate([[0], np.flatnonzero(sc[1:] != sc[:-1]) + 1, [m]])
            runs: list[_Run] = []
            for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
                idx = order[lo:hi]
                a, b = int(idx[0]), int(idx[-1])
                if b - a == hi - lo - 1:  # the cell's rows are one contiguous run: read in place
                    runs.append((int(sc[lo]), X[a : b + 1], Y[a : b + 1], None, _part(weights, a, b + 1)))
                else:
                    runs.append((int(sc[lo]), X, Y, idx, weights))
            if self._pool is None or len(runs) < 2:
                for run in runs:
                    self._add_run(*run)
                return
            self._add_shared(runs, [hi - lo for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist())])

    def _add_shared(self, runs: list[_Run], sizes: list[int]) -> None:
        """The cells' runs of one sub-block on the threads of :meth:`use_threads`, largest first to the least loaded."""
        n = len(self._tiles)
        load: list[int] = [0] * n
        share: list[list[_Run]] = [[] for _ in range(n)]
        for j in sorted(range(len(runs)), key=lambda j: -sizes[j]):
            t = load.index(min(load))
            load[t] += sizes[j]
            share[t].append(runs[j])

        def work(t: int) -> None:
            for c, X, Y, idx, w in share[t]:
                self._add_run(c, X, Y, idx, w, tiles=self._tiles[t])

        jobs = [self._pool.submit(work, t) for t in range(1, n) if share[t]]
        try:
            work(0)
        finally:
            for job in jobs:
                job.result()

    def _add_run(
        self,
        c: int,
        X: np.ndarray,
        Y: np.ndarray,
        idx: np.ndarray | None,
        w: np.ndarray | None,
        tiles: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    ) -> None:
        """Rows ``idx`` of ``X``/``Y`` (all rows when None) into cell ``c``, tile by tile (``tiles``: buffers to use)."""
        m = X.shape[0] if idx is None else idx.shape[0]
        self.count[c] += m
        S = self.sxx[c].T  # Fortran view: its upper triangle is the lower triangle of sxx[c]
        Sxy = self.sxy[c].T  # (T, N) Fortran view
        pend = self._pending.setdefault(c, ([], [], []))
        step = self.tile_rows
        tile_x, tile_y, ones = (self._bx, self._by, self._ones) if tiles is None else tiles
        for s in range(0, m, step):
            e = min(m, s + step)
            k = e - s
            bx, by = tile_x[:k], tile_y[:k]
            if idx is None:
                np.copyto(bx, X[s:e])
                np.copyto(by, Y[s:e])
                wt = None if w is None else w[s:e]
            else:
                rows = idx[s:e]
                _gather(X, rows, bx)
                _gather(Y, rows, by)
                wt = None if w is None else w[rows]
            W = float(k) if wt is None else float(wt.sum())
            if W <= 0:
                continue
            wc = ones[:k] if wt is None else wt
            mx = _center(bx, wc, W)
            my = _center(by, wc, W)
            if wt is not None:
                r = np.sqrt(wt)[:, None]
                bx *= r
                by *= r
            _syrk_into(bx, S)
            _cross_into(by, bx, Sxy)
            self.syy[c] += np.einsum("ij,ij->j", by, by)
            pend[0].append(W)
            pend[1].append(mx)
            pend[2].append(my)
        if len(pend[0]) >= self._max_pending:
            self._fold(c)

    def _fold(self, c: int) -> None:
        """Fold cell ``c``'s pending tiles (centered and added already; their weights and means) into its state.

        Adds the between-group term ``sum_t n_t (m_t - m)(m_t - m)'`` of the
        tiles and the cell's previous state (weight n0, mean m0) as one rank-k
        update.
        """
        ws, mxs, mys = self._pending.pop(c, ([], [], []))
        if not ws:
            return
        n0 = float(self.weight[c])
        w = np.array(ws)
        mx, my = np.array(mxs), np.array(mys)
        if n0 > 0:  # the cell's previous state is one more group
            w = np.concatenate([[n0], w])
            mx = np.concatenate([self.mean_x[c][None], mx])
            my = np.concatenate([self.mean_y[c][None], my])
        n = float(w.sum())
        if w.shape[0] > 1:
            rx, ry = mx[0], my[0]  # a reference inside the data: the new mean without cancellation
            mean_x = rx + (w @ (mx - rx)) / n
            mean_y = ry + (w @ (my - ry)) / n
            r = np.sqrt(w)[:, None]
            dx = (mx - mean_x) * r
            dy = (my - mean_y) * r
            _syrk_into(dx, self.sxx[c].T)
            _cross_into(dy, dx, self.sxy[c].T)
            self.syy[c] += np.einsum("ij,ij->j", dy, dy)
        else:
            mean_x, mean_y = mx[0], my[0]
        self.mean_x[c] = mean_x
        self.mean_y[c] = mean_y
        self.weight[c] = n

    def snapshot(self) -> dict[str, np.ndarray]:
        """The running state as arrays, for :meth:`restore` (a checkpoint inside a task).

        The cells' moments and the tiles whose means wait for a fold
        (``pending_*``): an accumulator restored from them and given the same
        rows ends with the same statistics, bit for bit.  The arrays may be
        views of the accumulator: write them out before the next :meth:`add`.
        """
        cells = list(self._pending)
        pend = [self._pending[c] for c in cells]
        N, T = self.mean_x.shape[1], self.mean_y.shape[1]
        return {
            **{name: getattr(self, name) for name in _STATE},
            "pending_cells": np.asarray(cells, dtype=np.int64),
            "pending_tiles": np.asarray([len(p[0]) for p in pend], dtype=np.int64),
            "pending_weight": np.asarray([w for p in pend for w in p[0]], dtype=np.float64),
            "pending_mean_x": np.asarray([m for p in pend for m in p[1]], dtype=np.float64).reshape(-1, N),
            "pending_mean_y": np.asarray([m for p in pend for m in p[2]], dtype=np.float64).reshape(-1, T),
        }

    def restore(self, arrays: dict[str, np.ndarray]) -> None:
        """Continue from a :meth:`snapshot` of an accumulator of the same cells and widths.

        Raises
        ------
        ValueError
            If an array is missing or of another shape.
        """
        for name in _STATE:
            mine, saved = getattr(self, name), np.asarray(arrays[name])
            if saved.shape != mine.shape:
                raise ValueError(f"{name} has shape {saved.shape}, expected {mine.shape}")
            np.copyto(mine, saved)
        tiles = np.asarray(arrays["pending_tiles"], dtype=np.int64)
        ends = np.cumsum(tiles)
        w = np.asarray(arrays["pending_weight"], dtype=np.float64)
        mx, my = np.asarray(arrays["pending_mean_x"]), np.asarray(arrays["pending_mean_y"])
        if not (len(w) == mx.shape[0] == my.shape[0] == (int(ends[-1]) if len(ends) else 0)):
            raise ValueError("the pending tiles' weights and means differ in number")
        self._pending = {}
        for c, b, k in zip(np.asarray(arrays["pending_cells"]).tolist(), ends.tolist(), tiles.tolist()):
            a = b - k
            self._pending[int(c)] = (w[a:b].tolist(), list(mx[a:b]), list(my[a:b]))

    def result(self, n_folds: int, n_classes: int) -> FoldStats:
        """The statistics as a :class:`FoldStats` of shape (n_folds, n_classes, ...); ends accumulation."""
        for c in list(self._pending):
            self._fold(c)
        for S in self.sxx:
            mirror_lower(S)
        arrays = (self.weight, self.count, self.mean_x, self.mean_y, self.sxx, self.sxy, self.syy)
        return FoldStats.from_arrays([a.reshape((n_folds, n_classes, *a.shape[1:])) for a in arrays])


def mirror_lower(S: np.ndarray, block: int = MIRROR_BLOCK) -> None:
    """Copy the strict lower triangle of ``S`` onto its upper one, in place (exact: a copy).

    The upper triangle must be zero on entry (it is never written before
    :meth:`CellAccumulator.result`).  Works in strips of ``block`` columns,
    each transposed while it is in cache: 2.8x less CPU than adding
    ``np.tril(S, -1).T`` (a full-size masked copy, then a strided add) for
    100 cells at N = 1000.

    Parameters
    ----------
    S : array of shape (n, n), C-ordered, float64
    block : int
        Columns per strip (a strip of n x block float64 stays in L2).
    """
    n = S.shape[0]
    for i in range(0, n, block):
        e = min(n, i + block)
        D = S[i:e, i:e]
        D += np.tril(D, -1).T  # the diagonal block: its upper part is zero, so the sum is a copy
        if e < n:
            S[i:e, e:] = S[e:, i:e].T


def _gather(A: np.ndarray, rows: np.ndarray, out: np.ndarray) -> None:
    """``out[:] = A[rows]`` converted to float64 (no temporary for float64 ``A``)."""
    if A.dtype == np.float64:
        np.take(A, rows, axis=0, out=out, mode="clip")  # mode="clip": unbuffered
    else:
        np.copyto(out, A[rows])


def _part(w: np.ndarray | None, a: int, b: int) -> np.ndarray | None:
    return None if w is None else w[a:b]


def _center(B: np.ndarray, w: np.ndarray, W: float) -> np.ndarray:
    """Center the float64 tile ``B`` in place about its (weighted) column means; return the means.

    Centering about a mean that is off by ``d`` changes the co-moment by
    ``n d d'`` only, second order in the rounding error, so one correction of
    the mean (not of the data) suffices.
    """
    mean = (w @ B) / W  # a GEMV (ones or weights): faster than a column sum
    B -= mean
    mean += (w @ B) / W
    return mean


def _syrk_into(Xc: np.ndarray, S: np.ndarray) -> None:
    """``S += Xc' Xc`` on the upper triangle of the Fortran-ordered ``S``, in place (GIL released)."""
    syrk_upper(np.ascontiguousarray(Xc), S)


def _cross_into(Yc: np.ndarray, Xc: np.ndarray, C: np.ndarray) -> None:
    """``C += Yc' Xc`` for the Fortran-ordered (T, N) ``C``, in place (GIL released)."""
    if C.shape[0] == 1:  # one target: a GEMV (dgemm is several times slower for a single column)
        C[0] += Xc.T @ Yc[:, 0]
        return
    gemm_tn(np.ascontiguousarray(Yc), np.ascontiguousarray(Xc), C)


def chunk_stats(
    X: np.ndarray,
    Y: np.ndarray,
    cells: np.ndarray,
    n_cells: int,
    weights: np.ndarray | None = None,
) -> tuple[np.ndarray, ...]:
    """Statistics of one chunk of rows, split by cell.

    Parameters
    ----------
    X : array of shape (m, n_features), any real dtype
    Y : array of shape (m, n_targets), any real dtype
    cells : array of int of shape (m,)
        Flat cell index ``fold * n_classes + class`` of every row.
    n_cells : int
    weights : array of shape (m,) or None
        Non-negative sample weights.

    Returns
    -------
    weight, count, mean_x, mean_y, sxx, sxy, syy : arrays with a leading
        axis of length n_cells (float64; count int64)
    """
    acc = CellAccumulator(n_cells, X.shape[1], Y.shape[1])
    acc.add(X, Y, cells, None if weights is None else np.asarray(weights, dtype=np.float64))
    out = acc.result(n_cells, 1)
    return tuple(getattr(out, a).reshape((n_cells, *getattr(out, a).shape[2:])) for a in STATS_ARRAYS)


def from_chunk(
    X: np.ndarray,
    Y: np.ndarray,
    folds: np.ndarray,
    classes: np.ndarray | None,
    n_folds: int,
    n_classes: int,
    weights: np.ndarray | None = None,
    meta: dict | None = None,
) -> FoldStats:
    """:class:`FoldStats` of one in-memory chunk given fold and class ids per row."""
    cells = folds * n_classes + (0 if classes is None else classes)
    arrays = chunk_stats(X, Y, np.asarray(cells), n_folds * n_classes, weights)
    K, C = n_folds, n_classes
    shaped = [a.reshape((K, C, *a.shape[1:])) for a in arrays]
    return FoldStats.from_arrays(shaped, meta)
