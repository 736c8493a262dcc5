"""Zarr stores (format 2 and 3), local or behind an fsspec URL."""

from __future__ import annotations

import os
import warnings
from typing import Any

import dask.array as da
import numpy as np
import zarr

from ..errors import SourceError
from ._common import ROLES, Container, atomic_path, default_chunk_rows, remote_errors


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
            self.fixed_x = node

    def get(self, name: str) -> Any | None:
        if self.group is None:
            return None
        try:
            node = self.group[name.strip("/")]
        except (KeyError, FileNotFoundError):
            return None
        return node if isinstance(node, zarr.Array) else None

    def names(self) -> list[str]:
        if self.group is None:
            return ["(a single array, used as X)"]
        members = self.group.members(max_depth=None)
        return sorted(path for path, node in members if isinstance(node, zarr.Array))

    def native_rows(self, array: Any) -> int:
        shards = getattr(array, "shards", None)
        return int((shards or array.chunks)[0])

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
        for role, value in values.items():
            if value is None:
                continue
            name = (names or {}).get(role, role).strip("/")
            parent, _, leaf = name.rpartition("/")
            grp = root.require_group(parent) if parent else root
            meta = {k: list(v) for k, v in attrs.get(role, {}).items() if v is not None}
            _write_array(grp, leaf, value, rows, meta)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # consolidated metadata is not yet in the v3 spec
            zarr.consolidate_metadata(tmp)
    return os.path.abspath(os.fspath(path))


def _write_array(grp: Any, name: str, value: Any, rows: int, attrs: dict[str, Any]) -> None:
    shape = tuple(value.shape)
    dtype = np.dtype(value.dtype)
    chunks = (min(rows, max(shape[0], 1)), *shape[1:])
    arr = grp.create_array(name, shape=shape, dtype=dtype, chunks=chunks, attributes=attrs)
    if isinstance(value, da.Array):
        da.store(value.rechunk({0: chunks[0]}), arr, lock=False)
        return
    for start in range(0, shape[0], chunks[0]):
        arr[start : start + chunks[0]] = np.asarray(value[start : start + chunks[0]])
