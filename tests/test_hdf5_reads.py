"""Whole gzip chunks of HDF5 datasets inflated straight into the result (values, fallbacks, corruption, memory)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

import streamridge.sources._hdf5 as h5src
from streamridge.sources import open_source


def _file(tmp_path: Path, data: dict[str, np.ndarray], rows: int, **kw: Any) -> str:
    path = str(tmp_path / "d.h5")
    with h5py.File(path, "w") as f:
        for name, a in data.items():
            f.create_dataset(name, data=a, chunks=(rows, *a.shape[1:]), **kw)
    return path


def _readers(path: str) -> dict[str, Any]:
    return open_source(path, y="y").pass_readers()[0]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int16"])
def test_inflated_chunks_equal_the_stored_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dtype: str
) -> None:
    monkeypatch.setattr(h5src, "INFLATE_BYTES", 0)
    rng = np.random.default_rng(0)
    data = {"X": (rng.normal(size=(53, 7)) * 100).astype(dtype), "y": rng.normal(size=53)}
    readers = _readers(_file(tmp_path, data, 10, compression="gzip"))
    X, y = readers["X"], readers["y"]
    assert X._gzip_chunk(0, 10) is not None and X._gzip_chunk(50, 53) is not None  # the padded last chunk too
    assert X._gzip_chunk(0, 20) is None and X._gzip_chunk(5, 15) is None
    for a, b in [(0, 10), (20, 30), (50, 53), (0, 53), (5, 15)]:
        got = X.read(a, b)
        assert got.dtype == data["X"].dtype
        np.testing.assert_array_equal(got, data["X"][a:b])
        np.testing.assert_array_equal(y.read(a, b), data["y"][a:b])


@pytest.mark.parametrize("kw", [{}, {"compression": "gzip", "shuffle": True}, {"compression": "lzf"}])
def test_other_filters_use_hdf5s_own_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kw: dict[str, Any]
) -> None:
    monkeypatch.setattr(h5src, "INFLATE_BYTES", 0)
    data = {"X": np.arange(40 * 3, dtype=np.float64).reshape(40, 3), "y": np.zeros(40)}
    X = _readers(_file(tmp_path, data, 10, **kw))["X"]
    assert X._gzip_chunk(0, 10) is None
    np.testing.assert_array_equal(X.read(10, 20), data["X"][10:20])


def test_small_chunks_use_hdf5s_own_read(tmp_path: Path) -> None:
    data = {"X": np.ones((40, 3)), "y": np.zeros(40)}
    assert _readers(_file(tmp_path, data, 10, compression="gzip"))["X"]._gzip_chunk(0, 10) is None


def test_corrupted_chunk_is_an_oserror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(h5src, "INFLATE_BYTES", 0)
    data = {"X": np.random.default_rng(1).normal(size=(40, 3)), "y": np.zeros(40)}
    path = _file(tmp_path, data, 10, compression="gzip")
    X = _readers(path)["X"]
    where = X._gzip_chunk(10, 20)
    assert where is not None
    offset, size, _ = where
    with open(path, "r+b") as fh:
        fh.seek(offset + size // 2)
        fh.write(b"\xff" * 8)
    with pytest.raises(OSError, match=r"gzip chunk at byte \d+ of .* (corrupted|truncated)"):
        X.read(10, 20)
    out = np.empty((10, 3))
    with pytest.raises(OSError, match="truncated"):
        h5src.inflate_into(path, offset, size // 2, out)  # a stream cut short


_CHILD = """
import json, sys
from streamridge.sources import open_source

def hwm():
    with open("/proc/self/status") as fh:
        return next(int(l.split()[1]) * 1024 for l in fh if l.startswith("VmHWM:"))

readers, _ = open_source(sys.argv[1]).pass_readers()
readers["y"].read(0, 10)  # h5py and the file opened (on the small dataset) before the baseline
base = hwm()
block = readers["X"].read(0, readers["X"].shape[0])
print(json.dumps({"growth": hwm() - base, "nbytes": block.nbytes, "sum": float(block[:, 0].sum())}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM is Linux-only")
def test_one_large_gzip_chunk_is_not_copied(tmp_path: Path) -> None:
    """Reading one 48 MiB gzip chunk grew the peak by 2 chunk sizes through h5py (HDF5's chunk buffer and the
    output); inflated into the output, by 1 and a few MB."""
    rows, N = 48 * 2**20 // (50 * 4), 50
    X = (np.random.default_rng(0).normal(size=(rows, N)) + 3).astype(np.float32)
    path = _file(tmp_path, {"X": X}, rows, compression="gzip")
    with h5py.File(path, "a") as f:
        f.create_dataset("y", data=np.zeros(rows), chunks=(rows,))
    cmd = [sys.executable, "-c", textwrap.dedent(_CHILD), path]
    got = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()[-1])
    assert got["nbytes"] == X.nbytes
    assert got["sum"] == pytest.approx(float(X[:, 0].astype(np.float64).sum()), rel=1e-6)
    assert got["growth"] < 1.4 * X.nbytes, got["growth"] / X.nbytes
