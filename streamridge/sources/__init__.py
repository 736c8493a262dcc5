"""Data sources: turn a path, URL, storage object or array into row-range readers and dask views.

:func:`open_source` accepts a zarr store (format 2 or 3, local or an fsspec URL,
or an open ``zarr.Group``), an HDF5 file (or an open ``h5py.File``/``Group``), a
``.npy`` file or a directory of them, NumPy and dask arrays, or an existing
:class:`Source`.  Each backend lives in one module (``_zarr``, ``_hdf5``,
``_npy``, ``_memory``; URLs in ``_url``) behind the reader protocol of
:mod:`._protocol`: shape and dtype, the stored chunk grid along the rows, a read
of a row range, a fingerprint of the stored bytes.  The pass reads through the
readers (:mod:`streamridge.partitions`); every array is also exposed as a dask
array with shared row chunks (``Source.X`` ...) for prediction and user code.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InputError, SourceError
from ._common import (
    ROLES,
    check_arrays,
    choose_row_chunks,
    find_arrays,
    regular_step,
    string_list,
    to_dask,
)
from ._memory import DaskReader, MemoryContainer, NumpyReader, as_reader
from ._npy import has_npy, open_npy
from ._protocol import ArrayReader, Container, RowGrid
from ._url import is_url, local_path, remote_options

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
        from ._zarr import is_zarr_node

        return is_zarr_node(data)
    from ._hdf5 import is_hdf5_node

    return is_hdf5_node(data)


@dataclass
class Source:
    """Arrays of one data set: row-range readers for the pass, dask views sharing their row chunks.

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
    partition_rows : int or None
        Rows per partition asked for (``chunk_rows``); None: from the memory budget.
    """

    X: da.Array
    y: da.Array | None = None
    groups: da.Array | None = None
    sample_weight: da.Array | None = None
    feature_names: list[str] | None = None
    target_names: list[str] | None = None
    description: str = "arrays"
    readers: dict[str, ArrayReader | None] | None = field(default=None, repr=False, compare=False)
    rows: tuple[int, int] | None = field(default=None, repr=False, compare=False)
    partition_rows: int | None = field(default=None, repr=False, compare=False)
    _views: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def n_rows(self) -> int:
        """Number of rows."""
        return int(self.X.shape[0])

    def n_features(self) -> int:
        """Number of features (columns of X)."""
        return int(self.X.shape[1])

    def row_chunks(self) -> tuple[int, ...]:
        """Row counts of the chunks of the dask views."""
        return tuple(int(c) for c in self.X.chunks[0])

    def rechunk(self, row_chunks: tuple[int, ...]) -> Source:
        """Return a copy whose dask views all have the given row chunks (the readers are kept)."""

        def re(a: da.Array | None) -> da.Array | None:
            return None if a is None else to_dask(a, row_chunks, token=())

        return _with_views(self, {"X": re(self.X), "y": re(self.y), "groups": re(self.groups), "sample_weight": re(self.sample_weight)})

    def select_rows(self, start: int, stop: int) -> Source:
        """The same data restricted to rows ``[start, stop)``."""
        lo = 0 if self.rows is None else self.rows[0]
        views = {role: None if getattr(self, role) is None else getattr(self, role)[start:stop] for role in ROLES}
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
            view = getattr(self, role)
            reader = (self.readers or {}).get(role)
            if view is None:
                out[role] = None
            elif reader is not None and self._views.get(role) is view:
                out[role] = reader
                offsets.add(0 if self.rows is None else self.rows[0])
            else:
                out[role] = DaskReader(view)
                offsets.add(0)
        if len(offsets) > 1:  # a mix of sliced readers and replaced views: read everything from the views
            return {role: None if getattr(self, role) is None else DaskReader(getattr(self, role)) for role in ROLES}, 0
        return out, offsets.pop() if offsets else 0


def _with_views(source: Source, views: dict[str, Any]) -> Source:
    out = replace(source, **views)
    out._views = {role: views[role] for role in ROLES if source._views.get(role) is getattr(source, role)}
    return out


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
        eighth, rounded to whole storage chunks so that none is decoded twice.
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
        from ._zarr import ZarrContainer, zarr_node_location

        location = zarr_node_location(data)
        return ZarrContainer(data, f"zarr store {location}"), location
    if _is_node(data, "h5py"):
        from ._hdf5 import open_hdf5_node

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
    from ._zarr import open_zarr

    return open_zarr(location, storage_options=options)


def _open_hdf5(location: str, options: dict[str, Any] | None) -> Container:
    from ._hdf5 import open_hdf5

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
        native_rows=grid.step if grid.regular else 1,
        chunk_rows=chunk_rows,
        memory_budget=memory_budget,
    )
    views = {
        role: None if arrays[role] is None else to_dask(_dask_input(arrays[role]), row_chunks, token=(*token, role))
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
        partition_rows=chunk_rows,
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
    out = source if row_chunks == source.row_chunks() else source.rechunk(row_chunks)
    if chunk_rows is not None and chunk_rows != out.partition_rows:
        out = replace(out, partition_rows=chunk_rows)
    return out
