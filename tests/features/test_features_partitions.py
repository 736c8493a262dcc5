"""Passes with a feature map on the partition machinery.

Stateless maps run inside the normal partition pass: each stored chunk is read
once (a counting zarr store), the map is applied per sub-block, and a resumed
pass equals an uninterrupted one bit for bit.  Stateful maps keep lanes per
series, reduced by the same fixed tree: resumes are bit-identical too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from zarr.storage import LocalStore

import streamridge.datapass.lane_task as lane_task
import streamridge.datapass.partition_task as partition_task
import streamridge.datapass.plan as plan_mod
from streamridge.datapass.driver import PassReport, accumulate
from streamridge.datapass.spec import PassSpec
from streamridge.datapass.stats_kernel import chunk_task
from streamridge.features import Concat, Distances, EchoStateNetwork, Nystroem, Pipeline, RandomHidden
from streamridge.folds.schemes import FoldScheme
from streamridge.sources import open_source
from tests.datapass.test_partitions import CountingStore

STATS = ("weight", "count", "mean_x", "mean_y", "sxx", "sxy", "syy")
M, N = 2400, 4


def _stateless_maps() -> list[Any]:
    return [
        RandomHidden(40, direct=True, seed=2),
        Nystroem(12, kernel="laplacian", seed=1),
        Distances(5, seed=4),
        Concat([RandomHidden(7, seed=5), Distances(3, seed=6)]),
        Pipeline([RandomHidden(9, seed=7), RandomHidden(6, activation="relu", seed=8)]),
    ]


@pytest.fixture
def raw(rng: np.random.Generator) -> dict[str, np.ndarray]:
    X = rng.standard_normal((M, N)) + 5.0
    return {
        "X": X,
        "y": np.sin(X[:, 0]) + 0.1 * rng.standard_normal(M),
        "groups": np.repeat(np.arange(12), M // 12),  # contiguous series of 200 rows
        "sample_weight": rng.uniform(0.5, 2.0, M),
    }


def _exact(a: Any, b: Any) -> None:
    for name in STATS:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


def _close(a: Any, b: Any, rtol: float = 1e-12) -> None:
    for name in STATS:
        x, y = getattr(a, name), getattr(b, name)
        assert np.abs(x - y).max() <= rtol * max(np.abs(y).max(), 1e-300), name


def _store(tmp_path: Path, raw: dict[str, np.ndarray], rows: int | dict[str, int]) -> CountingStore:
    """``raw`` written to a zarr store of stored chunks of ``rows`` rows (per array where a dict), opened counting."""
    root = zarr.open_group(LocalStore(tmp_path / "d.zarr"), mode="w", zarr_format=3)
    for name, a in raw.items():
        n = rows[name] if isinstance(rows, dict) else rows
        root.create_array(name, shape=a.shape, dtype=a.dtype, chunks=(n, *a.shape[1:]))[...] = a
    return CountingStore(LocalStore(tmp_path / "d.zarr", read_only=True))


def _spec(fmap: Any, X: np.ndarray) -> PassSpec:
    return PassSpec(FoldScheme("group", 3), None, 1, features=fmap.fit(X))


@pytest.mark.parametrize("fmap", _stateless_maps(), ids=lambda m: type(m).__name__)
def test_stateless_map_reads_every_stored_chunk_once(
    tmp_path: Path, raw: dict[str, np.ndarray], fmap: Any
) -> None:
    chunks = {"X": 300, "y": 600, "groups": 200, "sample_weight": 1200}  # partitions of 1200 rows
    store = _store(tmp_path, raw, chunks)
    src = open_source(
        zarr.open_group(store, mode="r"), groups="groups", sample_weight="sample_weight", chunk_rows=600
    )
    spec = _spec(fmap, raw["X"])
    store.reads.clear()
    report = PassReport()
    got = accumulate(src, spec, scheduler="threads", report=report, partition_rows=600)
    for name, rows in chunks.items():
        reads = store.chunk_reads(name)
        assert len(reads) == -(-M // rows), (name, reads)
        assert set(reads.values()) == {1}, (name, {k: v for k, v in reads.items() if v > 1})
    assert report.extra["partitions"] == 2  # the partition pass, not one lane per chunk
    F = spec.features.transform(raw["X"])
    _close(
        got, chunk_task(F, raw["y"], raw["groups"], raw["sample_weight"], 0, PassSpec(spec.scheme, None, 1))
    )


def _interrupted(monkeypatch: pytest.MonkeyPatch, module: Any, name: str, fail_at: Any) -> Any:
    real = getattr(module, name)

    def failing(*args: Any) -> Any:
        if fail_at(*args):
            raise OSError("disk went away")
        return real(*args)

    monkeypatch.setattr(module, name, failing)
    return real


@pytest.mark.parametrize("sched", ["sync", "threads"])
def test_stateless_map_resumes_bit_for_bit(
    tmp_path: Path, raw: dict[str, np.ndarray], monkeypatch: pytest.MonkeyPatch, sched: str
) -> None:
    spec = _spec(RandomHidden(30, seed=3), raw["X"])
    src = open_source(
        raw["X"], y=raw["y"], groups=raw["groups"], sample_weight=raw["sample_weight"], chunk_rows=300
    )
    whole = accumulate(src, spec, scheduler=sched, partition_rows=300)
    # partition rows [1500, 1800) fails: partitions 0-4 are checkpointed (one save per partition)
    real = _interrupted(
        monkeypatch, partition_task, "run_partition", lambda readers, start, *a: start >= 1500
    )
    with pytest.raises(Exception, match="disk went away"):
        accumulate(
            src, spec, scheduler="sync", checkpoint=tmp_path / "ck", checkpoint_every_s=0, partition_rows=300
        )
    monkeypatch.setattr(partition_task, "run_partition", real)
    report = PassReport()
    resumed = accumulate(
        src, spec, scheduler=sched, checkpoint=tmp_path / "ck", report=report, partition_rows=300
    )
    assert report.extra["resumed_chunks"] == 5 and report.extra["partitions"] == 8
    _exact(resumed, whole)


def test_stateful_map_resumes_bit_for_bit(
    tmp_path: Path, raw: dict[str, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lanes (one per series here, run in groups) reduced by the fixed tree: the partials are checkpointed, not a running total."""
    spec = _spec(EchoStateNetwork(20, seed=1, washout=5), raw["X"])
    monkeypatch.setattr(
        plan_mod, "LOCKSTEP_SERIES", 8
    )  # 12 lanes of a series each in groups of 8, not all 12 in one
    src = open_source(
        raw["X"], y=raw["y"], groups=raw["groups"], sample_weight=raw["sample_weight"], chunk_rows=100
    )
    whole = accumulate(src, spec, scheduler="threads")
    real = _interrupted(monkeypatch, lane_task, "lane_task", lambda lane, *a: lane.first >= 14)  # series 7 on
    with pytest.raises(Exception, match="disk went away"):
        accumulate(src, spec, scheduler="sync", checkpoint=tmp_path / "ck", checkpoint_every_s=0)
    monkeypatch.setattr(lane_task, "lane_task", real)
    report = PassReport()
    resumed = accumulate(src, spec, scheduler="threads", checkpoint=tmp_path / "ck", report=report)
    # 12 lanes (a series of 2 chunks each) in groups of 8: the group of lanes 8-11 (chunks 16-23) failed
    assert report.extra["resumed_chunks"] == 16 and report.extra["partitions"] == 2
    _exact(resumed, whole)
    F = spec.features.transform(raw["X"], groups=raw["groups"])
    keep = spec.features.keep_mask(M, raw["groups"], spec.features.init_state())
    ref = chunk_task(
        F[keep],
        raw["y"][keep],
        raw["groups"][keep],
        raw["sample_weight"][keep],
        0,
        PassSpec(spec.scheme, None, 1),
    )
    _close(resumed, ref, 1e-11)


