"""Data sources: turn a path, URL, storage object or array into row-range readers and dask views.

:func:`open_source` accepts a zarr store (format 2 or 3, local or an fsspec URL,
or an open ``zarr.Group``), an HDF5 file (or an open ``h5py.File``/``Group``), a
``.npy`` file or a directory of them, NumPy and dask arrays, or an existing
:class:`Source`.  Each backend lives in one module (``_zarr``, ``_hdf5``,
``_npy``, ``_memory``; URLs in ``_url``) behind the reader protocol of
:mod:`._protocol`: shape and dtype, the stored chunk grid along the rows, a read
of a row range, a fingerprint of the stored bytes.  The pass reads through the
readers, in blocks of whole stored chunks (:mod:`.blocks`); every array is also
exposed as a dask array with shared row chunks (``Source.X`` ...) for prediction
and user code, built on first access (:mod:`.source`): a fit that only needs
shapes, chunks and distinct values (``Source.shape``, ``row_chunks``,
``distinct``) never imports dask.  :mod:`.opening` tells the format and finds
the arrays.

``ROLES`` names the arrays of a data set in the order every reader list follows.
"""

from __future__ import annotations

from typing import Any

from streamridge.sources._common import ROLES
from streamridge.sources._memory import DaskReader
from streamridge.sources._protocol import ArrayReader, RowGrid
from streamridge.sources.blocks import block_ranges, distinct_values
from streamridge.sources.opening import HDF5_SUFFIXES, open_source
from streamridge.sources.source import Source, check_statistics_fit

__all__ = [
    "HDF5_SUFFIXES",
    "ROLES",
    "ArrayReader",
    "DaskReader",
    "RowGrid",
    "Source",
    "block_ranges",
    "check_statistics_fit",
    "distinct_values",
    "open_source",
    "write_hdf5",
    "write_zarr",
]


# zarr and h5py are imported by the backend that needs them: a pass over .npy files or arrays never pays for them
_LAZY = {"write_zarr": "._zarr", "write_hdf5": "._hdf5"}


def __getattr__(name: str) -> Any:
    """``write_zarr`` and ``write_hdf5`` from their backend module, imported on first use (PEP 562)."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_LAZY[name], __name__), name)
