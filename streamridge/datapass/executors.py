"""Run partition tasks and reduce their results in a fixed tree, merging where the results are.

The tree is a binary counter over partitions ``0, 1, 2, ...`` (partition ``i``
is merged with the partial of the same level, as in a binary increment; the
O(log n) partials left are folded left to right at the end), so its shape is
a pure function of the number of partitions: the statistics are bit-identical
on every scheduler and worker count, and a pass resumed from a checkpoint (which
keeps the partials) merges in the same order as an uninterrupted one.

On a dask.distributed cluster partition results never travel to the driver:
merges are tasks on the workers and the driver fetches one result per pass
(plus the partials when it writes a checkpoint).  Where there are partitions
enough, a task runs an aligned block of 2, 4, ... partitions and merges them
itself by the same tree (:func:`partition_blocks`), so the scheduler handles
fewer tasks and the statistics keep their bits.  Locally (sync, threads,
processes) results come back to this process anyway and are merged here.
At most ``window`` tasks (partitions, or blocks of them) are in flight, so
memory does not grow with the number of rows.
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import multiprocessing
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any

import numpy as np

from streamridge.datapass.scheduling import Scheduler
from streamridge.errors import StreamRidgeError
from streamridge.parallel import blas_controller

Node = Any  # a partial result, or a future of one
Snapshot = Callable[[], list[tuple[int, Any]]]


class TreeReducer:
    """Binary-counter reduction with a deterministic shape.

    Parameters
    ----------
    merge : callable (a, b) -> node
        Merges two nodes (or submits their merge and returns a future).
    stack : list of (level, node)
        Partials of a resumed pass.
    """

    def __init__(self, merge: Callable[[Node, Node], Node], stack: Sequence[tuple[int, Node]] = ()) -> None:
        self.merge = merge
        self.stack: list[tuple[int, Node]] = list(stack)

    def push(self, node: Node, level: int = 0) -> None:
        """Add the next partition's result, or (``level`` j) the merged results of the next 2**j partitions.

        A node of level j must follow a multiple of 2**j partitions; it then takes the place of its
        2**j partitions pushed one by one (the same merges, in the same order).
        """
        while self.stack and self.stack[-1][0] == level:
            _, left = self.stack.pop()
            node = self.merge(left, node)
            level += 1
        self.stack.append((level, node))

    def fold(self) -> Node | None:
        """All partials merged left to right (None when nothing was pushed)."""
        out = None
        for _, node in self.stack:
            out = node if out is None else self.merge(out, node)
        return out


def _init_process_worker() -> None:
    blas_controller().limit(limits=1)


def reduce_partitions(
    task: Callable[..., Any],
    args: Callable[[int], tuple[Any, ...]],
    n: int,
    merge: Callable[[Any, Any], Any],
    sched: Scheduler,
    *,
    first: int = 0,
    stack: Sequence[tuple[int, Any]] = (),
    window: int | None = None,
    on_done: Callable[[int, Snapshot], None] | None = None,
    name_error: Callable[[int, Exception], Exception] | None = None,
) -> Any:
    """``merge``-reduce ``task(*args(i))`` for partitions ``first .. n - 1`` onto ``stack``.

    Parameters
    ----------
    task : the partition kernel (pure, picklable)
    args : partition index -> arguments of ``task``
    n : number of partitions
    merge : associative merge of two results (picklable)
    sched : the resolved scheduler
    first, stack : resume point: partitions done and the reducer's partials
    window : tasks in flight, a partition or (on a cluster) a block of them each (default: workers + 2)
    on_done : called with ``(i, snapshot)`` after partition ``i`` joined the tree, for every
        partition in order; ``snapshot()`` returns the partials as concrete results (for
        checkpoints), and is None where the partials hold partitions after ``i`` too (inside
        a block of partitions run by one task)
    name_error : turns a foreign exception of partition ``i`` into a streamridge error

    Returns
    -------
    The merged result, or None when there was nothing to merge.
    """
    window = window or sched.n_workers + 2
    run = _run_distributed if sched.kind == "distributed" else _run_local
    return run(task, args, n, merge, sched, first, stack, window, on_done or (lambda i, s: None), name_error)


#: modules whose frames in a traceback mean "failed while reading or decoding the data"
_READING_MODULES = (
    "zarr",
    "numcodecs",
    "h5py",
    "fsspec",
    "s3fs",
    "gcsfs",
    "aiohttp",
    "dask",
    "zstandard",
    "backports",
    "compression",
    "streamridge.sources",
)


def raised_reading(exc: BaseException) -> bool:
    """Whether ``exc`` failed a read: an ``OSError``, or raised inside the storage, codec or dask layers.

    Judged from the traceback where it is raised (:func:`call_task` marks it
    there, since a traceback does not survive the trip from a worker process).
    """
    if isinstance(exc, OSError) or getattr(exc, "streamridge_read", False):
        return True
    tb = exc.__traceback__
    while tb is not None:
        name = str(tb.tb_frame.f_globals.get("__name__", ""))
        if any(name == mod or name.startswith(mod + ".") for mod in _READING_MODULES):
            return True
        tb = tb.tb_next
    return False


def call_task(task: Callable[..., Any], *args: Any) -> Any:
    """``task(*args)`` on a worker; an exception raised by a read is marked so before it travels."""
    try:
        return task(*args)
    except Exception as exc:
        if not isinstance(exc, StreamRidgeError) and raised_reading(exc):
            try:
                exc.streamridge_read = True  # type: ignore[attr-defined]  # kept by pickle (instance dict)
            except AttributeError:  # pragma: no cover - an exception type without a __dict__
                pass
        raise


def _named(name_error: Callable[[int, Exception], Exception] | None, i: int, exc: Exception) -> Exception:
    if isinstance(exc, StreamRidgeError) or name_error is None:
        return exc
    return name_error(i, exc)


def _run_local(task, args, n, merge, sched, first, stack, window, on_done, name_error):  # type: ignore[no-untyped-def]
    reducer = TreeReducer(merge, stack)

    def snapshot() -> list[tuple[int, Any]]:
        return list(reducer.stack)

    def finish(i: int, get: Callable[[], Any]) -> None:
        try:
            node = get()
        except Exception as exc:
            named = _named(name_error, i, exc)
            if named is exc:
                raise
            raise named from exc
        reducer.push(node)
        on_done(i, snapshot)

    # one BLAS thread per task, also for a lone one: the kernel's cache-sized rank-k updates ran up to ~12x
    # slower on threaded OpenBLAS (zarr-400mb N=50: statistics 6.5-6.9 s on 2 threads, 0.54-0.57 s on 1)
    limit = blas_controller().limit(limits=1)
    pool: cf.Executor | None = None
    try:
        if sched.kind == "sync" or n - first <= 0:
            for i in range(first, n):
                finish(i, lambda i=i: call_task(task, *args(i)))
            return reducer.fold()
        if sched.kind == "processes":
            ctx = multiprocessing.get_context("spawn")
            pool = cf.ProcessPoolExecutor(sched.n_workers, mp_context=ctx, initializer=_init_process_worker)
        else:
            pool = cf.ThreadPoolExecutor(sched.n_workers, thread_name_prefix="streamridge-pass")
        pending: dict[int, cf.Future[Any]] = {}
        nxt = first
        for i in range(first, n):
            while nxt < n and nxt < i + window:
                pending[nxt] = pool.submit(call_task, task, *args(nxt))
                nxt += 1
            finish(i, pending.pop(i).result)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        limit.restore_original_limits()
    return reducer.fold()


def ordered_results(
    task: Callable[..., Any],
    args: Callable[[int], tuple[Any, ...]],
    n: int,
    sched: Scheduler,
    *,
    window: int | None = None,
    name_error: Callable[[int, Exception], Exception] | None = None,
) -> Generator[tuple[int, Any], None, None]:
    """``(i, task(*args(i)))`` for ``i = 0 .. n - 1`` in order, at most ``window`` tasks in flight (no reduction).

    For passes whose results are written in row order as they come (``predict``):
    the tasks after the one yielded run while the caller uses it.  Closing the
    iterator cancels the tasks not started and waits for the running ones.
    """
    window = window or sched.n_workers + 2
    if sched.kind == "distributed":
        client = sched.client
        yield from _in_order(
            lambda i: client.submit(call_task, task, *args(i), pure=False, priority=-i), n, window, name_error
        )
        return
    limit = blas_controller().limit(limits=1)  # one BLAS thread per task, as in reduce_partitions
    try:
        if sched.kind == "sync" or n <= 1:
            for i in range(n):
                yield i, _get(name_error, i, functools.partial(call_task, task, *args(i)))
            return
        pool: cf.Executor
        if sched.kind == "processes":
            ctx = multiprocessing.get_context("spawn")
            pool = cf.ProcessPoolExecutor(sched.n_workers, mp_context=ctx, initializer=_init_process_worker)
        else:
            pool = cf.ThreadPoolExecutor(sched.n_workers, thread_name_prefix="streamridge-pass")
        with pool:
            yield from _in_order(lambda i: pool.submit(call_task, task, *args(i)), n, window, name_error)
    finally:
        limit.restore_original_limits()


def _in_order(
    submit: Callable[[int], Any],
    n: int,
    window: int,
    name_error: Callable[[int, Exception], Exception] | None,
) -> Iterator[tuple[int, Any]]:
    """The results of ``submit(i)`` (futures), ``i = 0 .. n - 1``, in order; the futures not taken are cancelled."""
    pending: dict[int, Any] = {}
    try:
        nxt = 0
        for i in range(n):
            while nxt < n and nxt < i + window:
                pending[nxt] = submit(nxt)
                nxt += 1
            yield i, _get(name_error, i, pending.pop(i).result)
    finally:
        for f in pending.values():
            f.cancel()


def _get(name_error: Callable[[int, Exception], Exception] | None, i: int, get: Callable[[], Any]) -> Any:
    """``get()``, an exception named as partition ``i``'s."""
    try:
        return get()
    except Exception as exc:
        named = _named(name_error, i, exc)
        if named is exc:
            raise
        raise named from exc


