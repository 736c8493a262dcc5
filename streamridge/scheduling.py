"""Where the data pass runs: threads, processes, a local dask cluster or a remote scheduler.

``scheduler`` accepts:

``None`` / ``"threads"``   dask's threaded scheduler in this process (default)
``"sync"``                 one thread, in order (debugging)
``"processes"``            dask's multiprocessing scheduler
``"local:N"``              a dask.distributed LocalCluster of N single-threaded worker processes
``"tcp://host:port"``      an existing dask.distributed scheduler (any address Client accepts)
a ``distributed.Client``   used as is
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .errors import ParameterError, SchedulerError
from .parallel import n_cpus

CONNECT_TIMEOUT_S = 10.0


@dataclass
class Scheduler:
    """A resolved scheduler: what to pass to ``dask.compute`` and how many workers it has."""

    kind: str  # "threads" | "sync" | "processes" | "distributed"
    target: Any  # argument of dask.compute(scheduler=...)
    n_workers: int
    client: Any = None
    label: str = ""


def describe(spec: Any) -> str:
    """Short text of a scheduler spec (for reports)."""
    if spec is None:
        return "threads"
    if isinstance(spec, str):
        return spec
    return type(spec).__name__


@contextlib.contextmanager
def open_scheduler(spec: Any) -> Iterator[Scheduler]:
    """Resolve ``spec`` (see module docstring), closing what was started here on exit.

    Raises
    ------
    SchedulerError
        If a scheduler address cannot be reached within ``CONNECT_TIMEOUT_S``.
    ParameterError
        If ``spec`` is not understood.
    """
    if spec is None or spec in ("threads", "threading"):
        yield Scheduler("threads", "threads", n_cpus(), label="threads")
        return
    if spec in ("sync", "synchronous", "single-threaded"):
        yield Scheduler("sync", "sync", 1, label="sync")
        return
    if spec in ("processes", "multiprocessing"):
        yield Scheduler("processes", "processes", n_cpus(), label="processes")
        return
    if hasattr(spec, "scheduler_info") and hasattr(spec, "submit"):
        yield Scheduler("distributed", spec, _client_workers(spec), client=spec, label=str(getattr(spec, "scheduler", "client")))
        return
    if not isinstance(spec, str):
        raise ParameterError(f"scheduler must be 'threads', 'processes', 'sync', 'local:N', an address or a Client; got {spec!r}")
    from distributed import Client, LocalCluster

    if spec.startswith("local"):
        n = _local_workers(spec)
        with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, Client(cluster) as client:
            yield Scheduler("distributed", client, n, client=client, label=f"local:{n}")
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
