"""Scale: flat-memory reduction, scheduler and chunking invariance, shards, corrupted chunks."""

from __future__ import annotations

import itertools
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import streamridge.datapass.driver as stream
import streamridge.datapass.executors as executors
import streamridge.datapass.partition_task as partition_task
from streamridge import StreamRidgeCV
from streamridge.datapass.driver import accumulate
from streamridge.errors import IncompatibleStatsError, SourceError
from streamridge.sources import open_source
from streamridge.stats.foldstats import merge
from tests.scale_utils import (
    assert_stats_close,
    damage_chunk,
    make_data,
    make_store,
    regression_meta,
    regression_spec,
)

# ---------------------------------------------------------------- flat memory


class _CountingReducer(executors.TreeReducer):
    """TreeReducer that records the deepest stack it held."""

    deepest = 0
    pushes = 0

    def push(self, s):  # type: ignore[no-untyped-def]
        super().push(s)
        type(self).pushes += 1
        type(self).deepest = max(type(self).deepest, len(self.stack))


def test_partials_held_are_log_n_and_window(
    monkeypatch: pytest.MonkeyPatch, rng: np.random.Generator
) -> None:
    """At most window partitions in flight and floor(log2 n) + 1 partial statistics on the merge stack."""
    X, y, _ = make_data(rng, 40_000, 8)
    source = open_source(X, y=y, chunk_rows=100)  # 400 partitions
    started = []
    task = partition_task.run_partition

    def counting_task(*args):  # type: ignore[no-untyped-def]
        started.append(_CountingReducer.pushes)  # pushes done when this partition started
        return task(*args)

    monkeypatch.setattr(executors, "TreeReducer", _CountingReducer)
    monkeypatch.setattr(partition_task, "run_partition", counting_task)
    _CountingReducer.deepest = _CountingReducer.pushes = 0
    window = 3
    report = stream.PassReport()
    accumulate(
        source, regression_spec(), scheduler="threads", window=window, report=report, partition_rows=100
    )
    n = 400
    assert report.extra["partitions"] == n
    assert _CountingReducer.pushes == n
    assert _CountingReducer.deepest <= int(np.log2(n)) + 1
    # partition j starts only once partition j - window has been merged
    in_flight = max(j - done for j, done in enumerate(sorted(started)))
    assert in_flight <= window


def _traced_peak(n_chunks: int, rng: np.random.Generator) -> int:
    X, y, _ = make_data(rng, 100 * n_chunks, 30)
    source = open_source(X, y=y, chunk_rows=100)
    tracemalloc.start()
    try:
        accumulate(source, regression_spec(), scheduler="sync", partition_rows=100)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_peak_memory_does_not_grow_with_chunks(rng: np.random.Generator) -> None:
    """Traced peak of a pass over 240 chunks vs 30 (data already in memory).

    Keeping every chunk's statistics would add 210 x (one chunk's statistics);
    the growth allowed is a quarter of that (it holds the O(log n) merge stack
    and dask's bounded key caches).
    """
    _traced_peak(5, rng)  # warm imports and caches
    small, large = _traced_peak(30, rng), _traced_peak(240, rng)
    one = sum(
        a.nbytes
        for a in accumulate(
            open_source(*make_data(rng, 100, 30)[:1], y=np.zeros(100)), regression_spec()
        ).__dict__.values()
        if isinstance(a, np.ndarray)
    )
    assert large - small <= 0.25 * 210 * one, (small, large, one)


# ------------------------------------------------------ schedulers and chunks


@pytest.fixture(scope="module")
def zarr_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    return make_store(tmp_path_factory.mktemp("scale") / "data.zarr", rng, 6000, 12, chunk_rows=500)


@pytest.fixture(scope="module")
def reference_stats(zarr_store):  # type: ignore[no-untyped-def]
    return accumulate(
        open_source(zarr_store[0], chunk_rows=1000), regression_spec(), scheduler="sync", partition_rows=1000
    )


@pytest.mark.parametrize(
    "scheduler,chunk_rows",
    [
        ("sync", 500),
        ("threads", 1000),
        ("threads", 500),
        ("threads", 1500),
        ("threads", 6000),
        ("threads", 333),
        ("processes", 1000),
        ("local:2", 750),
    ],
)
def test_same_stats_for_schedulers_and_chunks(
    zarr_store, reference_stats, scheduler: str, chunk_rows: int
) -> None:  # type: ignore[no-untyped-def]
    source = open_source(zarr_store[0], chunk_rows=chunk_rows)
    stats = accumulate(source, regression_spec(), scheduler=scheduler, partition_rows=chunk_rows)
    assert stats.n_rows == 6000
    assert_stats_close(stats, reference_stats)


# ---------------------------------------------------------------------- shards


