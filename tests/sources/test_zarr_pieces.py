"""Whole stored zarr chunks decoded in sub-block pieces: values, fallbacks, corruption, bits, reads, memory, GIL."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest
import zarr
import zstandard
from zarr.storage import LocalStore

from streamridge.datapass.driver import accumulate
from streamridge.datapass.partition_task import run_partition
from streamridge.datapass.partitions import Plan, plan_pass
from streamridge.datapass.spec import PassSpec
from streamridge.datapass.stats_kernel import StatsKernel
from streamridge.errors import SourceError
from streamridge.folds.schemes import FoldScheme
from streamridge.sources import open_source
from streamridge.sources._zarr import ZarrReader
from streamridge.sources._zstream import decode_pieces, fetch_chunk, stream_codec
from tests.datapass.test_partitions import CountingStore
from tests.scale_utils import gil_gap

STREAMED = {
    "v3-zstd": {},
    "v3-zstd-checksum": {"compressors": zarr.codecs.ZstdCodec(level=3, checksum=True)},
    "v3-gzip": {"compressors": zarr.codecs.GzipCodec()},
    "v2-zstd": {"zarr_format": 2, "compressors": numcodecs.Zstd()},
    "v2-zlib": {"zarr_format": 2, "compressors": numcodecs.Zlib()},
    "v2-gzip": {"zarr_format": 2, "compressors": numcodecs.GZip()},
}
CODEC = {
    "v3-zstd": "zstd",
    "v3-zstd-checksum": "zstd",
    "v3-gzip": "gzip",
    "v2-zstd": "zstd",
    "v2-zlib": "zlib",
    "v2-gzip": "gzip",
}


def _array(path: Path, data: np.ndarray, chunk_rows: int, name: str = "X", **kw: Any) -> Any:
    root = zarr.open_group(path, mode="a", zarr_format=kw.pop("zarr_format", 3))
    arr = root.create_array(
        name, shape=data.shape, dtype=data.dtype, chunks=(chunk_rows, *data.shape[1:]), **kw
    )
    arr[...] = data
    return arr


def _pieces(reader: ZarrReader, a: int, b: int, rows: int) -> list[np.ndarray]:
    it = reader.pieces(a, b, rows)
    assert it is not None
    return list(it)


@pytest.mark.parametrize("layout", list(STREAMED))
@pytest.mark.parametrize(("dtype", "row_shape"), [("float32", (7,)), ("float64", (7,)), ("int16", (3, 4))])
def test_pieces_equal_a_whole_decode(
    tmp_path: Path, layout: str, dtype: str, row_shape: tuple[int, ...]
) -> None:
    data = (np.random.default_rng(0).normal(size=(253, *row_shape)) * 100).astype(dtype)
    reader = ZarrReader(_array(tmp_path / "s.zarr", data, 100, **STREAMED[layout]))
    assert reader.stream_codec() == CODEC[layout]
    for a, b in [(0, 100), (100, 200), (200, 253)]:  # the last chunk is partial (padding decoded, dropped)
        whole = reader.read(a, b)
        for rows in (1, 7, 33, 100, 500):
            got = _pieces(reader, a, b, rows)
            assert [len(p) for p in got] == [min(rows, b - s) for s in range(a, b, rows)]
            assert all(p.dtype == data.dtype and p.shape[1:] == row_shape for p in got)
            np.testing.assert_array_equal(np.concatenate(got), whole)
            np.testing.assert_array_equal(np.concatenate(got), data[a:b])
    assert reader.pieces(0, 50, 10) is None and reader.pieces(50, 150, 10) is None  # not one whole chunk


def test_chains_that_cannot_stream_use_zarrs_read(tmp_path: Path) -> None:
    data = np.arange(40 * 6, dtype=np.float32).reshape(40, 6)
    other = {
        "raw": {"compressors": None},
        "v2-blosc": {"zarr_format": 2},
        "v2-fortran": {"zarr_format": 2, "order": "F", "compressors": numcodecs.Zstd()},
        "v2-filter": {
            "zarr_format": 2,
            "filters": [numcodecs.Delta(dtype="f4")],
            "compressors": numcodecs.Zstd(),
        },
        "v3-big-endian": {"serializer": zarr.codecs.BytesCodec(endian="big")},
        "v3-transpose": {"filters": [zarr.codecs.TransposeCodec(order=(1, 0))]},
        "v3-crc": {"compressors": [zarr.codecs.ZstdCodec(), zarr.codecs.Crc32cCodec()]},
        "sharded": {"shards": (20, 6)},
    }
    for name, kw in other.items():
        reader = ZarrReader(_array(tmp_path / f"{name}.zarr", data, 10, **kw))
        assert reader.stream_codec() is None, name
        assert reader.pieces(0, 10, 3) is None, name
        np.testing.assert_array_equal(reader.read(0, 20), data[:20])
    root = zarr.open_group(tmp_path / "fill.zarr", mode="w")
    unwritten = root.create_array("X", shape=(30, 2), dtype="float32", chunks=(10, 2), fill_value=7.0)
    unwritten[:10] = 1.0
    assert ZarrReader(unwritten).pieces(10, 20, 3) is None  # not stored: the fill value, from zarr's read


@pytest.mark.parametrize("frames", ["no content size", "two frames", "three frames, cut inside rows"])
def test_zstd_frames_without_size_and_several_frames(tmp_path: Path, frames: str) -> None:
    """numcodecs writes one frame with its content size; other writers may not, or write several frames."""
    data = np.random.default_rng(1).normal(size=(300, 5))
    arr = _array(tmp_path / "s.zarr", data, 300)
    raw = data.tobytes()
    if frames == "no content size":
        stored = zstandard.ZstdCompressor(write_content_size=False).compress(raw)
        assert zstandard.get_frame_parameters(stored).content_size == zstandard.CONTENTSIZE_UNKNOWN
    else:
        cuts = [0, len(raw) // 2, len(raw)] if frames == "two frames" else [0, 1001, 7777, len(raw)]
        stored = b"".join(zstandard.ZstdCompressor().compress(raw[a:b]) for a, b in itertools.pairwise(cuts))
    (tmp_path / "s.zarr" / "X" / "c" / "0" / "0").write_bytes(stored)
    np.testing.assert_array_equal(np.concatenate(_pieces(ZarrReader(arr), 0, 300, 37)), data)


def _damaged(tmp_path: Path, codec: dict[str, Any], how: str) -> ZarrReader:
    data = np.random.default_rng(2).normal(size=(400, 6))
    arr = _array(tmp_path / "bad.zarr", data, 200, **codec)
    key = tmp_path / "bad.zarr" / "X" / ("1" if codec.get("zarr_format") == 2 else "c/1")
    if codec.get("zarr_format") == 2:
        key = key.with_name("1.0")
    else:
        key = key / "0"
    raw = key.read_bytes()
    extra = (
        zstandard.ZstdCompressor().compress(b"\0" * 64) if "zstd" in str(codec) or not codec else b"x" * 64
    )
    damaged = {
        "garbage": bytes(200) + raw[200:],
        "half": raw[: len(raw) // 2],
        "end": raw[:-3],
        "extra": raw + extra,
    }
    key.write_bytes(damaged[how])
    return ZarrReader(arr)


@pytest.mark.parametrize("how", ["garbage", "half", "end", "extra"])
@pytest.mark.parametrize("layout", ["v3-zstd", "v3-gzip", "v2-zlib"])
def test_corrupted_or_truncated_chunk_is_a_one_line_oserror(tmp_path: Path, layout: str, how: str) -> None:
    reader = _damaged(tmp_path, STREAMED[layout], how)
    if how == "extra" and layout != "v3-zstd":
        pytest.skip("zlib streams end themselves; bytes after the end are ignored, as zlib.decompress does")
    with pytest.raises(
        OSError, match=r"stored chunk \S*1\S* \((zstd|gzip|zlib)\) is (corrupted|truncated)"
    ) as info:
        _pieces(reader, 200, 400, 30)
    assert "\n" not in str(info.value)
    assert len(_pieces(reader, 0, 200, 30)) == 7  # the other chunk is fine


@pytest.mark.parametrize("how", ["truncated", "extra frame"])
@pytest.mark.parametrize("scheduler", ["sync", "threads"])  # decoded in the task's thread / ahead (alone)
def test_corrupted_chunk_in_a_pass_names_the_partition(tmp_path: Path, how: str, scheduler: str) -> None:
    """The last, partial chunk: its padding is decoded and the end of its stream checked."""
    rng = np.random.default_rng(3)
    X, y = rng.normal(size=(30_000, 6)), rng.normal(size=30_000)
    _array(tmp_path / "bad.zarr", X, 12_000)
    _array(tmp_path / "bad.zarr", y, 12_000, name="y")
    chunk = tmp_path / "bad.zarr" / "X" / "c" / "2" / "0"
    raw = chunk.read_bytes()
    chunk.write_bytes(
        raw[:-100] if how == "truncated" else raw + zstandard.ZstdCompressor().compress(bytes(64))
    )
    src = open_source(str(tmp_path / "bad.zarr"), chunk_rows=12_000)
    with pytest.raises(
        SourceError,
        match=r"partition 2 \(rows 24000-29999\) of zarr store .*bad\.zarr .*: OSError: stored chunk c/2/0",
    ) as info:
        with pytest.warns(UserWarning, match="stored chunks of X"):
            accumulate(
                src,
                PassSpec(FoldScheme("hash", 3), None, 1),
                scheduler=scheduler,
                memory_budget=2**18,
                partition_rows=12_000,
            )
    assert "\n" not in str(info.value)
    assert ("truncated" if how == "truncated" else "more than 576000 bytes") in str(info.value)


def _stores(tmp_path: Path, dtype: str) -> tuple[str, dict[str, np.ndarray]]:
    rng = np.random.default_rng(4)
    M = 10_007
    data = {
        "X": (rng.normal(size=(M, 7)) + 1e3).astype(dtype),
        "y": rng.normal(size=(M, 2)),
        "groups": rng.integers(0, 9, M),
        "sample_weight": rng.uniform(0.5, 2.0, M),
    }
    chunks = {"X": 4000, "y": 3000, "groups": 2500, "sample_weight": 10_007}
    for name, a in data.items():
        _array(tmp_path / "d.zarr", a, chunks[name], name=name)
    return str(tmp_path / "d.zarr"), data


FIELDS = ("count", "weight", "mean_x", "mean_y", "sxx", "sxy", "syy")


def _assert_same(got: Any, ref: Any) -> None:
    """Bit-identical statistics, field by field."""
    for name in FIELDS:
        assert np.array_equal(getattr(got, name), getattr(ref, name)), name


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("lanes", [1, 2])
@pytest.mark.parametrize("sub_rows", [100, 333, 1000, 3999])
@pytest.mark.parametrize("ahead", [False, True])
def test_statistics_bit_identical_to_whole_chunk_reads(
    tmp_path: Path, dtype: str, lanes: int, sub_rows: int, ahead: bool
) -> None:
    path, data = _stores(tmp_path, dtype)
    readers, _ = open_source(path, groups="groups", sample_weight="sample_weight").pass_readers()
    spec = PassSpec(FoldScheme("group", 3), None, 2)
    kernel = StatsKernel(spec, 7)
    M = len(data["X"])
    plan = Plan(0, M, M, None, 4000, sub_rows, ahead, lanes)
    calls: list[int] = []
    real = ZarrReader.pieces

    def counted(self: ZarrReader, a: int, b: int, rows: int, alloc: Any = None) -> Any:
        calls.append(a)
        return real(self, a, b, rows, alloc)

    ZarrReader.pieces = counted  # type: ignore[method-assign]
    try:
        new = run_partition(readers, 0, M, plan, kernel, 0)
    finally:
        ZarrReader.pieces = real  # type: ignore[method-assign]
    old = run_partition(readers, 0, M, dataclasses.replace(plan, pieces=False), kernel, 0)
    assert calls == [0, 4000, 8000]  # every block decoded in pieces
    _assert_same(new, old)


def test_pass_in_pieces_reads_each_chunk_once_and_equals_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import streamridge.sources._zarr as zarr_backend

    decoded: list[str] = []
    real = zarr_backend.decode_pieces
    monkeypatch.setattr(zarr_backend, "decode_pieces", lambda raw, *a: decoded.append(a[5]) or real(raw, *a))
    path, data = _stores(tmp_path, "float32")
    store = CountingStore(LocalStore(path, read_only=True))
    src = open_source(zarr.open_group(store, mode="r"), groups="groups", sample_weight="sample_weight")
    spec = PassSpec(FoldScheme("group", 3), None, 2)
    readers, _ = src.pass_readers()
    plan = plan_pass(readers, 0, 10_007, n_cells=3, stats_bytes=10**4, memory_budget=2**16)
    assert plan.read_rows == 4000 and 10 * plan.sub_rows < 4000  # stored chunks of many sub-blocks
    assert plan.prefetch  # two whole blocks would not fit a quarter of the budget; a few pieces do
    whole = plan_pass(readers, 0, 10_007, n_cells=3, stats_bytes=10**4, memory_budget=2**16, pieces=False)
    assert not whole.pieces and not whole.prefetch  # the plan of whole-chunk reads (the read baseline)
    store.reads.clear()
    with pytest.warns(UserWarning, match="stored chunks of X"):
        got = accumulate(src, spec, scheduler="threads", memory_budget=2**16)
    assert sorted(decoded) == ["c/0/0", "c/1/0", "c/2/0"]  # X's chunks, each decoded in pieces once
    for name in data:
        reads = store.chunk_reads(name)
        assert reads and set(reads.values()) == {1}, (name, reads)
    decoded.clear()
    with pytest.warns(UserWarning, match="stored chunks of X"):
        ref = accumulate(
            open_source(path, groups="groups", sample_weight="sample_weight"),
            spec,
            scheduler="sync",
            memory_budget=2**16,
        )
    assert len(decoded) == 3
    _assert_same(got, ref)  # threads and sync: same bits
    mem = accumulate(
        open_source(data["X"], y=data["y"], groups=data["groups"], sample_weight=data["sample_weight"]), spec
    )
    np.testing.assert_allclose(got.sxx, mem.sxx, rtol=1e-9, atol=1e-6)


_CHILD = """
import json, sys, dataclasses
import numpy as np
from streamridge.sources import open_source
from streamridge.datapass.partition_task import run_partition
from streamridge.datapass.partitions import Plan