#: partitions a cluster task may run as one block (:func:`partition_blocks`): a block of 4 holds at most 4
#: copies of the statistics while it merges (two merged, two being merged), the 4 of the pass's memory budget
MAX_BLOCK = 4
#: blocks are only as large as leaves this many tasks per worker (for balance)
BLOCK_TASKS_PER_WORKER = 4


def partition_blocks(first: int, n: int, workers: int, max_block: int = MAX_BLOCK) -> list[tuple[int, int]]:
    """``(start, size)`` of the tasks that run partitions ``first .. n - 1`` on a cluster of ``workers``.

    Each size is a power of two no larger than the largest that leaves
    :data:`BLOCK_TASKS_PER_WORKER` tasks per worker (and ``max_block``), and
    each block starts at a multiple of its size: the tree merges such a block
    of partitions into one node before it meets any other partition, so a task
    merging its block by the same tree gives the same node, bit for bit.
    """
    size = 1
    while size * 2 <= max_block and (n - first) // (size * 2) >= BLOCK_TASKS_PER_WORKER * max(1, workers):
        size *= 2
    out, p = [], first
    while p < n:
        s = size
        while s > 1 and (p % s or p + s > n):
            s //= 2
        out.append((p, s))
        p += s
    return out


def call_block(
    task: Callable[..., Any], merge: Callable[[Any, Any], Any], start: int, arglist: list[tuple[Any, ...]]
) -> Any:
    """``task(*args)`` of consecutive partitions ``start ..`` (an aligned block), merged by the pass's tree.

    An exception names its partition (``streamridge_partition``, kept by pickle).
    """
    reducer = TreeReducer(merge)
    for k, a in enumerate(arglist):
        try:
            reducer.push(call_task(task, *a))
        except Exception as exc:
            try:
                exc.streamridge_partition = start + k  # type: ignore[attr-defined]
            except AttributeError:  # pragma: no cover - an exception type without a __dict__
                pass
            raise
    ((_, node),) = reducer.stack  # an aligned block of 2**j partitions: one node of level j
    return node


