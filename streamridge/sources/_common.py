"""Checks and helpers shared by the backends: array look-up, shapes and dtypes, dask views, writing.

Imports no backend (the backends import this module and :mod:`._protocol`), and
not ``dask.array``: a worker process of the pass imports this package to unpickle
its readers and needs no dask array (``dask.array`` pulls in ``scipy.fft``, about
0.14 s of CPU per worker start).  The dask views are built in the driver, which
imports ``dask.array`` when it opens a source (:func:`to_dask`).
"""

from __future__ import annotations

import itertools
import math
import os
import shutil
import sys
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from streamridge.errors import InputError, ParameterError, SourceError
from streamridge.sources._protocol import Container
from streamridge.sources._url import local_path

if TYPE_CHECKING:
    import dask.array as da

ROLES = ("X", "y", "groups", "sample_weight")
_FLAGS = {  # role -> (command-line flag, keyword of open_source)
    "X": ("x", "x"),
    "y": ("y", "y"),
    "groups": ("groups", "groups"),
    "sample_weight": ("sample-weight", "sample_weight"),
}
_NUMERIC_KINDS = "biuf"


def find_arrays(
    container: Container,
    names: dict[str, Any],
    *,
    require_y: bool,
) -> dict[str, Any]:
    """Look up X, y, groups and sample_weight; arrays given directly pass through.

    Parameters
    ----------
    container : Container
    names : dict
        Role to name (str), array-like (used as is) or None (absent).
    require_y : bool
        Whether a missing ``y`` is an error (else y is None).

    Returns
    -------
    dict of role to array-like or None
    """
    arrays: dict[str, Any] = {}
    for role in ROLES:
        name = names.get(role)
        if name is None or not isinstance(name, str):
            arrays[role] = name
            continue
        required = role != "y" or require_y
        arrays[role] = lookup(container, role, name, required=required)
    return arrays


def lookup(container: Container, role: str, name: str, *, required: bool) -> Any | None:
    """Find the array of ``role``; raise a :class:`SourceError` listing names if required."""
    array = container.get(name)
    if array is None and required:
        try:
            found = ", ".join(container.names()) or "no arrays"
        except Exception:  # listing is a courtesy; a remote store may refuse it
            found = "(could not list)"
        flag, keyword = _FLAGS[role]
        raise SourceError(
            f"array {name!r} not found in {container.where}; it has: {found}; "
            f"pass the right name with --{flag} ({keyword}=...)"
        )
    return array


def check_arrays(arrays: dict[str, Any], where: str) -> None:
    """Check ranks, row counts and dtypes; raise :class:`InputError` naming the array.

    Parameters
    ----------
    arrays : dict of role to array-like or None
        Each present array has ``shape`` and ``dtype``.
    where : str
        The storage, for messages.
    """
    X = arrays["X"]
    if len(X.shape) != 2:
        hint = " (reshape a single feature to (-1, 1))" if len(X.shape) == 1 else ""
        raise InputError(f"X must be 2-D (rows, features); got shape {tuple(X.shape)} in {where}{hint}")
    if X.shape[0] == 0:
        raise InputError(f"X has no rows in {where}; check the data or the array name")
    if X.shape[1] == 0:
        raise InputError(f"X has no features (shape {tuple(X.shape)}) in {where}")
    max_ndim = {"X": 2, "y": 2, "groups": 1, "sample_weight": 1}
    for role in ROLES:
        a = arrays.get(role)
        if a is None:
            continue
        shape = tuple(a.shape)
        if not 1 <= len(shape) <= max_ndim[role]:
            want = "(rows,) or (rows, targets)" if role == "y" else "(rows,)"
            raise InputError(f"{role} must have shape {want}; got shape {shape} in {where}")
        if shape[0] != X.shape[0]:
            raise InputError(
                f"{role} has {shape[0]} rows but X has {X.shape[0]} in {where}; "
                "they must describe the same rows"
            )
        kind = np.dtype(a.dtype).kind
        if role != "groups" and kind not in _NUMERIC_KINDS:
            raise InputError(f"{role} must be numeric (float or integer); got dtype {a.dtype} in {where}")


