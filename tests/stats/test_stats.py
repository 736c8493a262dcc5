"""Sufficient statistics: chunking invariance, Chan merge, large offsets, dtypes, files."""

from __future__ import annotations

import numpy as np
import pytest

from streamridge.datapass.driver import accumulate
from streamridge.datapass.spec import PassSpec
from streamridge.errors import IncompatibleStatsError, ModelFileError
from streamridge.folds.schemes import FoldScheme
from streamridge.stats.foldstats import FoldStats, load_stats, merge, merge_all, save_stats
from streamridge.stats.kernel import from_chunk
from tests.conftest import dask_source

FIELDS = ("weight", "mean_x", "mean_y", "sxx", "sxy", "syy")


def assert_stats_close(a: FoldStats, b: FoldStats, rtol: float) -> None:
    np.testing.assert_array_equal(a.count, b.count)
    for f in FIELDS:
        x, y = getattr(a, f), getattr(b, f)
        scale = max(np.abs(y).max(), 1e-300)
        assert np.abs(x - y).max() <= rtol * scale, (f, np.abs(x - y).max() / scale)


def direct_stats(X, Y, folds, K, w=None):
    """Slow reference: two-pass centered moments per fold, straight from the definition."""
    N, T = X.shape[1], Y.shape[1]
    out = FoldStats.zeros(K, 1, N, T)
    w = np.ones(len(X)) if w is None else w
    for k in range(K):
        m = folds == k
        Xk, Yk, wk = X[m].astype(np.float64), Y[m].astype(np.float64), w[m]
        W = wk.sum()
        mx, my = wk @ Xk / W, wk @ Yk / W
        Xc, Yc = Xk - mx, Yk - my
        out.weight[k, 0], out.count[k, 0] = W, m.sum()
        out.mean_x[k, 0], out.mean_y[k, 0] = mx, my
        out.sxx[k, 0] = (Xc * wk[:, None]).T @ Xc
        out.sxy[k, 0] = (Xc * wk[:, None]).T @ Yc
        out.syy[k, 0] = (wk[:, None] * Yc**2).sum(0)
    return out


@pytest.mark.parametrize("chunk_rows", [1, 7, 1000, None])
@pytest.mark.parametrize("weighted", [False, True])
def test_chunk_size_invariance(rng, chunk_rows, weighted):
    M, N, T, K = 1500, 6, 2, 5
    X = rng.standard_normal((M, N)) * rng.uniform(0.1, 10, N) + rng.uniform(-5, 5, N)
    Y = X @ rng.standard_normal((N, T)) + rng.standard_normal((M, T))
    w = rng.uniform(0, 3, M) if weighted else None
    scheme = FoldScheme("hash", K, seed=3)
    spec = PassSpec(scheme, None, T)
    rows = 1 if chunk_rows == 1 else chunk_rows
    src = dask_source(
        X[: 300 if rows == 1 else M],
        Y[: 300 if rows == 1 else M],
        sample_weight=None if w is None else w[: 300 if rows == 1 else M],
        chunk_rows=rows,
    )
    m = src.X.shape[0]
    got = accumulate(src, spec, scheduler="sync" if rows == 1 else None)
    ref = direct_stats(X[:m], Y[:m], scheme.assign(0, m), K, None if w is None else w[:m])
    assert_stats_close(got, ref, 1e-12)
    assert got.meta["rows_seen"] == m


def test_large_offset_keeps_accuracy(rng):
    # Z on a dyadic grid so that 1e6 + Z is exact in float64: the reference is Z's own moments
    M, N, K = 4000, 5, 4
    Z = np.round(rng.standard_normal((M, N)) * 2**20) / 2**20
    X = 1e6 + Z
    y = Z @ np.arange(1.0, N + 1) + np.round(rng.standard_normal(M) * 2**20) / 2**20
    spec = PassSpec(FoldScheme("hash", K), None, 1)
    got = accumulate(dask_source(X, y + 1e6, chunk_rows=333), spec)
    ref = accumulate(dask_source(Z, y, chunk_rows=333), spec)
    for f in ("sxx", "sxy", "syy"):
        rel = np.abs(getattr(got, f) - getattr(ref, f)).max() / np.abs(getattr(ref, f)).max()
        assert rel < 1e-9, (f, rel)
    np.testing.assert_allclose(got.mean_x - 1e6, ref.mean_x, atol=1e-9)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.int32, np.int64])
