"""Reads of stored zarr chunks: decoded once, straight into the result (values, layouts, codecs, peak memory)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest
import zarr
import zarr.codecs

from streamridge.sources import open_source
from streamridge.sources._zarr import ZarrReader, decode_chunk
from streamridge.sources._zstream import direct_codec


def _array(tmp_path: Path, data: np.ndarray, chunk_rows: int, **kw: Any) -> Any:
    root = zarr.open_group(tmp_path / "s.zarr", mode="w", zarr_format=kw.pop("zarr_format", 3))
    if "shards" in kw:
        kw["shards"] = (kw["shards"], *data.shape[1:])
    arr = root.create_array(
        "X", shape=data.shape, dtype=data.dtype, chunks=(chunk_rows, *data.shape[1:]), **kw
    )
    arr[:] = data
    return arr


LAYOUTS = {  # id -> (create_array options, the codec read_rows decodes with, or None: zarr's read)
    "v3-zstd": ({}, "zstd"),
    "v3-raw": ({"compressors": None}, "raw"),
    "v3-gzip": ({"compressors": zarr.codecs.GzipCodec()}, "gzip"),
    "v3-blosc": ({"compressors": zarr.codecs.BloscCodec()}, "blosc"),
    "v3-sharded": ({"shards": 30}, "zstd"),
    "v3-sharded-raw": ({"shards": 30, "compressors": None}, "raw"),
    "v3-sharded-blosc": ({"shards": 30, "compressors": zarr.codecs.BloscCodec()}, "blosc"),
    "v3-big-endian": ({"serializer": zarr.codecs.BytesCodec(endian="big")}, None),
    "v3-crc32c": ({"compressors": [zarr.codecs.ZstdCodec(), zarr.codecs.Crc32cCodec()]}, None),
    "v2-blosc": ({"zarr_format": 2}, "blosc"),
    "v2-fortran": ({"zarr_format": 2, "order": "F"}, None),
    "v2-raw": ({"zarr_format": 2, "compressors": None}, "raw"),
    "v2-zlib": ({"zarr_format": 2, "compressors": numcodecs.Zlib()}, "zlib"),
    "v2-shuffle": ({"zarr_format": 2, "filters": [numcodecs.Shuffle(8)]}, None),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("dtype", ["float32", "float64", "int16"])
def test_every_read_equals_the_stored_rows(tmp_path: Path, layout: str, dtype: str) -> None:
    kw, codec = LAYOUTS[layout]
    if layout == "v2-shuffle":
        kw = {**kw, "filters": [numcodecs.Shuffle(np.dtype(dtype).itemsize)]}
    data = (np.random.default_rng(0).normal(size=(53, 7)) * 100).astype(dtype)
    data[20:30] = 0  # a chunk of fill values: not stored (read as the fill value)
    reader = ZarrReader(_array(tmp_path, data, 10, **dict(kw)))
    assert reader._direct_codec == codec
    for a, b in [(0, 10), (20, 30), (50, 53), (0, 53), (10, 40), (5, 15), (3, 4), (25, 45), (29, 31)]:
        got = reader.read(a, b)
        assert got.dtype == data.dtype and got.shape == (b - a, 7)
        np.testing.assert_array_equal(got, data[a:b])


@pytest.mark.parametrize("layout", ["v3-zstd", "v3-sharded", "v2-blosc", "v3-raw"])
def test_1d_arrays_and_fill_values_without_zarrs_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    """1-D arrays (y, groups, weights) and chunks never written (the fill value) are decoded here too."""
    kw, codec = LAYOUTS[layout]
    root = zarr.open_group(tmp_path / "s.zarr", mode="w", zarr_format=kw.get("zarr_format", 3))
    rest = {k: v for k, v in kw.items() if k != "zarr_format"}
    if "shards" in rest:
        rest["shards"] = (rest["shards"],)
    y = root.create_array("y", shape=(95,), dtype="float64", chunks=(10,), fill_value=-3.5, **rest)
    values = np.arange(95, dtype=np.float64)
    y[:40] = values[:40]
    y[70:] = values[70:]
    values[40:70] = -3.5
    monkeypatch.setattr(zarr.Array, "__getitem__", lambda *a: pytest.fail("zarr's read was used"))
    reader = ZarrReader(y)
    assert reader._direct_codec == codec
    for a, b in [(0, 95), (35, 75), (40, 70), (90, 95), (41, 42)]:
        np.testing.assert_array_equal(reader.read(a, b), values[a:b])


def test_local_store_chunks_are_read_as_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A LocalStore's chunk files are read directly (no event loop); other stores go through zarr's get."""
    import streamridge.sources._zstream as zstream

    data = np.random.default_rng(3).normal(size=(45, 4))
    arr = _array(tmp_path, data, 10)
    monkeypatch.setattr(zstream, "_fetch", lambda *a: pytest.fail("the store's get was used"))
    np.testing.assert_array_equal(ZarrReader(arr).read(5, 45), data[5:45])
    from zarr.storage import MemoryStore

    mem = zarr.create_array(MemoryStore(), shape=data.shape, dtype=data.dtype, chunks=(10, 4))
    mem[:] = data
    with pytest.raises(pytest.fail.Exception, match="the store's get was used"):
        ZarrReader(mem).read(5, 45)


