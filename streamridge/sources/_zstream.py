"""Stored zarr chunks fetched and decoded here: which chains qualify, their bytes, whole rows of several chunks.

A stored chunk larger than a kernel sub-block need not be decoded whole before
its statistics start: its compressed bytes are fetched once (a local file's
read in pieces as they are decoded, :func:`stream_chunk`) and decompressed
incrementally, one piece of rows at a time, into the caller's arrays
(:mod:`._zdecode`).  Memory: the compressed chunk (a few MB for a local file)
and the pieces in flight, not the decoded chunk.

Only chains that are a plain byte stream of C-ordered rows qualify
(:func:`stream_codec`): zarr v3 ``bytes`` (host byte order) + ``zstd`` or
``gzip``; zarr v2 without filters, C order, host byte order, with a ``Zstd``,
``Zlib`` or ``GZip`` compressor.  Anything else (transposes, filters, blosc,
sharding, checksums codecs) is read by zarr's own pipeline
(:func:`streamridge.sources._zarr.decode_chunk`).

Reads of whole rows of several stored chunks (:func:`read_rows`) decode the
same chains, and blosc, straight into the output array: the compressed chunks
are fetched in one call (concurrently) and each is decompressed into its rows
of the output, without zarr's per-chunk machinery (about 0.45 ms of Python per
chunk, holding the GIL: reading the y of 128 chunks of 1 MB took 0.06 s of
CPU for 5 MB of data, X 0.155 s against 0.117 s decoded here).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np

from streamridge.sources._zdecode import decode_into
from streamridge.sources._zdecode import (
    decode_pieces as decode_pieces,  # re-exported beside stream_chunk, whose pieces it decodes
)


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


def direct_codec(array: Any) -> str | None:
    """The codec :func:`read_rows` decodes the stored chunks of ``array`` with (None: zarr's own read).

    :func:`stream_codec`'s chains, a blosc compressor alone (zarr v2, no
    filters) or after the ``bytes`` codec (zarr v3), and no compression at all
    (``"raw"``); in zarr v3 also as the inner chunks of a sharding codec.
    """
    dtype = np.dtype(array.dtype)
    if dtype.kind not in "biuf" or not dtype.isnative:
        return None
    try:
        meta = array._async_array.metadata
        if meta.zarr_format == 3:
            from zarr.codecs import ShardingCodec

            codecs = meta.codecs
            if getattr(array, "shards", None):
                if len(codecs) != 1 or not isinstance(codecs[0], ShardingCodec):
                    return None
                codecs = codecs[0].codecs
            return _v3_direct(codecs, dtype)
        streamed = _v2_codec(meta, dtype)
        if streamed is not None:
            return streamed
        codec_id = None if meta.compressor is None else str(getattr(meta.compressor, "codec_id", ""))
        plain = not meta.filters and (meta.order == "C" or len(meta.shape) == 1)
        stored = (
            meta.dtype.to_native_dtype() if hasattr(meta.dtype, "to_native_dtype") else np.dtype(meta.dtype)
        )
        if not plain or not stored.isnative or stored.newbyteorder("=") != dtype.newbyteorder("="):
            return None
        return {None: "raw", "blosc": "blosc"}.get(codec_id)
    except AttributeError:  # pragma: no cover - other zarr versions
        return None


def _v3_direct(codecs: Any, dtype: np.dtype[Any]) -> str | None:
    from zarr.codecs import BloscCodec, BytesCodec

    if not 1 <= len(codecs) <= 2 or not isinstance(codecs[0], BytesCodec):
        return None
    endian = getattr(codecs[0].endian, "value", codecs[0].endian)
    if endian not in (None, sys.byteorder) and dtype.itemsize > 1:
        return None
    if len(codecs) == 1:
        return "raw"
    return "blosc" if isinstance(codecs[1], BloscCodec) else _v3_codec(codecs, dtype)


def read_rows(
    array: Any, codec: str, start: int, stop: int, indexes: dict[str, Any] | None = None
) -> np.ndarray | None:
    """Rows ``[start, stop)`` of a zarr array chunked along its rows only, decoded here (see :func:`direct_codec`).

    Every stored chunk the rows touch is fetched once (all in one call; the
    inner chunks of a shard as byte ranges after its index) and decompressed
    into its rows of the result.  Chunks that are not stored read as the
    fill value, as in zarr.  A corrupted or truncated chunk raises a
    one-line :class:`OSError` naming its key.  None where this zarr version
    lacks the internals used (the caller then uses zarr's read).  ``indexes``
    keeps the shard indexes read, by shard key, for the next reads (over a
    network each index is a round trip).
    """

    shape = tuple(int(n) for n in array.shape)
    step = int(array.chunks[0])
    dtype = np.dtype(array.dtype)
    row_bytes = dtype.itemsize * int(np.prod(shape[1:], dtype=np.int64))
    ks = range(start // step, -(-stop // step))
    try:
        fetched = (
            _fetch_sharded(array, ks, indexes) if getattr(array, "shards", None) else _whole_chunks(array, ks)
        )
    except (AttributeError, ImportError, TypeError):  # pragma: no cover - other zarr versions
        return None
    if codec == "raw" and len(fetched) == 1 and fetched[0][1] is not None:  # one uncompressed chunk: no copy
        raw = fetched[0][1]
        if len(raw) == step * row_bytes and raw.flags.writeable:  # (bytes fetched over a network are copied)
            rows = raw.view(dtype).reshape((step, *shape[1:]))
            return rows[start - ks[0] * step : stop - ks[0] * step]
    out = np.empty((stop - start, *shape[1:]), dtype=dtype)
    flat = out.reshape(-1).view(np.uint8)
    for k, (key, raw) in zip(ks, fetched):
        a, b = max(start, k * step), min(stop, (k + 1) * step)
        if raw is None:
            fill = array.fill_value
            out[a - start : b - start] = 0 if fill is None else fill
            continue
        dest = flat[(a - start) * row_bytes : (b - start) * row_bytes]
        decode_into(raw, codec, dest, (a - k * step) * row_bytes, step * row_bytes, key)
    return out


def _local_files(array: Any, ks: range) -> list[tuple[str, Any]] | None:
    """:func:`_fetch` for a zarr ``LocalStore``: each chunk's file read into a NumPy buffer, no event loop.

    Through the store's asynchronous ``get`` a chunk cost about 0.45 ms of
    CPU beyond the read itself (128 chunks of 1 MB: 0.088 s against
    0.031 s); None for other stores.
    """
    base = _local_base(array)
    if base is None:
        return None
    keys = [_row_chunk_key(array, k) for k in ks]
    return [(key, _read_file(_key_path(base, key))) for key in keys]


def _row_chunk_key(array: Any, k: int) -> str:
    """The store key of stored chunk (or shard) ``k`` along the rows of an array chunked along its rows only."""
    return str(array._async_array.metadata.encode_chunk_key((k,) + (0,) * (len(array.shape) - 1)))


def _key_path(base: str, key: str) -> str:
    """The file of store key ``key`` under a ``LocalStore`` array's folder ``base``."""
    return os.path.join(base, *key.split("/"))


def _whole_chunks(array: Any, ks: range) -> list[tuple[str, Any]]:
    """``(key, compressed bytes or None)`` of stored chunks ``ks`` of an unsharded array: files, else zarr's get."""
    from zarr.core.sync import sync

    local = _local_files(array, ks)
    return sync(_fetch(array, ks)) if local is None else local


async def _fetch(array: Any, ks: range) -> list[tuple[str, Any]]:
    """``(key, compressed bytes or None)`` of stored chunks ``ks``, fetched concurrently."""
    import asyncio

    from zarr.core.buffer import default_buffer_prototype

    aa = array._async_array
    keys = [_row_chunk_key(array, k) for k in ks]
    proto = default_buffer_prototype()
    raws = await asyncio.gather(*((aa.store_path / key).get(prototype=proto) for key in keys))
    return [(key, None if raw is None else raw.as_numpy_array()) for key, raw in zip(keys, raws)]


INDEXES_KEPT = 4096  # shard indexes a reader keeps (each a few KB); the oldest go first


def _fetch_sharded(array: Any, ks: range, kept: dict[str, Any] | None = None) -> list[tuple[str, Any]]:
    """``(name, compressed bytes or None)`` of inner chunks ``ks``: per shard its index, then one byte range.

    The indexes are read through zarr (which checks their checksums), or
    taken from ``kept`` (and kept there); the chunks' bytes of a
    ``LocalStore`` shard are read from its file, others with the store's
    ranged ``get``.
    """
    import asyncio

    from zarr.abc.store import RangeByteRequest
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    aa = array._async_array
    sharding = aa.metadata.codecs[0]
    step, shard_rows = int(array.chunks[0]), int(array.shards[0])
    per_shard = (shard_rows // step,) + (1,) * (len(array.shape) - 1)
    zeros = (0,) * (len(array.shape) - 1)
    by_shard: dict[int, list[int]] = {}
    for k in ks:
        by_shard.setdefault(k * step // shard_rows, []).append(k)
    keys = {s: _row_chunk_key(array, s) for s in by_shard}

    async def index(s: int) -> Any:
        if kept is not None and keys[s] in kept:
            return kept[keys[s]]
        try:
            found = await sharding._load_shard_index_maybe(aa.store_path / keys[s], per_shard)
        except ValueError as exc:  # its checksum
            raise OSError(
                f"shard {keys[s]} is corrupted: its index does not match its checksum ({exc})"
            ) from None
        if kept is not None and found is not None:
            if len(kept) >= INDEXES_KEPT:
                kept.pop(next(iter(kept), ""), None)  # readers are shared by the threads of a pass
            kept[keys[s]] = found
        return found

    async def indexes() -> list[Any]:
        return await asyncio.gather(*(index(s) for s in by_shard))

    spans: dict[int, list[Any]] = {}
    ranges: list[tuple[int, int, int]] = []  # (shard, start, stop) of the bytes to read
    for (s, inner), idx in zip(by_shard.items(), sync(indexes())):
        spans[s] = [None] * len(inner) if idx is None else [idx.get_chunk_slice((k, *zeros)) for k in inner]
        present = [sp for sp in spans[s] if sp is not None]
        if not present:
            continue
        lo, hi = min(a for a, _ in present), max(b for _, b in present)
        if hi - lo > 2 * sum(b - a for a, b in present):  # inner chunks far apart: each on its own
            ranges += [(s, a, b) for a, b in present]
        else:  # one read of the range holding them all (zarr writes a shard's chunks in order)
            ranges.append((s, lo, hi))
    base = _local_base(array)
    if base is not None:
        got = [_read_file(_key_path(base, keys[s]), a, b) for s, a, b in ranges]
    else:
        proto = default_buffer_prototype()

        async def fetch() -> list[Any]:
            gets = (
                (aa.store_path / keys[s]).get(prototype=proto, byte_range=RangeByteRequest(a, b))
                for s, a, b in ranges
            )
            return [None if raw is None else raw.as_numpy_array() for raw in await asyncio.gather(*gets)]

        got = sync(fetch())
    held: dict[int, list[tuple[int, Any]]] = {}
    for (s, a, b), data in zip(ranges, got):
        if data is None or len(data) != b - a:
            raise OSError(
                f"shard {keys[s]} is truncated: its bytes {a}-{b}, listed in its index, are missing"
            )
        held.setdefault(s, []).append((a, data))
    out: list[tuple[str, Any]] = []
    for s, inner in by_shard.items():
        for k, sp in zip(inner, spans[s]):
            data = None
            if sp is not None:
                a, buf = next((a, buf) for a, buf in held[s] if a <= sp[0] and sp[1] <= a + len(buf))
                data = buf[sp[0] - a : sp[1] - a]
            out.append((f"{keys[s]}[{k}]", data))
    return out


def _local_base(array: Any) -> str | None:
    """The folder of a zarr array in a ``LocalStore`` (its chunk keys are files under it), or None."""
    from zarr.storage import LocalStore

    aa = array._async_array
    store = aa.store_path.store
    if type(store) is not LocalStore:  # subclasses may store elsewhere
        return None
    return os.path.join(str(store.root), *[p for p in aa.store_path.path.split("/") if p])


def _read_file(path: str, start: int | None = None, stop: int | None = None) -> np.ndarray | None:
    """Bytes ``[start, stop)`` of a file (all of it by default) in a NumPy buffer; None if there is no file."""
    try:
        with open(path, "rb") as fh:
            start = start or 0
            stop = os.fstat(fh.fileno()).st_size if stop is None else stop
            fh.seek(start)
            raw = np.empty(max(0, stop - start), dtype=np.uint8)
            got = fh.readinto(raw.data)
    except FileNotFoundError:
        return None
    return raw[:got]


def fetch_chunk(array: Any, k: int) -> tuple[str, Any] | None:
    """The key and compressed bytes of stored chunk ``k`` along the rows (None where it is not stored)."""
    ((key, raw),) = _whole_chunks(array, range(k, k + 1))
    return None if raw is None else (key, raw)


def stream_chunk(array: Any, k: int) -> tuple[str, Any] | None:
    """:func:`fetch_chunk`, but a ``LocalStore`` chunk's bytes come as pieces of its file, read as it is decoded.

    A 400 MB chunk decoded in pieces then never holds its compressed bytes
    (400 MB more of fresh pages beside the statistics), only one piece.
    """
    base = _local_base(array)
    if base is None:
        return fetch_chunk(array, k)
    key = _row_chunk_key(array, k)
    path = _key_path(base, key)
    try:
        size = os.path.getsize(path)
    except FileNotFoundError:
        return None
    return key, file_pieces(path, 0, size)


FILE_PIECE = 4 * 2**20  # bytes of a file read at a time while its compressed bytes are decoded


def file_pieces(path: str, offset: int, size: int) -> Iterator[bytes]:
    """The ``size`` bytes of a file from ``offset``, in pieces of ``FILE_PIECE`` bytes, read as they are asked for.

    Raises
    ------
    OSError
        The file ends first (it is truncated).
    """
    with open(path, "rb") as fh:
        fh.seek(offset)
        while size > 0:
            data = fh.read(min(FILE_PIECE, size))
            if not data:
                raise OSError(f"{path} ends inside the chunk at {offset}: it is truncated")
            size -= len(data)
            yield data
