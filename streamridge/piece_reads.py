"""A partition's read blocks as a stream of sub-block pieces, decoded ahead on a thread of the task.

A reader that can decode one stored chunk in pieces (``reader.pieces``, e.g.
a zstd zarr chunk, :mod:`streamridge.sources._zstream`) hands them over one
sub-block at a time: a decode thread fills a queue of at most ``depth``
pieces while the task's kernel accumulates the ones before.  Memory per
task: the compressed chunk and ``depth`` + lanes + 1 sub-blocks, not the
decoded chunk; decode and statistics overlap when a core is free.  Blocks the
reader cannot decode in pieces are read whole (``reader.read``) and cut into
views.  The pieces' row ranges are exactly the sub-blocks of the block, so
the statistics do not depend on this path.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

PIECE_DEPTH = 2  # decoded pieces waiting in the queue (beside the one being decoded and those in use)
_END = object()


def block_pieces(reader: Any, a: int, b: int, sub_rows: int) -> Iterator[tuple[int, np.ndarray]]:
    """Yield ``(s, piece)``: rows ``[s, s + len(piece))`` of read block ``[a, b)`` in sub-blocks of ``sub_rows``."""
    pieces = reader.pieces(a, b, sub_rows)
    if pieces is None:
        block = reader.read(a, b)
        for s in range(a, b, sub_rows):
            yield s, block[s - a : min(b, s + sub_rows) - a]
        return
    s = a
    for piece in pieces:  # to its end: the reader checks the chunk's end after the last piece
        yield s, piece
        s += piece.shape[0]


def piece_stream(
    reader: Any,
    ranges: Iterable[tuple[int, int]],
    sub_rows: int,
    *,
    ahead: bool = True,
    depth: int = PIECE_DEPTH,
    side: Callable[[int, int, int], Any] | None = None,
) -> Iterator[tuple[int, int, int, np.ndarray, Any]]:
    """Yield ``(a, b, s, piece, extra)`` for every sub-block of every read block ``[a, b)``, decoded ahead.

    Without ``ahead`` the pieces are decoded in the caller's thread as they
    are asked for (no thread: every core of the pass already computes).

    Parameters
    ----------
    reader : ArrayReader
    ranges : iterable of (int, int)
        Read blocks, in order.
    sub_rows : int
        Rows per piece (the last piece of a block may be shorter).
    ahead : bool
        Decode on a thread of this task, ahead of the caller.
    depth : int
        Pieces decoded ahead at most.
    side : callable or None
        ``side(s, e, b)`` for the piece of rows ``[s, e)`` of block ``[a, b)``,
        called in order on the thread that decodes (e.g. reads of the 1-D
        arrays); ``extra`` is its result (None without it).

    Raises
    ------
    Exception
        Whatever the reader raised, in the caller's thread.
    """
    def extra(s: int, piece: np.ndarray, b: int) -> Any:
        return None if side is None else side(s, s + piece.shape[0], b)

    if not ahead:
        for a, b in ranges:
            for s, piece in block_pieces(reader, a, b, sub_rows):
                yield a, b, s, piece, extra(s, piece, b)
                del piece
        return
    q: queue.Queue[Any] = queue.Queue(maxsize=max(1, depth))
    closing = threading.Event()

    def produce() -> None:
        try:
            for a, b in ranges:
                for s, piece in block_pieces(reader, a, b, sub_rows):
                    if not _put(q, (a, b, s, piece, extra(s, piece, b)), closing):
                        return
                    del piece
            _put(q, _END, closing)
        except BaseException as exc:
            _put(q, exc, closing)

    thread = threading.Thread(target=produce, name="streamridge-decode", daemon=True)
    thread.start()
    try:
        while (item := q.get()) is not _END:
            if isinstance(item, BaseException):
                raise item
            yield item
            del item
    finally:
        closing.set()
        thread.join()


def _put(q: queue.Queue[Any], item: Any, closing: threading.Event) -> bool:
    """Put ``item`` once there is room; False when the consumer has gone."""
    while not closing.is_set():
        try:
            q.put(item, timeout=0.05)
            return True
        except queue.Full:
            continue
    return False
