"""The pass reads every stored chunk once, whatever the layout; plans are O(1); budgets are checked.

A counting zarr store (a :class:`zarr.storage.WrapperStore` counting reads per
key) proves that each stored chunk of X, y, groups and sample_weight is read
exactly once by a pass, for layouts where the chunks of the 1-D arrays differ
from X's, where stored chunks are larger than the memory budget, and for
sharded Zarr v3.
"""

from __future__ import annotations

import collections
import dataclasses
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from zarr.storage import LocalStore, WrapperStore

from streamridge.datapass.driver import PassReport, accumulate
from streamridge.datapass.partition_task import read_blocks
from streamridge.datapass.partitions import LargeChunkWarning, Plan, plan_pass, task_plan
from streamridge.datapass.spec import PassSpec
from streamridge.datapass.stats_kernel import chunk_task
from streamridge.errors import InputError
from streamridge.folds.schemes import FoldScheme
from streamridge.sources import open_source
from streamridge.sources._memory import NumpyReader
from streamridge.sources._protocol import ArrayReader, RowGrid
from tests.scale_utils import assert_stats_close

M, N = 3000, 6


class CountingStore(WrapperStore[Any]):
    """Counts ``get`` calls per key (metadata keys included; tests look at chunk keys)."""

    def __init__(self, store: Any) -> None:
        super().__init__(store)
        self.reads: collections.Counter[str] = collections.Counter()

    async def get(self, key: str, prototype: Any, byte_range: Any = None) -> Any:
        self.reads[key if byte_range is None else f"{key}@{byte_range}"] += 1
        return await self._store.get(key, prototype, byte_range)

    def chunk_reads(self, array: str) -> collections.Counter[str]:
        """Reads of the stored chunk (or shard) keys of one array."""
        return collections.Counter(
            {
                k: v
                for k, v in self.reads.items()
                if k.startswith(f"{array}/c/") or k.startswith(f"{array}/c@")
            }
        )


def _write(
    path: Path, rng: np.random.Generator, chunks: dict[str, int], shards: int | None = None
) -> dict[str, np.ndarray]:
    data = {
        "X": (rng.standard_normal((M, N)) + 1e3).astype(np.float32),
        "y": rng.standard_normal(M),
        "groups": rng.integers(0, 9, M),
        "sample_weight": rng.uniform(0.5, 2.0, M),
    }
    root = zarr.open_group(LocalStore(path), mode="w", zarr_format=3)
    for name, a in data.items():
        rows = chunks[name]
        kw: dict[str, Any] = {}
        if shards is not None and name == "X":
            kw["shards"] = (shards, N)
        arr = root.create_array(name, shape=a.shape, dtype=a.dtype, chunks=(rows, *a.shape[1:]), **kw)
        arr[...] = a
    return data


def _counted_pass(path: Path, **kwargs: Any) -> tuple[Any, CountingStore]:
    store = CountingStore(LocalStore(path, read_only=True))
    group = zarr.open_group(store, mode="r")
    rows = kwargs.pop("chunk_rows", None)
    src = open_source(group, groups="groups", sample_weight="sample_weight", chunk_rows=rows)
    store.reads.clear()
    stats = accumulate(
        src, PassSpec(FoldScheme("group", 3), None, 1), scheduler="threads", partition_rows=rows, **kwargs
    )
    return stats, store


def _reference(data: dict[str, np.ndarray]) -> Any:
    return chunk_task(
        data["X"],
        data["y"],
        data["groups"],
        data["sample_weight"],
        0,
        PassSpec(FoldScheme("group", 3), None, 1),
    )


