"""HDF5 datasets read as bytes of their file: contiguous rows, and chunks of whole rows stored raw or deflated.

h5py runs every call under one global lock, so an HDF5 read decodes on one thread
however many tasks read, and a file behind a URL is read through a file object,
one small request after another.  For the common layouts the pass reads the
bytes itself: a contiguous dataset is one byte range per read; a chunked one
whose chunks hold whole rows, with no filter, ``deflate`` (gzip) or ``shuffle``
then ``deflate``, is a list of (offset, size) per chunk, taken once from HDF5's
chunk index (:func:`chunk_table`), fetched in one call per read (local files with
``readinto``; URLs with fsspec's concurrent ``cat_ranges``) and inflated with
:mod:`zlib` (as zarr's zlib chunks, :func:`._zdecode.decode_into`), which releases the GIL.  Other layouts return None from
:func:`direct_layout` and are read by h5py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from streamridge.sources._zdecode import decode_into

_DEFLATE, _SHUFFLE = 1, 2  # HDF5 filter ids


@dataclass(frozen=True)
class H5Layout:
    """Where a dataset's rows are in its file.

    Attributes
    ----------
    offset : int or None
        Byte offset of row 0 of a contiguous dataset; None when chunked.
    chunk_rows : int
        Rows per chunk (0 when contiguous).
    shuffle, deflate : bool
        The filters of every chunk (shuffle before deflate).
    fill : float or int
        The dataset's fill value (never-written chunks).
    """

    offset: int | None
    chunk_rows: int
    shuffle: bool
    deflate: bool
    fill: Any


def direct_layout(ds: Any) -> H5Layout | None:
    """The layout of h5py dataset ``ds`` when its rows can be read as file bytes, else None.

    Needs a native numeric dtype, a file without user block opened with the
    default (``sec2``) or file-object driver (their addresses are file offsets),
    no external or virtual storage, and either contiguous storage that is
    allocated or chunks spanning whole rows with at most ``shuffle`` and
    ``deflate``.
    """
    import h5py

    if (
        ds.dtype.kind not in "fiub"
        or not ds.dtype.isnative
        or ds.dtype.fields is not None
        or ds.ndim not in (1, 2)
    ):
        return None
    if ds.file.driver not in ("sec2", "fileobj") or ds.file.userblock_size != 0 or ds.is_virtual:
        return None
    plist = ds.id.get_create_plist()
    if plist.get_external_count() > 0:
        return None
    fill = ds.fillvalue
    if ds.chunks is None:
        if plist.get_layout() != h5py.h5d.CONTIGUOUS:
            return None  # compact
        offset = ds.id.get_offset()
        return None if offset is None else H5Layout(int(offset), 0, False, False, fill)
    if tuple(ds.chunks[1:]) != tuple(ds.shape[1:]):
        return None
    filters = [plist.get_filter(i)[0] for i in range(plist.get_nfilters())]
    if filters not in ([], [_DEFLATE], [_SHUFFLE, _DEFLATE]):
        return None
    return H5Layout(None, int(ds.chunks[0]), _SHUFFLE in filters, _DEFLATE in filters, fill)


def chunk_table(ds: Any, n_chunks: int) -> np.ndarray:
    """Byte offset, stored size and filter mask of every chunk along the rows (offset -1: never written).

    Returns
    -------
    ndarray of shape (n_chunks, 3), int64
    """
    table = np.full((n_chunks, 3), -1, dtype=np.int64)
    step = int(ds.chunks[0])

    def add(info: Any) -> None:
        table[info.chunk_offset[0] // step] = (info.byte_offset, info.size, info.filter_mask)

    if n_chunks:
        ds.id.chunk_iter(add)
    return table


def read_rows(
    layout: H5Layout,
    table: np.ndarray | None,
    fetch: Any,
    dtype: np.dtype[Any],
    shape: tuple[int, ...],
    start: int,
    stop: int,
    where: str,
) -> np.ndarray:
    """Rows ``[start, stop)`` of a dataset of ``shape`` stored as ``layout``.

    Parameters
    ----------
    layout : H5Layout
    table : ndarray or None
        :func:`chunk_table` of a chunked dataset.
    fetch : callable
        ``fetch(ranges, buffers)`` reads the byte ranges ``[(offset, size), ...]``
        of the file, all in one call: range ``i`` into ``buffers[i]`` (a uint8
        array of ``size`` bytes), or, where that is None, returned as bytes or
        as an iterator over byte pieces (read while they are inflated).
        Returns what it read, in order.
    where : str
        Names the file in errors.

    Raises
    ------
    OSError
        A chunk is truncated, corrupted or stored without one of the filters.
    """
    row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize
    out = np.empty((stop - start, *shape[1:]), dtype=dtype)
    flat = out.reshape(-1).view(np.uint8)
    if layout.offset is not None:
        fetch([(layout.offset + start * row_bytes, (stop - start) * row_bytes)], [flat])
        return out
    assert table is not None
    step = layout.chunk_rows
    chunk_bytes = step * row_bytes
    ranges: list[tuple[int, int]] = []
    buffers: list[np.ndarray | None] = []
    places: list[tuple[int, int, np.ndarray]] = []
    for c in range(start // step, (stop - 1) // step + 1):
        a, b = max(start, c * step), min(stop, (c + 1) * step)
        target = flat[(a - start) * row_bytes : (b - start) * row_bytes]
        skip = (a - c * step) * row_bytes
        offset, size, mask = (int(v) for v in table[c])
        if offset < 0:
            out[a - start : b - start] = layout.fill
        elif mask:
            raise OSError(
                f"chunk {c} of {where} is stored without one of its filters (mask {mask}); "
                "rewrite the dataset or read it with h5py"
            )
        elif not layout.deflate:  # raw (shuffle alone is refused by direct_layout): the rows asked for only
            if size != chunk_bytes:
                raise OSError(
                    f"chunk {c} of {where} holds {size} bytes, not {chunk_bytes}: it may be corrupted"
                )
            ranges.append((offset + skip, target.size))
            buffers.append(target)
        else:
            ranges.append((offset, size))
            buffers.append(None)
            places.append((c, skip, target))
    inflated = [data for data, buffer in zip(fetch(ranges, buffers), buffers) if buffer is None]
    for (c, skip, target), data in zip(places, inflated):
        key = f"{c} of {where}"
        if not layout.shuffle:
            decode_into(data, "zlib", target, skip, chunk_bytes, key)
            continue
        chunk = np.empty(chunk_bytes, np.uint8)
        decode_into(data, "zlib", chunk, 0, chunk_bytes, key)
        if target.size == chunk_bytes:  # a whole chunk: unshuffled straight into the result
            _unshuffle(chunk, dtype.itemsize, target)
        else:
            target[:] = _unshuffle(chunk, dtype.itemsize, np.empty(chunk_bytes, np.uint8))[
                skip : skip + target.size
            ]
    return out


def _unshuffle(chunk: np.ndarray, itemsize: int, out: np.ndarray) -> np.ndarray:
    """HDF5's shuffle filter undone into ``out``: ``itemsize`` planes of bytes back to items."""
    n = chunk.size // itemsize
    out.reshape(n, itemsize)[:] = chunk.reshape(itemsize, n).T
    return out
