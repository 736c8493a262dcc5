"""A real dask.distributed cluster (``dask scheduler`` / ``dask worker`` subprocesses) reached by address."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from streamridge import StreamRidgeCV
from streamridge.datapass.driver import accumulate
from streamridge.errors import SchedulerError, SourceError
from streamridge.sources import open_source
from tests.scale_utils import assert_stats_close, damage_chunk, make_store, regression_spec, slow_copy

pytest.importorskip("distributed")

ROOT = Path(__file__).resolve().parents[2]
DASK = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
WORKER = [sys.executable, "-m", "distributed.cli.dask_worker"]


class Cluster:
    """A scheduler and ``n`` single-threaded workers (no nanny: a SIGKILL really loses the worker)."""

    def __init__(self, directory: Path, n: int) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        file = directory / "scheduler.json"
        log = open(directory / "cluster.log", "ab")
        self.log = log
        self.scheduler = subprocess.Popen(
            [*DASK, "--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file", str(file)],
            env=env,
            stdout=log,
            stderr=log,
        )
        deadline = time.monotonic() + 60
        while not file.exists() or not file.read_text().strip():
            if time.monotonic() > deadline or self.scheduler.poll() is not None:
                self.close()
                pytest.fail("dask scheduler did not start")
            time.sleep(0.1)
        self.address = json.loads(file.read_text())["address"]
        self.workers = [
            subprocess.Popen(
                [*WORKER, self.address, "--nthreads", "1", "--no-nanny", "--no-dashboard", "--name", f"w{i}"],
                env=env,
                stdout=log,
                stderr=log,
                cwd=str(directory),
            )
            for i in range(n)
        ]
        from distributed import Client

        with Client(self.address, timeout=30) as client:
            client.wait_for_workers(n, timeout=60)

    def close(self) -> None:
        """Kill the workers (disposable) and stop the scheduler."""
        workers = getattr(self, "workers", [])
        for p in workers:
            if p.poll() is None:
                p.kill()
        if self.scheduler.poll() is None:
            self.scheduler.terminate()
        for p in [*workers, self.scheduler]:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.log.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("cluster"), 2)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    path, *_ = make_store(
        tmp_path_factory.mktemp("dist") / "data.zarr", np.random.default_rng(11), 6000, 10, chunk_rows=500
    )
    return path


def test_a_fit_connects_to_its_scheduler_once(
    cluster: Cluster, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The statistics pass and the metric pass of one fit share one connection to the scheduler, closed
    when the fit ends; the estimator keeps the address it was given."""
    import distributed

    clients: list[Any] = []
    real = distributed.Client

    class Counted(real):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            clients.append(self)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(distributed, "Client", Counted)
    est = StreamRidgeCV(scheduler=cluster.address, chunk_rows=500, scoring="explained_variance").fit(store)
    assert len(clients) == 1 and clients[0].status == "closed"
    assert "metric_pass_s" in est.timings_ and est.scheduler == cluster.address


