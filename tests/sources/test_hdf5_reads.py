"""HDF5 rows read as file bytes (contiguous, raw, gzip, shuffle + gzip chunks): values, fallbacks, corruption, memory."""

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

# name -> (create_dataset keywords, whether the pass reads the file's bytes itself)
LAYOUTS: dict[str, tuple[dict[str, Any], bool]] = {
    "contiguous": ({"chunks": None}, True),
    "raw": ({}, True),
    "gzip": ({"compression": "gzip"}, True),
    "gzip-9": ({"compression": "gzip", "compression_opts": 9}, True),
    "shuffle-gzip": ({"compression": "gzip", "shuffle": True}, True),
    "lzf": ({"compression": "lzf"}, False),
    "shuffle": ({"shuffle": True}, False),
    "gzip-fletcher32": ({"compression": "gzip", "fletcher32": True}, False),
    "column-chunks": ({"chunks": (10, 2)}, False),
}
RANGES = [(0, 10), (20, 30), (50, 53), (0, 53), (5, 15), (13, 17), (52, 53)]


def _write(path: Path, data: dict[str, np.ndarray], kw: dict[str, Any], unwritten: bool = False) -> str:
    with h5py.File(path, "w") as f:
        for name, a in data.items():
            opts = dict(kw)
            if "chunks" not in opts:
                opts["chunks"] = (10, *a.shape[1:])
            elif opts["chunks"] is not None and len(opts["chunks"]) != a.ndim:
                opts["chunks"] = (10,)
            if unwritten and opts["chunks"] is not None:
                ds = f.create_dataset(name, shape=a.shape, dtype=a.dtype, fillvalue=7, **opts)
                ds[:20] = a[:20]  # rows 20-29 are a chunk never written
                ds[30:] = a[30:]
            else:
                f.create_dataset(name, data=a, **opts)
    return str(path)


def _data(dtype: str, rows: int = 53) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"X": (rng.normal(size=(rows, 7)) * 100).astype(dtype), "y": rng.normal(size=rows)}


def _readers(path: str) -> dict[str, Any]:
    return open_source(path, y="y").pass_readers()[0]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int16"])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_reads_equal_the_stored_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str, dtype: str
) -> None:
    kw, direct = LAYOUTS[layout]
    data = _data(dtype)
    path = _write(tmp_path / "d.h5", data, kw, unwritten=kw.get("chunks", ()) is not None)
    with h5py.File(path) as f:
        stored = {name: f[name][...] for name in data}
    assert (stored["X"][20:30] == 7).all() == (kw.get("chunks", ()) is not None)
    readers = _readers(path)
    X, y = readers["X"], readers["y"]
    assert (X.layout is not None) == direct
    assert (y.layout is not None) == (direct or layout == "column-chunks")  # y's chunks are whole rows there
    assert X.overlap_reads == direct
    if direct:  # h5py's own read is never used for the rows
        monkeypatch.setattr(h5src.HDF5Reader, "__getitem__", lambda self, key: pytest.fail("h5py read"))
    for a, b in RANGES:
        got = X.read(a, b)
        assert got.dtype == stored["X"].dtype and got.shape == (b - a, 7)
        np.testing.assert_array_equal(got, stored["X"][a:b])
        np.testing.assert_array_equal(y.read(a, b), stored["y"][a:b])


def test_a_chunk_stored_without_its_filter_is_read_by_h5py(tmp_path: Path) -> None:
    data = _data("float64")
    path = _write(tmp_path / "d.h5", data, {"compression": "gzip"})
    with h5py.File(path, "a") as f:  # chunk 1 written as raw bytes with deflate marked skipped
        f["X"].id.write_direct_chunk((10, 0), np.ascontiguousarray(data["X"][10:20]).tobytes(), filter_mask=1)
    X = _readers(path)["X"]
    assert X.layout is not None
    np.testing.assert_array_equal(X.read(0, 53), data["X"])
    np.testing.assert_array_equal(X.read(20, 30), data["X"][20:30])  # the other chunks still directly


def test_a_file_open_for_writing_is_read_by_h5py(tmp_path: Path) -> None:
    data = _data("float64")
    path = _write(tmp_path / "d.h5", data, {"compression": "gzip"})
    with h5py.File(path, "a") as f:
        f["X"][0] = 1.0  # not yet in the file's bytes
        readers = open_source(f, y="y").pass_readers()[0]
        assert readers["X"].layout is None
    with h5py.File(path, "r") as f:
        assert open_source(f, y="y").pass_readers()[0]["X"].layout is not None


def _chunk(path: str, name: str, row: int) -> tuple[int, int]:
    with h5py.File(path) as f:
        info = f[name].id.get_chunk_info_by_coord((row, 0) if f[name].ndim == 2 else (row,))
        return int(info.byte_offset), int(info.size)


