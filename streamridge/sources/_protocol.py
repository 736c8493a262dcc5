"""The one protocol every source backend implements: an array read by row ranges.

A backend module (``_zarr``, ``_hdf5``, ``_npy``, ``_memory``) turns its storage
into :class:`ArrayReader` objects: ``shape`` and ``dtype``, the stored chunk
boundaries along the rows (:class:`RowGrid`), ``read(start, stop)`` of a row
range, and a ``fingerprint()`` of the stored bytes (checkpoints).  Readers are
picklable and open their file lazily in whichever process reads, so the pass
can ship them to threads, processes or cluster workers.

This module imports no backend and no I/O library.
"""

from __future__ import annotations

import hashlib
import math
import os
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class RowGrid:
    """Stored chunk boundaries along the rows of an array, in O(1) memory when regular.

    Parameters
    ----------
    n_rows : int
    step : int
        Rows per stored chunk of a regular grid (the last chunk may be shorter);
        1 for storage that can be read at any row (contiguous files, memory).
    bounds : tuple of int or None
        Boundaries ``0 = b_0 < b_1 < ... = n_rows`` of an irregular grid
        (only in-memory dask arrays have one); ``step`` is then ignored.
    read_step : int or None
        Rows of the unit decoded by one read when smaller than ``step`` (the
        inner chunks of a sharded zarr array); None when it is ``step``.
    """

    n_rows: int
    step: int = 1
    bounds: tuple[int, ...] | None = None
    read_step: int | None = None

    @property
    def regular(self) -> bool:
        """Whether the grid is regular (no explicit boundaries)."""
        return self.bounds is None

    @property
    def unit(self) -> int:
        """Rows of the smallest unit one read decodes (regular grids)."""
        return self.read_step or self.step

    def floor(self, row: int, *, unit: bool = False) -> int:
        """Largest stored boundary <= ``row`` (of the read units when ``unit``)."""
        if self.bounds is None:
            s = self.unit if unit else self.step
            return (row // s) * s
        i = int(np.searchsorted(self.bounds, row, side="right")) - 1
        return int(self.bounds[max(i, 0)])

    def ceil(self, row: int, *, unit: bool = False) -> int:
        """Smallest stored boundary >= ``row``, capped at ``n_rows``."""
        if self.bounds is None:
            s = self.unit if unit else self.step
            return min(self.n_rows, -(-row // s) * s)
        i = int(np.searchsorted(self.bounds, row, side="left"))
        return int(self.bounds[min(i, len(self.bounds) - 1)])

    def max_chunk_rows(self) -> int:
        """Rows of the largest stored chunk."""
        if self.bounds is None:
            return min(self.step, self.n_rows)
        return int(np.max(np.diff(self.bounds))) if len(self.bounds) > 1 else 0

    def n_chunks(self) -> int:
        """Number of stored chunks."""
        if self.bounds is None:
            return math.ceil(self.n_rows / self.step) if self.n_rows else 0
        return len(self.bounds) - 1

    def describe(self) -> dict[str, Any]:
        """JSON description (checkpoint fingerprints)."""
        if self.bounds is None:
            return {"step": self.step, "read_step": self.read_step}
        return {"bounds": hashlib.sha256(np.asarray(self.bounds, np.int64).tobytes()).hexdigest()[:16]}


class ArrayReader:
    """An array read by row ranges; picklable, opening its storage lazily.

    Subclasses set ``shape`` and ``dtype`` and implement :meth:`_open` (an
    object sliceable like the array), :meth:`grid` and :meth:`fingerprint`.
    """

    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    overlap_reads = False  # reads decode outside the GIL: a partition running alone may read ahead
    remote = False  # reads go over a network (a URL): every partition reads ahead (see partitions.task_plan)

    def __init__(self) -> None:
        self._handle: Any = None
        self._lock = threading.Lock()

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    def _open(self) -> Any:
        raise NotImplementedError

    def grid(self) -> RowGrid:
        """Stored chunk boundaries along the rows."""
        return RowGrid(int(self.shape[0]))

    def fingerprint(self) -> dict[str, Any]:
        """What changes when the stored data change (see docs/cluster.md)."""
        raise NotImplementedError

    def read(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start .. stop - 1`` as a NumPy array (one read; each stored chunk decoded once)."""
        return self.stored(slice(start, stop))

    def pieces(self, start: int, stop: int, piece_rows: int, alloc: Any = None) -> Any:
        """Rows ``start .. stop - 1`` decoded in pieces of ``piece_rows`` rows, or None (then use :meth:`read`).

        Backends that can decode one large stored chunk incrementally return an
        iterator of arrays (see :meth:`streamridge.sources._zarr.ZarrReader.pieces`),
        each decoded into ``alloc(n)`` where given.
        """
        return None

    def handle(self) -> Any:
        """The open storage object (opened on first use, once per process)."""
        if self._handle is None:
            with self._lock:
                if self._handle is None:
                    self._handle = self._open()
        return self._handle

    def stored(self, key: Any) -> np.ndarray:
        """``key`` read by the storage library itself (zarr, h5py, NumPy)."""
        return np.asarray(self.handle()[key])

    def __getitem__(self, key: Any) -> np.ndarray:
        """A row range (what the chunks of a dask view ask for) by :meth:`read`, anything else by :meth:`stored`.

        The dask views of a source wrap their reader: their chunks are then
        decoded as the pass decodes them (zarr: 2-3x less CPU than zarr's own
        read for small chunks), not by the storage library.
        """
        rows = _row_range(key, self.shape)
        return self.stored(key) if rows is None else self.read(*rows)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_handle"] = None
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


def _row_range(key: Any, shape: tuple[int, ...]) -> tuple[int, int] | None:
    """``(start, stop)`` when ``key`` selects contiguous whole rows (a step-1 row slice, every other axis whole)."""
    keys = key if isinstance(key, tuple) else (key,)
    if not keys or len(keys) > len(shape) or not all(isinstance(k, slice) for k in keys):
        return None
    for k, n in zip(keys[1:], shape[1:]):
        if k.indices(n) != (0, n, 1):
            return None
    start, stop, step = keys[0].indices(shape[0])
    if step != 1:
        return None
    return start, max(start, stop)


# the name the backends used before the protocol had a grid and a fingerprint
LazyReader = ArrayReader


class Container:
    """Named arrays of one storage (a zarr group, an HDF5 file, a directory of .npy files).

    Subclasses implement :meth:`get` and :meth:`names` and may override
    :meth:`attr`.  ``where`` names the storage in messages, e.g.
    ``"zarr store /data/big.zarr"``.
    """

    where: str = "source"
    fixed_x: Any | None = None  # set when the storage is X itself (a bare array, one .npy file)

    def get(self, name: str) -> Any | None:
        """Return the reader of the array called ``name``, or None when there is none."""
        raise NotImplementedError

    def names(self) -> list[str]:
        """Return the names of every array in the storage (for error messages)."""
        raise NotImplementedError

    def attr(self, array: Any, key: str) -> Any | None:
        """Return the attribute ``key`` of ``array`` (or of the storage), or None."""
        return None


def file_fingerprint(path: str, *, samples: int = 64, block: int = 4096) -> dict[str, Any]:
    """Size, modification time and a hash of ``samples`` evenly spaced blocks of a local file.

    Edits that keep the size and restore the modification time and miss every
    sampled block go undetected (docs/cluster.md).
    """
    st = os.stat(path)
    with open(path, "rb") as fh:
        sampled = sampled_hash(fh, st.st_size, samples=samples, block=block)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sample_sha256": sampled}


def sampled_hash(fh: Any, size: int, *, samples: int = 64, block: int = 4096) -> str:
    """SHA-256 of ``samples`` evenly spaced blocks and the last block of an open binary file."""
    h = hashlib.sha256()
    for i in range(samples):
        fh.seek(size * i // samples)
        h.update(fh.read(block))
    fh.seek(max(0, size - block))
    h.update(fh.read(block))
    return h.hexdigest()[:16]
