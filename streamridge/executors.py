"""Run chunk tasks with a bounded window of tasks in flight and yield results in chunk order.

Used by the data pass on every scheduler: a thread pool (one BLAS thread per
worker), a process pool, or a dask.distributed client.  At most ``window``
chunks are in flight or buffered, so memory does not grow with the row count.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from .parallel import blas_controller
from .scheduling import Scheduler
from .stats import FoldStats, merge


class TreeMerger:
    """In-order pairwise merge (a binary counter): O(log n) partial results, deterministic order."""

    def __init__(self, base: FoldStats) -> None:
        self.base = base
        self.stack: list[tuple[int, FoldStats]] = []

    def push(self, s: FoldStats) -> None:
        """Add the next chunk's statistics."""
        level = 0
        while self.stack and self.stack[-1][0] == level:
            _, left = self.stack.pop()
            s = merge(left, s)
            level += 1
        self.stack.append((level, s))

    def total(self) -> FoldStats:
        """Base merged with everything pushed so far (the stack is left as is)."""
        out = self.base
        for _, s in self.stack:
            out = merge(out, s)
        return out


def _materialize(a: Any) -> Any:
    if a is None:
        return None
    return np.asarray(a.compute(scheduler="sync")) if hasattr(a, "compute") else np.asarray(a)


def materialize_all(blocks: Sequence[Any]) -> list[Any]:
    """NumPy arrays of one chunk's blocks, the dask ones computed together in one call.

    One call computes upstream work shared by X and y (one task producing both,
    e.g. a simulation) once, not once per block.
    """
    out = [None if b is None else b if not hasattr(b, "compute") else None for b in blocks]
    lazy = [i for i, b in enumerate(blocks) if b is not None and hasattr(b, "compute")]
    if lazy:
        import dask

        for i, v in zip(lazy, dask.compute(*(blocks[i] for i in lazy), scheduler="sync")):
            out[i] = v
    return [None if v is None else np.asarray(v) for v in out]


def compute_chunk(fn: Callable[..., FoldStats], blocks: Sequence[Any], *args: Any) -> FoldStats:
    """Read the blocks of one chunk (dask arrays, computed together) and apply the kernel ``fn``."""
    return fn(*materialize_all(blocks), *args)


def _init_process_worker() -> None:
    blas_controller().limit(limits=1)


def run_in_order(
    fn: Callable[..., FoldStats],
    calls: Sequence[tuple[Sequence[Any], tuple[Any, ...]]],
    sched: Scheduler,
    *,
    window: int | None = None,
) -> Iterator[FoldStats]:
    """Yield ``compute_chunk(fn, blocks, *args)`` for each call, in order.

    Parameters
    ----------
    fn : the chunk kernel (pure, picklable)
    calls : sequence of (blocks, args) per chunk, blocks being dask arrays
    sched : the resolved scheduler
    window : tasks in flight (default: workers + 2)
    """
    window = window or sched.n_workers + 2
    if sched.kind == "sync" or len(calls) == 0:
        for blocks, args in calls:
            yield compute_chunk(fn, blocks, *args)
        return
    if sched.kind == "distributed":
        yield from _run_distributed(fn, calls, sched, window)
        return
    if sched.kind == "processes":
        ctx = multiprocessing.get_context("spawn")
        pool: cf.Executor = cf.ProcessPoolExecutor(sched.n_workers, mp_context=ctx, initializer=_init_process_worker)
        limit = None
    else:
        pool = cf.ThreadPoolExecutor(sched.n_workers, thread_name_prefix="streamridge-pass")
        limit = blas_controller().limit(limits=1) if sched.n_workers > 1 else None
    try:
        pending: dict[int, cf.Future[FoldStats]] = {}
        nxt = 0
        for i in range(len(calls)):
            while nxt < len(calls) and nxt < i + window:
                blocks, args = calls[nxt]
                pending[nxt] = pool.submit(compute_chunk, fn, blocks, *args)
                nxt += 1
            yield pending.pop(i).result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        if limit is not None:
            limit.restore_original_limits()


def _run_distributed(fn: Callable[..., FoldStats], calls: Sequence[tuple[Sequence[Any], tuple[Any, ...]]], sched: Scheduler, window: int) -> Iterator[FoldStats]:
    import dask

    client = sched.client
    task = dask.delayed(fn, pure=True)
    pending: dict[int, Any] = {}
    nxt = 0
    try:
        for i in range(len(calls)):
            while nxt < len(calls) and nxt < i + window:
                blocks, args = calls[nxt]
                pending[nxt] = client.compute(task(*[None if b is None else b.to_delayed().reshape(-1)[0] for b in blocks], *args))
                nxt += 1
            yield pending.pop(i).result()
    finally:
        for f in pending.values():
            f.cancel()
