"""Where the data pass runs: threads, processes, a local dask cluster or a remote scheduler.

``scheduler`` accepts:

``None`` / ``"threads"``   dask's threaded scheduler in this process (default)
``"sync"``                 one thread, in order (debugging)
``"processes"``            dask's multiprocessing scheduler
``"local:N"``              a dask.distributed LocalCluster of N single-threaded worker processes
                           (started on a background thread by :func:`scheduler_session`, so the
                           worker processes start while the driver opens the data and plans the pass;
                           forked from a preloaded forkserver, see :func:`_start_method`)
``"tcp://host:port"``      an existing dask.distributed scheduler (any address Client accepts)
a ``distributed.Client``   used as is

A fit opens its scheduler once (:func:`pass_session`) and hands the :class:`Session` to
every pass it runs (the statistics pass, a metric pass); a pass given a spec opens it
for itself.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import os
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from streamridge.errors import ParameterError, SchedulerError
from streamridge.parallel import n_cpus

CONNECT_TIMEOUT_S = 10.0


@dataclass
class Scheduler:
    """A resolved scheduler: what to pass to ``dask.compute`` and how many workers it has."""

    kind: str  # "threads" | "sync" | "processes" | "distributed"
    target: Any  # argument of dask.compute(scheduler=...)
    n_workers: int
    client: Any = None
    label: str = ""
    local: bool = False  # the workers are this machine's cores (threads, processes, a local:N cluster)


# imported by every partition task; a starting cluster imports them in its workers before the first task
WORKER_MODULES = (
    "streamridge.datapass.partition_task",
    "streamridge.datapass.stats_kernel",
    "streamridge.stats.kernel",
    "streamridge.stats.foldstats",
    "streamridge.sources",
)


@dataclass
class StartingCluster:
    """A ``local:N`` cluster being started on a background thread (see :func:`scheduler_session`).

    Passed wherever a scheduler spec is accepted; :func:`open_scheduler` waits for the start and
    uses the cluster without closing it (the session that started it closes it).
    """

    n_workers: int
    future: cf.Future[tuple[Any, Any]]
    label: str

    def client(self) -> Any:
        """The cluster's ``distributed.Client``, once started (re-raises a failed start)."""
        return self.future.result()[1]


class Session:
    """The scheduler of the passes of one block (a fit): opened at its first use, closed with the block.

    Made by :func:`pass_session`; passed wherever a scheduler spec is accepted, it is
    used as it is, never opened again nor closed by the pass.

    Parameters
    ----------
    spec : scheduler spec
        What :func:`scheduler_session` yields (a ``local:N`` cluster already starting).
    """

    def __init__(self, spec: Any) -> None:
        self.spec = spec
        self._opened: Scheduler | None = None
        self._stack = contextlib.ExitStack()
        self._lock = threading.Lock()

    def scheduler(self) -> Scheduler:
        """The opened scheduler (connected or waited for on the first call).

        Raises
        ------
        SchedulerError, ParameterError
            As :func:`open_scheduler`.
        """
        with self._lock:
            if self._opened is None:
                self._opened = self._stack.enter_context(open_scheduler(self.spec))
            return self._opened

    def close(self) -> None:
        """Close what :meth:`scheduler` opened (a client of an address)."""
        self._stack.close()


@contextlib.contextmanager
def pass_session(spec: Any) -> Iterator[Session]:
    """A :class:`Session` of ``spec`` for every pass inside the block, closed on exit.

    A ``"local:N"`` cluster starts now, on a background thread (:func:`scheduler_session`);
    an address is connected at the first pass, once for all of them.  A :class:`Session`
    is yielded as it is (its own block closes it).
    """
    if isinstance(spec, Session):
        yield spec
        return
    with scheduler_session(spec) as starting:
        session = Session(starting)
        try:
            yield session
        finally:
            session.close()


def runs_here(spec: Any) -> bool:
    """Whether a pass on ``spec`` runs on this machine (sync, threads, processes, ``local:N``), not on a cluster elsewhere."""
    if isinstance(spec, Session):
        return runs_here(spec.spec)
    if isinstance(spec, Scheduler):
        return spec.kind == "sync" or spec.local
    if spec is None or isinstance(spec, StartingCluster):
        return True
    if isinstance(spec, str):
        names = (
            "threads",
            "threading",
            "sync",
            "synchronous",
            "single-threaded",
            "processes",
            "multiprocessing",
        )
        return spec in names or spec.startswith("local")
    return False