def choose_row_chunks(
    n_rows: int,
    n_features: int,
    *,
    native_rows: int,
    chunk_rows: int | None,
    memory_budget: int,
) -> tuple[int, ...]:
    """Row chunks of a source.

    Parameters
    ----------
    n_rows, n_features : int
        Shape of X.
    native_rows : int
        Rows of one storage chunk of X (1 when the storage is unchunked).
    chunk_rows : int or None
        Explicit rows per chunk; None chooses from ``memory_budget``.
    memory_budget : int
        Bytes; one chunk of X as float64 takes about ``memory_budget / 8``,
        or one storage chunk up to ``memory_budget / 2``.

    Returns
    -------
    tuple of int
        Row counts of the chunks, summing to ``n_rows``.

    Notes
    -----
    The automatic size is a multiple of ``native_rows`` so that no storage chunk
    is decoded twice: a storage chunk larger than the target is a chunk of its
    own while it takes at most half the budget as float64 (each part of a split
    chunk decodes all of it: 50,000 x 200 float32 chunks cut in three made the
    metric pass 1.7x slower).  Only a storage chunk larger than that is split
    into equal parts that never straddle two of them.
    """
    if chunk_rows is not None:
        if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, (int, np.integer)) or chunk_rows < 1:
            raise ParameterError(f"chunk_rows must be an integer >= 1; got chunk_rows={chunk_rows!r}")
        return _uniform(n_rows, int(chunk_rows))
    if memory_budget < 1:
        raise ParameterError(f"memory_budget must be a positive number of bytes; got {memory_budget!r}")
    native = max(1, min(int(native_rows), n_rows))
    target = max(1, memory_budget // 8 // (8 * max(n_features, 1)))
    if target >= native:
        return _uniform(n_rows, (target // native) * native)
    if 2 * native * 8 * max(n_features, 1) <= memory_budget:
        return _uniform(n_rows, native)
    parts = math.ceil(native / target)
    chunks: list[int] = []
    for start in range(0, n_rows, native):
        block = min(native, n_rows - start)
        k = min(parts, block)
        chunks.extend(block // k + (1 if i < block % k else 0) for i in range(k))
    return tuple(chunks)


def _uniform(n_rows: int, step: int) -> tuple[int, ...]:
    step = min(step, n_rows)
    full, rest = divmod(n_rows, step)
    return (step,) * full + ((rest,) if rest else ())


def regular_step(chunks: Sequence[int]) -> int:
    """The common chunk length of regular chunks (all equal but a shorter last), else 1."""
    if len(chunks) == 1 or (len(set(chunks[:-1])) == 1 and chunks[-1] <= chunks[0]):
        return int(chunks[0])
    return 1


NUMPY_PREFIX = "streamridge-numpy-"  # dask names of in-memory NumPy arrays (random, not a content token)


def is_dask_array(x: Any) -> bool:
    """Whether ``x`` is a dask array, without importing ``dask.array``.

    Parameters
    ----------
    x : object

    Returns
    -------
    bool
        False whenever ``dask.array`` was never imported in this process: no
        dask array can exist then.
    """
    module = sys.modules.get("dask.array")
    return module is not None and isinstance(x, module.Array)


def to_dask(array: Any, row_chunks: tuple[int, ...], *, token: tuple[Any, ...]) -> da.Array:
    """Wrap one array (lazy, numpy or dask) as a dask array with the given row chunks.

    Axes after the first are one chunk each.
    """
    chunks = (row_chunks, *tuple((n,) for n in array.shape[1:]))
    if is_dask_array(array):
        return array.rechunk(chunks)
    if isinstance(array, np.ndarray):
        return _numpy_to_dask(array, chunks)
    import dask.array as da
    from dask.base import tokenize

    meta = np.empty((0,) * len(array.shape), dtype=array.dtype)
    name = "streamridge-source-" + tokenize(*token, array.shape, str(array.dtype), chunks)
    return da.from_array(array, chunks=chunks, name=name, lock=False, meta=meta, asarray=True)


def _numpy_to_dask(array: np.ndarray, chunks: tuple[tuple[int, ...], ...]) -> da.Array:
    """Row blocks of ``array`` as views under a random name.

    ``da.from_array`` would copy the whole array and hash every byte (SHA-1) on every fit
    (0.1 s each per 160 MB); checkpoint fingerprints hash the rows when asked.
    """
    import dask.array as da

    name = f"{NUMPY_PREFIX}{uuid.uuid4().hex}"
    bounds = np.cumsum((0, *chunks[0])).tolist()
    tail = (0,) * (array.ndim - 1)
    graph = {(name, i, *tail): array[a:b] for i, (a, b) in enumerate(itertools.pairwise(bounds))}
    return da.Array(graph, name, chunks, dtype=array.dtype)


def default_chunk_rows(X: Any) -> int:
    """Rows per stored chunk when writing: about 4 MiB of X, at least 1."""
    row_bytes = int(np.prod(X.shape[1:], dtype=np.int64)) * np.dtype(X.dtype).itemsize
    return max(1, min(int(X.shape[0]) or 1, (4 * 2**20) // max(row_bytes, 1)))


def row_blocks(values: Sequence[Any], rows: int) -> Iterator[tuple[int, int, np.ndarray]]:
    """``(index, start, block)`` of every value's rows, ``rows`` at a time, the values taken in turn.

    The writers fill their arrays from this: rows ``start .. start + rows - 1``
    of every value before the next rows, so values that compute their rows
    together (the predictions and scores of ``streamridge predict``, one read of
    X) are asked for the same rows in a row.  A dask block is computed; all
    values have the same number of rows.
    """
    n = int(values[0].shape[0]) if values else 0
    for start in range(0, n, rows):
        for i, value in enumerate(values):
            block = value[start : start + rows]
            yield i, start, block.compute() if is_dask_array(block) else np.asarray(block)


@contextmanager
def atomic_path(path: str | os.PathLike[str], *, overwrite: bool) -> Iterator[str]:
    """Yield a temporary sibling of ``path`` to write into; move it into place on success.

    A directory (a zarr store) or a file may be written.  An existing ``path`` is
    replaced only when ``overwrite``; on error the temporary is removed.
    """
    target = os.path.abspath(local_path(path))
    if os.path.lexists(target) and not overwrite:
        raise SourceError(f"{target} already exists; pass overwrite=True to replace it")
    parent, base = os.path.split(target)
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".tmp-{base}-{uuid.uuid4().hex[:8]}")
    try:
        yield tmp
        if os.path.isdir(target) and not os.path.islink(target):
            old = os.path.join(parent, f".old-{base}-{uuid.uuid4().hex[:8]}")
            os.replace(target, old)
            os.replace(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, target)
    except BaseException:
        _remove(tmp)
        raise


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.remove(path)


def string_list(value: Any) -> list[str] | None:
    """Decode a names attribute (list, numpy array, bytes) to a list of str; None stays None."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)):
        value = [value]
    return [v.decode() if isinstance(v, bytes) else str(v) for v in np.asarray(value, dtype=object).ravel()]