def test_fit_on_cluster_equals_threads(cluster: Cluster, store: str) -> None:
    remote = StreamRidgeCV(scheduler=cluster.address, chunk_rows=500).fit(store)
    local = StreamRidgeCV(scheduler="threads", chunk_rows=500).fit(store)
    assert_stats_close(remote.stats_, local.stats_)
    assert remote.alpha_ == local.alpha_
    np.testing.assert_allclose(remote.coef_, local.coef_, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(remote.intercept_, local.intercept_, rtol=1e-12)


def test_accumulate_by_address_other_chunks(cluster: Cluster, store: str) -> None:
    ref = accumulate(
        open_source(store, groups="groups", chunk_rows=1000),
        regression_spec("group"),
        scheduler="sync",
        partition_rows=1000,
    )
    got = accumulate(
        open_source(store, groups="groups", chunk_rows=700),
        regression_spec("group"),
        scheduler=cluster.address,
        partition_rows=700,
    )
    assert_stats_close(got, ref)


@pytest.mark.parametrize(
    ("M", "chunk_rows", "named"),
    [(3000, 500, "1500-1999"), (6000, 125, "375-499")],
    ids=["partition", "block"],
)
def test_corrupted_chunk_on_cluster(
    cluster: Cluster, tmp_path: Path, M: int, chunk_rows: int, named: str
) -> None:
    """Stored chunk 3 of X damaged: the error names its rows, also where it is the last partition of the
    first block of 4 that one task runs (48 partitions on 2 workers)."""
    path, *_ = make_store(tmp_path / "bad.zarr", np.random.default_rng(3), M, 5, chunk_rows=chunk_rows)
    damage_chunk(path)
    with pytest.raises(SourceError, match=rf"rows {named}\) of zarr store .*bad\.zarr") as info:
        accumulate(
            open_source(path, chunk_rows=chunk_rows),
            regression_spec(),
            scheduler=cluster.address,
            partition_rows=chunk_rows,
        )
    assert "\n" not in str(info.value)


def test_unreachable_scheduler_fails_fast(store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """One connection attempt, bounded by ``CONNECT_TIMEOUT_S`` (shortened here to 1 s), then one line
    naming the address and the time waited (scripts/bench_fail_fast.py times it)."""
    import distributed

    from streamridge.datapass import scheduling

    tries: list[tuple[str, float]] = []
    real = distributed.Client

    def client(address: str, *, timeout: float, **kw: Any) -> Any:
        tries.append((address, timeout))
        return real(address, timeout=timeout, **kw)

    monkeypatch.setattr(scheduling, "CONNECT_TIMEOUT_S", 1.0)
    monkeypatch.setattr(distributed, "Client", client)
    with pytest.raises(
        SchedulerError,
        match=r"cannot reach the dask scheduler at tcp://127\.0\.0\.1:1 within 1 s \(\w+Error\); ",
    ) as info:
        accumulate(
            open_source(store, chunk_rows=1000),
            regression_spec(),
            scheduler="tcp://127.0.0.1:1",
            partition_rows=1000,
        )
    assert tries == [("tcp://127.0.0.1:1", 1.0)]
    assert "\n" not in str(info.value)


def test_killed_worker_leaves_result_unchanged(store: str, tmp_path: Path) -> None:
    """SIGKILL one of two workers after 4 of 12 slow partitions: lost tasks are recomputed, stats unchanged.

    X is read through a slow dask view of 250-row chunks; y's stored chunks hold
    500 rows, so partitions are 500 rows (no stored chunk of y read twice).
    """
    source = open_source(store, chunk_rows=250)
    slow = replace(source, X=source.X.map_blocks(slow_copy, dtype=source.X.dtype, delay=0.15))
    ref = accumulate(source, regression_spec(), scheduler="threads", partition_rows=250)
    c = Cluster(tmp_path, 2)
    seen = []

    def progress(rows: int) -> None:
        seen.append(rows)
        if len(seen) == 4:
            os.kill(c.workers[0].pid, signal.SIGKILL)
            c.workers[0].wait(timeout=10)

    try:
        got = accumulate(slow, regression_spec(), scheduler=c.address, progress=progress, partition_rows=250)
    finally:
        c.close()
    assert c.workers[0].returncode == -signal.SIGKILL
    assert len(seen) == 12 and sum(seen) == 6000
    assert_stats_close(got, ref)


def _exact(a, b) -> None:  # type: ignore[no-untyped-def]
    for name in ("weight", "count", "mean_x", "mean_y", "sxx", "sxy", "syy"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


def test_driver_receives_one_result_per_pass(
    cluster: Cluster, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Partition results are merged on the workers: the client fetches one FoldStats per pass.

    The statistics equal a threaded pass bit for bit (the tree's shape depends
    only on the partitioning).
    """
    import distributed

    from streamridge.datapass.driver import PassReport

    received: list[str] = []
    result, gather = distributed.Future.result, distributed.Client.gather

    def counting_result(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        out = result(self, *args, **kwargs)
        received.append(type(out).__name__)
        return out

    def counting_gather(self, futures, *args, **kwargs):  # type: ignore[no-untyped-def]
        out = gather(self, futures, *args, **kwargs)
        received.extend(type(o).__name__ for o in (out if isinstance(out, list) else [out]))
        return out

    monkeypatch.setattr(distributed.Future, "result", counting_result)
    monkeypatch.setattr(distributed.Client, "gather", counting_gather)
    report = PassReport()
    got = accumulate(
        open_source(store, chunk_rows=500),
        regression_spec(),
        scheduler=cluster.address,
        report=report,
        partition_rows=500,
    )
    assert report.extra["partitions"] == 12
    assert received.count("FoldStats") == 1, received
    monkeypatch.undo()
    _exact(
        got,
        accumulate(
            open_source(store, chunk_rows=500), regression_spec(), scheduler="threads", partition_rows=500
        ),
    )


@pytest.mark.parametrize("stateful", [False, True], ids=["RandomHidden", "EchoStateNetwork"])
def test_pass_with_a_map_merges_on_the_workers(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, stateful: bool
) -> None:
    """A stateless map runs in the partition pass, a stateful one in lanes: both reduced by the fixed tree on
    the workers (one FoldStats reaches the driver) and equal to a threaded pass bit for bit."""
    import distributed

    from streamridge.features import EchoStateNetwork, RandomHidden

    rng = np.random.default_rng(3)
    X, y, g = rng.standard_normal((3000, 3)), rng.standard_normal(3000), np.repeat(np.arange(6), 500)
    fmap = (EchoStateNetwork(12, seed=2) if stateful else RandomHidden(16, seed=2)).fit(X)
    spec = replace(regression_spec(), features=fmap)
    received: list[str] = []
    result, gather = distributed.Future.result, distributed.Client.gather

    def counting_result(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        out = result(self, *args, **kwargs)
        received.append(type(out).__name__)
        return out

    def counting_gather(self, futures, *args, **kwargs):  # type: ignore[no-untyped-def]
        out = gather(self, futures, *args, **kwargs)
        received.extend(type(o).__name__ for o in (out if isinstance(out, list) else [out]))
        return out

    monkeypatch.setattr(distributed.Future, "result", counting_result)
    monkeypatch.setattr(distributed.Client, "gather", counting_gather)
    got = accumulate(
        open_source(X, y=y, groups=g, chunk_rows=250), spec, scheduler=cluster.address, partition_rows=250
    )
    assert received.count("FoldStats") == 1, received
    monkeypatch.undo()
    _exact(
        got,
        accumulate(
            open_source(X, y=y, groups=g, chunk_rows=250), spec, scheduler="threads", partition_rows=250
        ),
    )


def test_blocks_of_partitions_on_the_cluster_keep_the_bits(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """48 partitions on 2 workers run as 12 tasks of 4 (fewer tasks for the scheduler), merged by the same tree:
    the statistics equal a threaded pass bit for bit, and the driver still receives one result."""
    import distributed

    from streamridge.datapass import executors

    path, *_ = make_store(tmp_path / "many.zarr", np.random.default_rng(5), 6000, 10, chunk_rows=125)
    submitted: list[str] = []
    submit = distributed.Client.submit

    def counting_submit(self, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
        submitted.append(getattr(fn, "__name__", type(fn).__name__))
        return submit(self, fn, *args, **kwargs)

    monkeypatch.setattr(distributed.Client, "submit", counting_submit)
    got = accumulate(
        open_source(path, chunk_rows=125), regression_spec(), scheduler=cluster.address, partition_rows=125
    )
    monkeypatch.undo()
    assert submitted.count("call_block") == 12 and submitted.count("call_task") == 0, submitted
    assert executors.partition_blocks(0, 48, 2) == [(i, 4) for i in range(0, 48, 4)]
    _exact(
        got,
        accumulate(
            open_source(path, chunk_rows=125), regression_spec(), scheduler="threads", partition_rows=125
        ),
    )


def test_a_checkpoint_of_blocks_resumes_bit_for_bit(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checkpoints are written at block ends only (inside a block the partials hold later partitions).
    One checkpoint is due, from the first partition on: it is written after the first block (4 partitions,
    not 1); stored chunk 13 then fails, and a threaded resume gives the uninterrupted pass's bits."""
    from streamridge.datapass.checkpoint import Checkpointer

    asked: list[bool] = []
    monkeypatch.setattr(Checkpointer, "due", lambda self: not asked and not asked.append(True))
    path, *_ = make_store(tmp_path / "ck.zarr", np.random.default_rng(5), 6000, 10, chunk_rows=125)
    whole = accumulate(
        open_source(path, chunk_rows=125), regression_spec(), scheduler="threads", partition_rows=125
    )
    chunk = Path(path) / "X" / "c" / "13" / "0"
    good = chunk.read_bytes()
    chunk.write_bytes(os.urandom(len(good)))
    st = chunk.stat()
    ck = tmp_path / "ck"
    with pytest.raises(SourceError, match=r"rows 1625-1749\)"):
        accumulate(
            open_source(path, chunk_rows=125),
            regression_spec(),
            scheduler=cluster.address,
            checkpoint=ck,
            partition_rows=125,
        )
    chunk.write_bytes(good)
    os.utime(
        chunk, ns=(st.st_atime_ns, st.st_mtime_ns)
    )  # the listing the checkpoint was made from (a repaired read)
    from streamridge.datapass.driver import PassReport

    report = PassReport()
    resumed = accumulate(
        open_source(path, chunk_rows=125),
        regression_spec(),
        scheduler="threads",
        checkpoint=ck,
        report=report,
        partition_rows=125,
    )
    assert report.extra["resumed_chunks"] == 4
    _exact(resumed, whole)


def test_pass_by_address_inside_a_users_client_block(
    cluster: Cluster, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass by address while the user's own Client is the current one waits on its own client.

    ``distributed.wait`` and ``as_completed`` poll through the default client: inside the block that is
    the user's, which polled the pass's futures about 0.5 s per partition.  The pass never asks for the
    default client (a count of the look-ups, not a time: the same on a busy machine).
    """
    import distributed.client
    from distributed import Client

    src = open_source(store, chunk_rows=500)  # 12 partitions
    spec = regression_spec("hash")
    ref = accumulate(src, spec, scheduler=cluster.address, partition_rows=500)
    lookups: list[object] = []
    real = distributed.client.default_client

    def default_client(c: Any = None) -> Any:
        lookups.append(c)
        return real(c)

    with Client(cluster.address, timeout=30):
        monkeypatch.setattr(distributed.client, "default_client", default_client)
        got = accumulate(src, spec, scheduler=cluster.address, partition_rows=500)
        monkeypatch.undo()
        assert real() is not None  # the user's client was the default one during the pass
    assert_stats_close(got, ref, rtol=0)
    assert lookups == []


def test_candidate_maps_of_one_series_spread_over_the_workers(cluster: Cluster) -> None:
    """One series is one lane: its 4 candidate reservoirs are 4 tasks on the cluster's workers, each
    candidate's statistics those of its own threaded pass, bit for bit."""
    from streamridge.datapass.candidates import candidate_stats_kernel
    from streamridge.datapass.layouts import Lanes, LaneTasks
    from streamridge.features import EchoStateNetwork
    from streamridge.features._candidates import fitted_candidates

    rng = np.random.default_rng(5)
    X, y, g = rng.standard_normal((1200, 2)), rng.standard_normal(1200), np.zeros(1200, dtype=int)
    grid = EchoStateNetwork.grid(n_units=10, leak_rate=[0.3, 1.0], spectral_radius=[0.5, 0.9])
    maps = [m.fit(X) for m in grid]
    spec = replace(regression_spec(), features=fitted_candidates(maps, 2))
    src = open_source(X, y=y, groups=g, chunk_rows=250)
    assert len(LaneTasks(src, candidate_stats_kernel(spec), Lanes(spec, statistics=True), 0)) == 4
    got = accumulate(src, spec, scheduler=cluster.address)
    for m, a in zip(maps, got):
        _exact(a, accumulate(src, replace(spec, features=m), scheduler="threads"))