LAYOUTS = {
    "same chunks": {"X": 250, "y": 250, "groups": 250, "sample_weight": 250},
    "1-D arrays in larger chunks": {"X": 200, "y": 1000, "groups": 600, "sample_weight": 3000},
    "1-D arrays in smaller chunks": {"X": 500, "y": 100, "groups": 125, "sample_weight": 250},
}
RAGGED = {"X": 300, "y": 450, "groups": 700, "sample_weight": 100}  # common multiple 6300 > M


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("chunk_rows", [None, 1, 900])
def test_every_stored_chunk_read_once(tmp_path: Path, layout: str, chunk_rows: int | None) -> None:
    chunks = LAYOUTS[layout]
    data = _write(tmp_path / "d.zarr", np.random.default_rng(0), chunks)
    stats, store = _counted_pass(tmp_path / "d.zarr", chunk_rows=chunk_rows)
    for name, rows in chunks.items():
        reads = store.chunk_reads(name)
        assert len(reads) == -(-M // rows), (name, reads)
        assert set(reads.values()) == {1}, (name, layout, {k: v for k, v in reads.items() if v > 1})
    assert_stats_close(stats, _reference(data), rtol=1e-11)


def test_ragged_chunkings(tmp_path: Path) -> None:
    """Chunkings without a common boundary within reach.

    With the default partition size (64 MB) every chunk is read once.  When
    partitions of one stored chunk of X are asked for (chunk_rows=1), X is still
    read once and a stored chunk of a 1-D array is read once by each partition
    it overlaps (never twice by the same partition).
    """
    data = _write(tmp_path / "d.zarr", np.random.default_rng(0), RAGGED)
    stats, store = _counted_pass(tmp_path / "d.zarr")
    for name in RAGGED:
        assert set(store.chunk_reads(name).values()) == {1}, name
    stats, store = _counted_pass(tmp_path / "d.zarr", chunk_rows=1)
    assert set(store.chunk_reads("X").values()) == {1}
    for name in ("y", "groups", "sample_weight"):
        rows = RAGGED[name]
        for key, count in store.chunk_reads(name).items():
            k = int(key.rsplit("/", 1)[1])
            first, last = k * rows, min(M, (k + 1) * rows) - 1
            assert count == last // 300 - first // 300 + 1, (name, key, count)
    assert_stats_close(stats, _reference(data), rtol=1e-11)


def test_stored_chunks_larger_than_the_budget(tmp_path: Path) -> None:
    """A 1500-row chunk with a read budget of ~1000 rows: read once (warning naming its size), sub-blocked."""
    chunks = {"X": 1500, "y": 1500, "groups": 3000, "sample_weight": 1500}
    data = _write(tmp_path / "d.zarr", np.random.default_rng(1), chunks)
    spec_bytes = 8 * 3 * (N * N + N + N + 2 + 2)
    budget = 4 * spec_bytes + 4 * 8 * N * 1000  # read budget: 1000 rows of float64
    report = PassReport()
    with pytest.warns(LargeChunkWarning, match=r"hold 1500 rows \(0\.1 MiB as float64\)"):
        stats, store = _counted_pass(tmp_path / "d.zarr", memory_budget=budget, report=report)
    for name in chunks:
        assert set(store.chunk_reads(name).values()) == {1}, name
    assert report.extra["sub_rows"] <= 1000
    assert_stats_close(stats, _reference(data), rtol=1e-11)


@pytest.mark.parametrize(("target", "parts"), [(400, 1), (100, 10)])
def test_dask_views_decode_each_stored_chunk_once(tmp_path: Path, target: int, parts: int) -> None:
    """Stored chunks of 1000 rows, larger than the views' target (``target`` rows: a budget of 8 such row
    chunks as float64).  Within half the budget (target 400) they are whole chunks of the dask views, so
    what streams the views (the metric pass of ``scoring=``, feature-map lanes, user code) decodes each
    once; beyond it (target 100) they are split in 10 parts, each decoding the chunk."""
    chunks = {"X": 1000, "y": 1000, "groups": 1000, "sample_weight": 1000}
    data = _write(tmp_path / "d.zarr", np.random.default_rng(2), chunks)
    store = CountingStore(LocalStore(tmp_path / "d.zarr", read_only=True))
    src = open_source(zarr.open_group(store, mode="r"), memory_budget=target * 8 * (8 * N))
    assert src.row_chunks() == (1000 // parts,) * (3 * parts)
    store.reads.clear()
    np.testing.assert_array_equal(src.X.compute(scheduler="threads"), data["X"])
    assert store.chunk_reads("X") == {f"X/c/{k}/0": parts for k in range(3)}


@pytest.mark.parametrize("layout", [*LAYOUTS, "beyond the budget"])
def test_metric_pass_reads_every_stored_chunk_once(tmp_path: Path, layout: str) -> None:
    """The metric pass (``scoring=``, nested CV) runs on the statistics pass's partitions: each stored chunk
    of X, y, groups and weights is read once, stored chunks beyond the budget too (the dask views cut
    those, each part decoding the chunk up to its rows), without a second warning;
    the tally equals that of the rows in memory."""
    from streamridge.forms.build import build_forms
    from streamridge.model_selection.metric_pass import _tally_bytes, make_plan, metric_pass, tally_rows

    chunks = LAYOUTS.get(layout, {"X": 1500, "y": 1500, "groups": 3000, "sample_weight": 1500})
    data = _write(tmp_path / "d.zarr", np.random.default_rng(3), chunks)
    spec = PassSpec(FoldScheme("group", 3), None, 1)
    stats = _reference(data)
    forms = build_forms(stats, fit_intercept=True, standardize=False, balanced=False)
    plan = make_plan(stats, forms, np.logspace(-2, 2, 5), [np.ones(N, bool)], n_classes=0, auc=False)
    budget = 4 * _tally_bytes(plan.empty()) + 4 * 8 * N * 1000 if layout == "beyond the budget" else None
    store = CountingStore(LocalStore(tmp_path / "d.zarr", read_only=True))
    src = open_source(
        zarr.open_group(store, mode="r"),
        groups="groups",
        sample_weight="sample_weight",
        **({} if budget is None else {"memory_budget": budget}),
    )
    store.reads.clear()
    done: list[int] = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", LargeChunkWarning)
        tally = metric_pass(src, spec, plan, scheduler="threads", memory_budget=budget, progress=done.append)
    assert sum(done) == M and len(done) >= 1  # rows reported per partition
    for name, rows in chunks.items():
        reads = store.chunk_reads(name)
        assert len(reads) == -(-M // rows) and set(reads.values()) == {1}, (name, reads)
    ref = plan.empty()
    tally_rows(ref, data["X"], data["y"], data["groups"], data["sample_weight"], 0, spec, plan)
    for field in dataclasses.fields(ref):
        np.testing.assert_allclose(
            getattr(tally, field.name), getattr(ref, field.name), rtol=1e-11, err_msg=field.name
        )


def test_cli_prints_warnings_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    import warnings as w

    from streamridge.cli import _show_one_line

    _show_one_line(LargeChunkWarning("stored chunks of X hold 9 rows"), LargeChunkWarning, "f.py", 3)
    assert capsys.readouterr().err == "streamridge: warning: stored chunks of X hold 9 rows\n"
    assert w.showwarning is not _show_one_line  # main() restores it on return


def test_sharded_zarr_reads_each_inner_chunk_once(tmp_path: Path) -> None:
    """Sharded X (shards of 1000 rows, inner chunks of 100): partitions align to shards, each byte range read once."""
    chunks = {"X": 100, "y": 500, "groups": 1000, "sample_weight": 250}
    data = _write(tmp_path / "d.zarr", np.random.default_rng(2), chunks, shards=1000)
    stats, store = _counted_pass(tmp_path / "d.zarr", chunk_rows=500)
    x_reads = store.chunk_reads("X")
    assert x_reads and set(x_reads.values()) == {1}, x_reads
    for name in ("y", "groups", "sample_weight"):
        assert set(store.chunk_reads(name).values()) == {1}, name
    assert_stats_close(stats, _reference(data), rtol=1e-11)


def test_budget_too_small_for_the_statistics(tmp_path: Path) -> None:
    X = np.zeros((100, 50))
    spec = PassSpec(FoldScheme("hash", 10), None, 1)
    need = 8 * 10 * (50 * 50 + 50 + 50 + 2 + 2) * 4
    with pytest.raises(
        InputError, match=rf"statistics need {need / 2**20:.1f} MiB per task .* memory budget is 0\.5 MiB"
    ) as info:
        accumulate(open_source(X, y=np.zeros(100)), spec, memory_budget=2**19)
    assert "\n" not in str(info.value)


class _Declared(ArrayReader):
    """An array that declares a shape without data (like a huge lazily-created store)."""

    def __init__(self, shape: tuple[int, ...], step: int) -> None:
        super().__init__()
        self.shape, self.dtype, self.step = shape, np.dtype(np.float32), step

    def grid(self) -> RowGrid:
        return RowGrid(self.shape[0], step=self.step)


class _TooManyLines(AssertionError):
    """Raised inside the code under test once it has run more Python lines than allowed."""


def _lines_run(fn: Callable[[], Any], limit: int) -> tuple[Any, int]:
    """``fn()`` and the number of Python lines it ran in this thread.

    A count, not a time: the same on a busy machine.  Past ``limit`` lines the
    code under test is stopped with :class:`_TooManyLines`, so work that grows
    with the rows fails at once instead of hanging the suite.
    """
    count = 0

    def local(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
            if count > limit:
                raise _TooManyLines(f"more than {limit} lines run")
        return local

    previous = sys.gettrace()
    sys.settrace(lambda frame, event, arg: local)
    try:
        result = fn()
    finally:
        sys.settrace(previous)
    return result, count


def _declared_plan(n_rows: int) -> Plan:
    readers = {
        "X": _Declared((n_rows, 100), 1),
        "y": _Declared((n_rows,), 7),
        "groups": None,
        "sample_weight": None,
    }
    return plan_pass(readers, 0, n_rows, n_cells=5, stats_bytes=10**6, memory_budget=2**30)


def test_plans_are_constant_memory() -> None:
    """1e12 rows in 1-row chunks plan as a step, not a list: the same lines run as for 1e9 rows."""
    small, lines_small = _lines_run(lambda: _declared_plan(10**9), limit=5000)
    plan, lines = _lines_run(lambda: _declared_plan(10**12), limit=5000)
    assert lines == lines_small
    assert len(small) == -(-(10**9) // small.step)
    assert isinstance(plan, Plan) and plan.bounds is None
    assert len(plan) == -(-(10**12) // plan.step)
    assert plan.rows(len(plan) - 1)[1] == 10**12
    assert plan.step % 7 == 0


def test_huge_declared_shape_is_refused_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 1e12 x 1e6 zarr array is refused when opened, naming the size: only its metadata is read,
    each file once, no stored chunk, no listing."""
    zarr.create_array(tmp_path / "huge.zarr", shape=(10**12, 10**6), chunks=(1000, 1000), dtype="f4")
    calls: collections.Counter[str] = collections.Counter()
    for method in ("get", "get_partial_values", "exists", "getsize", "list", "list_prefix", "list_dir"):
        original = getattr(LocalStore, method)

        def counted(
            self: Any, *args: Any, _original: Any = original, _method: str = method, **kw: Any
        ) -> Any:
            calls[f"{_method} {args[0] if args else ''}"] += 1
            return _original(self, *args, **kw)

        monkeypatch.setattr(LocalStore, method, counted)
    with pytest.raises(InputError, match=r"statistics need at least 8 TB"):
        _lines_run(lambda: open_source(str(tmp_path / "huge.zarr"), y=None, require_y=False), limit=100_000)
    assert calls and set(calls.values()) == {1}, calls
    assert {c.split(" ")[0] for c in calls} == {"get"}, calls
    assert {c.split(" ")[1] for c in calls} <= {"zarr.json", ".zarray", ".zattrs", ".zgroup"}, calls


def test_plan_rows_cover_every_row_once() -> None:
    for lo, hi, step in [(0, 10, 5), (3, 10, 5), (5, 10, 5), (0, 1, 7), (13, 100, 7)]:
        plan = Plan(lo, hi, step, None, 1, 1)
        rows = [plan.rows(i) for i in range(len(plan))]
        assert rows[0][0] == lo and rows[-1][1] == hi
        assert all(a < b for a, b in rows) and all(rows[i][1] == rows[i + 1][0] for i in range(len(rows) - 1))


@pytest.mark.parametrize("chunk_rows", [1, 7, 250, 1000, 2999])
def test_partition_sizes_agree_to_1e12(chunk_rows: int) -> None:
    """Data with an offset of 3 (with 1e6, means carry an absolute error of ulp(1e6) ~ 1e-10, and the
    Chan term of merges of different partitions differ by ~1e-11 relative: test_stats checks that case
    against a two-pass reference)."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((3000, 8)) + 3.0
    y = X @ rng.standard_normal(8) + rng.standard_normal(3000)
    spec = PassSpec(FoldScheme("hash", 5), None, 1)
    ref = accumulate(open_source(X, y=y, chunk_rows=3000), spec, scheduler="sync", partition_rows=3000)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = accumulate(
            open_source(X, y=y, chunk_rows=chunk_rows), spec, scheduler="threads", partition_rows=chunk_rows
        )
    assert_stats_close(got, ref, rtol=1e-12)


def test_contiguous_hdf5_irregular_dask_and_npy(tmp_path: Path) -> None:
    """Storage without chunks (contiguous HDF5, .npy) and irregular dask chunks give the in-memory statistics."""
    import dask.array as da
    import h5py

    rng = np.random.default_rng(4)
    data = {
        "X": rng.standard_normal((M, N)).astype(np.float32),
        "y": rng.standard_normal(M),
        "groups": rng.integers(0, 9, M),
        "sample_weight": rng.uniform(0.5, 2.0, M),
    }
    ref = _reference(data)
    spec = PassSpec(FoldScheme("group", 3), None, 1)
    with h5py.File(tmp_path / "c.h5", "w") as f:
        for name, a in data.items():
            f.create_dataset(name, data=a)  # contiguous: no chunks
    for name, a in data.items():
        np.save(tmp_path / f"{name}.npy", a)
    irregular = (700, 13, 1287, 1000)
    sources = {
        "hdf5 contiguous": open_source(
            str(tmp_path / "c.h5"), groups="groups", sample_weight="sample_weight", chunk_rows=800
        ),
        "npy": open_source(str(tmp_path), groups="groups", sample_weight="sample_weight", chunk_rows=800),
        "irregular dask": open_source(
            da.from_array(data["X"], chunks=(irregular, N)),
            y=da.from_array(data["y"], chunks=(irregular,)),
            groups=data["groups"],
            sample_weight=da.from_array(data["sample_weight"], chunks=((1500, 1500),)),
            chunk_rows=800,
        ),
    }
    for what, source in sources.items():
        report = PassReport()
        got = accumulate(source, spec, scheduler="threads", report=report, partition_rows=800)
        assert report.extra["partitions"] > 1, what
        assert_stats_close(got, ref, rtol=1e-11)


def test_many_cells_get_large_partitions() -> None:
    """Partitions hold >= ROWS_PER_CELL rows per cell: with 10 x 10 cells at N = 1000 a partition's fixed cost
    (zeroing, symmetrizing, merging 800 MB of statistics) was as large as its updates (pass 2.4x read + stats)."""
    from streamridge.datapass.partitions import PARTITION_BYTES, ROWS_PER_CELL

    readers = {"X": _Declared((10**7, 1000), 1000), "y": None, "groups": None, "sample_weight": None}
    few = plan_pass(readers, 0, 10**7, n_cells=5, stats_bytes=8 * 5 * 10**6, memory_budget=2**33)
    many = plan_pass(readers, 0, 10**7, n_cells=100, stats_bytes=8 * 100 * 10**6, memory_budget=2**33)
    assert few.step == PARTITION_BYTES // 4000 // 1000 * 1000
    assert many.step == ROWS_PER_CELL * 100 // 1000 * 1000  # whole stored chunks


def test_result_is_symmetric_and_matches_numpy() -> None:
    """The lower triangle is mirrored into the (still zero) upper one exactly, cell by cell."""
    from streamridge.stats.kernel import CellAccumulator

    rng = np.random.default_rng(3)
    X, Y = rng.standard_normal((300, 7)) + 1e6, rng.standard_normal((300, 2))
    cells = rng.integers(0, 6, 300)
    acc = CellAccumulator(6, 7, 2)
    acc.add(X[:150], Y[:150], cells[:150])
    acc.add(X[150:], Y[150:], cells[150:])
    st = acc.result(3, 2)
    for c in range(6):
        Xc = X[cells == c] - X[cells == c].mean(axis=0)
        S = st.sxx.reshape(6, 7, 7)[c]
        np.testing.assert_array_equal(S, S.T)
        np.testing.assert_allclose(S, Xc.T @ Xc, rtol=1e-9, atol=1e-6)


@pytest.mark.parametrize(
    "rows, chunk, n_expected",
    [
        (100_000, 1, 2),  # 2.1 partitions of ~47k rows (the last a stub of 6k) -> 2 equal ones
        (100_000, 1000, 2),  # ... in whole stored chunks
        (100_000, 1024, 2),  # ... the rows past the last whole chunk in the last partition (49,152 + 50,848)
        (150_000, 1000, 4),  # 3.2 -> 3 -> 4 equal ones
        (40_000, 1, 2),  # one partition of 32 MB or more -> 2, so two workers both have one
        (3_000, 1, 1),  # small data: one partition
        (10**7, 1000, None),  # many partitions: left as planned
    ],
)
def test_few_partitions_are_balanced(rows: int, chunk: int, n_expected: int | None) -> None:
    """A handful of partitions become an even number of equal ones (in whole stored chunks).

    Measured before (M = 100,000 x N = 200 float64, 23 group folds): partitions of 47,104, 47,104 and
    5,792 rows on 2 threads; the plan is a function of the data only, never of the worker count.
    """
    from streamridge.datapass.partitions import BALANCE_BELOW

    X = _Declared((rows, 200), chunk)
    X.dtype = np.dtype(np.float64)
    readers = {"X": X, "y": None, "groups": None, "sample_weight": None}
    plan = plan_pass(readers, 0, rows, n_cells=23, stats_bytes=8 * 23 * 200 * 200, memory_budget=2**31)
    sizes = [b - a for a, b in (plan.rows(i) for i in range(len(plan)))]
    assert sum(sizes) == rows
    if n_expected is None:
        assert len(plan) >= BALANCE_BELOW
        return
    assert len(plan) == n_expected, sizes
    assert max(sizes) - min(sizes) <= 2 * chunk, sizes
    assert all(plan.rows(i)[0] % chunk == 0 for i in range(len(plan)))  # boundaries at stored chunks


def test_partition_rows_asked_for_are_kept() -> None:
    readers = {"X": _Declared((10_000, 10), 100), "y": None, "groups": None, "sample_weight": None}
    plan = plan_pass(
        readers, 0, 10_000, n_cells=1, stats_bytes=10**4, memory_budget=2**30, partition_rows=2_450
    )
    assert plan.step == 2_400 and len(plan) == 5


def test_task_plan_reads_ahead_only_where_a_core_idles() -> None:
    plan = Plan(0, 100, 10, None, 5, 5, prefetch=True)
    ahead = [
        [i for i in range(first, n) if task_plan(plan, i, first, n, w).prefetch]
        for first, n, w in [(0, 5, 2), (0, 4, 2), (0, 1, 2), (0, 7, 4), (2, 5, 2), (0, 5, 1)]
    ]
    assert ahead == [[4], [], [0], [4, 5, 6], [4], []]
    assert not task_plan(dataclasses.replace(plan, prefetch=False), 0, 0, 1, 2).prefetch
    bound = dataclasses.replace(plan, read_bound=True)  # reads as slow as the statistics: ahead in every wave
    assert [i for i in range(5) if task_plan(bound, i, 0, 5, 2).prefetch] == [0, 1, 2, 3, 4]
    assert not any(
        task_plan(bound, i, 0, 5, 1).prefetch for i in range(5)
    )  # one worker (sync): no read thread
    assert not task_plan(dataclasses.replace(bound, prefetch=False), 0, 0, 5, 2).prefetch


@pytest.mark.parametrize(
    ("first", "n", "workers", "local", "n_cells", "expected"),
    [
        (0, 1, 2, True, 100, [2]),  # one partition of 10 x 10 cells: both cores share its cells
        (0, 1, 4, True, 100, [4]),
        (0, 3, 2, True, 100, [1, 1, 2]),  # the last task runs alone
        (0, 4, 2, True, 100, [1, 1, 1, 1]),
        (1, 4, 2, True, 100, [1, 1, 1, 2][1:]),  # resumed at partition 1: waves of the 3 left
        (0, 5, 4, True, 100, [1, 1, 1, 1, 4]),
        (0, 1, 2, False, 100, [1]),  # a cluster's workers keep one thread each
        (0, 1, 2, True, 3, [1]),  # fewer than two cells per thread
        (0, 1, 1, True, 100, [1]),  # one worker
    ],
)
def test_cell_threads_take_the_cores_a_wave_leaves_idle(
    first: int, n: int, workers: int, local: bool, n_cells: int, expected: list[int]
) -> None:
    plan = Plan(0, 100, 10, None, 5, 5, prefetch=True, share_cells=n_cells)
    got = [task_plan(plan, i, first, n, workers, local=local).cell_threads for i in range(first, n)]
    assert got == expected
    lanes = dataclasses.replace(plan, lanes=2)  # two accumulators already use two threads
    assert task_plan(lanes, n - 1, first, n, workers, local=local).cell_threads == 1


@pytest.mark.parametrize(
    ("bounds", "workers", "local", "expected"),
    [
        (
            [0, 78, 100],
            2,
            True,
            [2, 1],
        ),  # a 400 MB stored chunk and a 112 MB one: the large one takes both cores
        ([0, 22, 100], 2, True, [1, 2]),
        ([0, 50, 100], 2, True, [1, 1]),
        ([0, 60, 80, 100], 4, True, [2, 1, 1]),  # base 4 // 3 = 1 thread each; 60% of 4 cores: 2
        ([0, 90, 100], 4, True, [4, 1]),  # the base gives the 2-task wave 2 threads each; 90% of 4: 4
        ([0, 78, 100], 2, False, [1, 1]),  # a cluster's workers keep one thread each
        ([0, 30, 55, 78, 100], 2, True, [1, 1, 1, 1]),  # more than one wave: as before
    ],
)
def test_cell_threads_follow_the_rows_of_a_single_wave_of_unequal_partitions(
    bounds: list[int], workers: int, local: bool, expected: list[int]
) -> None:
    """Two partitions of very unequal size on two threads (zarr-400mb, N = 1000 at 512 MB: 400 MB and 112 MB
    chunks) ran 2.89 s against 2.08 s for the statistics alone, one core idle once the small one ended."""
    plan = Plan(0, 100, 10, bounds, 5, 5, prefetch=True, share_cells=100)
    n = len(bounds) - 1
    assert [task_plan(plan, i, 0, n, workers, local=local).cell_threads for i in range(n)] == expected


def _cell_thread_names(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """Names of the threads that add cells' runs from now on, on a machine of 2 cores."""
    import threading

    from streamridge.stats.kernel import CellAccumulator

    names: set[str] = set()
    real = CellAccumulator._add_run

    def add_run(self: Any, *args: Any, **kw: Any) -> None:
        names.add(threading.current_thread().name)
        real(self, *args, **kw)

    monkeypatch.setattr(CellAccumulator, "_add_run", add_run)
    monkeypatch.setattr("streamridge.datapass.scheduling.n_cpus", lambda: 2)
    return names


def test_a_large_and_a_small_partition_share_the_cores_with_the_same_statistics(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(9)
    M, N = 4000, 120
    X = rng.normal(size=(M, N)) + 1e6
    y = X[:, :3] @ np.array([1.0, -2.0, 0.5]) + rng.normal(size=M)
    spec = PassSpec(FoldScheme("hash", 5), None, 1)
    names = _cell_thread_names(monkeypatch)
    src = open_source(X, y=y, chunk_rows=3200)  # stored chunks of 3,200 and 800 rows: two partitions
    shared = accumulate(src, spec, scheduler="threads", partition_rows=3200)
    assert any(name.startswith("streamridge-cells") for name in names), names
    one = accumulate(src, spec, scheduler="sync", partition_rows=3200)
    for name in ("count", "weight", "mean_x", "mean_y", "sxx", "sxy", "syy"):
        np.testing.assert_array_equal(getattr(shared, name), getattr(one, name))


@pytest.mark.parametrize(
    ("n_features", "n_cells", "shared"),
    [(50, 100, 0), (99, 100, 0), (100, 100, 100), (1000, 100, 100), (200, 3, 0), (200, 10, 10)],
)
def test_cells_are_shared_from_100_features(n_features: int, n_cells: int, shared: int) -> None:
    """Below 100 features a cell's run in a sub-block is too little BLAS work for a thread of its own
    (scripts/bench_cells.py: 10 x 10 cells at N = 50, 0.98-1.39x one thread's time)."""
    X = _Declared((100_000, n_features), 1_000)
    readers = {"X": X, "y": None, "groups": None, "sample_weight": None}
    plan = plan_pass(
        readers, 0, 100_000, n_cells=n_cells, stats_bytes=8 * n_cells * n_features**2, memory_budget=2**34
    )
    assert plan.share_cells == shared


def test_one_partition_of_many_cells_uses_both_cores_with_the_same_statistics(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """10 x 10 cells at N = 200 over 128 MB plan one partition: its cells are shared by two threads (it used one
    core: 0.20 s against 0.13 s measured), and the statistics equal one thread's bit for bit."""
    rng = np.random.default_rng(8)
    M, N = 3000, 100
    X = rng.normal(size=(M, N)) + 1e6
    y = rng.integers(0, 10, M).astype(float)
    w = rng.uniform(0.5, 2, M)
    spec = PassSpec(FoldScheme("hash", 10), tuple(float(c) for c in range(10)), 10)
    names = _cell_thread_names(monkeypatch)
    src = open_source(X, y=y, sample_weight=w, chunk_rows=M)  # one partition
    shared = accumulate(src, spec, scheduler="threads", partition_rows=M)
    assert any(name.startswith("streamridge-cells") for name in names), names
    names.clear()
    one = accumulate(src, spec, scheduler="sync", partition_rows=M)
    assert not any(name.startswith("streamridge-cells") for name in names)
    for name in ("count", "weight", "mean_x", "mean_y", "sxx", "sxy", "syy"):
        np.testing.assert_array_equal(getattr(shared, name), getattr(one, name))


def test_remote_data_are_read_ahead_by_every_task_on_every_scheduler() -> None:
    """A read over a network mostly waits: reading ahead hides the wait even with one worker."""
    X = _Declared((100_000, 1000), 1_000)  # not read-bound, and not a reader that decodes outside the GIL
    X.dtype = np.dtype(np.float64)
    readers = {"X": X, "y": None, "groups": None, "sample_weight": None}
    args = {"n_cells": 100, "stats_bytes": 8 * 100 * 1000**2, "memory_budget": 2**34}
    local = plan_pass(readers, 0, 100_000, **args)
    assert not local.remote and not local.prefetch and not local.read_bound
    X.remote = True
    remote = plan_pass(readers, 0, 100_000, **args)
    assert remote.remote and remote.prefetch
    assert all(task_plan(remote, i, 0, 5, w).prefetch for i in range(5) for w in (1, 2))
    y = _Declared((100_000,), 1_000)
    y.remote = True  # any array over a network counts
    X.remote = False
    assert plan_pass({**readers, "y": y}, 0, 100_000, **args).remote


def test_remote_1d_arrays_are_read_beside_x(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over a network a block's y, groups and weights are fetched on a thread of their own while X is fetched
    (one round trip per block, not two), and the statistics are the same."""
    import threading

    from streamridge.datapass.partition_task import _sub_blocks

    rng = np.random.default_rng(3)
    X, y = rng.normal(size=(3000, N)), rng.normal(size=3000)
    readers = {"X": NumpyReader(X), "y": NumpyReader(y), "groups": None, "sample_weight": None}
    plan = Plan(0, 3000, 3000, None, 1000, 250, prefetch=False)
    where: dict[str, set[str]] = {"X": set(), "y": set()}
    both = threading.Barrier(2, timeout=5)  # X's read waits for y's: they must run at once
    real = NumpyReader.read

    def read(self: Any, start: int, stop: int) -> np.ndarray:
        role = "X" if self.array.ndim == 2 else "y"
        where[role].add(threading.current_thread().name)
        if plan_used.remote:
            both.wait()
        return real(self, start, stop)

    monkeypatch.setattr(NumpyReader, "read", read)
    got = {}
    for remote in (False, True):
        plan_used = dataclasses.replace(plan, remote=remote)
        got[remote] = [
            (b[0].copy(), b[1].copy())
            for blocks in _sub_blocks(readers, 0, 3000, plan_used, 0)
            for b in blocks
        ]
    assert any(name.startswith("streamridge-read-1d") for name in where["y"])
    assert not any(name.startswith("streamridge-read-1d") for name in where["X"])
    for (xa, ya), (xb, yb) in zip(got[False], got[True]):
        np.testing.assert_array_equal(xa, xb)
        np.testing.assert_array_equal(ya, yb)
    assert len(got[True]) == 12


class _DeclaredPieces(_Declared):
    """A declared array whose stored chunks decode in pieces outside the GIL (as zstd zarr chunks)."""

    overlap_reads = True

    def stream_codec(self) -> str:
        return "zstd"


@pytest.mark.parametrize(
    ("n_features", "dtype", "expected"),
    [
        (50, np.float32, True),
        (50, np.float64, True),
        (200, np.float32, True),
        (200, np.float64, True),
        (256, np.float32, True),
        (257, np.float32, False),
        (512, np.float64, True),
        (1000, np.float64, False),
    ],
)
def test_read_bound_passes_are_those_of_few_features_in_large_chunks(
    n_features: int, dtype: Any, expected: bool
) -> None:
    """N <= 64 x itemsize, few cells, stored chunks decoded in pieces: those passes read ahead in every wave.

    Reading is a large share of a row's work there (40-70 % at N = 50 and 200).  Whole stored chunks
    are not read ahead in every wave: at 512 MB a read thread beside two computing tasks made the
    pass 0-15 % slower in most cells (docs/benchmarks.md, section 3).
    """
    step = 4 * 2**21 // n_features  # four 16 MiB float64 sub-blocks per stored chunk
    rows = 10 * step
    for cls, want in ((_DeclaredPieces, expected), (_Declared, False)):
        X = cls((rows, n_features), step)
        X.dtype = np.dtype(dtype)
        readers = {"X": X, "y": None, "groups": None, "sample_weight": None}
        plan = plan_pass(readers, 0, rows, n_cells=5, stats_bytes=8 * 5 * n_features**2, memory_budget=2**31)
        assert (
            plan.read_rows == step and plan.sub_rows < step
        )  # one stored chunk per read block, several sub-blocks
        assert plan.read_bound is want, cls.__name__
        many = plan_pass(
            readers, 0, rows, n_cells=100, stats_bytes=8 * 100 * n_features**2, memory_budget=2**34
        )
        assert (
            not many.read_bound
        )  # 10 x 10 cells: the statistics of a row cost 3x more, reading no longer dominates


class _Counted(ArrayReader):
    """An in-memory reader counting reads, failing on the read that starts at ``fail_at``."""

    def __init__(self, data: np.ndarray, step: int, fail_at: int | None = None) -> None:
        super().__init__()
        self.data, self.step, self.fail_at = data, step, fail_at
        self.shape, self.dtype = data.shape, data.dtype
        self.reads: list[tuple[int, int]] = []

    def grid(self) -> RowGrid:
        return RowGrid(self.shape[0], step=self.step)

    def read(self, start: int, stop: int) -> np.ndarray:
        if start == self.fail_at:
            raise OSError(f"chunk at row {start} is truncated")
        self.reads.append((start, stop))
        return self.data[start:stop].copy()


@pytest.mark.parametrize("prefetch", [False, True])
def test_read_ahead_reads_the_same_blocks_once(prefetch: bool) -> None:
    data = np.arange(1000 * 3, dtype=np.float64).reshape(1000, 3)
    reader = _Counted(data, 70)
    got = [(a, b, blk) for a, b, blk in read_blocks(reader, 140, 1000, 200, prefetch=prefetch)]
    assert [(a, b) for a, b, _ in got] == sorted(set(reader.reads)) == sorted(reader.reads)
    assert got[0][:2] == (140, 280) and got[-1][1] == 1000
    np.testing.assert_array_equal(np.concatenate([blk for *_, blk in got]), data[140:])
    failing = _Counted(data, 70, fail_at=420)
    with pytest.raises(OSError, match="row 420 is truncated"):
        for _ in read_blocks(failing, 0, 1000, 140, prefetch=prefetch):
            pass


@pytest.mark.parametrize(
    ("unit", "start", "stop", "read_rows", "expected"),
    [
        (1, 0, 1000, 1000, [(0, 250), (250, 750), (750, 1000)]),  # one block: both edges cut
        (1, 0, 3000, 1000, [(0, 250), (250, 1000), (1000, 2000), (2000, 2750), (2750, 3000)]),
        (
            100,
            0,
            3000,
            1000,
            [(0, 200), (200, 1000), (1000, 2000), (2000, 2800), (2800, 3000)],
        ),  # whole units
        (
            70,
            140,
            1000,
            200,
            [(140, 280), (280, 420), (420, 560), (560, 700), (700, 840), (840, 980), (980, 1000)],
        ),
        (1000, 0, 3000, 1000, [(0, 1000), (1000, 2000), (2000, 3000)]),  # a stored chunk is not cut
        (1, 0, 1001, 1000, [(0, 250), (250, 1000), (1000, 1001)]),  # a short last block is left
    ],
)
def test_first_and_last_read_blocks_are_short(
    unit: int, start: int, stop: int, read_rows: int, expected: list[tuple[int, int]]
) -> None:
    """A task reading ahead waits for its first block and computes its last one alone: both are short."""
    from streamridge.sources.blocks import block_ranges

    reader = _Counted(np.zeros((3000, 1)), unit)
    assert list(block_ranges(reader, start, stop, read_rows)) == expected


def test_read_ahead_leaves_the_statistics_bit_identical(tmp_path: Path) -> None:
    """A lone partition on 2 threads reads ahead; the sync scheduler does not: same bits."""
    data = _write(tmp_path / "s.zarr", np.random.default_rng(5), LAYOUTS["same chunks"])
    src = open_source(str(tmp_path / "s.zarr"), groups="groups", sample_weight="sample_weight")
    readers, _ = src.pass_readers()
    spec = PassSpec(FoldScheme("group", 3), None, 1)
    plan = plan_pass(readers, 0, M, n_cells=3, stats_bytes=10**5, memory_budget=2**30)
    assert len(plan) == 1 and plan.prefetch and task_plan(plan, 0, 0, 1, 2).prefetch
    ahead = accumulate(src, spec, scheduler="threads")
    plain = accumulate(src, spec, scheduler="sync")
    for name in ("count", "weight", "mean_x", "sxx", "sxy", "syy"):
        np.testing.assert_array_equal(getattr(ahead, name), getattr(plain, name))
    assert_stats_close(ahead, _reference(data), rtol=1e-9)


@pytest.mark.parametrize("layout", ["same chunks", "1-D arrays in smaller chunks"])
def test_read_ahead_reads_the_1d_arrays_with_x(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    """Where a task reads ahead, y, groups and weights are read on its read thread with X, never on the
    task's thread: the statistics do not wait on them (on zarr's event loop, behind the decodes of X,
    they waited 43-50 ms of a 0.2 s pass in bench_layouts' zarr2-blosc N = 50 cell)."""
    import threading

    import streamridge.datapass.partitions as partitions
    from streamridge.sources._zarr import ZarrReader

    data = _write(tmp_path / "s.zarr", np.random.default_rng(6), LAYOUTS[layout])
    monkeypatch.setattr(partitions, "READ_BYTES", 1000 * N * 8)  # 3 read blocks
    seen: list[tuple[int, str]] = []
    real = ZarrReader.read

    def read(self: Any, start: int, stop: int) -> np.ndarray:
        seen.append((len(self.shape), threading.current_thread().name))
        return real(self, start, stop)

    monkeypatch.setattr(ZarrReader, "read", read)
    src = open_source(str(tmp_path / "s.zarr"), groups="groups", sample_weight="sample_weight")
    spec = PassSpec(FoldScheme("group", 3), None, 1)
    ahead = accumulate(src, spec, scheduler="threads")
    ones = [name for ndim, name in seen if ndim == 1]
    assert len(ones) >= 9 and all(name.startswith("streamridge-read") for name in ones), ones
    # 3 read blocks; with stored chunks of 250 rows the first and the last are cut at 1/4 (not with 500)
    assert sum(ndim == 2 for ndim, _ in seen) == {"same chunks": 5, "1-D arrays in smaller chunks": 3}[layout]
    seen.clear()
    plain = accumulate(src, spec, scheduler="sync")
    assert not any(name.startswith("streamridge-read") for _, name in seen)
    for name in ("count", "weight", "mean_x", "sxx", "sxy", "syy"):
        np.testing.assert_array_equal(getattr(ahead, name), getattr(plain, name))
    assert_stats_close(ahead, _reference(data), rtol=1e-9)


def test_large_statistics_are_not_split_for_balance() -> None:
    """10 x 10 cells at N = 1000 (800 MB of statistics) over 128 MB of rows stay one partition: split in two
    for balance they peaked at 3.2 GiB instead of 1.1 (bench_layouts, zarr-4mb)."""
    rows, N = 33_554, 1000
    X = _Declared((rows, N), 1048)
    readers = {"X": X, "y": None, "groups": None, "sample_weight": None}
    stats = 8 * 100 * N * N
    plan = plan_pass(readers, 0, rows, n_cells=100, stats_bytes=stats, memory_budget=2**34)
    assert len(plan) == 1
    small = plan_pass(readers, 0, rows, n_cells=5, stats_bytes=8 * 5 * 50 * 50, memory_budget=2**34)
    assert len(small) >= 2


def test_lone_partition_gets_two_lanes() -> None:
    """A pass that is one partition (one stored chunk as large as the data) splits its sub-blocks over two
    accumulators; not with large statistics, little data, or partition sizes asked for."""
    rows = 60_000
    X = _Declared((rows, 200), rows)  # one stored chunk of 48 MB (float32)
    readers = {"X": X, "y": None, "groups": None, "sample_weight": None}
    plan = plan_pass(readers, 0, rows, n_cells=5, stats_bytes=8 * 5 * 200 * 200, memory_budget=2**31)
    assert len(plan) == 1 and plan.lanes == 2
    big = plan_pass(readers, 0, rows, n_cells=100, stats_bytes=8 * 100 * 200 * 200 * 10, memory_budget=2**34)
    assert big.lanes == 1
    asked = plan_pass(
        readers, 0, rows, n_cells=5, stats_bytes=8 * 5 * 200 * 200, memory_budget=2**31, partition_rows=rows
    )
    assert asked.lanes == 1
    small = _Declared((5_000, 200), 5_000)
    plan = plan_pass(
        {**readers, "X": small}, 0, 5_000, n_cells=5, stats_bytes=8 * 5 * 200 * 200, memory_budget=2**31
    )
    assert plan.lanes == 1


def test_two_lanes_equal_one_and_every_scheduler(tmp_path: Path) -> None:
    """One 40 MB stored chunk: two lanes give the one-lane statistics to 1e-12 and the same bits on threads,
    sync and processes."""
    rng = np.random.default_rng(5)
    rows, N = 25_000, 200
    X = rng.standard_normal((rows, N)) + 1e3
    y = X[:, :3].sum(1) + rng.standard_normal(rows)
    root = zarr.open_group(str(tmp_path / "one.zarr"), mode="w")
    root.create_array("X", data=X, chunks=(rows, N))
    root.create_array("y", data=y, chunks=(rows,))
    spec = PassSpec(FoldScheme("hash", 5), None, 1)
    report = PassReport()
    two = accumulate(open_source(str(tmp_path / "one.zarr")), spec, scheduler="threads", report=report)
    assert report.extra["partitions"] == 1
    one = chunk_task(X, y, None, None, 0, spec)
    assert_stats_close(two, one, rtol=1e-12)
    for sched in ("sync", "processes"):
        again = accumulate(open_source(str(tmp_path / "one.zarr")), spec, scheduler=sched)
        assert_stats_close(again, two, rtol=0)
