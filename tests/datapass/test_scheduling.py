"""``scheduler="local:N"``: the cluster starts in the background, once per fit, with the workers' malloc left adaptive."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import streamridge as sr
from streamridge.datapass import scheduling
from streamridge.datapass.driver import accumulate
from streamridge.datapass.scheduling import StartingCluster, describe, open_scheduler, scheduler_session
from streamridge.io.model_file import read_model
from streamridge.sources import open_source
from tests.scale_utils import make_store, regression_spec

distributed = pytest.importorskip("distributed")
ROOT = Path(__file__).resolve().parents[2]


def _worker_malloc_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k.startswith("MALLOC_")}


def _worker_profiles(dask_worker: Any) -> tuple[Any, bool, float, float]:
    """The worker's profiler setting, whether its profile sampling runs, its tick and monitor periods (ms)."""
    import dask

    callbacks = dask_worker.periodic_callbacks
    return (
        dask.config.get("distributed.worker.profile.enabled"),
        "profile" in callbacks,
        callbacks["tick"].callback_time,
        callbacks["monitor"].callback_time,
    )


@pytest.fixture
def count_clusters(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every LocalCluster started by the code under test (it imports the class when it starts one)."""
    started: list[Any] = []

    class Counted(distributed.LocalCluster):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            started.append(kwargs)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(distributed, "LocalCluster", Counted)
    return started


def test_which_schedulers_run_on_this_machines_cores() -> None:
    for spec, local in (("threads", True), ("processes", True), ("sync", False)):
        with open_scheduler(spec) as sched:
            assert sched.local is local, spec


def test_other_specs_pass_through_unchanged() -> None:
    for spec in (None, "threads", "sync", "processes", "tcp://127.0.0.1:1"):
        with scheduler_session(spec) as s:
            assert s == spec


def test_session_returns_before_the_cluster_is_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    trim = distributed.config.get("distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_")
    profile = distributed.config.get("distributed.worker.profile.enabled")
    with scheduler_session("local:1") as starting:
        assert isinstance(starting, StartingCluster) and describe(starting) == "local:1"
        assert not starting.future.done()  # the caller goes on while the worker process starts
        with open_scheduler(starting) as sched, open_scheduler(starting) as again:
            assert sched.client is again.client and sched.n_workers == 1
            assert (
                sched.local
            )  # its workers are this machine's cores: a lone task may take idle ones (cell threads)
            env = sched.client.run(_worker_malloc_env)
            modules = sched.client.run(lambda: sorted(sys.modules))
            profiles = sched.client.run(_worker_profiles)
        assert starting.client().status == "running"  # open_scheduler does not close the session's cluster
    assert starting.client().status == "closed"
    assert list(env.values()) == [{}]  # nanny's MALLOC_TRIM_THRESHOLD_=65536 left out of the worker
    assert set(scheduling.WORKER_MODULES) <= set(next(iter(modules.values())))  # imported before any task
    assert distributed.config.get("distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_") == trim
    assert list(profiles.values()) == [(False, False, 1000, 2000)]  # no stack sampling every 10 ms; 1 s tick
    assert distributed.config.get("distributed.worker.profile.enabled") == profile  # the driver's config kept


def _held(dask_scheduler: Any) -> tuple[list[int], int]:
    """Tasks each worker holds, and tasks waiting on the scheduler for a free worker."""
    return sorted(len(ws.processing) for ws in dask_scheduler.workers.values()), len(dask_scheduler.queued)


def test_a_local_cluster_gives_each_worker_one_task_at_a_time() -> None:
    """The next task waits on the scheduler for the first free worker: at dask's default (two tasks a
    one-thread worker) a stateful map's last lane tasks could queue on one worker while the other idled."""
    import time

    with scheduler_session("local:2") as starting, open_scheduler(starting) as sched:
        client = sched.client
        gate = distributed.Event("gate", client=client)
        # one group of 10 tasks (more than twice the threads): dask queues them on the scheduler
        futures = client.map(lambda i, e=gate: e.wait(60) and i, range(10), pure=False)
        try:
            deadline = time.monotonic() + 10
            while client.run_on_scheduler(_held) != ([1, 1], 8) and time.monotonic() < deadline:
                time.sleep(0.05)
            held = client.run_on_scheduler(_held)
        finally:
            gate.set()
        assert held == ([1, 1], 8)  # dask's default gives ([2, 2], 6)
        assert client.gather(futures) == list(range(10))


