"""A partition's read blocks as a stream of sub-block pieces, decoded ahead on a thread of the task.

A reader that can decode one stored chunk in pieces (``reader.pieces``, e.g.
a zstd zarr chunk, :mod:`streamridge.sources._zdecode`) hands them over one
sub-block at a time, into arrays of a small pool (:class:`PieceBuffers`)
that are reused once the consumer has let go of them: a piece costs no
fresh pages (a 51 MB piece is a fresh ``mmap`` per allocation, whose pages
the kernel zeroes on first touch).  With ``ahead``, a decode thread decodes
while the task's kernel accumulates the pieces before; at most ``slots``
pieces exist at once (those queued, the one decoding, the consumer's group),
so memory per task is the compressed chunk and ``slots`` sub-blocks, not
the decoded chunk.  Blocks the reader cannot decode in pieces are read
whole (``reader.read``) and cut into views.  The pieces' row ranges are
exactly the sub-blocks of the block, so the statistics do not depend on
this path.
"""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

PIECE_DEPTH = 2  # decoded pieces waiting in the queue (beside the one being decoded and those in use)
_END = object()


def _free_refs() -> int:
    """``sys.getrefcount`` of an array held only by a list, seen from a loop over that list.

    Measured, not assumed: interpreters count borrowed references
    differently, and a count too high would overwrite a piece still in use.
    """
    pool = [np.empty(0)]
    for buf in pool:
        return sys.getrefcount(buf)
    raise AssertionError  # pragma: no cover


_FREE_REFS = _free_refs()


class _Closed(Exception):
    """The consumer has gone: the decode thread stops."""


class PieceBuffers:
    """A pool of piece arrays, each reused once nothing else refers to it.

    ``take(n)`` returns the first ``n`` rows of a pooled array nobody else
    holds (a view keeps its base alive, so a piece still in use is never
    handed out again), or of a new one.  With ``slots``, ``take`` first waits
    for one of ``slots`` tokens, which the consumer gives back with
    :meth:`release` once it is done with its pieces: at most ``slots`` pooled
    pieces exist at once.

    Parameters
    ----------
    rows : int
        Rows of the largest piece.
    row_shape : tuple of int
    dtype : numpy dtype
    keep : int
        Arrays kept for reuse.
    slots : int or None
        Pieces alive at once (None: no limit, e.g. pieces decoded in the
        consumer's own thread, which hold one group at a time).
    closing : threading.Event or None
        Set when the consumer has gone: a waiting ``take`` raises ``_Closed``.
    """

    def __init__(
        self,
        rows: int,
        row_shape: tuple[int, ...],
        dtype: Any,
        keep: int,
        slots: int | None = None,
        closing: threading.Event | None = None,
    ) -> None:
        self.rows, self.row_shape, self.dtype = rows, row_shape, np.dtype(dtype)
        self.keep = max(1, keep)
        self._pool: list[np.ndarray] = []
        self.allocated = 0  # new arrays made (the rest of the pieces reused one)
        self._tokens = None if slots is None else threading.Semaphore(max(1, slots))
        self._closing = closing

    def take(self, n: int) -> np.ndarray:
        """An array of ``n`` rows (``n <= rows``) for the next piece."""
        if self._tokens is not None:
            while not self._tokens.acquire(timeout=0.05):
                if self._closing is not None and self._closing.is_set():
                    raise _Closed
        for buf in self._pool:
            if sys.getrefcount(buf) <= _FREE_REFS:  # only the pool's list and this loop: no piece, no view
                return buf[:n]
        buf = np.empty((self.rows, *self.row_shape), dtype=self.dtype)
        self.allocated += 1
        if len(self._pool) < self.keep:
            self._pool.append(buf)
        else:  # a consumer that kept a piece: it is dropped from the pool, never overwritten
            self._pool[0] = buf
        return buf[:n]

    def release(self, n: int) -> None:
        """Give back ``n`` tokens (pieces the consumer is done with)."""
        if self._tokens is not None:
            for _ in range(n):
                self._tokens.release()


def block_pieces(
    reader: Any, a: int, b: int, sub_rows: int, buffers: PieceBuffers | None = None
) -> Iterator[tuple[int, np.ndarray, bool]]:
    """Yield ``(s, piece, pooled)``: rows ``[s, s + len(piece))`` of read block ``[a, b)`` in sub-blocks of ``sub_rows``.

    ``pooled``: the piece came from ``buffers`` (a token to give back).
    """
    pieces = (
        reader.pieces(a, b, sub_rows)
        if buffers is None
        else reader.pieces(a, b, sub_rows, alloc=buffers.take)
    )
    if pieces is None:
        block = reader.read(a, b)
        for s in range(a, b, sub_rows):
            yield s, block[s - a : min(b, s + sub_rows) - a], False
        return
    s = a
    for piece in pieces:  # to its end: the reader checks the chunk's end after the last piece
        yield s, piece, buffers is not None
        s += piece.shape[0]
        del piece  # not held while the next piece's array is taken


