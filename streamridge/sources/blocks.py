"""The rows of a reader in read blocks of whole stored read units, each decoded by one read.

The pass (:mod:`streamridge.datapass.partition_task`) and the distinct values of a
column (:func:`streamridge.sources.distinct_values`) read rows this way, so that no
stored chunk is decoded twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

#: a partition's first and last read blocks are about 1 / EDGE_PARTS of a read block
EDGE_PARTS = 4


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
