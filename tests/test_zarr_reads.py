"""Reads of whole stored zarr chunks: the decoded chunk is the result (values, layouts, peak memory)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr

from streamridge.sources import open_source
from streamridge.sources._zarr import ZarrReader, decode_chunk


def _array(tmp_path: Path, data: np.ndarray, chunk_rows: int, **kw: Any) -> Any:
    root = zarr.open_group(tmp_path / "s.zarr", mode="w", zarr_format=kw.pop("zarr_format", 3))
    arr = root.create_array(
        "X", shape=data.shape, dtype=data.dtype, chunks=(chunk_rows, *data.shape[1:]), **kw
    )
    arr[:] = data
    return arr


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"compressors": None},
        {"zarr_format": 2},
        {"zarr_format": 2, "order": "F"},
        {"zarr_format": 2, "compressors": None},
    ],
    ids=["v3-zstd", "v3-raw", "v2-blosc", "v2-fortran", "v2-raw"],
)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int16"])
def test_every_read_equals_the_stored_rows(tmp_path: Path, kw: dict[str, Any], dtype: str) -> None:
    data = (np.random.default_rng(0).normal(size=(53, 7)) * 100).astype(dtype)
    reader = ZarrReader(_array(tmp_path, data, 10, **kw))
    for a, b in [(0, 10), (20, 30), (50, 53), (0, 53), (10, 40), (5, 15), (3, 4)]:
        got = reader.read(a, b)
        assert got.dtype == data.dtype and got.shape == (b - a, 7)
        np.testing.assert_array_equal(got, data[a:b])


def test_whole_chunk_reads_take_the_decoded_chunk(tmp_path: Path) -> None:
    data = np.arange(53 * 3, dtype=np.float64).reshape(53, 3)
    reader = ZarrReader(_array(tmp_path, data, 10))
    assert [reader._whole_chunk(a, b) for a, b in [(0, 10), (50, 53), (10, 20)]] == [0, 5, 1]
    assert [reader._whole_chunk(a, b) for a, b in [(0, 20), (5, 15), (50, 52), (0, 0)]] == [None] * 4
    np.testing.assert_array_equal(
        decode_chunk(reader.array, 5, 3), data[50:]
    )  # last chunk: its stored rows only


def test_unwritten_chunk_falls_back_to_the_fill_value(tmp_path: Path) -> None:
    root = zarr.open_group(tmp_path / "s.zarr", mode="w")
    arr = root.create_array("X", shape=(30, 2), dtype="float32", chunks=(10, 2), fill_value=7.0)
    arr[:10] = 1.0
    assert decode_chunk(arr, 1, 10) is None
    np.testing.assert_array_equal(ZarrReader(arr).read(10, 20), np.full((10, 2), 7.0, np.float32))


def test_column_chunked_and_sharded_arrays_use_zarrs_own_read(tmp_path: Path) -> None:
    data = np.arange(40 * 6, dtype=np.float32).reshape(40, 6)
    cols = ZarrReader(_array(tmp_path / "a", data, 10))
    root = zarr.open_group(tmp_path / "b.zarr", mode="w")
    wide = root.create_array("X", shape=data.shape, dtype=data.dtype, chunks=(10, 3))
    wide[:] = data
    sharded = root.create_array("S", shape=data.shape, dtype=data.dtype, chunks=(10, 6), shards=(20, 6))
    sharded[:] = data
    assert cols._whole_chunk(0, 10) == 0
    for reader in (ZarrReader(wide), ZarrReader(sharded)):
        assert reader._whole_chunk(0, 10) is None and reader._whole_chunk(0, 20) is None
        np.testing.assert_array_equal(reader.read(0, 20), data[:20])


_CHILD = """
import json, sys
import numpy as np
from streamridge.sources import open_source

def hwm():
    with open("/proc/self/status") as fh:
        return next(int(l.split()[1]) * 1024 for l in fh if l.startswith("VmHWM:"))

readers, _ = open_source(sys.argv[1]).pass_readers()
X = readers["X"]
readers["y"].read(0, 10)  # zarr's loop, threads and codecs started (on the small array) before the baseline
base = hwm()
block = X.read(0, X.shape[0])
print(json.dumps({"growth": hwm() - base, "nbytes": block.nbytes, "sum": float(block[:, 0].sum())}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM is Linux-only")
@pytest.mark.parametrize(("compressors", "limit"), [(None, 1.5), ("zstd", 2.4)], ids=["raw", "zstd"])
def test_one_large_stored_chunk_is_not_copied(tmp_path: Path, compressors: Any, limit: float) -> None:
    """Peak memory of reading one 48 MiB stored chunk, in a child process.

    zarr's own read holds the compressed bytes, its decoded chunk and the copy
    in the output array (about 2 chunk sizes uncompressed, 2.9 with zstd on
    these data); the pass's read holds the compressed bytes and the decoded
    chunk only (1 and about 1.9).
    """
    rows, N = 48 * 2**20 // (50 * 4), 50
    data = (np.random.default_rng(0).normal(size=(rows, N)) + 3).astype(np.float32)
    root = zarr.open_group(tmp_path / "big.zarr", mode="w")
    kw = {} if compressors == "zstd" else {"compressors": None}
    root.create_array("X", shape=data.shape, dtype=data.dtype, chunks=data.shape, **kw)[:] = data
    root.create_array("y", shape=(rows,), dtype="float64", chunks=(rows,))[:] = 0.0
    code = textwrap.dedent(_CHILD)
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "big.zarr")], capture_output=True, text=True, check=True
    )
    got = json.loads(out.stdout.splitlines()[-1])
    assert got["nbytes"] == data.nbytes
    assert got["sum"] == pytest.approx(float(data[:, 0].astype(np.float64).sum()), rel=1e-6)
    assert got["growth"] < limit * data.nbytes, got["growth"] / data.nbytes


def test_pass_over_one_large_chunk_equals_in_memory(tmp_path: Path) -> None:
    from streamridge.folds import FoldScheme
    from streamridge.stream import PassSpec, accumulate, chunk_task

    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(500, 4)) + 1e6, rng.normal(size=500)
    root = zarr.open_group(tmp_path / "one.zarr", mode="w")
    root.create_array("X", shape=X.shape, dtype=X.dtype, chunks=X.shape)[:] = X
    root.create_array("y", shape=y.shape, dtype=y.dtype, chunks=(500,))[:] = y
    spec = PassSpec(FoldScheme("hash", 3), None, 1)
    got = accumulate(open_source(str(tmp_path / "one.zarr")), spec, scheduler="threads", memory_budget=2**26)
    ref = chunk_task(X, y, None, None, 0, spec)
    np.testing.assert_array_equal(got.count, ref.count)
    np.testing.assert_allclose(got.sxx, ref.sxx, rtol=1e-9, atol=1e-9)
