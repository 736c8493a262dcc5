"""HDF5 files, local or behind an fsspec URL, read lazily with h5py."""

from __future__ import annotations

import os
import zlib
from typing import Any

import h5py
import numpy as np

from ..errors import SourceError
from ._common import ROLES, atomic_path, default_chunk_rows, is_dask_array
from ._protocol import ArrayReader, Container, RowGrid, file_fingerprint, sampled_hash
from ._url import is_url, remote_errors


def _open_file(location: str, storage_options: dict[str, Any] | None) -> h5py.File:
    if is_url(location):
        import fsspec

        handle = fsspec.open(location, mode="rb", **(storage_options or {})).open()
        return h5py.File(handle, "r")
    return h5py.File(location, "r")


class HDF5Reader(ArrayReader):
    """One HDF5 dataset; every process that reads opens the file itself.

    h5py serialises calls with its own global lock, so no dask lock is needed.

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
        """Rows ``start .. stop - 1``; one large gzip chunk is inflated piece by piece into the result.

        HDF5 inflates a chunk into a buffer of its own and copies it into the
        output (two chunk sizes at the peak); a whole stored chunk of at least
        ``INFLATE_BYTES`` of a local file is read from its file offset and
        inflated straight into the result (one chunk size and a few MB).
        """
        where = self._gzip_chunk(start, stop)
        if where is not None:
            offset, size, shape = where
            out = np.empty(shape, dtype=self.dtype)
            inflate_into(self.location, offset, size, out)
            return out[: stop - start]
        return self[start:stop]

    def _gzip_chunk(self, start: int, stop: int) -> tuple[int, int, tuple[int, ...]] | None:
        """File offset, stored size and shape of the gzip-only chunk holding exactly rows ``[start, stop)``."""
        step = self.native_rows
        if is_url(self.location) or step <= 1 or start % step or stop != min(start + step, self.shape[0]):
            return None
        if step * int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize < INFLATE_BYTES:
            return None
        ds = self.handle()
        if not isinstance(ds, h5py.Dataset) or ds.chunks is None or tuple(ds.chunks[1:]) != tuple(ds.shape[1:]):
            return None
        if ds.compression != "gzip" or ds.shuffle or ds.fletcher32 or ds.scaleoffset is not None:
            return None
        if ds.id.get_create_plist().get_nfilters() != 1 or ds.dtype != self.dtype or not ds.dtype.isnative or ds.file.driver != "sec2":
            return None  # offsets are plain file offsets only with the default driver
        info = ds.id.get_chunk_info_by_coord((start,) + (0,) * (len(self.shape) - 1))
        if info.byte_offset is None or info.filter_mask:
            return None
        return int(info.byte_offset), int(info.size), tuple(int(c) for c in ds.chunks)


INFLATE_BYTES = 16 * 2**20  # whole gzip chunks at least this large are inflated into the result
_PIECE = 4 * 2**20  # bytes read from the file, and inflated, per step


def inflate_into(path: str, offset: int, size: int, out: np.ndarray) -> None:
    """Inflate the zlib stream of ``size`` bytes at ``offset`` of file ``path`` into ``out`` (C-contiguous).

    Raises
    ------
    OSError
        If the stream is truncated, corrupted, or does not fill ``out`` exactly.
    """
    flat = out.reshape(-1).view(np.uint8)
    z, pos, left = zlib.decompressobj(), 0, size
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            while left > 0 and not z.eof:
                data = fh.read(min(_PIECE, left))
                if not data:
                    break
                left -= len(data)
                while data:
                    piece = z.decompress(data, _PIECE)
                    if pos + len(piece) > flat.size:
                        raise OSError(f"a gzip chunk at byte {offset} of {path} inflates to more than {flat.size} bytes")
                    flat[pos : pos + len(piece)] = np.frombuffer(piece, np.uint8)
                    pos += len(piece)
                    data = z.unconsumed_tail
    except zlib.error as exc:
        raise OSError(f"the gzip chunk at byte {offset} of {path} is corrupted: {exc}") from exc
    if not z.eof or pos != flat.size:
        raise OSError(f"the gzip chunk at byte {offset} of {path} is truncated ({pos} of {flat.size} bytes)")


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
        for role, value in values.items():
            if value is None:
                continue
            name = "/" + (names or {}).get(role, role).strip("/")
            dataset = _create(file, name, value, rows, compression)
            for key, names_ in attrs.get(role, {}).items():
                if names_ is not None:
                    dataset.attrs[key] = [str(n) for n in names_]
    return os.path.abspath(os.fspath(path))


def _create(file: h5py.File, name: str, value: Any, rows: int, compression: str | None) -> h5py.Dataset:
    shape = tuple(value.shape)
    dtype = np.dtype(value.dtype)
    if dtype.kind in "UO":
        dtype = h5py.string_dtype()
    chunks = (min(rows, max(shape[0], 1)), *shape[1:]) if shape[0] else None
    dataset = file.create_dataset(name, shape=shape, dtype=dtype, chunks=chunks, compression=compression)
    step = chunks[0] if chunks else 1
    for start in range(0, shape[0], step):
        block = value[start : start + step]
        block = block.compute() if is_dask_array(block) else np.asarray(block)
        dataset[start : start + step] = block.astype(object) if dtype.kind == "O" else block
    return dataset
