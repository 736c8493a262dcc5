"""Zarr stores (format 2 and 3), local or behind an fsspec URL."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import zarr

from streamridge.errors import SourceError
from streamridge.sources._common import ROLES, atomic_path, default_chunk_rows, is_dask_array, row_blocks
from streamridge.sources._protocol import ArrayReader, Container, RowGrid
from streamridge.sources._url import remote_errors
from streamridge.sources._zdecode import decode_pieces
from streamridge.sources._zstream import direct_codec, read_rows, stream_chunk, stream_codec


class ZarrReader(ArrayReader):
    """One zarr array (format 2 or 3, sharded or not), local or remote.

    The stored grid is the shard (or chunk) grid; a read of whole inner
    chunks decodes each of them once.

    Parameters
    ----------
    array : zarr.Array
    """

    overlap_reads = True  # zarr decodes in its own threads, without the GIL: worth reading ahead

    def __init__(self, array: Any) -> None:
        super().__init__()
        self.array = array
        self.shape = tuple(int(n) for n in array.shape)
        self.dtype = np.dtype(array.dtype)
        self._stream_codec = stream_codec(array)
        rows_only = (
            tuple(int(c) for c in array.chunks[1:]) == self.shape[1:]
        )  # chunks (and shards) of whole rows
        self._direct_codec = direct_codec(array) if rows_only else None
        self.remote = _over_network(array)
        self._indexes: dict[str, Any] = {}  # shard indexes read, per process

    @classmethod
    def from_array(cls, array: Any) -> ZarrReader:
        """Reader of a zarr array object."""
        return cls(array)

    @property
    def attrs(self) -> Any:
        """The array's attributes."""
        return self.array.attrs

    def _open(self) -> Any:
        return self.array

    def grid(self) -> RowGrid:
        """Shard rows (stored objects) with inner-chunk reads, or chunk rows."""
        chunk = int(self.array.chunks[0]) if self.shape[0] else 1
        shards = getattr(self.array, "shards", None)
        if shards:
            return RowGrid(self.shape[0], step=max(1, int(shards[0])), read_step=max(1, chunk))
        return RowGrid(self.shape[0], step=max(1, chunk))

    def fingerprint(self) -> dict[str, Any]:
        """Size and modification time (or ETag) of every stored object of the array, hashed."""
        return {"objects": _listing_digest(self.array), "shape": list(self.shape)}

    def read(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start .. stop - 1``, each stored chunk decoded once, straight into the result where possible.

        Chunks of whole rows with plain codecs (zstd, gzip, zlib, blosc, none;
        sharded or not) are fetched in one call and decompressed here
        (:func:`._zstream.read_rows`): zarr's per-chunk machinery cost about
        0.45 ms of Python per chunk, with the GIL held.  Otherwise a read of
        exactly one stored chunk returns zarr's decoded buffer without a copy
        (zarr's own read held the compressed bytes, the decoded chunk and the
        output at once), and anything else is zarr's read.
        """
        if self._direct_codec is not None and stop > start:
            rows = read_rows(self.handle(), self._direct_codec, start, stop, self._indexes)
            if rows is not None:
                return rows
        k = self._whole_chunk(start, stop)
        if k is not None:
            block = decode_chunk(self.handle(), k, stop - start)
            if block is not None:
                return block
        return self.stored(slice(start, stop))

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_indexes"] = {}
        return state

    def pieces(
        self, start: int, stop: int, piece_rows: int, alloc: Callable[[int], np.ndarray] | None = None
    ) -> Iterator[np.ndarray] | None:
        """Rows ``start .. stop - 1`` of exactly one stored chunk as arrays of ``piece_rows`` rows (the last shorter).

        The compressed chunk is fetched now (a local file is opened and read
        in pieces as it is decoded) and decoded piece by piece as the
        iterator is consumed (see :mod:`._zdecode`): memory is the compressed
        chunk (a local file's: a few MB) and one piece, not the decoded
        chunk.  ``alloc(n)`` gives the array a piece of ``n`` rows is decoded
        into (None: a new one per piece).  None when the rows are not one
        whole stored chunk, its codecs cannot be decoded in pieces, or it is
        not stored (the caller then uses :meth:`read`).
        """
        k = self._whole_chunk(start, stop)
        codec = None if k is None else self.stream_codec()
        if k is None or codec is None:
            return None
        fetched = stream_chunk(self.handle(), k)
        if fetched is None:
            return None
        key, raw = fetched
        sizes = [min(piece_rows, stop - s) for s in range(start, stop, piece_rows)]
        chunk_rows = int(self.array.chunks[0])
        return decode_pieces(raw, codec, self.dtype, self.shape[1:], chunk_rows, sizes, key, alloc)

    def stream_codec(self) -> str | None:
        """The codec whole stored chunks are decoded in pieces with (None: zarr's own read), see :meth:`pieces`."""
        return self._stream_codec

    def _whole_chunk(self, start: int, stop: int) -> int | None:
        """Index of the stored chunk whose rows are exactly ``[start, stop)``, or None."""
        chunks = tuple(int(c) for c in self.array.chunks)
        if getattr(self.array, "shards", None) or chunks[1:] != self.shape[1:] or stop <= start:
            return None
        step = chunks[0]
        if start % step or stop != min(start + step, self.shape[0]):
            return None
        return start // step


def decode_chunk(array: Any, k: int, rows: int) -> np.ndarray | None:
    """Stored chunk ``k`` along the rows of a zarr array, decoded by its own codecs (its first ``rows`` rows).

    The decoded buffer is the result (read-only where the codec returns
    bytes); None where the chunk is not stored (fill value) or this zarr
    version lacks the internals used, so the caller falls back to a plain read.
    """
    try:
        from zarr.core.buffer import default_buffer_prototype
        from zarr.core.sync import sync

        aa = array._async_array
        meta, config = aa.metadata, aa.config
        if meta.zarr_format == 2:
            config = dataclasses.replace(config, order=meta.order)
        coords = (k,) + (0,) * (len(array.shape) - 1)
        spec = meta.get_chunk_spec(coords, config, prototype=default_buffer_prototype())
        getter = aa.store_path / meta.encode_chunk_key(coords)
        pipeline = aa.codec_pipeline
    except (AttributeError, ImportError, TypeError):  # pragma: no cover - other zarr versions
        return None

    async def fetch_and_decode() -> Any:
        raw = await getter.get(prototype=spec.prototype)
        if raw is None:
            return None
        (decoded,) = await pipeline.decode([(raw, spec)])
        return decoded

    decoded = sync(fetch_and_decode())
    if decoded is None:
        return None
    out = np.asarray(decoded.as_ndarray_like())
    if out.dtype != np.dtype(array.dtype) or out.shape[1:] != tuple(array.shape[1:]):
        return None
    return out[:rows]


def _sampled_digest(array: Any) -> str:
    """Hash of the metadata and of the first, middle and last stored chunks (stores that cannot be listed)."""
    n = int(array.shape[0])
    rows = int(array.chunks[0]) if n else 0
    h = hashlib.sha256(repr((array.shape, array.chunks, str(array.dtype), dict(array.attrs))).encode())
    for k in sorted({0, (n // max(rows, 1)) // 2, max(0, (n - 1) // max(rows, 1))}):
        h.update(np.ascontiguousarray(array[k * rows : (k + 1) * rows]).tobytes())
    return "sampled-" + h.hexdigest()[:16]


def _listing_digest(array: Any) -> str:
    """SHA-256 over (key, size, mtime) of every object under the array's path in its store."""
    store = array.store
    path = str(getattr(array, "path", "") or "").strip("/")
    entries: list[tuple[str, int, str]] = []
    root = getattr(store, "root", None)
    if root is not None:
        base = os.path.join(str(root), path)
        for dirpath, _dirs, files in os.walk(base):
            for f in files:
                st = os.stat(os.path.join(dirpath, f))
                entries.append(
                    (os.path.relpath(os.path.join(dirpath, f), base), st.st_size, str(st.st_mtime_ns))
                )
    else:  # remote (fsspec) and in-memory stores: listing is not always possible
        return _sampled_digest(array)
    entries.sort()
    return hashlib.sha256(repr(entries).encode()).hexdigest()[:16]


class ZarrContainer(Container):
    """A zarr group holding named arrays, or a bare array store (then it is X).

    Parameters
    ----------
    node : zarr.Group or zarr.Array
    where : str
        ``"zarr store LOCATION"``.
    """

    def __init__(self, node: Any, where: str) -> None:
        self.where = where
        self.group = node if isinstance(node, zarr.Group) else None
        if self.group is None:
            self.fixed_x = ZarrReader(node)

    def get(self, name: str) -> ZarrReader | None:
        if self.group is None:
            return None
        try:
            node = self.group[name.strip("/")]
        except (KeyError, FileNotFoundError):
            return None
        return ZarrReader(node) if isinstance(node, zarr.Array) else None

    def names(self) -> list[str]:
        if self.group is None:
            return ["(a single array, used as X)"]
        members = self.group.members(max_depth=None)
        return sorted(path for path, node in members if isinstance(node, zarr.Array))

    def attr(self, array: Any, key: str) -> Any | None:
        value = array.attrs.get(key)
        if value is None and self.group is not None:
            value = self.group.attrs.get(key)
        return value


def open_zarr(location: str, *, storage_options: dict[str, Any] | None) -> ZarrContainer:
    """Open a zarr store read-only.

    Parameters
    ----------
    location : str
        Local path or fsspec URL.
    storage_options : dict or None
        Passed to fsspec for URLs (None for local paths).

    Returns
    -------
    ZarrContainer
    """
    where = f"zarr store {location}"
    try:
        node = zarr.open(location, mode="r", storage_options=storage_options)
    except FileNotFoundError as exc:  # includes zarr's NodeNotFoundError
        raise SourceError(f"no zarr store at {location}; check the path or URL") from exc
    except ImportError as exc:
        raise SourceError(f"cannot open {location}: {exc}") from exc
    except remote_errors() as exc:
        raise SourceError(f"cannot reach {location}: {exc}; check the address and the network") from exc
    except (ValueError, KeyError, TypeError) as exc:  # unreadable metadata
        raise SourceError(f"cannot read zarr store {location}: {exc}") from exc
    return ZarrContainer(node, where)


def zarr_node_location(node: Any) -> str:
    """Where a zarr Group or Array object lives, for messages (its store and path)."""
    store = node.store
    root = getattr(store, "root", None) or getattr(store, "path", None)
    path = str(getattr(node, "path", "") or "")
    base = str(root) if root is not None else str(store)
    return os.path.join(base, path) if path else base


def is_zarr_node(data: Any) -> bool:
    """Whether ``data`` is a zarr Group or Array object."""
    return isinstance(data, (zarr.Group, zarr.Array))


def write_zarr(
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
    zarr_format: int = 3,
    overwrite: bool = True,
    root_attrs: dict[str, str] | None = None,
) -> str:
    """Write arrays into a new zarr group store, atomically.

    Parameters
    ----------
    path : str or path-like
        Local directory to create (replaced when ``overwrite``).
    X : array of shape (n_rows, n_features)
        NumPy, memory-mapped or dask array; written chunk by chunk.
    y : array of shape (n_rows,) or (n_rows, n_targets), optional
    groups, sample_weight : array of shape (n_rows,), optional
    chunk_rows : int, optional
        Rows per stored chunk; default about 4 MiB of X.
    feature_names, target_names : list of str, optional
        Stored as the ``feature_names`` attribute of X and ``target_names`` of y.
    names : dict, optional
        Array path per role (``"X"``, ``"y"``, ``"groups"``, ``"sample_weight"``),
        e.g. ``{"X": "features/X"}``; defaults to the role.
    zarr_format : {2, 3}
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
    with atomic_path(path, overwrite=overwrite) as tmp:
        root = zarr.open_group(tmp, mode="w", zarr_format=zarr_format)  # type: ignore[arg-type]
        root.attrs.update(root_attrs or {})
        targets = []
        for role, value in values.items():
            if value is None:
                continue
            name = (names or {}).get(role, role).strip("/")
            parent, _, leaf = name.rpartition("/")
            grp = root.require_group(parent) if parent else root
            meta = {k: list(v) for k, v in attrs.get(role, {}).items() if v is not None}
            targets.append((_create_array(grp, leaf, value, rows, meta), value))
        _fill(targets)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # consolidated metadata is not yet in the v3 spec
            zarr.consolidate_metadata(tmp)
    return os.path.abspath(os.fspath(path))


def _create_array(grp: Any, name: str, value: Any, rows: int, attrs: dict[str, Any]) -> Any:
    shape = tuple(value.shape)
    chunks = (min(rows, max(shape[0], 1)), *shape[1:])
    return grp.create_array(name, shape=shape, dtype=np.dtype(value.dtype), chunks=chunks, attributes=attrs)


def _fill(targets: list[tuple[Any, Any]]) -> None:
    """Write every value into its zarr array: dask values by one ``da.store``, the others a stored chunk
    of every array at a time (:func:`~streamridge.sources._common.row_blocks`)."""
    lazy = [(arr, value) for arr, value in targets if is_dask_array(value)]
    if lazy:
        import dask.array as da

        da.store([v.rechunk({0: a.chunks[0]}) for a, v in lazy], [a for a, _ in lazy], lock=False)
    rest = [(arr, value) for arr, value in targets if not is_dask_array(value)]
    if rest:
        step = rest[0][0].chunks[0]
        for i, start, block in row_blocks([v for _, v in rest], step):
            rest[i][0][start : start + step] = block


def _over_network(array: Any) -> bool:
    """Whether the array's store is an fsspec filesystem other than the local one (reads wait on a network)."""
    from zarr.storage import FsspecStore

    store = array.store_path.store if hasattr(array, "store_path") else array.store
    if not isinstance(store, FsspecStore):
        return False
    return "file" not in (store.fs.protocol if isinstance(store.fs.protocol, tuple) else (store.fs.protocol,))