@pytest.mark.parametrize("layout", ["gzip", "shuffle-gzip"])
def test_a_corrupted_chunk_is_one_oserror_naming_it(tmp_path: Path, layout: str) -> None:
    data = _data("float64")
    path = _write(tmp_path / "d.h5", data, LAYOUTS[layout][0])
    offset, size = _chunk(path, "X", 10)
    with open(path, "r+b") as fh:
        fh.seek(offset + size // 2)
        fh.write(b"\xff" * 8)
    X = _readers(path)["X"]
    with pytest.raises(OSError, match=r"stored chunk 1 of /X in .*d\.h5 \(zlib\) is (corrupted|truncated)"):
        X.read(10, 20)
    np.testing.assert_array_equal(X.read(20, 30), data["X"][20:30])


def test_a_deflated_stream_in_pieces_cut_short_or_too_long_is_an_oserror() -> None:
    """A large chunk of a local file is inflated while it is read, piece by piece (zarr's zlib decoder, fed pieces)."""
    import zlib

    from streamridge.sources._zstream import decode_into

    payload = np.arange(1000, dtype=np.float64).tobytes()
    stream = zlib.compress(payload)
    pieces = [stream[i : i + 100] for i in range(0, len(stream), 100)]
    out = np.empty(len(payload), np.uint8)
    decode_into(iter(pieces), "zlib", out, 0, len(payload), "0 of f.h5")
    assert out.tobytes() == payload
    part = np.empty(80, np.uint8)
    decode_into(iter(pieces), "zlib", part, 160, len(payload), "0 of f.h5")  # rows inside the chunk
    assert part.tobytes() == payload[160:240]
    with pytest.raises(OSError, match=r"stored chunk 0 of f\.h5 \(zlib\) is truncated"):
        decode_into(iter(pieces[: len(pieces) // 2]), "zlib", out, 0, len(payload), "0 of f.h5")
    longer = zlib.compress(payload + b"x" * 8)
    with pytest.raises(OSError, match="is corrupted: more than"):
        decode_into(
            iter([longer[i : i + 100] for i in range(0, len(longer), 100)]),
            "zlib",
            out,
            0,
            len(payload),
            "0 of f.h5",
        )


def test_a_truncated_file_is_an_oserror(tmp_path: Path) -> None:
    data = _data("float64", rows=2000)
    path = _write(tmp_path / "d.h5", data, {"chunks": None})
    X = _readers(path)["X"]
    with open(path, "r+b") as fh:
        fh.truncate(X.layout.offset + 100 * 7 * 8)
    with pytest.raises(OSError, match="truncated"):
        X.read(0, 2000)


_CHILD = """
import json, sys
from streamridge.sources import open_source

def hwm():
    with open("/proc/self/status") as fh:
        return next(int(l.split()[1]) * 1024 for l in fh if l.startswith("VmHWM:"))

readers, _ = open_source(sys.argv[1]).pass_readers()
readers["y"].read(0, 10)  # h5py and the file opened (on the small dataset) before the baseline
readers["X"]._chunk_table()
base = hwm()
block = readers["X"].read(0, readers["X"].shape[0])
print(json.dumps({"growth": hwm() - base, "nbytes": block.nbytes, "sum": float(block[:, 0].sum())}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM is Linux-only")
def test_one_large_gzip_chunk_is_not_copied(tmp_path: Path) -> None:
    """Reading one 48 MiB gzip chunk grew the peak by 2 chunk sizes through h5py (HDF5's chunk buffer and the
    output); read from the file in pieces and inflated into the output, by 1 and a few MB."""
    rows, N = 48 * 2**20 // (50 * 4), 50
    X = (np.random.default_rng(0).normal(size=(rows, N)) + 3).astype(np.float32)
    path = _write(tmp_path / "d.h5", {"X": X}, {"compression": "gzip", "chunks": (rows, N)})
    with h5py.File(path, "a") as f:
        f.create_dataset("y", data=np.zeros(rows), chunks=(rows,))
    cmd = [sys.executable, "-c", textwrap.dedent(_CHILD), path]
    got = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()[-1])
    assert got["nbytes"] == X.nbytes
    assert got["sum"] == pytest.approx(float(X[:, 0].astype(np.float64).sum()), rel=1e-6)
    assert got["growth"] < 1.4 * X.nbytes, got["growth"] / X.nbytes


@pytest.mark.parametrize("layout", ["contiguous", "raw", "shuffle-gzip"])
def test_over_http_each_read_fetches_its_chunks_in_one_call(
    http_root: tuple[Path, str], monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    root, base = http_root
    data = _data("float32")
    _write(root / f"{layout}.h5", data, LAYOUTS[layout][0], unwritten=layout != "contiguous")
    with h5py.File(root / f"{layout}.h5") as f:
        stored = {name: f[name][...] for name in data}
    readers = _readers(f"{base}/{layout}.h5")
    X = readers["X"]
    assert X.layout is not None
    calls: list[int] = []

    class Counting:  # the reader's filesystem, counting the ranges of each call
        def __init__(self, fs: Any) -> None:
            self.fs = fs

        def cat_ranges(self, paths: list[str], *args: Any, **kw: Any) -> Any:
            calls.append(len(paths))
            return self.fs.cat_ranges(paths, *args, **kw)

    for reader in (X, readers["y"]):
        reader.read(0, 1)
        reader._fs = (Counting(reader._fs[0]), reader._fs[1])
    monkeypatch.setattr(h5src.HDF5Reader, "__getitem__", lambda self, key: pytest.fail("h5py read"))
    for a, b in RANGES:
        np.testing.assert_array_equal(X.read(a, b), stored["X"][a:b])
        np.testing.assert_array_equal(readers["y"].read(a, b), stored["y"][a:b])
    assert len(calls) == 2 * len(RANGES) - (
        0 if layout == "contiguous" else 2
    )  # (20, 30): a never-written chunk
    assert max(calls) > 1 or layout == "contiguous"