def test_input_dtypes_accumulate_in_float64(rng, dtype):
    X = (rng.standard_normal((200, 4)) * 8).astype(dtype)
    y = rng.standard_normal(200).astype(np.float32)
    spec = PassSpec(FoldScheme("hash", 3), None, 1)
    got = accumulate(dask_source(X, y, chunk_rows=64), spec)
    assert got.sxx.dtype == np.float64
    ref = direct_stats(X.astype(np.float64), y.astype(np.float64)[:, None], spec.scheme.assign(0, 200), 3)
    assert_stats_close(got, ref, 1e-12)


def test_merge_is_associative_and_has_identity(rng):
    K, N, T = 3, 4, 2
    parts = []
    for i in range(3):
        X = rng.standard_normal((50 + 10 * i, N)) + 100 * i
        Y = rng.standard_normal((50 + 10 * i, T))
        parts.append(from_chunk(X, Y, rng.integers(0, K, len(X)), None, K, 1))
    a, b, c = parts
    assert_stats_close(merge(merge(a, b), c), merge(a, merge(b, c)), 1e-13)
    assert_stats_close(merge(FoldStats.zeros(K, 1, N, T), a), a, 0)
    assert_stats_close(merge_all(parts), merge(merge(a, b), c), 1e-13)


def test_merge_refuses_other_problems(rng):
    a = from_chunk(rng.standard_normal((20, 3)), rng.standard_normal((20, 1)), np.zeros(20, int), None, 2, 1)
    b = from_chunk(rng.standard_normal((20, 4)), rng.standard_normal((20, 1)), np.zeros(20, int), None, 2, 1)
    with pytest.raises(IncompatibleStatsError, match="shapes"):
        merge(a, b)
    c = a.copy()
    a.meta["scheme"], c.meta["scheme"] = {"seed": 0}, {"seed": 1}
    with pytest.raises(IncompatibleStatsError, match="scheme"):
        merge(a, c)


def test_merge_names_what_differs_by_path(rng):
    """A scheme or feature map that differs is named by its parameter and both values, not cut short as a dict."""
    from streamridge.features import Concat, Delays, EchoStateNetwork, Nystroem, to_json

    a = from_chunk(rng.standard_normal((20, 2)), rng.standard_normal((20, 1)), np.zeros(20, int), None, 2, 1)
    c = a.copy()
    a.meta["scheme"] = FoldScheme("hash", 2, seed=0).to_dict()
    c.meta["scheme"] = FoldScheme("hash", 2, seed=3).to_dict()
    with pytest.raises(
        IncompatibleStatsError, match=r"^statistics differ in scheme: seed 0 vs 3; only statistics"
    ):
        merge(a, c)
    from streamridge.stats.json_diff import describe_difference

    esn = [to_json(EchoStateNetwork(30, seed=s, washout=w).fit_width(2)) for s, w in ((1, 0), (1, 9), (2, 9))]
    assert describe_difference(esn[0], esn[1]) == "washout 0 vs 9"
    assert describe_difference(esn[0], esn[2]) == "washout 0 vs 9, seed 1 vs 2"  # not the arrays seed changed
    both = [to_json(Concat([Delays(2), EchoStateNetwork(5, seed=s)]).fit_width(2)) for s in (1, 2)]
    assert describe_difference(*both) == "maps[1].seed 1 vs 2"
    fitted = [to_json(Nystroem(4, seed=0).fit(rng.standard_normal((50, 3)))) for _ in range(2)]
    expected = "basis_ (a fitted array) differs, normalization_ (a fitted array) differs"
    assert describe_difference(*fitted) == expected
    many = describe_difference({"a": 1, "b": 2, "c": 3, "d": 4}, {"a": 0, "b": 0, "c": 0, "d": 0})
    assert many == "a 1 vs 0, b 2 vs 0, c 3 vs 0 and 1 more"
    assert describe_difference(["x0", "x1"], ["x0", "y1"]) == "[1] 'x1' vs 'y1'"
    assert describe_difference({"seed": 1}, {}) == "seed 1 vs (absent)"