def piece_stream(
    reader: Any,
    ranges: Iterable[tuple[int, int]],
    sub_rows: int,
    *,
    ahead: bool = True,
    slots: int | None = None,
    group: int = 1,
    side: Callable[[int, int, int], Any] | None = None,
) -> Iterator[list[tuple[int, int, int, np.ndarray, Any]]]:
    """Yield groups of ``(a, b, s, piece, extra)`` for every sub-block of every read block ``[a, b)``.

    A group holds ``group`` consecutive sub-blocks of one read block (fewer at
    the block's end).  The consumer must be done with a group's pieces when
    it asks for the next group: their arrays are then reused.  Without
    ``ahead`` the pieces are decoded in the caller's thread as they are asked
    for (no thread: every core of the pass already computes).

    Parameters
    ----------
    reader : ArrayReader
    ranges : iterable of (int, int)
        Read blocks, in order.
    sub_rows : int
        Rows per piece (the last piece of a block may be shorter).
    ahead : bool
        Decode on a thread of this task, ahead of the caller.
    slots : int or None
        With ``ahead``: pieces alive at once, at least ``group + 1`` (default
        ``PIECE_DEPTH + 1 + group``: the queue, the one decoding, the group in use).
    group : int
        Sub-blocks per group (a task's lanes).
    side : callable or None
        ``side(s, e, b)`` for the piece of rows ``[s, e)`` of block ``[a, b)``,
        called in order on the thread that decodes (e.g. reads of the 1-D
        arrays); ``extra`` is its result (None without it).

    Raises
    ------
    Exception
        Whatever the reader raised, in the caller's thread.
    """
    group = max(1, group)
    shape = tuple(int(d) for d in reader.shape[1:])

    def items(buffers: PieceBuffers) -> Iterator[tuple[tuple[int, int, int, np.ndarray, Any], bool]]:
        for a, b in ranges:
            for s, piece, pooled in block_pieces(reader, a, b, sub_rows, buffers):
                yield (a, b, s, piece, None if side is None else side(s, s + piece.shape[0], b)), pooled
                del piece

    if not ahead:
        yield from _grouped(items(PieceBuffers(sub_rows, shape, reader.dtype, group)), group, None)
        return
    slots = max(group + 1, slots or PIECE_DEPTH + 1 + group)
    closing = threading.Event()
    buffers = PieceBuffers(sub_rows, shape, reader.dtype, slots, slots, closing)
    q: queue.Queue[Any] = queue.Queue(maxsize=slots)

    def produce() -> None:
        try:
            for item in items(buffers):
                if not _put(q, item, closing):
                    return
                del item
            _put(q, _END, closing)
        except _Closed:
            return
        except BaseException as exc:
            _put(q, exc, closing)

    def consume() -> Iterator[tuple[tuple[int, int, int, np.ndarray, Any], bool]]:
        while (item := q.get()) is not _END:
            if isinstance(item, BaseException):
                raise item
            yield item
            del item

    thread = threading.Thread(target=produce, name="streamridge-decode", daemon=True)
    thread.start()
    try:
        yield from _grouped(consume(), group, buffers)
    finally:
        closing.set()
        thread.join()


def _grouped(
    items: Iterator[tuple[tuple[int, int, int, np.ndarray, Any], bool]],
    group: int,
    buffers: PieceBuffers | None,
) -> Iterator[list[tuple[int, int, int, np.ndarray, Any]]]:
    """Groups of ``group`` items of one block; tokens of a group's pooled pieces given back when the next is asked for."""
    out: list[tuple[int, int, int, np.ndarray, Any]] = []
    pooled = 0
    for item, from_pool in items:
        out.append(item)
        pooled += from_pool
        end = item[2] + item[3].shape[0] == item[1]
        del item
        if len(out) == group or end:
            yield out
            out = []  # the consumer has let go of the group's pieces
            if buffers is not None:
                buffers.release(pooled)
            pooled = 0
    if out:
        yield out


def _put(q: queue.Queue[Any], item: Any, closing: threading.Event) -> bool:
    """Put ``item`` once there is room; False when the consumer has gone."""
    while not closing.is_set():
        try:
            q.put(item, timeout=0.05)
            return True
        except queue.Full:
            continue
    return False
