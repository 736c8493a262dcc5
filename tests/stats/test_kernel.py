"""The cache-tiled cell kernel (streamridge.stats.kernel) against a two-pass extended-precision reference.

The kernel centers every tile about its own mean and folds the tiles' means
in later (one rank-k update per cell); these tests drive it through every
branch -- one cell, contiguous runs read in place, gathered interleaved rows,
many tiles and folds, zero weights, float32 input, several targets -- on data
with a large offset and a strong drift, where raw sums of squares would lose
every digit.
"""

from __future__ import annotations

import numpy as np
import pytest

from streamridge.stats import kernel
from streamridge.stats.kernel import CellAccumulator


def reference(X, Y, cells, w, n_cells):
    """Per-cell weighted means and co-moments, two passes in extended precision."""
    L = np.longdouble
    N, T = X.shape[1], Y.shape[1]
    out = {k: [] for k in ("weight", "count", "mean_x", "mean_y", "sxx", "sxy", "syy")}
    w = np.ones(X.shape[0]) if w is None else w
    for c in range(n_cells):
        sel = cells == c
        Xs, Ys, ws = X[sel].astype(L), Y[sel].astype(L), w[sel].astype(L)
        W = ws.sum()
        mx = (ws[:, None] * Xs).sum(0) / W if W > 0 else np.zeros(N, L)
        my = (ws[:, None] * Ys).sum(0) / W if W > 0 else np.zeros(T, L)
        Xc, Yc = (Xs - mx) * np.sqrt(ws)[:, None], (Ys - my) * np.sqrt(ws)[:, None]
        out["weight"].append(W)
        out["count"].append(int(sel.sum()))
        out["mean_x"].append(mx)
        out["mean_y"].append(my)
        out["sxx"].append(Xc.T @ Xc)
        out["sxy"].append(Xc.T @ Yc)
        out["syy"].append((Yc * Yc).sum(0))
    return {k: np.array(v, dtype=np.float64) for k, v in out.items()}


def run(X, Y, cells, w, n_cells, block, threads=1):
    acc = CellAccumulator(n_cells, X.shape[1], Y.shape[1])
    if threads > 1:
        import concurrent.futures as cf

        pool = cf.ThreadPoolExecutor(threads - 1)
        acc.use_threads(pool, threads)
    for s in range(0, X.shape[0], block):
        acc.add(
            X[s : s + block], Y[s : s + block], cells[s : s + block], None if w is None else w[s : s + block]
        )
    r = acc.result(n_cells, 1)
    return {
        k: np.asarray(getattr(r, k))[:, 0]
        for k in ("weight", "count", "mean_x", "mean_y", "sxx", "sxy", "syy")
    }


