"""Data sources: turn a path, URL, storage object or array into row-range readers and dask views.

:func:`open_source` accepts a zarr store (format 2 or 3, local or an fsspec URL,
or an open ``zarr.Group``), an HDF5 file (or an open ``h5py.File``/``Group``), a
``.npy`` file or a directory of them, NumPy and dask arrays, or an existing
:class:`Source`.  Each backend lives in one module (``_zarr``, ``_hdf5``,
``_npy``, ``_memory``; URLs in ``_url``) behind the reader protocol of
:mod:`._protocol`: shape and dtype, the stored chunk grid along the rows, a read
of a row range, a fingerprint of the stored bytes.  The pass reads through the
readers (:mod:`streamridge.datapass.partition_task`); every array is also exposed as a dask
array with shared row chunks (``Source.X`` ...) for prediction and user code,
built on first access: a fit that only needs shapes, chunks and distinct
values (``Source.shape``, ``row_chunks``, ``distinct``) never imports dask.
"""

from __future__ import annotations

import copy
import itertools
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from streamridge.errors import InputError, SourceError
from streamridge.sources._common import (
    ROLES,
    check_arrays,
    choose_row_chunks,
    find_arrays,
    regular_step,
    string_list,
    to_dask,
)
from streamridge.sources._memory import DaskReader, MemoryContainer, NumpyReader, as_reader
from streamridge.sources._npy import has_npy, open_npy
from streamridge.sources._protocol import ArrayReader, Container, RowGrid
from streamridge.sources._url import is_url, local_path, remote_options

if TYPE_CHECKING:  # dask.array is imported where a dask view is built (in the driver), not by a worker
    import dask.array as da

__all__ = ["ArrayReader", "RowGrid", "Source", "open_source", "write_hdf5", "write_zarr"]

_ZARR_MARKERS = ("zarr.json", ".zgroup", ".zarray")
HDF5_SUFFIXES = (".h5", ".hdf5", ".hdf", ".he5")


# zarr and h5py are imported by the backend that needs them: a pass over .npy files or arrays never pays for them
_LAZY = {"write_zarr": "._zarr", "write_hdf5": "._hdf5"}