def test_direct_codecs_are_only_plain_row_streams(tmp_path: Path) -> None:
    """Chunks split across columns, non-native byte order and checksums go to zarr's own read."""
    data = np.arange(40 * 6, dtype=np.float32).reshape(40, 6)
    root = zarr.open_group(tmp_path / "c.zarr", mode="w")
    wide = root.create_array("X", shape=data.shape, dtype=data.dtype, chunks=(10, 3))
    wide[:] = data
    assert direct_codec(wide) == "zstd" and ZarrReader(wide)._direct_codec is None  # not whole rows
    np.testing.assert_array_equal(ZarrReader(wide).read(5, 35), data[5:35])
    assert LAYOUTS["v3-crc32c"][1] is None and LAYOUTS["v3-big-endian"][1] is None


@pytest.mark.parametrize("layout", ["v3-raw", "v3-blosc", "v2-blosc", "v3-sharded"])
def test_corrupted_chunk_read_directly_is_a_one_line_oserror(tmp_path: Path, layout: str) -> None:
    kw, _codec = LAYOUTS[layout]
    data = np.random.default_rng(2).normal(size=(60, 6))
    reader = ZarrReader(_array(tmp_path, data, 10, **dict(kw)))
    if layout == "v3-sharded":  # the second shard (rows 30-59), its bytes cut short: the index is gone
        key = tmp_path / "s.zarr" / "X" / "c" / "1" / "0"
    else:
        key = tmp_path / "s.zarr" / "X" / ("1.0" if kw.get("zarr_format") == 2 else "c/1/0")
    raw = key.read_bytes()
    key.write_bytes(raw[: len(raw) // 2] if layout != "v3-sharded" else raw[:-40])
    with pytest.raises(
        Exception, match=r"(stored chunk|shard) \S*1\S*.* (corrupted|truncated|checksum)"
    ) as info:
        reader.read(0, 60)
    assert "\n" not in str(info.value)
    np.testing.assert_array_equal(reader.read(0, 10), data[:10])  # the other chunks are fine


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
    from streamridge.datapass.driver import accumulate
    from streamridge.datapass.spec import PassSpec
    from streamridge.datapass.stats_kernel import chunk_task
    from streamridge.folds.schemes import FoldScheme

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


def test_shard_indexes_are_read_once_per_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each read of a shard's rows needs its index (over a network, a round trip of its own): a reader keeps
    the indexes it read, and a reader sent to another process starts without them."""
    import pickle

    from zarr.codecs.sharding import ShardingCodec

    data = np.random.default_rng(4).normal(size=(95, 3))
    arr = _array(tmp_path, data, 10, shards=30)
    calls: list[str] = []
    real = ShardingCodec._load_shard_index_maybe

    async def load(self: Any, byte_getter: Any, chunks_per_shard: Any) -> Any:
        calls.append(str(byte_getter.path))
        return await real(self, byte_getter, chunks_per_shard)

    monkeypatch.setattr(ShardingCodec, "_load_shard_index_maybe", load)
    reader = ZarrReader(arr)
    for a, b in [(0, 10), (10, 20), (20, 30), (0, 30), (25, 65), (90, 95)]:
        np.testing.assert_array_equal(reader.read(a, b), data[a:b])
    assert sorted(calls) == sorted(set(calls)) and len(calls) == 4  # shards 0, 1, 2, 3, each once
    again = pickle.loads(pickle.dumps(reader))
    np.testing.assert_array_equal(again.read(0, 10), data[:10])
    assert len(calls) == 5