def hwm():
    with open("/proc/self/status") as fh:
        return next(int(l.split()[1]) * 1024 for l in fh if l.startswith("VmHWM:"))

class Sum:
    def start(self): return [0.0]
    def add(self, acc, X, y, g, w, row): acc[0] += float(X[:, 0].sum(dtype=np.float64))
    def finish(self, acc): return acc[0]
    @staticmethod
    def merge(a, b): return a + b

readers, _ = open_source(sys.argv[1]).pass_readers()
X = readers["X"]
readers["y"].read(0, 10)  # zarr's loop, threads and codecs started before the baseline
base = hwm()
M = X.shape[0]
plan = Plan(0, M, M, None, M, int(sys.argv[2]), sys.argv[5] == "ahead", int(sys.argv[3]), sys.argv[4] == "pieces")
total = run_partition(readers, 0, M, plan, Sum(), 0)
print(json.dumps({"growth": hwm() - base, "sum": total}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM is Linux-only")
@pytest.mark.parametrize(("lanes", "ahead"), [(1, False), (1, True), (2, True)])
def test_a_large_chunk_in_pieces_holds_a_piece_of_its_file_and_a_few_sub_blocks(
    tmp_path: Path, lanes: int, ahead: bool
) -> None:
    """Peak growth of a pass over one 48 MiB zstd chunk in 2 MiB sub-blocks, in a child process.

    Decoded whole, the compressed chunk and the decoded chunk (about 1.9 chunk
    sizes on these data); in pieces, a piece of the file (the compressed chunk
    is 0.87 of the data, 42 MiB), zstd's window and at most a few sub-blocks
    (queue, the one decoding, those in use).
    """
    rows, N = 48 * 2**20 // (50 * 4), 50
    data = (np.random.default_rng(0).normal(size=(rows, N)) + 3).astype(np.float32)
    root = zarr.open_group(tmp_path / "big.zarr", mode="w")
    root.create_array("X", shape=data.shape, dtype=data.dtype, chunks=data.shape)[:] = data
    root.create_array("y", shape=(rows,), dtype="float64", chunks=(rows,))[:] = 0.0
    compressed = (tmp_path / "big.zarr" / "X" / "c" / "0" / "0").stat().st_size
    sub_rows = 2 * 2**20 // (N * 4)
    code = textwrap.dedent(_CHILD)
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            str(tmp_path / "big.zarr"),
            str(sub_rows),
            str(lanes),
            "pieces",
            "ahead" if ahead else "-",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    got = json.loads(out.stdout.splitlines()[-1])
    assert got["sum"] == pytest.approx(float(data[:, 0].astype(np.float64).sum()), rel=1e-9)
    from streamridge.sources._zstream import FILE_PIECE

    # the file read in pieces as it is decoded (15-19 MiB measured): not even the compressed chunk is held
    assert got["growth"] < min(0.6 * compressed, 2 * FILE_PIECE + 8 * 2 * 2**20), (
        got["growth"] / 2**20,
        compressed / 2**20,
    )


@pytest.mark.parametrize("codec", ["zstd", "gzip"])
def test_decoding_a_piece_releases_the_gil(tmp_path: Path, codec: str) -> None:
    """While one large piece decodes, another Python thread keeps running.

    A decoder holding the GIL (the same zstd library called through
    ``ctypes.PyDLL``) leaves a gap as long as the call.
    """
    data = np.random.default_rng(0).normal(size=(1_000_000, 8))
    kw = {} if codec == "zstd" else {"compressors": zarr.codecs.GzipCodec(level=1)}
    arr = _array(tmp_path / "s.zarr", data, len(data), **kw)
    assert stream_codec(arr) == codec
    fetched = fetch_chunk(arr, 0)
    assert fetched is not None
    key, raw = fetched
    out: list[np.ndarray] = []
    gap, call = gil_gap(
        lambda: out.extend(decode_pieces(raw, codec, data.dtype, (8,), len(data), [len(data)], key))
    )
    np.testing.assert_array_equal(out[0], data)
    assert gap < 0.5 * call, (gap, call)


@pytest.mark.parametrize(
    ("sub_rows", "lanes", "slots"),
    [(800, 1, 4), (1000, 1, 4), (1500, 1, 2), (2500, 1, 0), (600, 2, 5), (1000, 2, 3), (1500, 2, 0)],
)
def test_pieces_decode_ahead_only_when_the_pieces_alive_fit_a_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sub_rows: int, lanes: int, slots: int
) -> None:
    """Decoding ahead holds queue + decoding + the lanes' pieces (deep), else one piece ahead (lean): at most a chunk.

    Chunks of 4000 rows: deep is 2 + 1 + lanes pieces, lean lanes + 1; neither fits: decoded in the task's thread.
    """
    import streamridge.sources.pieces as piece_reads

    path, _ = _stores(tmp_path, "float64")
    readers, _ = open_source(path, groups="groups", sample_weight="sample_weight").pass_readers()
    seen: list[tuple[bool, Any]] = []
    real = piece_reads.piece_stream
    monkeypatch.setattr(
        piece_reads,
        "piece_stream",
        lambda *a, **kw: seen.append((kw["ahead"], kw["slots"])) or real(*a, **kw),
    )
    plan = Plan(0, 10_007, 10_007, None, 4000, sub_rows, True, lanes)
    kernel = StatsKernel(PassSpec(FoldScheme("group", 3), None, 2), 7)
    got = run_partition(readers, 0, 10_007, plan, kernel, 0)
    ref = run_partition(readers, 0, 10_007, dataclasses.replace(plan, pieces=False), kernel, 0)
    assert seen == [(slots > 0, slots or None)]
    _assert_same(got, ref)


def test_pieces_decoded_ahead_read_the_1d_arrays_on_the_decode_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """y, groups and weights of pieces decoded ahead are read on the decode thread, not the task's."""
    import threading

    path, _ = _stores(tmp_path, "float64")
    readers, _ = open_source(path, groups="groups", sample_weight="sample_weight").pass_readers()
    names: list[str] = []
    real = ZarrReader.read

    def read(self: Any, start: int, stop: int) -> np.ndarray:
        if len(self.shape) == 1:
            names.append(threading.current_thread().name)
        return real(self, start, stop)

    monkeypatch.setattr(ZarrReader, "read", read)
    plan = Plan(0, 10_007, 10_007, None, 4000, 800, True, 1)
    kernel = StatsKernel(PassSpec(FoldScheme("group", 3), None, 2), 7)
    got = run_partition(readers, 0, 10_007, plan, kernel, 0)
    assert len(names) >= 3 and set(names) == {"streamridge-decode"}, names
    names.clear()
    ref = run_partition(readers, 0, 10_007, dataclasses.replace(plan, prefetch=False), kernel, 0)
    assert threading.current_thread().name in set(names)
    _assert_same(got, ref)


def _heavy_cell(sub_rows: int, lanes: int = 1, overlap: bool = True) -> tuple[Any, Plan]:
    """X of 52,428 x 1000 float64 in one 400 MB stored chunk, and a plan over it."""
    import types

    from streamridge.sources._protocol import RowGrid

    X = types.SimpleNamespace(
        shape=(52_428, 1000),
        dtype=np.dtype("float64"),
        grid=lambda: RowGrid(52_428, 52_428),
        overlap_reads=overlap,
    )
    return X, Plan(0, 52_428, 52_428, None, 52_428, sub_rows, True, lanes)


def test_pieces_ahead_stay_within_the_read_ahead_budget() -> None:
    """10 x 10 cells at N = 1000 float64: 6,400-row sub-blocks of 51 MB; 4 alive would hold 205 MB, 2 hold 102 MB."""
    from streamridge.datapass.partitions import PREFETCH_BYTES, ahead_slots

    X, plan = _heavy_cell(6400)
    assert 4 * 6400 * 8000 > PREFETCH_BYTES >= 2 * 6400 * 8000
    assert ahead_slots(X, plan) == 2  # lean: one piece ahead of the one in use
    assert ahead_slots(X, dataclasses.replace(plan, sub_rows=3000)) == 4  # deep: 4 x 24 MB
    assert (
        ahead_slots(X, dataclasses.replace(plan, sub_rows=9000)) == 0
    )  # 2 x 72 MB: decoded in the task's thread
    assert (
        ahead_slots(X, dataclasses.replace(plan, sub_rows=5000, lanes=2)) == 3
    )  # lean with two lanes: 120 MB


def test_large_statistics_decode_whole_unless_pieces_decode_ahead() -> None:
    """10 x 10 cells at N = 1000 (800 MB of statistics) over a 400 MB chunk.

    Decoded whole, the peak is lower; pieces decoded ahead overlap the decode with the statistics for at
    most the pieces alive (2 x 51 MB) more, so they are taken where the reader decodes outside the GIL.
    """
    from streamridge.datapass.partitions import pieces_pay

    X, plan = _heavy_cell(4000, lanes=2, overlap=False)
    plan = dataclasses.replace(plan, prefetch=False)
    assert pieces_pay(X, plan, 40 * 10**6)  # 5 x 1 cells: 40 MB of statistics, lower peak in pieces
    assert not pieces_pay(X, plan, 800 * 10**6)  # in the task's thread: no gain for a higher peak
    X, plan = _heavy_cell(6400)
    assert pieces_pay(X, plan, 800 * 10**6)  # two pieces alive, decoded ahead
    assert not pieces_pay(X, dataclasses.replace(plan, sub_rows=9000), 800 * 10**6)  # no room ahead


def test_plan_of_a_heavy_cell_decodes_its_chunk_ahead_in_pieces(tmp_path: Path) -> None:
    """One stored chunk under statistics larger than it: one partition, pieces decoded ahead, two alive."""
    from streamridge.datapass.partitions import ahead_slots

    rows, N = 6000, 40
    data = np.random.default_rng(3).normal(size=(rows, N))
    root = zarr.open_group(tmp_path / "one.zarr", mode="w")
    root.create_array("X", shape=data.shape, dtype=data.dtype, chunks=data.shape)[:] = data
    root.create_array("y", shape=(rows,), dtype="float64", chunks=(rows,))[:] = data[:, 0]
    readers, _ = open_source(tmp_path / "one.zarr").pass_readers()
    stats = 4 * data.nbytes  # heavier than the chunk: decoded whole would peak lower
    budget = 4 * stats + 2 * data.nbytes  # a read budget of half the chunk: two sub-blocks of 3000 rows
    with pytest.warns(UserWarning, match="stored chunks of X"):
        plan = plan_pass(readers, 0, rows, n_cells=10, stats_bytes=stats, memory_budget=budget)
        whole = plan_pass(readers, 0, rows, n_cells=10, stats_bytes=stats, memory_budget=budget, pieces=False)
    assert (len(plan), plan.read_rows, plan.sub_rows) == (1, rows, 3000)
    assert plan.pieces and plan.prefetch and ahead_slots(readers["X"], plan) == 2  # lean
    assert not whole.pieces and not whole.prefetch
    kernel = StatsKernel(PassSpec(FoldScheme("hash", 10), None, 1), N)
    got = run_partition(readers, 0, rows, plan, kernel, 0)
    ref = run_partition(readers, 0, rows, whole, kernel, 0)
    _assert_same(got, ref)


@pytest.mark.parametrize(
    ("lanes", "ahead", "cell_threads", "alive"),
    [(1, True, 1, 4), (2, True, 1, 5), (1, True, 2, 4), (1, False, 2, 1), (2, False, 1, 2)],
)
def test_a_pass_in_pieces_reuses_the_arrays_of_its_pieces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lanes: int, ahead: bool, cell_threads: int, alive: int
) -> None:
    """The kernel lets go of each sub-block: 21 pieces of 3 chunks decoded into at most the pieces alive at once.

    A fresh array per piece costs fresh pages (a 51 MB piece is a new mmap whose pages the kernel zeroes).
    """
    import streamridge.sources.pieces as piece_reads

    pools: list[Any] = []

    class Recorded(piece_reads.PieceBuffers):
        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, **kw)
            pools.append(self)

    monkeypatch.setattr(piece_reads, "PieceBuffers", Recorded)
    path, _ = _stores(tmp_path, "float64")
    readers, _ = open_source(path, groups="groups", sample_weight="sample_weight").pass_readers()
    plan = Plan(0, 10_007, 10_007, None, 4000, 500, ahead, lanes, share_cells=3, cell_threads=cell_threads)
    kernel = StatsKernel(PassSpec(FoldScheme("group", 3), None, 2), 7)
    got = run_partition(readers, 0, 10_007, plan, kernel, 0)
    ref = run_partition(readers, 0, 10_007, dataclasses.replace(plan, pieces=False), kernel, 0)
    (pool,) = pools
    assert 1 <= pool.allocated <= alive
    _assert_same(got, ref)


