"""Incremental decompression of one stored zarr chunk into the caller's arrays (zstd, zlib and gzip chains).

The compressed bytes (or an iterator over pieces of them, e.g. a local file read as it
is decoded) are decompressed one piece of rows at a time (zstd: ``zstandard``'s stream
reader decompresses straight into the array, releasing the GIL; zlib/gzip: the standard
library's ``decompressobj``).  :func:`decode_pieces` yields a chunk's rows in pieces;
:func:`decode_into` decodes a byte range of a chunk (also raw and blosc chunks) into a
slice of an output array.  A corrupted or truncated chunk is a one-line :class:`OSError`
naming its key.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

ZLIB_WBITS = {"zlib": zlib.MAX_WBITS, "gzip": 16 + zlib.MAX_WBITS}
ZLIB_INPUT = 2**20  # compressed bytes handed to zlib per call (bounds its copies of unconsumed input)


def decode_into(raw: Any, codec: str, dest: np.ndarray, skip: int, total: int, key: str) -> None:
    """Decode the bytes ``[skip, skip + len(dest))`` of a stored chunk of ``total`` bytes into ``dest`` (uint8)."""
    if codec == "raw":
        if len(raw) != total:
            raise OSError(f"stored chunk {key} is corrupted: {len(raw)} bytes instead of {total}")
        dest[:] = np.frombuffer(raw, dtype=np.uint8)[skip : skip + len(dest)]
        return
    if codec == "blosc":
        from numcodecs import blosc

        try:
            header = bytes(memoryview(raw).cast("B")[:16])  # blosc header: ..., nbytes, blocksize, cbytes
            nbytes, cbytes = (
                (int.from_bytes(header[i : i + 4], "little") for i in (4, 12))
                if len(header) == 16
                else (-1, -1)
            )
            if cbytes != len(raw):
                raise OSError(f"stored chunk {key} (blosc) is truncated: {len(raw)} of {cbytes} bytes stored")
            if nbytes != total:
                raise OSError(f"stored chunk {key} (blosc) is corrupted: {nbytes} bytes instead of {total}")
            if skip == 0 and len(dest) == total:
                blosc.decompress(raw, dest)
            else:
                dest[:] = np.frombuffer(blosc.decompress(raw), dtype=np.uint8)[skip : skip + len(dest)]
        except (RuntimeError, ValueError) as exc:
            raise OSError(f"stored chunk {key} (blosc) is corrupted: {exc}") from None
        return
    reader = _Reader(raw, codec, key)
    scratch = np.empty(min(max(skip, total - skip - len(dest)), 4 * 2**20), dtype=np.uint8)
    for n in _spans(skip, len(scratch)):
        reader.fill(scratch[:n], n, total)
    reader.fill(dest, len(dest), total)
    for n in _spans(total - skip - len(dest), len(scratch)):
        reader.fill(scratch[:n], n, total)
    reader.check_end(total)


def _spans(n: int, size: int) -> Iterator[int]:
    """``n`` bytes in pieces of at most ``size``."""
    while n > 0:
        yield min(n, size)
        n -= min(n, size)


def decode_pieces(
    raw: Any,
    codec: str,
    dtype: np.dtype[Any],
    row_shape: tuple[int, ...],
    chunk_rows: int,
    sizes: list[int],
    key: str,
    alloc: Callable[[int], np.ndarray] | None = None,
) -> Iterator[np.ndarray]:
    """Yield the rows of one stored chunk as arrays of ``sizes[0], sizes[1], ...`` rows.

    The rows past ``sum(sizes)`` (the padding of a last, partial chunk) are
    decoded and dropped, and the stream must hold exactly ``chunk_rows`` rows:
    a truncated or corrupted chunk raises a one-line :class:`OSError`.

    Parameters
    ----------
    raw : bytes-like
        The compressed chunk.
    codec : {"zstd", "zlib", "gzip"}
    dtype : numpy dtype
    row_shape : tuple of int
        Shape of one row (the array's shape after the first axis).
    chunk_rows : int
        Rows of a stored chunk (the chunk shape along the rows).
    sizes : list of int
        Rows of each piece, in order.
    key : str
        The chunk's key, for messages.
    alloc : callable or None
        ``alloc(n)`` gives the C-contiguous array of ``n`` rows a piece is
        decoded into (e.g. reused buffers, :class:`streamridge.sources.pieces.PieceBuffers`);
        None allocates a new array per piece.
    """
    row_bytes = dtype.itemsize * int(np.prod(row_shape, dtype=np.int64))
    reader = _Reader(raw, codec, key)
    for n in sizes:
        piece = np.empty((n, *row_shape), dtype=dtype) if alloc is None else alloc(n)
        reader.fill(piece.reshape(-1).view(np.uint8), n * row_bytes, chunk_rows * row_bytes)
        yield piece
        del piece  # not held while the next piece's array is taken
    rest = (chunk_rows - sum(sizes)) * row_bytes
    scratch = np.empty(min(rest, 4 * 2**20), dtype=np.uint8)
    for n in _spans(rest, len(scratch)):
        reader.fill(scratch[:n], n, chunk_rows * row_bytes)
    reader.check_end(chunk_rows * row_bytes)


class _PieceFile:
    """A file-like ``read`` over an iterator of byte pieces (for zstandard's stream reader), without copies."""

    def __init__(self, pieces: Iterator[Any]) -> None:
        self.pieces, self.view, self.pos = pieces, memoryview(b""), 0

    def read(self, n: int = -1) -> Any:
        while self.pos >= len(self.view):
            nxt = next(self.pieces, None)
            if nxt is None:
                return b""
            self.view, self.pos = memoryview(nxt).cast("B"), 0
        end = len(self.view) if n < 0 else self.pos + n
        out = self.view[self.pos : end]
        self.pos += len(out)
        return out


class _Reader:
    """Incremental decompression of one stored chunk into caller buffers.

    ``raw`` is the compressed chunk, or an iterator over its pieces (e.g.
    :func:`file_pieces`), read as decompression needs them.
    """

    def __init__(self, raw: Any, codec: str, key: str) -> None:
        self.key, self.codec, self.done = key, codec, 0
        self.pieces = raw if isinstance(raw, Iterator) else None
        self.raw = memoryview(b"") if self.pieces is not None else memoryview(raw).cast("B")
        if codec == "zstd":
            import zstandard

            self.errors: tuple[type[Exception], ...] = (zstandard.ZstdError,)
            source: Any = self.raw if self.pieces is None else _PieceFile(self.pieces)
            self.zs = zstandard.ZstdDecompressor().stream_reader(
                source, read_size=2**20, read_across_frames=True
            )
        else:
            self.errors = (zlib.error,)
            self.zd = zlib.decompressobj(ZLIB_WBITS[codec])
            self.pos = 0

    def fill(self, out: np.ndarray, n: int, total: int) -> None:
        """Decode the next ``n`` bytes into ``out[:n]`` (uint8); the chunk holds ``total`` bytes."""
        try:
            got = self._zstd_into(out, n) if self.codec == "zstd" else self._zlib_into(out, n)
        except self.errors as exc:
            raise OSError(f"stored chunk {self.key} ({self.codec}) is corrupted: {exc}") from None
        self.done += got
        if got < n:
            raise OSError(
                f"stored chunk {self.key} ({self.codec}) is truncated: {self.done} of {total} bytes decoded"
            )

    def check_end(self, total: int) -> None:
        """Raise unless the stream ends here (no bytes beyond the chunk's, a complete frame)."""
        extra = np.empty(1, dtype=np.uint8)
        try:
            more = self._zstd_into(extra, 1) if self.codec == "zstd" else self._zlib_into(extra, 1)
            ended = self.codec == "zstd" or self.zd.eof
        except self.errors as exc:
            raise OSError(f"stored chunk {self.key} ({self.codec}) is corrupted: {exc}") from None
        if more or not ended:
            what = f"more than {total} bytes" if more else "an incomplete stream"
            raise OSError(f"stored chunk {self.key} ({self.codec}) is corrupted: {what}")

    def _zstd_into(self, out: np.ndarray, n: int) -> int:
        view, pos = memoryview(out.data)[:n], 0
        while pos < n:
            got = self.zs.readinto(view[pos:])
            if not got:
                break
            pos += got
        return pos

    def _zlib_into(self, out: np.ndarray, n: int) -> int:
        pos = 0
        while pos < n and not self.zd.eof:
            data: bytes | memoryview = self.zd.unconsumed_tail
            if not data and self.pieces is not None:  # compressed bytes read while they are inflated
                data = next(self.pieces, b"")
            elif not data and self.pos < len(self.raw):
                data = self.raw[self.pos : self.pos + ZLIB_INPUT]
                self.pos += len(data)
            chunk = self.zd.decompress(data, n - pos)  # empty input: output zlib still holds
            if not chunk and not data:
                break
            out[pos : pos + len(chunk)] = np.frombuffer(chunk, dtype=np.uint8)
            pos += len(chunk)
        return pos
