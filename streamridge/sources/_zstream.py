"""Whole stored zarr chunks decoded in pieces of whole rows (zstd, zlib and gzip chains).

A stored chunk larger than a kernel sub-block need not be decoded whole before
its statistics start: its compressed bytes are fetched once and decompressed
incrementally, one piece of rows at a time, into a fresh NumPy array per
piece (zstd: ``zstandard``'s stream reader decompresses straight into the
array, releasing the GIL; zlib/gzip: the standard library's ``decompressobj``).
Memory: the compressed chunk and the pieces in flight, not the decoded chunk.

Only chains that are a plain byte stream of C-ordered rows qualify: zarr v3
``bytes`` (host byte order) + ``zstd`` or ``gzip``; zarr v2 without filters,
C order, host byte order, with a ``Zstd``, ``Zlib`` or ``GZip`` compressor.
Anything else (transposes, filters, blosc, sharding, checksums codecs) is
read by zarr's own pipeline (:func:`streamridge.sources._zarr.decode_chunk`).
"""

from __future__ import annotations

import sys
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np

ZLIB_WBITS = {"zlib": zlib.MAX_WBITS, "gzip": 16 + zlib.MAX_WBITS}
ZLIB_INPUT = 2**20  # compressed bytes handed to zlib per call (bounds its copies of unconsumed input)


def stream_codec(array: Any) -> str | None:
    """``"zstd"``, ``"zlib"`` or ``"gzip"`` when the chunks of a zarr array are one compressed byte stream of rows.

    Parameters
    ----------
    array : zarr.Array

    Returns
    -------
    str or None
        None when the chain cannot be decoded in pieces (or this zarr
        version lacks the metadata fields used).
    """
    dtype = np.dtype(array.dtype)
    if dtype.kind not in "biuf" or not dtype.isnative or getattr(array, "shards", None):
        return None
    try:
        meta = array._async_array.metadata
        if meta.zarr_format == 3:
            return _v3_codec(meta.codecs, dtype)
        return _v2_codec(meta, dtype)
    except AttributeError:  # pragma: no cover - other zarr versions
        return None


def _v3_codec(codecs: Any, dtype: np.dtype[Any]) -> str | None:
    from zarr.codecs import BytesCodec, GzipCodec, ZstdCodec

    if len(codecs) != 2 or not isinstance(codecs[0], BytesCodec):
        return None
    endian = getattr(codecs[0].endian, "value", codecs[0].endian)
    if endian not in (None, sys.byteorder) and dtype.itemsize > 1:
        return None
    return (
        "zstd" if isinstance(codecs[1], ZstdCodec) else "gzip" if isinstance(codecs[1], GzipCodec) else None
    )


def _v2_codec(meta: Any, dtype: np.dtype[Any]) -> str | None:
    stored = meta.dtype.to_native_dtype() if hasattr(meta.dtype, "to_native_dtype") else np.dtype(meta.dtype)
    if (
        meta.filters
        or (meta.order != "C" and len(meta.shape) > 1)
        or stored.newbyteorder("=") != dtype.newbyteorder("=")
    ):
        return None
    if not stored.isnative:
        return None
    codec_id = getattr(meta.compressor, "codec_id", None)
    return {"zstd": "zstd", "zlib": "zlib", "gzip": "gzip"}.get(str(codec_id))


def fetch_chunk(array: Any, k: int) -> tuple[str, Any] | None:
    """The key and compressed bytes of stored chunk ``k`` along the rows (None where it is not stored)."""
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    aa = array._async_array
    coords = (k,) + (0,) * (len(array.shape) - 1)
    key = aa.metadata.encode_chunk_key(coords)
    raw = sync((aa.store_path / key).get(prototype=default_buffer_prototype()))
    return None if raw is None else (key, raw.as_numpy_array())


def decode_pieces(
    raw: Any,
    codec: str,
    dtype: np.dtype[Any],
    row_shape: tuple[int, ...],
    chunk_rows: int,
    sizes: list[int],
    key: str,
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
    """
    row_bytes = dtype.itemsize * int(np.prod(row_shape, dtype=np.int64))
    reader = _Reader(raw, codec, key)
    for n in sizes:
        piece = np.empty((n, *row_shape), dtype=dtype)
        reader.fill(piece.reshape(-1).view(np.uint8), n * row_bytes, chunk_rows * row_bytes)
        yield piece
    rest = (chunk_rows - sum(sizes)) * row_bytes
    scratch = np.empty(min(rest, 4 * 2**20), dtype=np.uint8)
    while rest > 0:
        n = min(rest, len(scratch))
        reader.fill(scratch[:n], n, chunk_rows * row_bytes)
        rest -= n
    reader.check_end(chunk_rows * row_bytes)


class _Reader:
    """Incremental decompression of one stored chunk into caller buffers."""

    def __init__(self, raw: Any, codec: str, key: str) -> None:
        self.key, self.codec, self.done = key, codec, 0
        self.raw = memoryview(raw).cast("B")
        if codec == "zstd":
            import zstandard

            self.errors: tuple[type[Exception], ...] = (zstandard.ZstdError,)
            self.zs = zstandard.ZstdDecompressor().stream_reader(self.raw, read_across_frames=True)
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
            if not data and self.pos < len(self.raw):
                data = self.raw[self.pos : self.pos + ZLIB_INPUT]
                self.pos += len(data)
            chunk = self.zd.decompress(data, n - pos)  # empty input: output zlib still holds
            if not chunk and not data:
                break
            out[pos : pos + len(chunk)] = np.frombuffer(chunk, dtype=np.uint8)
            pos += len(chunk)
        return pos
