"""Reading rows in blocks of whole stored chunks: the read ranges of a row range, and distinct values.

:func:`block_ranges` cuts a row range into read blocks that never split a stored read
unit (a chunk, or a shard's inner chunk), so no stored chunk is decoded twice; the pass
and ``predict`` read through it, and :func:`distinct_values` (the labels or groups of a
column) reduces its blocks on the cores' threads.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np

from streamridge.sources._protocol import ArrayReader

EDGE_PARTS = 4  # a partition's first and last read blocks are about 1 / EDGE_PARTS of a read block


def block_ranges(X: Any, start: int, stop: int, read_rows: int) -> Iterator[tuple[int, int]]:
    """Yield ``(a, b)``: X rows ``[start, stop)`` in read blocks of whole stored read units.

    The first and the last block of a partition are cut to about a quarter of
    ``read_rows`` where stored read units allow (``EDGE_PARTS``): a task
    reading ahead waits for its first block before its statistics start, and
    its last block's statistics run after its reads are done, so short edges
    shorten both (a read-bound pass of two 32 MB blocks per task spent a
    quarter of its time in them).  A function of the rows and the grid only.
    """
    grid = X.grid()
    edge = max(1, read_rows // EDGE_PARTS)

    def plain() -> Any:
        pos = start
        while pos < stop:
            end = grid.floor(pos + read_rows, unit=True)
            if end <= pos:
                end = grid.ceil(pos + 1, unit=True)
            end = min(stop, end)
            yield pos, end
            pos = end

    def head(a: int, b: int) -> list[tuple[int, int]]:
        m = grid.floor(a + edge, unit=True)
        return [(a, m), (m, b)] if a < m < b else [(a, b)]

    def tail(a: int, b: int) -> list[tuple[int, int]]:
        m = grid.ceil(b - edge, unit=True)
        return [(a, m), (m, b)] if a < m < b and b - m < m - a else [(a, b)]

    blocks = plain()
    prev = next(blocks, None)
    first = True
    for cur in blocks:
        yield from head(*prev) if first else [prev]  # type: ignore[misc]
        first, prev = False, cur
    if prev is not None:
        edges = head(*prev) if first else [prev]
        yield from edges[:-1]
        yield from tail(*edges[-1])


def distinct_values(reader: ArrayReader, start: int, stop: int, block_rows: int = 2**20) -> np.ndarray:
    """Sorted distinct values of reader rows ``[start, stop)``.

    Blocks of whole stored chunks are read and reduced on the cores' threads
    (a few blocks in flight); their distinct values are merged whenever they
    outnumber those merged so far, so the merging costs O(n log n) in all and
    memory holds the distinct values, never the column.
    """
    from concurrent.futures import ThreadPoolExecutor

    from streamridge.parallel import n_cpus

    def one(a: int, b: int) -> np.ndarray:
        return np.unique(reader.read(a, b).reshape(-1))

    out = np.empty(0, dtype=reader.dtype)
    parts: list[np.ndarray] = []
    pending = 0
    ranges = block_ranges(reader, start, stop, block_rows)
    workers = max(1, n_cpus())
    with ThreadPoolExecutor(workers, thread_name_prefix="streamridge-distinct") as pool:
        jobs = [pool.submit(one, *r) for r in itertools.islice(ranges, 2 * workers)]
        while jobs:
            values = jobs.pop(0).result()
            nxt = next(ranges, None)
            if nxt is not None:
                jobs.append(pool.submit(one, *nxt))
            parts.append(values)
            pending += len(values)
            if pending >= max(len(out), block_rows):
                out, parts, pending = np.unique(np.concatenate([out, *parts])), [], 0
    return np.unique(np.concatenate([out, *parts])) if parts else out