def rel(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def data(kind, m=6000, N=12, T=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((m, N)) @ (np.eye(N) + 0.3 * rng.standard_normal((N, N)))
    if kind == "offset":
        X += 1e6
    elif kind == "drift":  # a trend of 1e4 standard deviations along the rows, plus an offset
        X += 1e4 * np.linspace(0, 1, m)[:, None] + 1e5
    Y = X[:, :T] * 2.0 - 1.0 + rng.standard_normal((m, T))
    return X, Y


@pytest.mark.parametrize("kind", ["plain", "offset", "drift"])
@pytest.mark.parametrize("layout", ["one", "runs", "interleaved", "mixed"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_kernel_equals_reference(monkeypatch, kind, layout, weighted, dtype):
    # small tiles and few pending tile means: many tiles per cell run and many folds
    monkeypatch.setattr(kernel, "MIN_TILE_ROWS", 16)
    monkeypatch.setattr(kernel, "MAX_TILE_ROWS", 37)
    monkeypatch.setattr(kernel, "MAX_PENDING", 5)
    X, Y = data(kind)
    X = X.astype(dtype)  # the reference sees the same (rounded) values
    m = X.shape[0]
    rng = np.random.default_rng(1)
    n_cells = {"one": 1, "runs": 6, "interleaved": 7, "mixed": 9}[layout]
    if layout == "one":
        cells = np.zeros(m, dtype=np.int64)
    elif layout == "runs":
        cells = np.repeat(np.arange(6), m // 6)
    elif layout == "interleaved":
        cells = rng.integers(0, 7, m)
    else:  # contiguous runs in some blocks, interleaved in others, one cell never seen
        cells = np.where(np.arange(m) % 1000 < 500, np.arange(m) // 1000, rng.integers(0, 8, m))
    w = None
    if weighted:
        w = rng.random(m) * 3
        w[rng.random(m) < 0.1] = 0.0  # zero weights count as rows but not in the moments
        w[:40] = 0.0  # a whole tile of zero weights
    got = run(X, Y, cells, w, n_cells, block=997)
    ref = reference(X.astype(np.float64), Y, cells, w, n_cells)
    shared = run(X, Y, cells, w, n_cells, block=997, threads=3)  # threads taking the cells of each sub-block
    for k in got:
        assert np.array_equal(shared[k], got[k]), (
            k
        )  # bit for bit: each cell's rows are added in the same order
    assert np.array_equal(got["count"], ref["count"])
    np.testing.assert_allclose(got["weight"], ref["weight"], rtol=1e-13)
    for k in ("mean_x", "mean_y"):
        assert rel(got[k], ref[k]) < 1e-14, k
    for k in ("sxx", "sxy", "syy"):
        assert rel(got[k], ref[k]) < 1e-11, (k, rel(got[k], ref[k]))


@pytest.mark.parametrize("kind, tol", [("plain", 1e-13), ("offset", 1e-11)])
def test_kernel_independent_of_blocking(monkeypatch, kind, tol):
    """Sub-block size and tile size change the result by rounding only.

    With an offset of 1e6 the rounding of the inputs themselves is ~1e-10 of a
    unit-variance column: 8-row tiles then differ from one tile by ~5e-12.
    """
    X, Y = data(kind, m=5000)
    cells = np.random.default_rng(2).integers(0, 4, 5000)
    a = run(X, Y, cells, None, 4, block=5000)
    monkeypatch.setattr(kernel, "MIN_TILE_ROWS", 8)
    monkeypatch.setattr(kernel, "MAX_TILE_ROWS", 8)
    b = run(X, Y, cells, None, 4, block=123)
    for k in ("sxx", "sxy", "syy", "mean_x"):
        assert rel(a[k], b[k]) < tol, k


def test_raw_sums_would_fail_here():
    """The offset data really needs centering: raw sums of squares lose the co-moments entirely."""
    X, Y = data("offset", m=2000)
    raw = X.T @ X - 2000 * np.outer(X.mean(0), X.mean(0))
    ref = reference(X, Y, np.zeros(2000, dtype=np.int64), None, 1)["sxx"][0]
    assert rel(raw, ref) > 1e-3
    assert rel(run(X, Y, np.zeros(2000, dtype=np.int64), None, 1, 2000)["sxx"][0], ref) < 1e-12


@pytest.mark.parametrize("fallback", [False, True])
def test_blas_updates_in_place(monkeypatch, fallback):
    """syrk_upper / gemm_tn (ctypes BLAS, GIL released) and their NumPy fallback: upper triangle only, in place."""
    from streamridge import blas_nogil

    if fallback:
        monkeypatch.setattr(blas_nogil, "_dsyrk", None)
        monkeypatch.setattr(blas_nogil, "_dgemm", None)
    else:
        assert blas_nogil._dsyrk is not None and blas_nogil._dgemm is not None
    rng = np.random.default_rng(3)
    for k, n, t in ((130, 20, 3), (5, 7, 2), (1, 1, 1), (0, 4, 2)):
        A, B = rng.standard_normal((k, n)), rng.standard_normal((k, t))
        C = np.asfortranarray(rng.standard_normal((n, n)))
        C0 = C.copy()
        blas_nogil.syrk_upper(A, C)
        np.testing.assert_allclose(np.triu(C), np.triu(C0 + A.T @ A), rtol=1e-13, atol=1e-12)
        assert np.array_equal(np.tril(C, -1), np.tril(C0, -1))
        D = np.asfortranarray(rng.standard_normal((t, n)))
        D0 = D.copy()
        blas_nogil.gemm_tn(B, A, D)
        np.testing.assert_allclose(D, D0 + B.T @ A, rtol=1e-13, atol=1e-12)


def test_blas_updates_release_the_gil():
    """While syrk_upper runs, another Python thread keeps running.

    Measured: a pure-Python thread recording timestamps sees no gap longer than
    ~10 ms during a 0.13-0.3 s call of syrk_upper or NumPy's matmul, but a gap
    as long as the whole call during ``scipy.linalg.blas.dsyrk`` (which holds
    the GIL, so the pass's worker threads ran their BLAS one at a time).
    """
    from threadpoolctl import threadpool_limits

    from streamridge import blas_nogil
    from tests.scale_utils import gil_gap

    A = np.random.default_rng(0).standard_normal((3000, 800))
    C = np.zeros((800, 800), order="F")
    with threadpool_limits(1):
        gap, call = gil_gap(lambda: blas_nogil.syrk_upper(A, C))
    assert gap < 0.5 * call, (gap, call)


@pytest.mark.parametrize("n", [1, 2, 7, 63, 64, 65, 130, 300])
@pytest.mark.parametrize("block", [1, 16, 64, 512])
def test_mirror_lower_is_an_exact_copy(n, block):
    """Strip-wise mirroring (result()) gives the values of the full-matrix formula ``S + tril(S, -1).T``
    (a -0.0 below the diagonal is mirrored as -0.0 where the sum gave +0.0; equal as numbers)."""
    rng = np.random.default_rng(n)
    L = np.tril(rng.standard_normal((n, n)) * 10.0 ** rng.integers(-200, 200, (n, n)))
    L[np.tril(rng.random((n, n)) < 0.1)] = -0.0
    want = L + np.tril(L, -1).T
    S = L.copy()
    kernel.mirror_lower(S, block)
    assert np.array_equal(S, want)
    assert np.array_equal(S, S.T) and np.array_equal(np.signbit(S), np.signbit(S.T))


def test_result_mirrors_every_cell():
    """Many cells, N above the strip width: result() is symmetric and the lower triangle is unchanged."""
    rng = np.random.default_rng(4)
    X, Y = rng.standard_normal((900, 150)) + 1e3, rng.standard_normal((900, 1))
    cells = rng.integers(0, 6, 900)
    acc = CellAccumulator(6, 150, 1)
    acc.add(X, Y, cells)
    for c in list(acc._pending):
        acc._fold(c)
    lower = np.tril(acc.sxx).copy()
    S = acc.result(3, 2).sxx.reshape(6, 150, 150)
    assert np.array_equal(np.tril(S), lower)
    assert np.array_equal(S, np.transpose(S, (0, 2, 1)))


def test_cell_threads_take_different_cells_of_each_sub_block(monkeypatch):
    """The cells of a sub-block go to the threads largest first, each to the least loaded; every thread adds
    with its own tile buffers; ``add`` returns when all are done."""
    import concurrent.futures as cf
    import threading

    X, Y = data("offset", m=4000, N=20, T=2)
    cells = np.random.default_rng(5).integers(0, 8, 4000)
    seen: dict[int, set[str]] = {}
    buffers: dict[str, set[int]] = {}
    real = CellAccumulator._add_run

    def add_run(self, c, X, Y, idx, w, tiles=None):
        name = threading.current_thread().name
        seen.setdefault(c, set()).add(name)
        buffers.setdefault(name, set()).add(id((tiles or (self._bx,))[0]))
        return real(self, c, X, Y, idx, w, tiles)

    monkeypatch.setattr(CellAccumulator, "_add_run", add_run)
    acc = CellAccumulator(8, 20, 2)
    with cf.ThreadPoolExecutor(1, thread_name_prefix="cells") as pool:
        acc.use_threads(pool, 2)
        for s in range(0, 4000, 1000):
            acc.add(X[s : s + 1000], Y[s : s + 1000], cells[s : s + 1000])
    assert len(buffers) == 2 and all(len(ids) == 1 for ids in buffers.values())
    assert len(set.union(*buffers.values())) == 2  # a tile buffer per thread
    assert any(name.startswith("cells") for names in seen.values() for name in names)
    acc.use_threads(None, 1)
    alone = CellAccumulator(8, 20, 2)
    for s in range(0, 4000, 1000):
        alone.add(X[s : s + 1000], Y[s : s + 1000], cells[s : s + 1000])
    for k in ("weight", "count", "mean_x", "sxx", "sxy", "syy"):
        assert np.array_equal(getattr(acc.result(8, 1), k), getattr(alone.result(8, 1), k)), k