def test_a_failed_start_is_raised_where_the_cluster_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(n: int) -> Any:
        raise RuntimeError("Nanny failed to start.")

    monkeypatch.setattr(scheduling, "_start_local", fail)
    with scheduler_session("local:2") as starting, pytest.raises(RuntimeError, match="Nanny failed"):
        with open_scheduler(starting):
            pass


def test_one_cluster_for_the_statistics_and_the_metric_pass(
    rng: np.random.Generator, count_clusters: list[Any]
) -> None:
    X = rng.standard_normal((600, 4))
    y = X @ rng.standard_normal(4) + rng.standard_normal(600)
    on_cluster = sr.StreamRidgeCV(scoring="r2", chunk_rows=100, scheduler="local:1").fit(X, y)
    assert len(count_clusters) == 1  # two passes, one cluster
    threads = sr.StreamRidgeCV(scoring="r2", chunk_rows=100).fit(X, y)
    np.testing.assert_array_equal(on_cluster.cv_scores_, threads.cv_scores_)
    np.testing.assert_array_equal(on_cluster.coef_, threads.coef_)
    assert on_cluster.scheduler == "local:1" and not hasattr(on_cluster, "_session_scheduler")


def test_accumulate_on_local_equals_threads(
    tmp_path: Path, rng: np.random.Generator, count_clusters: list[Any]
) -> None:
    store, *_ = make_store(tmp_path / "d.zarr", rng, 3000, 6, chunk_rows=500)
    source = open_source(store)
    a = accumulate(source, regression_spec(), scheduler="local:2")
    b = accumulate(source, regression_spec(), scheduler="threads")
    assert len(count_clusters) == 1
    for name in ("count", "weight", "mean_x", "mean_y", "sxx", "sxy", "syy"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


def test_cli_fit_on_local_writes_the_spec_not_the_cluster(tmp_path: Path, rng: np.random.Generator) -> None:
    store, *_ = make_store(tmp_path / "d.zarr", rng, 2000, 5, chunk_rows=500)
    models = {}
    for scheduler in ("local:1", "threads"):
        out = tmp_path / f"{scheduler.replace(':', '')}.npz"
        cmd = [
            sys.executable,
            "-m",
            "streamridge",
            "fit",
            "--data",
            store,
            "--out",
            str(out),
            "--quiet",
            "--scheduler",
            scheduler,
        ]
        subprocess.run(cmd, check=True, cwd=ROOT, env=_env())
        models[scheduler] = read_model(str(out))
    header, arrays = models["local:1"]
    assert header["params"]["scheduler"] == "local:1" and "scheduler" not in header.get("params_dropped", [])
    for name, value in arrays.items():
        np.testing.assert_array_equal(value, models["threads"][1][name])


def _env() -> dict[str, str]:
    import os

    return dict(os.environ, PYTHONPATH=str(ROOT))


#: whether a worker has zarr imported (a builtin, so that running it imports nothing; this module imports zarr)
_HAS_ZARR = '"zarr" in __import__("sys").modules'


def _worker_state() -> tuple[int, str | None, list[int]]:
    """A worker's parent process, an environment variable, its BLAS threads."""
    import os

    from streamridge.parallel import blas_controller

    threads = [lib["num_threads"] for lib in blas_controller().info() if lib["user_api"] == "blas"]
    return os.getppid(), os.environ.get("STREAMRIDGE_TEST_SET_LATER"), threads


@pytest.mark.skipif(
    "forkserver" not in __import__("multiprocessing").get_all_start_methods(), reason="no forkserver"
)
def test_local_workers_are_forked_from_a_preloaded_forkserver(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spawned workers each imported distributed, NumPy and zarr (0.4-0.5 s of CPU per worker, every fit):
    forked from one forkserver that imported them once, they start with them, one BLAS thread each, and
    with the environment the driver has when the cluster starts (not the one of the forkserver's start)."""
    import os

    monkeypatch.delenv("STREAMRIDGE_TEST_SET_LATER", raising=False)
    assert scheduling._start_method() == "forkserver"
    with scheduler_session("local:2") as starting, open_scheduler(starting) as sched:
        zarr_first = sched.client.run(eval, _HAS_ZARR)  # before this module's functions are unpickled there
        first = sched.client.run(_worker_state)
    monkeypatch.setenv("STREAMRIDGE_TEST_SET_LATER", "seen")  # after the forkserver started
    with scheduler_session("local:1") as starting, open_scheduler(starting) as sched:
        zarr_second = sched.client.run(eval, _HAS_ZARR)
        second = sched.client.run(_worker_state)
    assert [*zarr_first.values(), *zarr_second.values()] == [True] * 3  # the pass's reader, imported once
    for parent, _, threads in [*first.values(), *second.values()]:
        assert parent != os.getpid()  # a nanny in this process spawns its worker; a forkserver forks it
        assert threads and set(threads) == {1}
    assert [s[1] for s in first.values()] == [None, None]
    assert [s[1] for s in second.values()] == ["seen"]
    assert len({s[0] for s in [*first.values(), *second.values()]}) == 1  # one forkserver for both clusters


def test_a_start_method_set_in_dask_config_is_kept() -> None:
    import dask

    for method in ("fork", "forkserver"):
        with dask.config.set({"distributed.worker.multiprocessing-method": method}):
            assert scheduling._start_method() == method


_EARLY_FORKSERVER = """
import json, os, sys
from multiprocessing import forkserver
from streamridge.datapass import scheduling

started = {}
start = scheduling._start_forkserver
def recorded():
    started["distributed imported"] = "distributed" in sys.modules
    started["environ before"] = dict(os.environ)
    start()
    started["environ after"] = dict(os.environ)
    started["pid"] = forkserver._forkserver._forkserver_pid
    started["preload"] = forkserver._forkserver._preload_modules
scheduling._start_forkserver = recorded
with scheduling.scheduler_session("local:1") as starting, scheduling.open_scheduler(starting) as sched:
    parents = list(sched.client.run(os.getppid).values())
with open(f"/proc/{started['pid']}/environ", "rb") as fh:
    env = dict(kv.split("=", 1) for kv in fh.read().decode().split("\\0") if "=" in kv)
print(json.dumps({
    "distributed": started["distributed imported"], "unchanged": started["environ before"] == started["environ after"],
    "server": started["pid"], "parents": parents, "preload": started["preload"],
    "env": {k: env.get(k) for k in scheduling.FORKSERVER_ENV},
}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_forkserver_starts_before_the_driver_imports_distributed() -> None:
    """Its imports (0.6-0.8 s of CPU) ran after the driver's own import of distributed (0.4 s): started
    first, the two import at once. It gets one BLAS thread and the nannies' hash seed; the driver's
    environment is left as it was."""
    import json
    import os

    env = {k: v for k, v in os.environ.items() if k not in scheduling.FORKSERVER_ENV}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run(
        [sys.executable, "-c", _EARLY_FORKSERVER], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    r = json.loads(out.stdout.splitlines()[-1])
    assert r["distributed"] is False
    assert r["unchanged"] is True
    assert r["parents"] == [r["server"]]  # the worker was forked from the server started first
    assert r["preload"] == list(scheduling.FORKSERVER_PRELOAD)
    assert r["env"] == scheduling.FORKSERVER_ENV


def test_the_forkserver_gets_the_pre_spawn_variables_of_the_users_config() -> None:
    import dask

    with dask.config.set(
        {"distributed.nanny.pre-spawn-environ": {"OMP_NUM_THREADS": 2, "MALLOC_TRIM_THRESHOLD_": 1}}
    ):
        env = scheduling._forkserver_env()
    assert env == {**scheduling.FORKSERVER_ENV, "OMP_NUM_THREADS": "2"}


def test_a_local_cluster_leaves_the_drivers_environment_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    """distributed's nannies set OMP_NUM_THREADS=1 (and more) in the driver too, and left them there:
    every later subprocess of the caller's had one BLAS thread. The workers still have one BLAS thread."""
    import os

    for k in scheduling.FORKSERVER_ENV:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    before = dict(os.environ)
    with scheduler_session("local:1") as starting, open_scheduler(starting) as sched:
        during = dict(os.environ)
        threads = next(iter(sched.client.run(_worker_state).values()))[2]
    changed = {k for k in set(before) | set(during) if before.get(k) != during.get(k)}
    assert changed <= {"__DASK_PARENT_PID"}, changed
    assert dict(os.environ).get("OMP_NUM_THREADS") == "3"
    assert threads and set(threads) == {1}