def describe(spec: Any) -> str:
    """Short text of a scheduler spec (for reports)."""
    if isinstance(spec, Session):
        return describe(spec.spec)
    if isinstance(spec, Scheduler):
        return spec.label
    if spec is None:
        return "threads"
    if isinstance(spec, str):
        return spec
    if isinstance(spec, StartingCluster):
        return spec.label
    return type(spec).__name__


@contextlib.contextmanager
def open_scheduler(spec: Any) -> Iterator[Scheduler]:
    """Resolve ``spec`` (see module docstring), closing what was started here on exit.

    A :class:`Scheduler` or a :class:`Session` is used as it is (not closed here).

    Raises
    ------
    SchedulerError
        If a scheduler address cannot be reached within ``CONNECT_TIMEOUT_S``.
    ParameterError
        If ``spec`` is not understood.
    """
    if isinstance(spec, Session):  # opened by the session, closed by it
        yield spec.scheduler()
        return
    if isinstance(spec, Scheduler):
        yield spec
        return
    if spec is None or spec in ("threads", "threading"):
        yield Scheduler("threads", "threads", n_cpus(), label="threads", local=True)
        return
    if spec in ("sync", "synchronous", "single-threaded"):
        yield Scheduler("sync", "sync", 1, label="sync")
        return
    if spec in ("processes", "multiprocessing"):
        yield Scheduler("processes", "processes", n_cpus(), label="processes", local=True)
        return
    if isinstance(spec, StartingCluster):
        client = spec.client()
        yield Scheduler("distributed", client, spec.n_workers, client=client, label=spec.label, local=True)
        return
    if hasattr(spec, "scheduler_info") and hasattr(spec, "submit"):
        yield Scheduler(
            "distributed",
            spec,
            _client_workers(spec),
            client=spec,
            label=str(getattr(spec, "scheduler", "client")),
        )
        return
    if not isinstance(spec, str):
        raise ParameterError(
            f"scheduler must be 'threads', 'processes', 'sync', 'local:N', an address or a Client; got {spec!r}"
        )
    from distributed import Client

    if spec.startswith("local"):
        with scheduler_session(spec) as starting, open_scheduler(starting) as sched:
            yield sched
        return
    try:
        client = Client(spec, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        raise SchedulerError(
            f"cannot reach the dask scheduler at {spec} within {CONNECT_TIMEOUT_S:.0f} s ({type(exc).__name__}); "
            "check the address, or start one with `dask scheduler` and `dask worker ADDRESS`"
        ) from None
    try:
        yield Scheduler("distributed", client, _client_workers(client), client=client, label=spec)
    finally:
        client.close()


@contextlib.contextmanager
def scheduler_session(spec: Any) -> Iterator[Any]:
    """Start a ``"local:N"`` cluster now, on a background thread, for every pass inside the block.

    The worker processes start (and import what the partition tasks need) while the
    caller opens the source, reads fold or class columns and plans the pass; every pass
    of the block (the statistics pass, a metric pass) then uses the same cluster, which
    is closed on exit.  Other specs, and a cluster already starting, are yielded as they are.

    Parameters
    ----------
    spec : scheduler spec
        See the module docstring.

    Yields
    ------
    StartingCluster or the spec unchanged
        What to pass as ``scheduler=`` inside the block.
    """
    if not (isinstance(spec, str) and spec.startswith("local")):
        yield spec
        return
    n = _local_workers(spec)
    _start_forkserver()  # its imports run in its own process while this one imports distributed
    import distributed  # noqa: F401  (imported here, not by two threads at once)

    pool = cf.ThreadPoolExecutor(1, thread_name_prefix="streamridge-cluster-start")
    future = pool.submit(_start_local, n)
    pool.shutdown(wait=False)
    try:
        yield StartingCluster(n, future, f"local:{n}")
    finally:
        _close_local(future)


def _start_local(n: int) -> tuple[Any, Any]:
    """A LocalCluster of ``n`` one-thread worker processes and its client, the pass's modules imported."""
    import dask
    from distributed import Client, LocalCluster

    # distributed's nannies set MALLOC_TRIM_THRESHOLD_=65536 in their workers, which turns off glibc's
    # adaptive mmap threshold: every read block was then mmapped fresh and zero-filled (690,000 page faults
    # and 1.8 s of system time per 10^6 x 200 pass, against 74,000 and 0.4 s on threads).  Left unset here
    # (a value in the environment is still inherited); workers live for one fit.
    # The workers' statistical profiler samples every thread's stack each 10 ms, holding the GIL: it cost
    # the workers 0.4-0.5 s of CPU per 2 x 10^6 x 200 pass (3.66 s against 3.22 s without it, threads 3.05 s),
    # and a cluster of one fit has no dashboard to show its profiles.  Off for the workers started here, and
    # the event loops' 20 ms health tick and 0.5 s system monitor (dashboard data) slowed to 1 s and 2 s:
    # local:2 vs threads 1.30x / 1.27x against 1.34x / 1.33x in the same run (a late tick is still reported
    # after distributed.admin.tick.limit, 3 s; memory monitoring, which pauses a worker, is left as it is).
    # worker-saturation 1.0: a one-thread worker holds one task, the next waits on the scheduler for the
    # first free worker (dask queues a group of tasks there once it has more than twice as many as there
    # are threads).  At dask's default, 1.1, each worker took two, so the last tasks could queue behind each
    # other on one worker while the other idled: a stateful map's 8 lane tasks of 0.5 s on local:2 went 3
    # and 5 in 6 of 8 passes (4 and 4 in 8 of 8 at 1.0; mean wall 2.09 s against 1.86 s; scripts/bench_lane_split.py).
    config = {
        "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None,
        "distributed.worker.profile.enabled": False,
        "distributed.admin.tick.interval": "1s",
        "distributed.admin.system-monitor.interval": "2s",
        "distributed.scheduler.worker-saturation": 1.0,
    }
    # Worker processes forked from a forkserver, not spawned: see :func:`_start_method`.  Each worker's
    # environment is updated to this process's, as a spawned one would have it (a forkserver started by
    # an earlier fit holds the environment of then).
    config["distributed.worker.multiprocessing-method"] = _start_method()
    env = dict(os.environ)
    # each nanny also sets its pre-spawn variables in this process, and leaves them (one BLAS thread for
    # every later subprocess of the caller's, a fixed PYTHONHASHSEED): they are put back once the workers run
    pre_spawn = [*dask.config.get("distributed.nanny.pre-spawn-environ", {}), *FORKSERVER_ENV]
    with _environ_kept(pre_spawn), dask.config.set(config):
        if config["distributed.worker.multiprocessing-method"] == "forkserver":
            _set_forkserver_preload()
        cluster = LocalCluster(
            n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None, env=env
        )
    try:
        client = Client(cluster, set_as_default=False)
    except BaseException:
        cluster.close()
        raise
    try:
        client.run(_prepare_worker, WORKER_MODULES)
    except Exception:  # pragma: no cover - the first task imports them anyway
        pass
    return cluster, client


#: what a forkserver imports once, before it forks the workers (their first task finds these imported)
FORKSERVER_PRELOAD = (
    "distributed",
    "dask",
    "msgpack",
    "cloudpickle",
    "tornado",
    "toolz",
    "numpy",
    "zarr",
    *WORKER_MODULES,
)


def _start_method() -> str:
    """How ``local:N`` starts its worker processes: ``"forkserver"`` where distributed's default, spawn, is set.

    A spawned worker is a new interpreter that imports distributed, NumPy and zarr: 0.4-0.5 s of CPU
    per worker, and two of them used both cores of a 2-core machine for half a second at every
    ``fit(scheduler="local:2")``.  A forkserver imports them once and forks each worker from that
    state; it stays (one idle process) until this process exits, so later clusters start in
    about 0.15 s.  :func:`_start_forkserver` starts the server when a session begins, with the
    nannies' pre-spawn environment (one BLAS thread), and :func:`_prepare_worker` limits BLAS to
    one thread again in each worker, in case a forkserver started by other code was inherited.
    ``fork`` (a copy of this threaded process) is not used: its BLAS thread pools ran the pass
    3-4x slower.  A method other than ``spawn`` set in dask's config is kept.
    """
    import multiprocessing

    import dask

    method = str(dask.config.get("distributed.worker.multiprocessing-method", "spawn"))
    if method == "spawn" and "forkserver" in multiprocessing.get_all_start_methods():
        return "forkserver"
    return method


#: the environment a forkserver started by :func:`_start_forkserver` gets, as distributed's nannies
#: would give it (their ``distributed.nanny.pre-spawn-environ`` less ``MALLOC_TRIM_THRESHOLD_``)
FORKSERVER_ENV = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "PYTHONHASHSEED": "6640",
}