def __getattr__(name: str) -> Any:
    """``write_zarr`` and ``write_hdf5`` from their backend module, imported on first use (PEP 562)."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_LAZY[name], __name__), name)


def _is_node(data: Any, package: str) -> bool:
    """Whether ``data`` is an open zarr or h5py object (its package is then already imported)."""
    if type(data).__module__.split(".")[0] != package:
        return False
    if package == "zarr":
        from streamridge.sources._zarr import is_zarr_node

        return is_zarr_node(data)
    from streamridge.sources._hdf5 import is_hdf5_node

    return is_hdf5_node(data)


class _Lazy:
    """A dask view not built yet: the reader it wraps, its row chunks, and the rows of them it shows.

    A fit of files that never touches ``Source.X`` (statistics, model selection)
    then never imports ``dask.array`` (0.2 s of a command's start-up).
    """

    __slots__ = ("array", "chunks", "rows", "token")

    def __init__(self, array: Any, chunks: tuple[int, ...], token: tuple[Any, ...], rows: tuple[int, int]) -> None:
        self.array, self.chunks, self.token, self.rows = array, chunks, token, rows

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.rows[1] - self.rows[0], *(int(n) for n in self.array.shape[1:]))

    def row_chunks(self) -> tuple[int, ...]:
        """Row counts of the chunks of the view (the stored chunking cut to ``rows``)."""
        a, b = self.rows
        bounds = itertools.accumulate(self.chunks, initial=0)
        cut = sorted({a, b, *(x for x in bounds if a < x < b)})
        return tuple(hi - lo for lo, hi in itertools.pairwise(cut)) if b > a else ()

    def sliced(self, start: int, stop: int) -> _Lazy:
        a = self.rows[0]
        return _Lazy(self.array, self.chunks, self.token, (a + start, a + stop))

    def rechunked(self, chunks: tuple[int, ...]) -> _Lazy:
        if self.rows != (0, sum(self.chunks)):
            raise ValueError("a sliced view is rechunked as a dask array")
        return _Lazy(self.array, chunks, self.token, self.rows)

    def build(self) -> da.Array:
        view = to_dask(_dask_input(self.array), self.chunks, token=self.token)
        return view if self.rows == (0, sum(self.chunks)) else view[self.rows[0] : self.rows[1]]


class _View:
    """A role's dask view on a :class:`Source`: built from its :class:`_Lazy` on first access, then kept."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.role = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return None  # the dataclass field's default
        value = obj.__dict__.get(self.role)
        if isinstance(value, _Lazy):
            built = value.build()
            obj.__dict__[self.role] = built
            if obj._views.get(self.role) is value:
                obj._views[self.role] = built
            return built
        return value

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__[self.role] = value


@dataclass
class Source:
    """Arrays of one data set: row-range readers for the pass, dask views sharing their row chunks.

    The dask views of a source opened by :func:`open_source` are built when
    first read (``source.X``), then kept; :meth:`shape`, :meth:`n_rows`,
    :meth:`row_chunks`, :meth:`select_rows`, :meth:`distinct` and the pass
    itself do not build them.

    Attributes
    ----------
    X : dask array of shape (n_rows, n_features)
        Original dtype; one chunk along the features.
    y : dask array of shape (n_rows,) or (n_rows, n_targets), or None
    groups : dask array of shape (n_rows,), or None
    sample_weight : dask array of shape (n_rows,), or None
    feature_names : list of str or None
        From the ``feature_names`` attribute of X (or of its group or file).
    target_names : list of str or None
        From the ``target_names`` attribute of y (or of its group or file).
    description : str
        E.g. ``"zarr store /data/big.zarr (X: 2000000 x 200 float32)"``.
    readers : dict of role to ArrayReader or None
        What the pass reads (stored chunks, row ranges); a dask array replaced
        on the Source (``dataclasses.replace(src, X=...)``) is read instead.
    rows : tuple of int
        The rows ``[start, stop)`` of the readers this source covers.
    """

    X: da.Array = _View()  # type: ignore[assignment]
    y: da.Array | None = _View()  # type: ignore[assignment]
    groups: da.Array | None = _View()  # type: ignore[assignment]
    sample_weight: da.Array | None = _View()  # type: ignore[assignment]
    feature_names: list[str] | None = None
    target_names: list[str] | None = None
    description: str = "arrays"
    readers: dict[str, ArrayReader | None] | None = field(default=None, repr=False, compare=False)
    rows: tuple[int, int] | None = field(default=None, repr=False, compare=False)
    _views: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def shape(self, role: str = "X") -> tuple[int, ...] | None:
        """Shape of ``role``'s array (X, y, groups or sample_weight), None where it is absent.

        Unlike ``Source.X.shape`` this builds no dask view.
        """
        value = self.__dict__.get(role)
        return None if value is None else tuple(int(n) for n in value.shape)

    def n_rows(self) -> int:
        """Number of rows."""
        return self._x_shape()[0]

    def n_features(self) -> int:
        """Number of features (columns of X)."""
        return self._x_shape()[1]

    def _x_shape(self) -> tuple[int, ...]:
        shape = self.shape("X")
        assert shape is not None
        return shape

    def row_chunks(self) -> tuple[int, ...]:
        """Row counts of the chunks of the dask views."""
        value = self.__dict__.get("X")
        if isinstance(value, _Lazy):
            return value.row_chunks()
        return tuple(int(c) for c in self.X.chunks[0])

    def distinct(self, role: str) -> np.ndarray:
        """Sorted distinct values of the 1-D (or one-column) array of ``role``.

        Read through its reader where its view was never replaced (every stored
        chunk once, a block at a time; no dask), else reduced by dask chunk by
        chunk on the local threaded scheduler.  Never the whole column in memory.
        """
        value = self.__dict__.get(role)
        if value is None:
            raise ValueError(f"the source has no {role}")
        reader = (self.readers or {}).get(role)
        if reader is not None and self._reads_reader(role):
            start = 0 if self.rows is None else self.rows[0]  # the reader's rows of this source
            return distinct_values(reader, start, start + int(value.shape[0]))
        import dask.array as da
        from dask.threaded import get as threads  # a callable: dask imports distributed to resolve a name

        view = getattr(self, role)
        return np.unique(np.asarray(da.unique(view.reshape(-1)).compute(scheduler=threads)))

    def _reads_reader(self, role: str) -> bool:
        """Whether ``role`` is still the view the source was opened with (not replaced): its reader holds its rows."""
        return self._views.get(role) is self.__dict__.get(role)

    def rechunk(self, row_chunks: tuple[int, ...]) -> Source:
        """Return a copy whose dask views all have the given row chunks (the readers are kept)."""

        def re(role: str) -> Any:
            value = self.__dict__.get(role)
            if value is None:
                return None
            if isinstance(value, _Lazy) and value.rows == (0, sum(value.chunks)):
                return value.rechunked(row_chunks)
            return to_dask(getattr(self, role), row_chunks, token=())

        return _with_views(self, {role: re(role) for role in ROLES})

    def select_rows(self, start: int, stop: int) -> Source:
        """The same data restricted to rows ``[start, stop)``."""
        lo = 0 if self.rows is None else self.rows[0]

        def cut(role: str) -> Any:
            value = self.__dict__.get(role)
            if value is None:
                return None
            return value.sliced(start, stop) if isinstance(value, _Lazy) else value[start:stop]

        views = {role: cut(role) for role in ROLES}
        out = _with_views(self, views)
        out.rows = (lo + start, lo + stop)
        out.description = f"{self.description} rows {start}:{stop}"
        return out

    def pass_readers(self) -> tuple[dict[str, ArrayReader | None], int]:
        """Readers of X, y, groups, sample_weight for the pass, and the first row they cover.

        A role whose dask view was replaced since the source was opened is read
        from its current dask array.
        """
        out: dict[str, ArrayReader | None] = {}
        offsets = set()
        for role in ROLES:
            value = self.__dict__.get(role)  # not getattr: a view not built yet stays so
            reader = (self.readers or {}).get(role)
            if value is None:
                out[role] = None
            elif reader is not None and self._reads_reader(role):
                out[role] = reader
                offsets.add(0 if self.rows is None else self.rows[0])
            else:
                out[role] = DaskReader(getattr(self, role))
                offsets.add(0)
        if len(offsets) > 1:  # a mix of sliced readers and replaced views: read everything from the views
            return {role: None if getattr(self, role) is None else DaskReader(getattr(self, role)) for role in ROLES}, 0
        return out, offsets.pop() if offsets else 0


def _evolve(source: Source, **changes: Any) -> Source:
    """``dataclasses.replace`` that keeps views not built yet unbuilt (``replace`` reads every field)."""
    out = copy.copy(source)
    out._views = dict(source._views)
    for name, value in changes.items():
        setattr(out, name, value)
    return out


def _with_views(source: Source, views: dict[str, Any]) -> Source:
    out = _evolve(source, **views)
    out._views = {role: views[role] for role in ROLES if source._reads_reader(role)}
    return out


def distinct_values(reader: ArrayReader, start: int, stop: int, block_rows: int = 2**20) -> np.ndarray:
    """Sorted distinct values of reader rows ``[start, stop)``.

    Blocks of whole stored chunks are read and reduced on the cores' threads
    (a few blocks in flight); their distinct values are merged whenever they
    outnumber those merged so far, so the merging costs O(n log n) in all and
    memory holds the distinct values, never the column.
    """
    from concurrent.futures import ThreadPoolExecutor

    from streamridge.parallel import n_cpus
    from streamridge.sources.blocks import block_ranges

    def one(a: int, b: int) -> np.ndarray:
        return np.unique(reader.read(a, b).reshape(-1))

    out = np.empty(0, dtype=reader.dtype)
    parts: list[np.ndarray] = []
    pending = 0
    ranges = block_ranges(reader, start, stop, block_rows)
    workers = max(1, n_cpus())
    with ThreadPoolExecutor(workers, thread_name_prefix="streamridge-distinct") as pool:
        jobs = [pool.submit(one, *r) for r in itertools.islice(ranges, 2 * workers)]
        while jobs:
            values = jobs.pop(0).result()
            nxt = next(ranges, None)
            if nxt is not None:
                jobs.append(pool.submit(one, *nxt))
            parts.append(values)
            pending += len(values)
            if pending >= max(len(out), block_rows):
                out, parts, pending = np.unique(np.concatenate([out, *parts])), [], 0
    return np.unique(np.concatenate([out, *parts])) if parts else out


def open_source(
    data: Any,
    *,
    x: str = "X",
    y: Any = "y",
    groups: Any = None,
    sample_weight: Any = None,
    chunk_rows: int | None = None,
    memory_budget: int = 256 * 2**20,
    storage_options: dict[str, Any] | None = None,
    require_y: bool = True,
) -> Source:
    """Open a data set for one streamed pass over its rows.

    Parameters
    ----------
    data : str, path-like, array of shape (n_rows, n_features), dask array or Source
        A local path or fsspec URL (``file://``, ``http(s)://``, ``s3://``,
        ``gs://``) of a zarr store (a group of named arrays, or a bare array
        that is X), an HDF5 file (``.h5``, ``.hdf5``, ``.hdf``), a ``.npy`` file
        (X itself), a directory of ``.npy`` files, or X as an array.  An
        existing Source is re-chunked (the other arguments but ``chunk_rows``
        and ``memory_budget`` are ignored; its current chunks stand in for the
        storage chunks).
    x : str
        Name of X in a zarr group, HDF5 file (``"/features/X"`` or ``"X"``) or
        directory of ``.npy`` files; ignored for a bare array or a ``.npy`` file.
    y, groups, sample_weight : str, array or None
        A name resolved like ``x`` (for a ``.npy`` file: ``"<name>.npy"`` in its
        directory, or a path ending in ``.npy``), an array, or None (absent).
    chunk_rows : int, optional
        Rows per chunk.  None chooses from ``memory_budget``.
    memory_budget : int
        Bytes of memory for the pass; one chunk of X as float64 takes about an
        eighth, rounded to whole storage chunks so that none is decoded twice
        (a storage chunk up to half the budget as float64 is one chunk).
    storage_options : dict, optional
        Passed to fsspec for URLs.  http(s) gets a 10 s connect timeout unless
        ``client_kwargs["timeout"]`` is given.
    require_y : bool
        Whether a ``y`` name that is not found is an error (else y is None).

    Returns
    -------
    Source

    Raises
    ------
    SourceError
        A file, array name or URL cannot be found or reached.
    InputError
        Shapes or dtypes cannot be used (X not 2-D, no rows, row counts that
        differ, a non-numeric X, y or sample_weight).
    """
    if isinstance(data, Source):
        return _reopen(data, chunk_rows=chunk_rows, memory_budget=memory_budget)
    names = {"X": x, "y": y, "groups": groups, "sample_weight": sample_weight}
    token: tuple[Any, ...] = ()
    if isinstance(data, (str, os.PathLike)) or _is_node(data, "zarr") or _is_node(data, "h5py"):
        container, location = _open_location(data, storage_options)
        if container.fixed_x is None:
            arrays = find_arrays(container, names, require_y=require_y)
        else:
            arrays = find_arrays(container, {**names, "X": None}, require_y=require_y)
            arrays["X"] = container.fixed_x
        token = (container.where, _mtime(location))
        named = {role for role in ROLES if isinstance(names[role], str)}
    else:
        container = MemoryContainer()
        arrays = {"X": as_reader(data, "X")}
        for role in ROLES[1:]:
            arrays[role] = _in_memory(role, names[role], require_y=require_y)
        named = set()
    for role in ROLES[1:]:
        if arrays[role] is not None and not isinstance(names[role], str):
            arrays[role] = as_reader(arrays[role], role)
    return _assemble(container, arrays, token, named, chunk_rows=chunk_rows, memory_budget=memory_budget)


def _in_memory(role: str, value: Any, *, require_y: bool) -> Any:
    if not isinstance(value, str):
        return value
    if role == "y" and not require_y:
        return None
    raise SourceError(
        f"{role}={value!r} names an array, but X was given as an array; pass {role} as an array too"
    )


def _open_location(data: Any, storage_options: dict[str, Any] | None) -> tuple[Container, str]:
    if _is_node(data, "zarr"):
        from streamridge.sources._zarr import ZarrContainer, zarr_node_location

        location = zarr_node_location(data)
        return ZarrContainer(data, f"zarr store {location}"), location
    if _is_node(data, "h5py"):
        from streamridge.sources._hdf5 import open_hdf5_node

        container = open_hdf5_node(data)
        return container, container.location
    text = os.fspath(data)
    if is_url(text):
        options = remote_options(text, storage_options)
        suffix = text.rstrip("/").lower()
        if suffix.endswith(HDF5_SUFFIXES):
            return _open_hdf5(text, options), text
        if suffix.endswith(".npy"):
            raise SourceError(
                f"cannot read .npy over a URL ({text}); copy it locally or convert it with write_zarr"
            )
        return _open_zarr(text, options), text
    path = local_path(text)
    if not os.path.exists(path):
        raise SourceError(f"no such file or directory: {path}")
    if os.path.isdir(path):
        if path.rstrip("/").endswith(".zarr") or any(
            os.path.exists(os.path.join(path, m)) for m in _ZARR_MARKERS
        ):
            return _open_zarr(path, None), path
        if has_npy(path):
            return open_npy(path), path
        raise SourceError(f"{path} is a directory but neither a zarr store nor a directory of .npy files")
    if path.lower().endswith(".npy"):
        return open_npy(path), path
    if path.lower().endswith(HDF5_SUFFIXES) or _is_hdf5_file(path):
        return _open_hdf5(path, None), path
    raise SourceError(f"cannot tell the format of {path}; use a zarr store, an .h5/.hdf5 file or .npy files")


def _open_zarr(location: str, options: dict[str, Any] | None) -> Container:
    from streamridge.sources._zarr import open_zarr

    return open_zarr(location, storage_options=options)


def _open_hdf5(location: str, options: dict[str, Any] | None) -> Container:
    from streamridge.sources._hdf5 import open_hdf5

    return open_hdf5(location, storage_options=options)


def _is_hdf5_file(path: str) -> bool:
    import h5py

    return bool(h5py.is_hdf5(path))


def _mtime(location: str) -> float | None:
    try:
        return os.stat(location).st_mtime_ns if not is_url(location) else None
    except OSError:
        return None


def _assemble(
    container: Container,
    arrays: dict[str, Any],
    token: tuple[Any, ...],
    named: set[str],
    *,
    chunk_rows: int | None,
    memory_budget: int,
) -> Source:
    check_arrays(arrays, container.where)
    X = arrays["X"]
    n_rows, n_features = (int(n) for n in X.shape)
    check_statistics_fit(n_features, container.where)
    grid = X.grid()
    row_chunks = choose_row_chunks(
        n_rows,
        n_features,
        native_rows=grid.unit if grid.regular else 1,  # a shard's inner chunk: the unit a read decodes
        chunk_rows=chunk_rows,
        memory_budget=memory_budget,
    )
    views: dict[str, Any] = {
        role: None if arrays[role] is None else _Lazy(arrays[role], row_chunks, (*token, role), (0, n_rows))
        for role in ROLES
    }
    feature_names = string_list(container.attr(X, "feature_names"))
    y = arrays["y"]
    target_names = string_list(container.attr(y, "target_names")) if "y" in named and y is not None else None
    _check_names(feature_names, n_features, "feature_names", container.where)
    n_targets = 1 if y is None or len(y.shape) == 1 else int(y.shape[1])
    _check_names(target_names, n_targets, "target_names", container.where)
    description = f"{container.where} (X: {n_rows} x {n_features} {np.dtype(X.dtype)})"
    X_view = views["X"]
    assert X_view is not None
    return Source(
        X_view,
        views["y"],
        views["groups"],
        views["sample_weight"],
        feature_names=feature_names,
        target_names=target_names,
        description=description,
        readers=dict(arrays),
        _views=dict(views),
    )


def _dask_input(reader: ArrayReader) -> Any:
    """What the dask view wraps: the array itself when it is in memory or already dask."""
    if isinstance(reader, (NumpyReader, DaskReader)):
        return reader.array
    return reader


def check_statistics_fit(n_features: int, where: str) -> None:
    """Refuse at once an X whose N x N statistics alone exceed this machine's memory.

    Raises
    ------
    InputError
        Naming the size of one N x N float64 matrix and the memory.
    """
    need = 8 * n_features * n_features
    total = _physical_memory()
    if total is not None and need > total:
        raise InputError(
            f"X in {where} has {n_features} features: its statistics need at least {_size(need)} "
            f"(N x N x 8 bytes per fold and class), more than this machine's {_size(total)} of memory; "
            "select or reduce the features first"
        )


def _physical_memory() -> int | None:
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if n < 1000:
            return f"{n:.3g} {unit}"
        n /= 1000
    return f"{n:.3g} EB"


def _check_names(names: list[str] | None, expected: int, what: str, where: str) -> None:
    if names is not None and len(names) != expected:
        raise InputError(f"{what} in {where} has {len(names)} names but the data has {expected} columns")


def _reopen(source: Source, *, chunk_rows: int | None, memory_budget: int) -> Source:
    row_chunks = choose_row_chunks(
        source.n_rows(),
        source.n_features(),
        native_rows=regular_step(source.row_chunks()),
        chunk_rows=chunk_rows,
        memory_budget=memory_budget,
    )
    return source if row_chunks == source.row_chunks() else source.rechunk(row_chunks)