def _shard(X, y, groups, start, stop, spec, chunk_rows=700):  # type: ignore[no-untyped-def]
    g = None if groups is None else groups[start:stop]
    source = open_source(X[start:stop], y=y[start:stop], groups=g, chunk_rows=chunk_rows)
    meta = regression_meta(spec.scheme, X.shape[1])
    return accumulate(source, spec, row_offset=start, meta=meta, partition_rows=chunk_rows)


@pytest.mark.parametrize("kind", ["hash", "group"])
def test_merged_shards_equal_one_pass(rng: np.random.Generator, kind: str) -> None:
    X, y, groups = make_data(rng, 5000, 10)
    g = groups if kind == "group" else None
    spec = regression_spec(kind)
    whole = _shard(X, y, g, 0, 5000, spec, chunk_rows=1000)
    m = 2347  # neither a multiple of the folds nor of the chunks
    merged = merge(_shard(X, y, g, 0, m, spec), _shard(X, y, g, m, 5000, spec, chunk_rows=400))
    assert_stats_close(merged, whole)
    three = merge(
        merge(_shard(X, y, g, 0, 1001, spec), _shard(X, y, g, 1001, m, spec)), _shard(X, y, g, m, 5000, spec)
    )
    assert_stats_close(three, whole)
    assert merged.meta["rows_seen"] == 5000

    direct = StreamRidgeCV(cv=5).fit(X, y, groups=g)
    from_shards = StreamRidgeCV(cv=5).fit_stats(merged)
    assert from_shards.alpha_ == direct.alpha_
    np.testing.assert_allclose(from_shards.coef_, direct.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(from_shards.intercept_, direct.intercept_, rtol=1e-9)
    np.testing.assert_allclose(from_shards.cv_errors_, direct.cv_errors_, rtol=1e-9)


def test_incompatible_shards_refused(rng: np.random.Generator) -> None:
    X, y, _ = make_data(rng, 2000, 6)
    first = _shard(X, y, None, 0, 1000, regression_spec())
    differ = "statistics differ in "
    others = {  # what differs -> the messages of merge(first, other) and merge(other, first)
        "features": (
            _shard(X[:, :5], y, None, 1000, 2000, regression_spec()),
            differ + "n_features: 6 vs 5; ",
            differ + "n_features: 5 vs 6; ",
        ),
        "folds": (
            _shard(X, y, None, 1000, 2000, regression_spec(n_folds=4)),
            differ + "scheme: n_folds 5 vs 4; ",
            differ + "scheme: n_folds 4 vs 5; ",
        ),
        "seed": (
            _shard(X, y, None, 1000, 2000, regression_spec(seed=1)),
            differ + "scheme: seed 0 vs 1; ",
            differ + "scheme: seed 1 vs 0; ",
        ),
    }
    for what, (other, forward, backward) in others.items():
        with pytest.raises(IncompatibleStatsError, match=forward):
            merge(first, other)
        with pytest.raises(IncompatibleStatsError, match=backward):
            merge(other, first)
        assert other.n_rows == first.n_rows == 1000, what


# ----------------------------------------------------------- corrupted chunks


@pytest.mark.parametrize("how", ["garbage", "truncated"])
@pytest.mark.parametrize("scheduler", ["sync", "threads", "processes"])
def test_corrupted_chunk_names_the_chunk(
    tmp_path: Path, rng: np.random.Generator, how: str, scheduler: str
) -> None:
    store, *_ = make_store(tmp_path / "bad.zarr", rng, 4000, 6, chunk_rows=500)
    damage_chunk(store, how)
    with pytest.raises(
        SourceError, match=r"partition 3 \(rows 1500-1999\) of zarr store .*bad\.zarr"
    ) as info:
        accumulate(
            open_source(store, chunk_rows=500), regression_spec(), scheduler=scheduler, partition_rows=500
        )
    assert "\n" not in str(info.value)


def _buggy_kernel_add(self: Any, *args: Any) -> None:
    raise IndexError("a bug in the kernel")


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_a_bug_in_a_task_is_not_blamed_on_the_data(
    tmp_path: Path, rng: np.random.Generator, scheduler: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception raised outside the reading layers keeps its type and names the partition in a note;
    it is not reported as a corrupted stored chunk (the data are fine)."""
    from streamridge.datapass import driver as stream

    store, *_ = make_store(tmp_path / "good.zarr", rng, 4000, 6, chunk_rows=500)
    monkeypatch.setattr(stream.StatsKernel, "add", _buggy_kernel_add)
    with pytest.raises(IndexError, match="a bug in the kernel") as info:
        accumulate(
            open_source(store, chunk_rows=500), regression_spec(), scheduler=scheduler, partition_rows=500
        )
    assert not isinstance(info.value, SourceError)
    assert any("partition 0 (rows 0-" in note for note in getattr(info.value, "__notes__", []))


def test_read_errors_are_marked_where_they_are_raised() -> None:
    """A worker process's exception loses its traceback on the way back: call_task marks a read failure
    before it travels, and the mark survives pickling."""
    import pickle

    from streamridge.datapass.executors import call_task, raised_reading

    codec: dict[str, Any] = {"__name__": "numcodecs.fake"}  # a function whose frame is in a codec module
    exec("def decode():\n    raise RuntimeError('bad frame')", codec)
    with pytest.raises(RuntimeError) as info:
        call_task(codec["decode"])
    assert raised_reading(pickle.loads(pickle.dumps(info.value)))
    with pytest.raises(IndexError) as info2:
        call_task(_buggy_kernel_add, None)
    assert not raised_reading(pickle.loads(pickle.dumps(info2.value)))


def test_corrupted_chunk_cli_one_line_no_files(tmp_path: Path, rng: np.random.Generator) -> None:
    store, *_ = make_store(tmp_path / "bad.zarr", rng, 4000, 6, chunk_rows=500)
    damage_chunk(store, "garbage")
    model, stats = tmp_path / "m.npz", tmp_path / "s.npz"
    cmd = [
        sys.executable,
        "-m",
        "streamridge",
        "fit",
        "--data",
        store,
        "--out",
        str(model),
        "--save-stats",
        str(stats),
        "--quiet",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "rows " in lines[0] and "bad.zarr" in lines[0], proc.stderr
    assert not model.exists() and not stats.exists()


@pytest.mark.slow
def test_many_chunks_many_shards_on_local_cluster(tmp_path: Path, rng: np.random.Generator) -> None:
    """2,000 chunks in 4 shards on a 2-process local cluster equal one threaded pass."""
    store, X, y, groups = make_store(tmp_path / "many.zarr", rng, 100_000, 16, chunk_rows=50)
    spec = regression_spec("group")
    whole = accumulate(
        open_source(store, groups="groups", chunk_rows=5000), spec, scheduler="threads", partition_rows=5000
    )
    cuts = [0, 12_345, 50_000, 77_777, 100_000]
    parts = [
        accumulate(
            open_source(X[a:b], y=y[a:b], groups=groups[a:b], chunk_rows=50),
            spec,
            row_offset=a,
            scheduler="local:2",
            partition_rows=50,
        )
        for a, b in itertools.pairwise(cuts)
    ]
    merged = parts[0]
    for p in parts[1:]:
        merged = merge(merged, p)
    assert_stats_close(merged, whole)


@pytest.mark.slow
def test_bit_identical_across_schedulers_and_worker_counts(zarr_store) -> None:  # type: ignore[no-untyped-def]
    """The reduction tree depends only on the partitioning: every scheduler gives the same bits."""
    source = open_source(zarr_store[0], groups="groups", chunk_rows=500)  # 12 partitions
    spec = regression_spec("group")
    ref = accumulate(source, spec, scheduler="sync", partition_rows=500)
    for scheduler in ("threads", "processes", "local:1", "local:2"):
        got = accumulate(
            source,
            spec,
            scheduler=scheduler,
            window=5 if scheduler == "threads" else None,
            partition_rows=500,
        )
        for name in ("weight", "count", "mean_x", "mean_y", "sxx", "sxy", "syy"):
            np.testing.assert_array_equal(
                getattr(got, name), getattr(ref, name), err_msg=f"{scheduler} {name}"
            )


def test_closing_a_pass_in_row_order_stops_its_tasks(rng: np.random.Generator) -> None:
    """The results of iter_pass taken one by one: once the iterator is closed no task starts, its
    threads are gone, and BLAS has its threads back."""
    import threading

    from streamridge.datapass.driver import iter_pass
    from streamridge.datapass.layouts import Partitions
    from streamridge.datapass.stats_kernel import StatsKernel
    from streamridge.parallel import blas_controller

    X, y, _ = make_data(rng, 4000, 4)
    started: list[int] = []

    class Counted(StatsKernel):
        def start(self):  # type: ignore[no-untyped-def]
            started.append(1)
            return super().start()

    def blas() -> list[int]:
        return [lib["num_threads"] for lib in blas_controller().info()]

    before, threads = blas(), threading.active_count()
    results = iter_pass(
        open_source(X, y=y),
        Counted(regression_spec(), 4),
        Partitions(rows=100),
        scheduler="threads",
        window=3,
    )
    next(results)
    results.close()
    n = len(started)
    assert 1 <= n <= 4  # the one taken and the window in flight, of 40
    assert threading.active_count() == threads and blas() == before