def _run_distributed(task, args, n, merge, sched, first, stack, window, on_done, name_error):  # type: ignore[no-untyped-def]
    client = sched.client

    def submit_merge(a: Any, b: Any) -> Any:
        return client.submit(merge, a, b, pure=False, priority=10)

    reducer = TreeReducer(submit_merge, stack)

    def snapshot() -> list[tuple[int, Any]]:
        values = client.gather([node for _, node in reducer.stack])
        return [(level, v) for (level, _), v in zip(reducer.stack, values)]

    def submit(start: int, size: int, priority: int) -> Any:
        if size == 1:
            return client.submit(call_task, task, *args(start), pure=False, priority=priority)
        return client.submit(
            call_block,
            task,
            merge,
            start,
            [args(i) for i in range(start, start + size)],
            pure=False,
            priority=priority,
        )

    blocks = partition_blocks(first, n, sched.n_workers)
    pending: dict[int, Any] = {}
    nxt = 0
    try:
        for k, (start, size) in enumerate(blocks):
            while nxt < len(blocks) and nxt < k + window:
                pending[nxt] = submit(*blocks[nxt], priority=-nxt)
                nxt += 1
            fut = pending.pop(k)
            # waits through the future's own client (distributed.wait uses the default client: inside a
            # user's `with Client(...)` block that other client polled these futures, ~0.5 s per partition)
            exc = fut.exception()
            if exc is not None:
                raise _named(name_error, getattr(exc, "streamridge_partition", start), exc) from exc
            reducer.push(fut, size.bit_length() - 1)
            for i in range(start, start + size):
                on_done(i, snapshot if i == start + size - 1 else None)
        total = reducer.fold()
        return None if total is None else _result(total)
    finally:
        for f in pending.values():
            f.cancel()


def _result(node: Any) -> Any:
    """The value of a node: a future's result (the one transfer to the driver), or the node itself."""
    return node.result() if hasattr(node, "result") and hasattr(node, "key") else node


# --- reading one chunk's dask blocks together (the lanes of a stateful feature map, streamridge.datapass.plan)


def materialize_all(blocks: Sequence[Any]) -> list[Any]:
    """NumPy arrays of one chunk's blocks, the dask ones computed together in one call.

    One call computes upstream work shared by X and y (one task producing both,
    e.g. a simulation) once, not once per block.
    """
    out = [None if b is None else b if not hasattr(b, "compute") else None for b in blocks]
    lazy = [i for i, b in enumerate(blocks) if b is not None and hasattr(b, "compute")]
    if lazy:
        import dask
        from dask.local import get_sync

        for i, v in zip(lazy, dask.compute(*(blocks[i] for i in lazy), scheduler=get_sync)):
            out[i] = v
    return [None if v is None else np.asarray(v) for v in out]
