"""NumPy ``.npy`` files: one file as X, or a directory of them (X.npy, y.npy, ...)."""

from __future__ import annotations

import mmap
import os
from typing import Any, Literal

import numpy as np

from streamridge.errors import InputError, SourceError
from streamridge.sources._protocol import ArrayReader, Container, file_fingerprint


class NpyReader(ArrayReader):
    """One ``.npy`` file, memory-mapped read-only in whichever process reads it.

    Parameters
    ----------
    path : str
    """

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        mapped = self._open()
        self.shape = tuple(mapped.shape)
        self.dtype = mapped.dtype

    def _open(self) -> Any:
        try:
            return np.load(self.path, mmap_mode="r", allow_pickle=False)
        except ValueError as exc:
            raise InputError(f"cannot memory-map {self.path}: {exc}; save it with a numeric dtype") from exc

    def fingerprint(self) -> dict[str, Any]:
        """Size, modification time and a sampled hash of the file."""
        return file_fingerprint(self.path)


class MemmapReader(ArrayReader):
    """A whole ``np.memmap`` passed as an array, re-mapped in whichever process reads it.

    Dask would otherwise copy a memmap into memory when wrapping it.

    Parameters
    ----------
    mapped : np.memmap
        A memmap over its whole mapping (see :func:`is_whole_memmap`).
    """

    def __init__(self, mapped: np.memmap[Any, Any]) -> None:
        super().__init__()
        self.path = str(mapped.filename)
        self.offset = int(mapped.offset)
        self.shape = tuple(mapped.shape)
        self.dtype = mapped.dtype
        self.order: Literal["C", "F"] = (
            "F" if mapped.flags.f_contiguous and not mapped.flags.c_contiguous else "C"
        )

    def _open(self) -> Any:
        return np.memmap(
            self.path, dtype=self.dtype, mode="r", offset=self.offset, shape=self.shape, order=self.order
        )

    def fingerprint(self) -> dict[str, Any]:
        """Size, modification time and a sampled hash of the file, and the mapping's offset."""
        return {**file_fingerprint(self.path), "offset": self.offset}


def is_whole_memmap(value: Any) -> bool:
    """Whether ``value`` is a memmap of a file that can be re-mapped from its filename and offset.

    Views (slices) of a memmap keep the parent's offset, so they do not qualify.
    """
    return (
        isinstance(value, np.memmap)
        and isinstance(value.base, mmap.mmap)
        and value.filename is not None
        and (value.flags.c_contiguous or value.flags.f_contiguous)
    )


class NpyContainer(Container):
    """The ``.npy`` files of one directory, named by file stem (``"y"`` is ``y.npy``).

    Names ending in ``.npy`` are paths: absolute, relative to the working
    directory, or relative to the directory.

    Parameters
    ----------
    directory : str
    x_file : str, optional
        A single ``.npy`` file that is X (its directory holds the other arrays).
    """

    def __init__(self, directory: str, x_file: str | None = None) -> None:
        self.directory = directory
        if x_file is None:
            self.where = f"directory of .npy files {directory}"
        else:
            self.where = f".npy file {x_file}"
            self.fixed_x = NpyReader(x_file)

    def get(self, name: str) -> NpyReader | None:
        if name.endswith(".npy"):
            candidates = [name, os.path.join(self.directory, name)]
        else:
            candidates = [os.path.join(self.directory, name + ".npy")]
        for path in candidates:
            if os.path.isfile(path):
                return NpyReader(path)
        return None

    def names(self) -> list[str]:
        files = sorted(f for f in os.listdir(self.directory) if f.endswith(".npy"))
        return [f[: -len(".npy")] for f in files]


def open_npy(path: str) -> NpyContainer:
    """Open a ``.npy`` file (as X) or a directory of ``.npy`` files.

    Parameters
    ----------
    path : str
        Local path.

    Returns
    -------
    NpyContainer
    """
    if os.path.isdir(path):
        return NpyContainer(path)
    try:
        return NpyContainer(os.path.dirname(os.path.abspath(path)), x_file=path)
    except OSError as exc:
        raise SourceError(f"cannot read .npy file {path}: {exc}") from exc


def has_npy(directory: str) -> bool:
    """Whether ``directory`` holds at least one ``.npy`` file."""
    return any(f.endswith(".npy") for f in os.listdir(directory))