@pytest.mark.parametrize("sched", ["sync", "threads", "processes"])
def test_stateful_map_lanes_read_stored_chunks_through_the_readers(
    tmp_path: Path, raw: dict[str, np.ndarray], sched: str
) -> None:
    """Lanes over stored data read each chunk's rows through the source's readers: every stored chunk of X, y
    and the weights once, the series ids twice (the plan reads them first), and the tasks carry no dask graph."""
    store = _store(tmp_path, raw, 100)
    src = open_source(
        zarr.open_group(store, mode="r"), groups="groups", sample_weight="sample_weight", chunk_rows=100
    )
    spec = _spec(EchoStateNetwork(20, seed=1, washout=5), raw["X"])
    starts = np.arange(0, M, 100)
    calls = plan_mod.lane_calls(src, spec, starts, 0, lambda arr, i: pytest.fail("a dask block was made"))
    assert all(
        isinstance(c, plan_mod.ChunkRead)
        for _, (group, _s) in calls
        for lane in group.lanes
        for c in lane.blocks
    )
    store.reads.clear()
    got = accumulate(src, spec, scheduler=sched)
    here = sched != "processes"  # else the tasks read in other processes: only the plan's reads are seen
    for name, n in (("X", here), ("y", here), ("sample_weight", here), ("groups", 1 + here)):
        reads = store.chunk_reads(name)
        assert sorted(reads.values()) == [n] * (M // 100) * bool(n), (name, reads)
    F = spec.features.transform(raw["X"], groups=raw["groups"])
    keep = spec.features.keep_mask(M, raw["groups"], spec.features.init_state())
    ref = chunk_task(
        F[keep],
        raw["y"][keep],
        raw["groups"][keep],
        raw["sample_weight"][keep],
        0,
        PassSpec(spec.scheme, None, 1),
    )
    _close(got, ref, 1e-11)
    # the same pass over dask views of the store (blocks computed by dask) gives the same numbers, bit for bit
    import dask.array as da

    group = zarr.open_group(tmp_path / "d.zarr", mode="r")
    views = {name: da.from_zarr(group[name]) for name in raw}
    lazy = open_source(
        views["X"], y=views["y"], groups=views["groups"], sample_weight=views["sample_weight"], chunk_rows=100
    )
    _exact(accumulate(lazy, spec, scheduler=sched), got)


def test_stateful_map_warmup_prefixes_read_through_the_readers(
    tmp_path: Path, raw: dict[str, np.ndarray]
) -> None:
    store = _store(tmp_path, raw, 100)
    src = open_source(
        zarr.open_group(store, mode="r"), groups="groups", sample_weight="sample_weight", chunk_rows=100
    )
    spec = _spec(EchoStateNetwork(20, seed=1, warmup=30), raw["X"])
    lanes = [
        lane for _, (lane, _s) in plan_mod.lane_calls(src, spec, np.arange(0, M, 100), 0, lambda arr, i: None)
    ]
    prefixes = [lane.prefix for lane in lanes if lane.prefix is not None]
    assert len(prefixes) == 12 and all(
        isinstance(p[0], plan_mod.ChunkRead) for p in prefixes
    )  # the 2nd chunk of every series
    rows, row = prefixes[0]
    assert (rows.lo, rows.hi, row) == (70, 100, 70) and rows.readers[1] is None and rows.readers[3] is None
    got = accumulate(src, spec, scheduler="threads")
    ref = accumulate(
        open_source(
            raw["X"], y=raw["y"], groups=raw["groups"], sample_weight=raw["sample_weight"], chunk_rows=100
        ),
        spec,
        scheduler="sync",
    )
    _exact(got, ref)


def test_series_runs_read_in_batches_through_the_reader(
    tmp_path: Path, raw: dict[str, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    from streamridge.errors import InputError

    monkeypatch.setattr(
        plan_mod, "RUN_READ_ROWS", 250
    )  # reads of 300 rows: series heads inside and across reads
    g = raw["groups"].copy()
    src = open_source(raw["X"], y=raw["y"], groups=g, chunk_rows=100)
    readers, lo = src.pass_readers()
    starts = np.arange(0, M, 100) + 1000  # a pass continuing at global row 1000
    pos, ids = plan_mod.stored_series_runs(readers["groups"], lo, starts, M)
    np.testing.assert_array_equal(pos, np.arange(0, M, 200) + 1000)
    np.testing.assert_array_equal(ids, np.arange(12))
    ref = plan_mod.series_runs(src.groups, starts)
    np.testing.assert_array_equal(pos, ref[0])
    np.testing.assert_array_equal(ids, ref[1])
    g[900:1000] = 3  # series 3 (rows 600-799) comes back, across a read boundary
    with pytest.raises(InputError, match=r"series 3 starts again at row 1900"):
        plan_mod.stored_series_runs(
            open_source(raw["X"], y=raw["y"], groups=g, chunk_rows=100).pass_readers()[0]["groups"],
            0,
            starts,
            M,
        )


def test_lanes_cut_chunks_holding_many_series(
    tmp_path: Path, raw: dict[str, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Narrow raw inputs make chunks that hold many series: the lanes' chunks are cut at the series heads, so
    every series is a lane (in lockstep with others, in parallel), and consecutive series cut from one
    stored chunk decode it once: each stored chunk is read once, except the one two lane groups share."""
    store = _store(tmp_path, raw, 300)
    src = open_source(
        zarr.open_group(store, mode="r"), groups="groups", sample_weight="sample_weight", chunk_rows=600
    )
    spec = _spec(EchoStateNetwork(20, seed=1), raw["X"])
    chunks, runs = plan_mod.lane_chunks(src, spec, list(src.row_chunks()), 1000)
    assert chunks == [200] * 12  # series of 200 rows in chunks of 600
    np.testing.assert_array_equal(runs[0], np.arange(0, M, 200) + 1000)
    store.reads.clear()
    report = PassReport()
    monkeypatch.setattr(
        plan_mod, "LOCKSTEP_SERIES", 8
    )  # 12 lanes of a series each in groups of 8, not one group
    got = accumulate(src, spec, scheduler="threads", report=report)
    assert report.extra["partitions"] == 2  # 12 lanes in groups of 8
    for name in ("X", "y", "sample_weight"):  # group 1 reads rows [0, 1600), group 2 [1600, 2400)
        reads = store.chunk_reads(name)
        assert {int(k.split("/")[2]): v for k, v in reads.items()} == {i: 1 + (i == 5) for i in range(8)}, (
            name
        )
    ref = accumulate(
        open_source(
            raw["X"], y=raw["y"], groups=raw["groups"], sample_weight=raw["sample_weight"], chunk_rows=200
        ),
        spec,
        scheduler="sync",
    )
    _close(got, ref)
    # without series ids, or with a map that is not exact (warm-up), the source's chunks
    assert (
        plan_mod.lane_chunks(open_source(raw["X"], y=raw["y"], chunk_rows=600), spec, [600] * 4)[0]
        == [600] * 4
    )
    warm = _spec(EchoStateNetwork(20, seed=1, warmup=30), raw["X"])
    assert plan_mod.lane_chunks(src, warm, list(src.row_chunks())) == ([600] * 4, None)


def test_many_short_series_share_lanes(raw: dict[str, np.ndarray]) -> None:
    """240 series of 10 rows are not 240 lanes: the chunk is cut at series heads into pieces of about
    M / (8 tasks x 8 lanes) = 38 rows or more, whose series run in lockstep inside the piece."""
    g = np.repeat(np.arange(240), 10)
    src = open_source(raw["X"], y=raw["y"], groups=g, sample_weight=raw["sample_weight"], chunk_rows=M)
    spec = _spec(EchoStateNetwork(20, seed=1), raw["X"])
    chunks, _ = plan_mod.lane_chunks(src, spec, [M])
    cuts = np.cumsum([0, *chunks])[:-1]
    assert (
        50 <= len(chunks) <= 64
        and set(cuts) <= set(range(0, M, 10))
        and 30 <= min(chunks[:-1])
        and max(chunks) <= 40
    )
    report = PassReport()
    got = accumulate(src, spec, scheduler="threads", report=report)
    assert report.extra["partitions"] == -(-len(chunks) // plan_mod.group_size(len(chunks), 240))
    F = spec.features.transform(raw["X"], groups=g)
    _close(got, chunk_task(F, raw["y"], g, raw["sample_weight"], 0, PassSpec(spec.scheme, None, 1)), 1e-11)
