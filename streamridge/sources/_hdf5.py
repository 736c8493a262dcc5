"""HDF5 files, local or behind an fsspec URL, read lazily with h5py."""

from __future__ import annotations

import os
from typing import Any

import h5py
import numpy as np

from streamridge.errors import SourceError
from streamridge.sources._common import ROLES, atomic_path, default_chunk_rows, row_blocks
from streamridge.sources._h5direct import chunk_table, direct_layout, read_rows
from streamridge.sources._protocol import ArrayReader, Container, RowGrid, file_fingerprint, sampled_hash
from streamridge.sources._url import is_url, remote_errors
from streamridge.sources._zstream import file_pieces


def _open_file(location: str, storage_options: dict[str, Any] | None) -> h5py.File:
    if is_url(location):
        import fsspec

        handle = fsspec.open(location, mode="rb", **(storage_options or {})).open()
        return h5py.File(handle, "r")
    return h5py.File(location, "r")


class HDF5Reader(ArrayReader):
    """One HDF5 dataset; every process that reads opens the file itself.

    h5py serialises calls with its own global lock, so no dask lock is needed.
    The pass's reads of contiguous data and of raw or deflated chunks of whole
    rows read the file's bytes instead (:mod:`._h5direct`): they decode in
    parallel, and over a URL fetch a read's chunks concurrently.

    Parameters
    ----------
    location : str
        Path or URL of the file.
    name : str
        Dataset path, e.g. ``"/features/X"``.
    dataset : h5py.Dataset
        The dataset, open in this process (for shape, dtype, chunks, attributes).
    storage_options : dict or None
    """

    def __init__(
        self, location: str, name: str, dataset: h5py.Dataset, storage_options: dict[str, Any] | None
    ) -> None:
        super().__init__()
        self.location = location
        self.name = name
        self.storage_options = storage_options
        self.shape = tuple(dataset.shape)
        self.dtype = _read_dtype(dataset.dtype)
        self.native_rows = int(dataset.chunks[0]) if dataset.chunks else 1
        self.attrs = {k: dataset.attrs[k] for k in ("feature_names", "target_names") if k in dataset.attrs}
        driver = (
            "fileobj" if is_url(location) else "sec2"
        )  # addresses are offsets into the file at `location`
        self.layout = (
            direct_layout(dataset) if dataset.file.driver == driver and dataset.file.mode == "r" else None
        )
        self.overlap_reads = self.layout is not None  # file reads and zlib release the GIL
        self.remote = is_url(location)
        self._table: np.ndarray | None = None
        self._fs: Any = None

    def grid(self) -> RowGrid:
        """HDF5 chunk rows; any row range for a contiguous dataset."""
        return RowGrid(int(self.shape[0]), step=max(1, self.native_rows))

    def fingerprint(self) -> dict[str, Any]:
        """Size, modification time and a sampled hash of the file (size and ETag/mtime for URLs)."""
        if not is_url(self.location):
            return {**file_fingerprint(self.location), "dataset": self.name}
        import fsspec

        fs, path = fsspec.core.url_to_fs(self.location, **(self.storage_options or {}))
        info = fs.info(path)
        size = int(info.get("size") or 0)
        stamp = next((str(info[k]) for k in ("mtime", "LastModified", "ETag", "etag") if k in info), "")
        with fs.open(path, "rb") as fh:
            sampled = sampled_hash(fh, size, samples=16)
        return {"size": size, "stamp": stamp, "sample_sha256": sampled, "dataset": self.name}

    def _open(self) -> Any:
        dataset = _open_file(self.location, self.storage_options)[self.name]
        if h5py.check_string_dtype(dataset.dtype) is not None:
            return dataset.asstr()
        return dataset

    def read(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start .. stop - 1``, as file bytes where the layout allows (see :mod:`._h5direct`), else by h5py."""
        table = self._chunk_table()
        if self.layout is None or (table is not None and self._skipped_filter(table, start, stop)):
            return self.stored(slice(start, stop))
        return read_rows(
            self.layout,
            table,
            self._fetch,
            self.dtype,
            self.shape,
            start,
            stop,
            f"{self.name} in {self.location}",
        )

    def _skipped_filter(self, table: np.ndarray, start: int, stop: int) -> bool:
        """Whether a chunk of rows ``[start, stop)`` was stored without one of its filters (HDF5 may skip an optional one)."""
        step = self.native_rows
        return bool((table[start // step : -(-stop // step), 2] > 0).any())

    def _chunk_table(self) -> np.ndarray | None:
        """The chunks' offsets and sizes, read from HDF5's index once per process."""
        if self.layout is None or self.layout.offset is not None:
            return None
        if self._table is None:
            step = self.layout.chunk_rows
            table = chunk_table(self.handle(), -(-int(self.shape[0]) // step))
            with self._lock:
                self._table = table
        return self._table

    def _fetch(self, ranges: list[tuple[int, int]], buffers: list[np.ndarray | None]) -> list[Any]:
        """Byte ranges of the file in one call: a local file's with ``readinto``, a URL's concurrently."""
        if not is_url(self.location):
            return fetch_file(self.location, ranges, buffers)
        if self._fs is None:
            import fsspec

            self._fs = fsspec.core.url_to_fs(self.location, **(self.storage_options or {}))
        fs, path = self._fs
        if not ranges:
            return []
        got = fs.cat_ranges(
            [path] * len(ranges), [o for o, _ in ranges], [o + n for o, n in ranges], on_error="raise"
        )
        out: list[Any] = []
        for (offset, size), data, buffer in zip(ranges, got, buffers):
            if len(data) != size:
                raise OSError(
                    f"{self.location} sent {len(data)} bytes for the {size} at byte {offset}: the file is "
                    "truncated, or the server does not answer byte ranges (HTTP Range)"
                )
            if buffer is not None:
                buffer[:] = np.frombuffer(data, np.uint8)
            out.append(data if buffer is None else buffer)
        return out

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_table"] = state["_fs"] = None  # per process
        return state


def fetch_file(path: str, ranges: list[tuple[int, int]], buffers: list[np.ndarray | None]) -> list[Any]:
    """Byte ranges of a local file: into the buffers given, as bytes, or (large ones) as pieces read while inflating.

    Raises
    ------
    OSError
        A range lies past the end of the file.
    """
    out: list[Any] = []
    with open(path, "rb", buffering=0) as fh:
        for (offset, size), buffer in zip(ranges, buffers):
            if buffer is None and size > STREAM_BYTES:
                out.append(file_pieces(path, offset, size))
                continue
            fh.seek(offset)
            target = memoryview(bytearray(size)) if buffer is None else buffer.data.cast("B")
            done = 0
            while done < size:
                n = fh.readinto(target[done:])
                if not n:
                    raise OSError(f"{path} ends inside the {size} bytes at {offset}: it is truncated")
                done += n
            out.append(target.obj if buffer is None else buffer)
    return out


STREAM_BYTES = 16 * 2**20  # compressed chunks larger than this are read in pieces while they are inflated


def _read_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    return np.dtype(object) if h5py.check_string_dtype(dtype) is not None else np.dtype(dtype)


class HDF5Container(Container):
    """The datasets of one HDF5 file, named by path (``"/features/X"`` or ``"X"``)."""

    def __init__(
        self, file: h5py.File | h5py.Group, location: str, storage_options: dict[str, Any] | None
    ) -> None:
        self.file = file  # the file or, for a Group object passed as data, that group
        self.location = location
        self.storage_options = storage_options
        inside = "" if file.name in ("/", None) else f" group {file.name}"
        self.where = f"HDF5 file {location}{inside}"

    def get(self, name: str) -> HDF5Reader | None:
        key = name.strip("/")
        obj = self.file.get(key) if self.file.name != "/" else self.file.get("/" + key)
        if not isinstance(obj, h5py.Dataset):
            return None
        return HDF5Reader(self.location, str(obj.name), obj, self.storage_options)

    def names(self) -> list[str]:
        found: list[str] = []
        self.file.visititems(lambda n, o: found.append("/" + n) if isinstance(o, h5py.Dataset) else None)
        return sorted(found)

    def attr(self, array: Any, key: str) -> Any | None:
        value = getattr(array, "attrs", {}).get(key)
        return self.file.attrs.get(key) if value is None else value


def open_hdf5(location: str, *, storage_options: dict[str, Any] | None) -> HDF5Container:
    """Open an HDF5 file read-only.

    Parameters
    ----------
    location : str
        Local path or fsspec URL.
    storage_options : dict or None

    Returns
    -------
    HDF5Container
    """
    try:
        file = _open_file(location, storage_options)
    except FileNotFoundError as exc:
        raise SourceError(f"no such file or directory: {location}") from exc
    except ImportError as exc:
        raise SourceError(f"cannot open {location}: {exc}") from exc
    except remote_errors() as exc:
        what = "reach" if is_url(location) else "read HDF5 file"
        raise SourceError(f"cannot {what} {location}: {exc}") from exc
    return HDF5Container(file, location, storage_options)


def is_hdf5_node(data: Any) -> bool:
    """Whether ``data`` is an open h5py File or Group."""
    return isinstance(data, h5py.Group)


def open_hdf5_node(node: h5py.Group) -> HDF5Container:
    """The datasets under an open h5py File or Group (read again by path in every reader)."""
    return HDF5Container(node, str(node.file.filename), None)


def write_hdf5(
    path: str | os.PathLike[str],
    X: Any,
    y: Any = None,
    groups: Any = None,
    sample_weight: Any = None,
    *,
    chunk_rows: int | None = None,
    feature_names: list[str] | None = None,
    target_names: list[str] | None = None,
    names: dict[str, str] | None = None,
    compression: str | None = None,
    overwrite: bool = True,
    root_attrs: dict[str, str] | None = None,
) -> str:
    """Write arrays into a new HDF5 file, atomically.

    Parameters
    ----------
    path : str or path-like
        Local file to create (replaced when ``overwrite``).
    X : array of shape (n_rows, n_features)
    y : array of shape (n_rows,) or (n_rows, n_targets), optional
    groups, sample_weight : array of shape (n_rows,), optional
    chunk_rows : int, optional
        Rows per HDF5 chunk; default about 4 MiB of X.
    feature_names, target_names : list of str, optional
        Stored as attributes of the X and y datasets.
    names : dict, optional
        Dataset path per role, e.g. ``{"X": "/features/X"}``; defaults to the role.
    compression : str, optional
        h5py filter, e.g. ``"gzip"``.
    overwrite : bool
    root_attrs : dict of str to str, optional
        Attributes of the root (e.g. the marker of a streamridge output).

    Returns
    -------
    str
        The absolute path written.
    """
    values = dict(zip(ROLES, (X, y, groups, sample_weight)))
    rows = chunk_rows or default_chunk_rows(X)
    attrs = {"X": {"feature_names": feature_names}, "y": {"target_names": target_names}}
    with atomic_path(path, overwrite=overwrite) as tmp, h5py.File(tmp, "w") as file:
        file.attrs.update(root_attrs or {})
        datasets, filled = [], []
        for role, value in values.items():
            if value is None:
                continue
            name = "/" + (names or {}).get(role, role).strip("/")
            dataset = _create(file, name, value, rows, compression)
            for key, names_ in attrs.get(role, {}).items():
                if names_ is not None:
                    dataset.attrs[key] = [str(n) for n in names_]
            datasets.append(dataset)
            filled.append(value)
        step = datasets[0].chunks[0] if datasets and datasets[0].chunks else 1  # no chunks: no rows
        for i, start, block in row_blocks(filled, step):  # a chunk of every dataset at a time
            datasets[i][start : start + step] = (
                block.astype(object) if datasets[i].dtype.kind == "O" else block
            )
    return os.path.abspath(os.fspath(path))


def _create(file: h5py.File, name: str, value: Any, rows: int, compression: str | None) -> h5py.Dataset:
    shape = tuple(value.shape)
    dtype = np.dtype(value.dtype)
    if dtype.kind in "UO":
        dtype = h5py.string_dtype()
    chunks = (min(rows, max(shape[0], 1)), *shape[1:]) if shape[0] else None
    return file.create_dataset(name, shape=shape, dtype=dtype, chunks=chunks, compression=compression)
