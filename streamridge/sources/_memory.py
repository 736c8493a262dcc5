"""Arrays already in the program: NumPy arrays, dask arrays and other array-likes."""

from __future__ import annotations

import hashlib
import itertools
from typing import Any

import numpy as np

from streamridge.errors import InputError
from streamridge.sources._npy import MemmapReader, is_whole_memmap
from streamridge.sources._protocol import ArrayReader, Container, RowGrid


class NumpyReader(ArrayReader):
    """An in-memory NumPy array; any row range can be read (no stored chunks).

    Parameters
    ----------
    array : numpy.ndarray
    """

    def __init__(self, array: np.ndarray, offset: int = 0) -> None:
        super().__init__()
        self.array = array
        self.offset = offset  # row index of array[0] (a window of a larger array)
        self.shape = tuple(array.shape)
        self.dtype = array.dtype

    def _open(self) -> Any:
        return self.array

    def grid(self) -> RowGrid:
        """No stored chunks: any row range."""
        return RowGrid(self.offset + int(self.shape[0]))

    def read(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start .. stop - 1`` (a view)."""
        return self.array[start - self.offset : stop - self.offset]

    def __getitem__(self, key: Any) -> np.ndarray:
        """Indexes the array itself (its own rows, not those shifted by ``offset``)."""
        return self.stored(key)

    def window(self, start: int, stop: int) -> NumpyReader:
        """The rows ``[start, stop)`` only (what a task ships to another process)."""
        return NumpyReader(self.read(start, stop), offset=start)

    def fingerprint(self) -> dict[str, Any]:
        """SHA-256 of the whole array (it is in memory already)."""
        data = np.ascontiguousarray(self.array)
        if data.dtype.kind == "O":
            return {"sha256": hashlib.sha256(repr(data.tolist()).encode()).hexdigest()[:16]}
        return {"sha256": hashlib.sha256(data.tobytes()).hexdigest()[:16]}


class DaskReader(ArrayReader):
    """A dask array: its row chunks are the stored chunks; each read computes one row range.

    Parameters
    ----------
    array : dask.array.Array
    """

    def __init__(self, array: Any, offset: int = 0) -> None:
        super().__init__()
        self.array = array
        self.offset = offset  # row index of array[0] (a window of a larger array)
        self.shape = tuple(int(n) for n in array.shape)
        self.dtype = np.dtype(array.dtype)

    def __getitem__(self, key: Any) -> np.ndarray:
        """Indexes the array itself (its own rows, not those shifted by ``offset``)."""
        return self.stored(key)

    def window(self, start: int, stop: int) -> DaskReader:
        """The rows ``[start, stop)`` only (a smaller graph to ship)."""
        return DaskReader(self.array[start - self.offset : stop - self.offset], offset=start)

    def _open(self) -> Any:
        return self.array

    def grid(self) -> RowGrid:
        """The dask array's row chunks (regular when all but the last are equal)."""
        chunks = [int(c) for c in self.array.chunks[0]]
        n = self.offset + self.shape[0]
        if self.offset == 0 and (
            len(chunks) <= 1 or (len(set(chunks[:-1])) == 1 and chunks[-1] <= chunks[0])
        ):
            return RowGrid(n, step=max(1, chunks[0] if chunks else 1))
        return RowGrid(n, bounds=tuple(int(b) for b in np.cumsum([0, *chunks]) + self.offset))

    def read(self, start: int, stop: int) -> np.ndarray:
        """Compute rows ``start .. stop - 1`` in the calling thread."""
        from dask.local import get_sync  # a callable: dask imports distributed to resolve the name "sync"

        return np.asarray(self.array[start - self.offset : stop - self.offset].compute(scheduler=get_sync))

    def fingerprint(self) -> dict[str, Any]:
        """The dask graph's name (a token of its inputs), or a NumPy array's content hash."""
        from dask.base import tokenize

        from streamridge.sources._common import NUMPY_PREFIX

        name = str(self.array.name)
        if not name.startswith(NUMPY_PREFIX):
            return {"dask_name": name}
        bounds = np.cumsum([self.offset, *self.array.chunks[0]]).tolist()
        rows = (self.read(a, b) for a, b in itertools.pairwise(bounds))
        return {"numpy_token": tokenize(self.shape, str(self.dtype), *rows)}


class MemoryContainer(Container):
    """Arrays given directly (no names to look up)."""

    where = "arrays"

    def get(self, name: str) -> Any | None:
        return None

    def names(self) -> list[str]:
        return []


def as_reader(value: Any, role: str) -> ArrayReader:
    """Wrap an array given directly (NumPy, memmap, dask, zarr, a reader, an array-like) as a reader.

    Raises
    ------
    InputError
        If ``value`` cannot be turned into an array.
    """
    if isinstance(value, ArrayReader):
        return value
    if is_whole_memmap(value):
        return MemmapReader(value)
    if hasattr(value, "dask") and hasattr(value, "chunks"):
        return DaskReader(value)
    if type(value).__module__.startswith("zarr."):
        from streamridge.sources._zarr import ZarrReader

        return ZarrReader.from_array(value)
    try:
        return NumpyReader(np.asarray(value))
    except Exception as exc:
        raise InputError(f"{role} must be an array or an array name; got {type(value).__name__}") from exc