def test_save_load_roundtrip_without_pickle(rng, tmp_path):
    s = from_chunk(
        rng.standard_normal((30, 3)), rng.standard_normal((30, 2)), rng.integers(0, 3, 30), None, 3, 1
    )
    s.meta["scheme"] = FoldScheme("hash", 3, seed=7).to_dict()
    p = tmp_path / "s.npz"
    save_stats(s, p)
    with np.load(p, allow_pickle=False) as z:
        assert "sxx" in z.files
    t = load_stats(p)
    assert_stats_close(t, s, 0)
    assert t.meta["scheme"]["seed"] == 7
    assert list(tmp_path.iterdir()) == [p]  # no temporary file left behind


def test_save_and_load_hold_no_second_copy_of_the_statistics(rng, tmp_path):
    """Statistics of many targets (X'Y of 40 MB): writing streams them into the file (numpy writes an array
    in pieces of 16 MB) and reading puts each array straight into its own new array, so neither holds the
    file's bytes or a copy beside them."""
    import tracemalloc

    s = from_chunk(
        rng.standard_normal((40, 100)), rng.standard_normal((40, 10_000)), np.arange(40) % 5, None, 5, 1
    )
    s.meta["scheme"] = FoldScheme("hash", 5, seed=1).to_dict()
    total = sum(getattr(s, f).nbytes for f in FIELDS)
    p = tmp_path / "s.npz"
    tracemalloc.start()
    save_stats(s, p)
    _, saving = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    t = load_stats(p)
    _, loading = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert total > 40e6
    assert saving < 0.5 * total  # was the whole file in a buffer: > total
    assert loading < 1.2 * total  # was a second copy of every array: > 2 x total
    assert_stats_close(t, s, 0)


def test_load_errors(tmp_path):
    with pytest.raises(ModelFileError, match="does not exist"):
        load_stats(tmp_path / "nope.npz")
    bad = tmp_path / "bad.npz"
    np.savez(bad, a=np.zeros(3))
    with pytest.raises(ModelFileError, match="not a streamridge statistics file"):
        load_stats(bad)


def test_kernel_accumulates_in_place_without_cell_sized_temporaries() -> None:
    """200 cells, 20 sub-blocks: no K x C x N x N temporary per sub-block.

    The traced peak while adding (a few copies of one 0.4 MB sub-block) stays
    below half of the accumulator's N x N arrays (4 MB); allocating zeroed
    per-chunk statistics would cost the full 4 MB.
    """
    import tracemalloc

    from streamridge.stats.kernel import CellAccumulator

    rng = np.random.default_rng(0)
    n_cells, N = 200, 50
    blocks = [
        (rng.standard_normal((1000, N)), rng.standard_normal((1000, 1)), rng.integers(0, n_cells, 1000))
        for _ in range(20)
    ]
    acc = CellAccumulator(n_cells, N, 1)
    tracemalloc.start()
    try:
        for X, Y, cells in blocks:
            acc.add(X, Y, cells)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < acc.sxx.nbytes / 2, (peak, acc.sxx.nbytes)
    # and the result equals a direct computation per cell
    X = np.concatenate([b[0] for b in blocks])
    cells = np.concatenate([b[2] for b in blocks])
    out = acc.result(n_cells, 1)
    for c in (0, 17, 199):
        Xc = X[cells == c] - X[cells == c].mean(axis=0)
        np.testing.assert_allclose(out.sxx[c, 0], Xc.T @ Xc, rtol=1e-12, atol=1e-10)


@pytest.mark.parametrize(
    "shape", [(3, 2, 7, 7), (2, 1, 300, 4), (1, 1, 1, 1), (40, 1, 5, 5), (2, 3, 130, 130)]
)
@pytest.mark.parametrize("piece", [8, 512, 2**20])
def test_merge_outer_term_in_pieces_has_the_bits_of_the_broadcast(shape, piece):
    """merge() adds n_a n_b / n * delta delta' in cache-sized pieces: bit for bit the one-line broadcast,
    which made a temporary as large as Sxx (800 MB at 10 x 10 cells, N = 1000)."""
    from streamridge.stats.foldstats import _add_outer

    rng = np.random.default_rng(sum(shape) + piece)
    S = rng.standard_normal(shape) * 1e3
    u, v = rng.standard_normal(shape[:-1]), rng.standard_normal((*shape[:-2], shape[-1])) * 1e-3
    want = S + u[..., :, None] * v[..., None, :]
    _add_outer(S, u, v, piece)
    assert np.array_equal(S, want)