def test_local_chunks_in_pieces_are_read_from_their_files_once_as_they_decode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A LocalStore chunk decoded in pieces is read as pieces of its file, once, never into one buffer."""
    from streamridge.sources import _zstream

    opened: list[str] = []
    pieces_read: list[int] = []
    real = _zstream.file_pieces

    def counted(path: str, offset: int, size: int) -> Any:
        opened.append(os.path.relpath(path, tmp_path))
        for data in real(path, offset, size):
            pieces_read.append(len(data))
            yield data

    monkeypatch.setattr(_zstream, "file_pieces", counted)
    monkeypatch.setattr(_zstream, "FILE_PIECE", 4096)
    path, _ = _stores(tmp_path, "float64")
    readers, _ = open_source(path, groups="groups", sample_weight="sample_weight").pass_readers()
    plan = Plan(0, 10_007, 10_007, None, 4000, 700, True, 1)
    kernel = StatsKernel(PassSpec(FoldScheme("group", 3), None, 2), 7)
    got = run_partition(readers, 0, 10_007, plan, kernel, 0)
    ref = run_partition(readers, 0, 10_007, dataclasses.replace(plan, pieces=False), kernel, 0)
    assert sorted(opened) == [os.path.join("d.zarr", "X", "c", str(k), "0") for k in range(3)]
    sizes = [(tmp_path / p).stat().st_size for p in sorted(opened)]
    assert sum(pieces_read) == sum(sizes) and max(pieces_read) == 4096  # every byte once, 4 KB at a time
    _assert_same(got, ref)
