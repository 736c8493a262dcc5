"""Opening a data set: a path, URL, storage object or array becomes a :class:`~streamridge.sources.source.Source`.

The format is told from the path (a zarr store, an HDF5 file, ``.npy`` files) or the
object; each backend module (``_zarr``, ``_hdf5``, ``_npy``, ``_memory``; URLs in
``_url``) finds the arrays, and :func:`~streamridge.sources.source.assemble` checks
them and makes the Source.
"""

from __future__ import annotations

import os
from typing import Any

from streamridge.errors import SourceError
from streamridge.sources._common import ROLES, find_arrays
from streamridge.sources._memory import MemoryContainer, as_reader
from streamridge.sources._npy import has_npy, open_npy
from streamridge.sources._protocol import Container
from streamridge.sources._url import is_url, local_path, remote_options
from streamridge.sources.source import Source, assemble, reopen

_ZARR_MARKERS = ("zarr.json", ".zgroup", ".zarray")
HDF5_SUFFIXES = (".h5", ".hdf5", ".hdf", ".he5")


def _is_node(data: Any, package: str) -> bool:
    """Whether ``data`` is an open zarr or h5py object (its package is then already imported)."""
    if type(data).__module__.split(".")[0] != package:
        return False
    if package == "zarr":
        from streamridge.sources._zarr import is_zarr_node

        return is_zarr_node(data)
    from streamridge.sources._hdf5 import is_hdf5_node

    return is_hdf5_node(data)


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
        return reopen(data, chunk_rows=chunk_rows, memory_budget=memory_budget)
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
    return assemble(container, arrays, token, named, chunk_rows=chunk_rows, memory_budget=memory_budget)


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