def _start_forkserver() -> None:
    """Start the forkserver of ``local:N`` now, where :func:`_start_method` chooses one and none runs.

    Started by the nannies, the server imported :data:`FORKSERVER_PRELOAD` (0.6-0.8 s of CPU)
    only after this process had imported distributed (0.4 s) and started the cluster's
    scheduler; started here, before that, the two import at once on two cores.  It gets
    this process's environment with :data:`FORKSERVER_ENV` (so its NumPy has one BLAS thread),
    set in ``os.environ`` only while the server is spawned.
    """
    import multiprocessing
    from multiprocessing import forkserver

    if _start_method() != "forkserver":
        return
    multiprocessing.get_context("forkserver").set_forkserver_preload(list(FORKSERVER_PRELOAD))
    env = _forkserver_env()
    with _environ_kept(env):
        os.environ.update(env)
        forkserver.ensure_running()


def _forkserver_env() -> dict[str, str]:
    """:data:`FORKSERVER_ENV`, with the values of a ``distributed.nanny.pre-spawn-environ`` of the user's config."""
    import dask

    user = (
        dask.config.get("distributed.nanny.pre-spawn-environ", None) or {}
    )  # distributed's defaults not loaded
    env = {**FORKSERVER_ENV, **{k: str(v) for k, v in user.items() if v is not None}}
    env.pop("MALLOC_TRIM_THRESHOLD_", None)  # left unset, as for the workers (see _start_local)
    return env


