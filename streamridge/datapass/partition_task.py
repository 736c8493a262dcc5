"""The task of one partition: read its rows once, hand them to the kernel in sub-blocks.

:func:`run_partition` reads the partition's rows of X in read blocks of whole stored
chunks (:func:`streamridge.sources.blocks.block_ranges`, :func:`read_blocks`), the 1-D arrays beside them, each
stored chunk once (:class:`RangeCursor`), and adds sub-blocks of ``plan.sub_rows`` rows
to the kernel; the plan (:mod:`streamridge.datapass.partitions`) says how.
A read block that is one stored chunk of several sub-blocks, from a reader that can
decode it in pieces (zstd, zlib and gzip zarr chunks), is decoded one sub-block at a
time (:mod:`streamridge.sources.pieces`) into a few reused arrays: the task holds the
compressed chunk (a local file's is read as it is decoded) and a few sub-blocks, not
the decoded chunk, and where a core would idle the next pieces decode while the kernel
accumulates.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamridge.datapass.partitions import Plan, ahead_slots, streams_pieces
from streamridge.sources import ROLES
from streamridge.sources.blocks import block_ranges


class RangeCursor:
    """Sequential reads of one 1-D (or y) array in whole stored chunks, each decoded once.

    Parameters
    ----------
    reader : ArrayReader
    hi : int
        End of the partition (reads never go past it).
    """

    def __init__(self, reader: Any, lo: int, hi: int) -> None:
        self.reader, self.grid, self.hi = reader, reader.grid(), hi
        self.b0 = self.b1 = lo
        self.buf: np.ndarray | None = None

    def take(self, a: int, b: int, ahead: int) -> np.ndarray:
        """Rows ``[a, b)``; a read reaches up to the stored boundary at or after ``ahead``."""
        if b > self.b1:
            end = min(self.hi, max(b, self.grid.ceil(ahead, unit=True)))
            part = self.reader.read(self.b1, end)
            keep = None if self.buf is None or a >= self.b1 else self.buf[max(a, self.b0) - self.b0 :]
            self.buf = part if keep is None or len(keep) == 0 else np.concatenate([keep, part])
            self.b0, self.b1 = end - self.buf.shape[0], end
        assert self.buf is not None
        return self.buf[a - self.b0 : b - self.b0]


def read_blocks(
    X: Any, start: int, stop: int, read_rows: int, *, prefetch: bool = False, read: Any = None
) -> Any:
    """Yield ``(a, b, block)``: X rows ``[a, b)`` read in whole stored read units.

    With ``prefetch`` the next block is read (and decoded) by a thread of
    this task while the caller works on the current one: two read blocks in
    memory instead of one, and the read overlaps the statistics when a core
    is free (a partition running alone, or the last ones of a pass).
    ``read(a, b)`` replaces ``X.read`` (e.g. to read the 1-D arrays of the
    block with it, on the same thread); ``block`` is what it returns.
    """
    read = X.read if read is None else read
    ranges = block_ranges(X, start, stop, read_rows)
    if not prefetch:
        for a, b in ranges:
            yield a, b, read(a, b)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1, thread_name_prefix="streamridge-read") as pool:
        nxt = next(ranges, None)
        fut = None if nxt is None else pool.submit(read, *nxt)
        while fut is not None and nxt is not None:
            (a, b), block = nxt, fut.result()
            nxt = next(ranges, None)
            fut = None if nxt is None else pool.submit(read, *nxt)
            yield a, b, block
            del block


def _all_dask(readers: dict[str, Any]) -> bool:
    return all(r is None or hasattr(getattr(r, "array", None), "dask") for r in readers.values())


def _joint_blocks(readers: dict[str, Any], start: int, stop: int, read_rows: int) -> Any:
    """Yield ``(a, b, [X, y, groups, weights])`` of dask arrays computed in one call per block.

    Upstream work shared by X and y (one task producing both, e.g. a
    simulation) then runs once per block, not once per array.
    """
    import dask
    from dask.local import get_sync  # a callable: dask imports distributed to resolve the name "sync"

    for a, b in block_ranges(readers["X"], start, stop, read_rows):
        present = [role for role in ROLES if readers.get(role) is not None]
        views = [readers[r].array[a - readers[r].offset : b - readers[r].offset] for r in present]
        values = dict(zip(present, dask.compute(*views, scheduler=get_sync)))
        yield a, b, [None if values.get(r) is None else np.asarray(values[r]) for r in ROLES]


def run_partition(
    readers: dict[str, Any], start: int, stop: int, plan: Plan, kernel: Any, row_start: int
) -> Any:
    """The task of one partition: read reader rows ``[start, stop)`` once, return ``kernel``'s result.

    With ``plan.lanes > 1`` sub-block ``j`` goes to accumulator ``j % lanes``,
    each accumulator on a thread of its own, and their results are merged in
    lane order at the end (the same result on every scheduler).

    Parameters
    ----------
    readers : dict of role to ArrayReader or None
    start, stop : int
        Reader rows of the partition.
    plan : Plan
        Read-block and sub-block sizes.
    kernel : a kernel of the pass (``start``, ``add``, ``finish``, ``merge``; :mod:`streamridge.datapass.driver`)
    row_start : int
        Global row index of reader row ``start`` (fold assignment).
    """
    lanes = max(1, plan.lanes)
    accs = [kernel.start() for _ in range(lanes)]
    pool = cells = None
    if lanes > 1:
        import concurrent.futures as cf

        pool = cf.ThreadPoolExecutor(lanes, thread_name_prefix="streamridge-lane")
    elif plan.cell_threads > 1 and hasattr(accs[0], "use_threads"):
        import concurrent.futures as cf

        cells = cf.ThreadPoolExecutor(plan.cell_threads - 1, thread_name_prefix="streamridge-cells")
        accs[0].use_threads(cells, plan.cell_threads)
    try:
        for sub_blocks in _sub_blocks(readers, start, stop, plan, row_start):
            if pool is None:
                _add_all(kernel, accs[0], sub_blocks)
            else:
                jobs = [pool.submit(_add_all, kernel, accs[k], sub_blocks[k::lanes]) for k in range(lanes)]
                for job in jobs:
                    job.result()
            del sub_blocks  # not held while the next sub-blocks are read (or decoded)
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
        if cells is not None:
            cells.shutdown(wait=True)
            accs[0].use_threads(None, 1)
    out = kernel.finish(accs[0])
    for acc in accs[1:]:
        out = kernel.merge(out, kernel.finish(acc))
    return out


def _add_all(kernel: Any, acc: Any, sub_blocks: list[tuple[Any, ...]]) -> None:
    for args in sub_blocks:
        kernel.add(acc, *args)


def _sub_blocks(readers: dict[str, Any], start: int, stop: int, plan: Plan, row_start: int) -> Any:
    """Per read block, its sub-blocks as ``kernel.add`` arguments ``(X, y, groups, weights, row)``."""
    if _all_dask(readers):  # dask arrays: every array of a block in one compute call
        for a, b, (block, y, g, w) in _joint_blocks(readers, start, stop, plan.read_rows):
            out = []
            for s in range(a, b, plan.sub_rows):
                sl = slice(s - a, min(b, s + plan.sub_rows) - a)
                out.append(
                    (block[sl], *(None if v is None else v[sl] for v in (y, g, w)), row_start + (s - start))
                )
            yield out
        return
    cursors = {
        role: None if readers.get(role) is None else RangeCursor(readers[role], start, stop)
        for role in ROLES[1:]
    }
    if streams_pieces(readers["X"], plan):
        yield from _piece_groups(readers["X"], cursors, start, stop, plan, row_start)
        return

    def ones(a: int, b: int) -> list[Any]:
        return [None if c is None else c.take(a, b, b) for c in cursors.values()]

    # the 1-D arrays of the block are read with X, on the read-ahead thread where there is one: the
    # statistics never wait on them (they waited 30-50 ms of a 0.2 s pass on zarr's event loop); over a
    # network, on a thread of their own beside X's read: one round trip per block, not two
    beside = None
    if plan.remote and any(c is not None for c in cursors.values()):
        from concurrent.futures import ThreadPoolExecutor

        beside = ThreadPoolExecutor(1, thread_name_prefix="streamridge-read-1d")

    def read(a: int, b: int) -> tuple[np.ndarray, list[Any]]:
        if beside is None:
            return readers["X"].read(a, b), ones(a, b)
        job = beside.submit(ones, a, b)
        return readers["X"].read(a, b), job.result()

    try:
        for a, b, (block, values) in read_blocks(
            readers["X"], start, stop, plan.read_rows, prefetch=plan.prefetch, read=read
        ):
            out = []
            for s in range(a, b, plan.sub_rows):
                e = min(b, s + plan.sub_rows)
                y, g, w = (None if v is None else v[s - a : e - a] for v in values)
                out.append((block[s - a : e - a], y, g, w, row_start + (s - start)))
            yield out
            del block, values, out
    finally:
        if beside is not None:
            beside.shutdown(wait=True)


def _piece_groups(X: Any, cursors: dict[str, Any], start: int, stop: int, plan: Plan, row_start: int) -> Any:
    """:func:`_sub_blocks` of blocks decoded in pieces: lists of ``lanes`` sub-blocks, as they decode.

    Sub-block ``j`` of a read block is item ``j % lanes`` of its list, as in a
    whole block's list, so each lane adds the same sub-blocks in the same order.
    """
    from streamridge.sources.pieces import piece_stream

    ranges = block_ranges(X, start, stop, plan.read_rows)
    slots = ahead_slots(X, plan) if plan.prefetch else 0

    def ones(s: int, e: int, b: int) -> list[Any]:  # read with the piece (on the decode thread when ahead)
        return [None if c is None else c.take(s, e, b) for c in cursors.values()]

    stream = piece_stream(
        X, ranges, plan.sub_rows, ahead=slots > 0, slots=slots or None, group=max(1, plan.lanes), side=ones
    )
    for group in stream:
        out = [(piece, y, g, w, row_start + (s - start)) for _a, _b, s, piece, (y, g, w) in group]
        del group
        yield out
        del out  # the pieces' arrays are reused once the next group is asked for