@contextlib.contextmanager
def _environ_kept(keys: Iterable[str]) -> Iterator[None]:
    """Put the variables ``keys`` of ``os.environ`` back as they were on exit (unset ones unset again)."""
    saved = {k: os.environ.get(k) for k in keys}
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _set_forkserver_preload() -> None:
    """Preload :data:`FORKSERVER_PRELOAD` in the forkserver (no effect once it runs)."""
    import multiprocessing

    from distributed import utils

    # distributed's own list, set on its first get_mp_context(), would import pandas and lz4 here, in
    # this process, where they are installed: marked as set, it is skipped (a no-op should it go)
    utils._forkserver_preload_set = True  # type: ignore[attr-defined]
    multiprocessing.get_context("forkserver").set_forkserver_preload(list(FORKSERVER_PRELOAD))


def _prepare_worker(names: tuple[str, ...]) -> None:
    """Import ``names`` in a worker and give its BLAS one thread (a worker has one thread)."""
    import importlib

    from streamridge.parallel import blas_controller

    for name in names:
        importlib.import_module(name)
    blas_controller().limit(limits=1)


def _close_local(future: cf.Future[tuple[Any, Any]]) -> None:
    """Close the client and cluster of :func:`_start_local` (waiting for a start still running)."""
    if future.exception() is not None:
        return
    cluster, client = future.result()
    try:
        client.close()
    finally:
        cluster.close()


def _local_workers(spec: str) -> int:
    _, _, n = spec.partition(":")
    try:
        value = int(n) if n else n_cpus()
    except ValueError:
        value = 0
    if value < 1:
        raise ParameterError(f"scheduler 'local:N' needs N >= 1 worker processes; got {spec!r}")
    return value


def _client_workers(client: Any) -> int:
    try:
        return max(1, sum(client.nthreads().values()))
    except Exception:
        return 1
