"""Conformance tests of the data sources: one class of checks, subclassed per backend.

Pattern of zarr-python's ``StoreTests``: :class:`SourceTests` states what every
backend must do; each subclass only says how to store arrays (``make``).
"""

from __future__ import annotations

import collections
import os
import pickle
import socket
import time
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np
import pytest

from streamridge.errors import InputError, ParameterError, SourceError
from streamridge.sources import Source, open_source, write_hdf5, write_zarr
from streamridge.sources._common import ROLES, choose_row_chunks
from streamridge.sources._url import HTTP_CONNECT_TIMEOUT, remote_options

N_ROWS, N_FEATURES, NATIVE = 230, 6, 20
FEATURES = [f"f{j}" for j in range(N_FEATURES)]


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


def _data(rng: np.random.Generator, dtype: Any = np.float32, n_targets: int = 0) -> dict[str, np.ndarray]:
    X = (rng.normal(size=(N_ROWS, N_FEATURES)) * 10).astype(dtype)
    y = rng.normal(size=(N_ROWS, n_targets) if n_targets else N_ROWS)
    groups = np.arange(N_ROWS) % 7
    w = rng.uniform(0.5, 2.0, size=N_ROWS)
    return {"X": X, "y": y, "groups": groups, "w": w}


def _budget_for(rows: int) -> int:
    """Memory budget whose target chunk is ``rows`` rows of float64 X."""
    return rows * N_FEATURES * 8 * 8


class SourceTests:
    """What every backend must do.  Subclasses implement :meth:`make`."""

    native_rows = 1  # rows of one storage chunk as written by make (1: unchunked)
    named = True  # arrays are looked up by name
    has_attrs = False  # feature names travel with the data
    remote = False  # read over a network (the pass then reads ahead in every task)
    writable_reads = True  # reads return arrays of their own (not read-only views of a file)

    def make(
        self,
        tmp_path: Path,
        X: Any,
        y: Any = None,
        groups: Any = None,
        w: Any = None,
        *,
        feature_names: list[str] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Store the arrays; return the ``data`` argument and keyword arguments of open_source."""
        raise NotImplementedError

    def open(self, tmp_path: Path, d: dict[str, Any], **kwargs: Any) -> Source:
        data, kw = self.make(tmp_path, d["X"], d["y"], d["groups"], d["w"])
        return open_source(data, **kw, **kwargs)

    @pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32])
    def test_shape_and_dtype_preserved(self, tmp_path: Path, rng: np.random.Generator, dtype: Any) -> None:
        d = _data(rng, dtype)
        source = self.open(tmp_path, d)
        assert source.X.shape == (N_ROWS, N_FEATURES)
        assert source.X.dtype == np.dtype(dtype)
        assert source.n_rows() == N_ROWS and source.n_features() == N_FEATURES
        assert f"{N_ROWS} x {N_FEATURES} {np.dtype(dtype)}" in source.description

    @pytest.mark.parametrize("n_targets", [0, 3])
    def test_values_equal_original(self, tmp_path: Path, rng: np.random.Generator, n_targets: int) -> None:
        d = _data(rng, n_targets=n_targets)
        source = self.open(tmp_path, d, chunk_rows=50)
        assert source.y is not None and source.groups is not None and source.sample_weight is not None
        np.testing.assert_array_equal(source.X.compute(), d["X"])
        np.testing.assert_array_equal(source.y.compute(), d["y"])
        np.testing.assert_array_equal(source.groups.compute(), d["groups"])
        np.testing.assert_array_equal(source.sample_weight.compute(), d["w"])

    def test_same_row_chunks_everywhere(self, tmp_path: Path, rng: np.random.Generator) -> None:
        source = self.open(tmp_path, _data(rng, n_targets=2), memory_budget=_budget_for(45))
        assert source.X.chunks[1] == (N_FEATURES,)
        for a in (source.y, source.groups, source.sample_weight):
            assert a is not None and a.chunks[0] == source.row_chunks()
        assert source.y is not None and source.y.chunks[1] == (2,)
        assert sum(source.row_chunks()) == N_ROWS

    def test_chunk_rows_override(self, tmp_path: Path, rng: np.random.Generator) -> None:
        source = self.open(tmp_path, _data(rng), chunk_rows=37)
        assert source.row_chunks() == (37,) * 6 + (8,)

    def test_auto_chunks_aligned_to_storage(self, tmp_path: Path, rng: np.random.Generator) -> None:
        source = self.open(tmp_path, _data(rng), memory_budget=_budget_for(50))
        step = max(self.native_rows, 50 // self.native_rows * self.native_rows)
        assert source.row_chunks()[0] == step
        assert all(c == step for c in source.row_chunks()[:-1])

    def test_auto_chunks_smaller_than_storage_chunk(self, tmp_path: Path, rng: np.random.Generator) -> None:
        source = self.open(
            tmp_path, _data(rng), memory_budget=_budget_for(3)
        )  # a storage chunk: > half the budget
        bounds = set(np.cumsum((0, *source.row_chunks())).tolist())
        if self.native_rows > 1:  # no chunk straddles two storage chunks
            assert set(range(0, N_ROWS, self.native_rows)) <= bounds
        assert max(source.row_chunks()) <= 3

    def test_storage_chunks_within_half_the_budget_stay_whole(
        self, tmp_path: Path, rng: np.random.Generator
    ) -> None:
        """A storage chunk larger than the target but within half the budget is one chunk (no part decodes it again)."""
        source = self.open(tmp_path, _data(rng), memory_budget=_budget_for(7))
        assert 2 * self.native_rows * N_FEATURES * 8 <= _budget_for(7)
        step = self.native_rows if self.native_rows > 7 else 7 // self.native_rows * self.native_rows
        assert source.row_chunks() == (step,) * (N_ROWS // step) + ((N_ROWS % step,) if N_ROWS % step else ())

    def test_missing_name_lists_available(self, tmp_path: Path, rng: np.random.Generator) -> None:
        d = _data(rng)
        data, kw = self.make(tmp_path, d["X"], d["y"])
        match = r"array 'Z' not found in .*it has: .*y.*--y" if self.named else "pass y as an array"
        with pytest.raises(SourceError, match=match):
            open_source(data, **{**kw, "y": "Z"})
        assert open_source(data, **{**kw, "y": "Z"}, require_y=False).y is None

    def test_row_count_mismatch(self, tmp_path: Path, rng: np.random.Generator) -> None:
        d = _data(rng)
        data, kw = self.make(tmp_path, d["X"], d["y"][:-3])
        with pytest.raises(InputError, match=f"y has {N_ROWS - 3} rows but X has {N_ROWS}"):
            open_source(data, **kw)

    @pytest.mark.filterwarnings("ignore:The data type")  # zarr v3: fixed-width strings are unspecified
    def test_non_numeric_dtype(self, tmp_path: Path, rng: np.random.Generator) -> None:
        d = _data(rng)
        data, kw = self.make(tmp_path, d["X"], d["y"].astype(str))
        with pytest.raises(InputError, match=r"y must be numeric.*dtype"):
            open_source(data, **kw)

    def test_feature_names(self, tmp_path: Path, rng: np.random.Generator) -> None:
        d = _data(rng)
        data, kw = self.make(tmp_path, d["X"], d["y"], feature_names=FEATURES)
        source = open_source(data, **kw)
        assert source.feature_names == (FEATURES if self.has_attrs else None)

    def test_pickled_graph_computes(self, tmp_path: Path, rng: np.random.Generator) -> None:
        d = _data(rng)
        source = self.open(tmp_path, d, chunk_rows=64)
        X, y = pickle.loads(pickle.dumps((source.X, source.y)))
        np.testing.assert_array_equal(X.compute(), d["X"])
        np.testing.assert_array_equal(y.compute(), d["y"])

    # --- the reader protocol: shape/dtype, stored grid, row-range reads, fingerprint ---------

    def test_readers_say_whether_they_read_over_a_network(
        self, tmp_path: Path, rng: np.random.Generator
    ) -> None:
        readers, _ = self.open(tmp_path, _data(rng)).pass_readers()
        assert {role: r.remote for role, r in readers.items() if r is not None} == dict.fromkeys(
            ROLES, self.remote
        )

    def test_readers_grid_matches_storage(self, tmp_path: Path, rng: np.random.Generator) -> None:
        source = self.open(tmp_path, _data(rng))
        readers, first = source.pass_readers()
        assert first == 0 and set(readers) == {"X", "y", "groups", "sample_weight"}
        for role, reader in readers.items():
            assert reader is not None, role
            grid = reader.grid()
            assert grid.n_rows == N_ROWS and grid.regular
            assert grid.step == self.native_rows, role
            assert grid.floor(self.native_rows + 1) == (
                self.native_rows if self.native_rows > 1 else self.native_rows + 1
            )

    def test_readers_read_row_ranges(self, tmp_path: Path, rng: np.random.Generator) -> None:
        d = _data(rng)
        readers, _ = self.open(tmp_path, d).pass_readers()
        assert readers["X"] is not None and readers["sample_weight"] is not None
        for a, b in [(0, 1), (17, 63), (N_ROWS - 5, N_ROWS), (0, N_ROWS)]:
            np.testing.assert_array_equal(readers["X"].read(a, b), d["X"][a:b])
            np.testing.assert_array_equal(readers["sample_weight"].read(a, b), d["w"][a:b])
        assert readers["X"].shape == d["X"].shape and readers["X"].dtype == d["X"].dtype

    def test_reader_indexing_equals_the_array(
        self, tmp_path: Path, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """What a dask view asks of its reader: whole-row ranges go through ``read`` (the pass's decoding),
        anything else through the storage library; both equal the array."""
        d = _data(rng)
        readers, _ = self.open(tmp_path, d).pass_readers()
        X = readers["X"]
        assert X is not None
        rows: list[tuple[int, int]] = []
        original = type(X).read
        monkeypatch.setattr(type(X), "read", lambda self, a, b: rows.append((a, b)) or original(self, a, b))
        keys: list[Any] = [
            slice(17, 63),
            (slice(0, 40), slice(0, N_FEATURES)),
            (slice(200, None), slice(None)),
            slice(50, 50),
            (slice(3, 90), slice(1, 4)),
            slice(0, 100, 3),
            (slice(5, 9), 2),
            7,
        ]
        for key in keys:
            got = np.asarray(X[key])
            np.testing.assert_array_equal(got, d["X"][key], err_msg=str(key))
            if self.writable_reads:  # user code on a view's blocks may write into them
                assert got.flags.writeable or got.ndim == 0, key
        if type(X).__name__ in ("NumpyReader", "DaskReader"):  # they index their own array
            assert rows == []
        else:
            assert rows == [(17, 63), (0, 40), (200, N_ROWS), (50, 50)]

    def test_readers_pickle_and_read(self, tmp_path: Path, rng: np.random.Generator) -> None:
        d = _data(rng)
        readers, _ = self.open(tmp_path, d).pass_readers()
        again = pickle.loads(pickle.dumps(readers))
        np.testing.assert_array_equal(again["X"].read(20, 60), d["X"][20:60])

    def test_fingerprint_is_stable_and_sees_edits(self, tmp_path: Path, rng: np.random.Generator) -> None:
        d = _data(rng)
        data, kw = self.make(tmp_path, d["X"], d["y"], d["groups"], d["w"])
        first = open_source(data, **kw).pass_readers()[0]["X"]
        assert first is not None
        assert first.fingerprint() == open_source(data, **kw).pass_readers()[0]["X"].fingerprint()  # type: ignore[union-attr]
        if not self.named:
            return
        time.sleep(0.01)
        X2 = d["X"].copy()
        X2[N_ROWS // 2] += 1  # a row in the middle
        data2, kw2 = self.make(tmp_path, X2, d["y"], d["groups"], d["w"])
        assert data2 != data
        second = open_source(data2, **kw2).pass_readers()[0]["X"]
        assert second is not None and second.fingerprint() != first.fingerprint()

    def test_pass_equals_in_memory(self, tmp_path: Path, rng: np.random.Generator) -> None:
        from streamridge.datapass.driver import accumulate
        from streamridge.datapass.spec import PassSpec
        from streamridge.datapass.stats_kernel import chunk_task
        from streamridge.folds.schemes import FoldScheme

        d = _data(rng)
        spec = PassSpec(FoldScheme("group", 3), None, 1)
        got = accumulate(self.open(tmp_path, d, chunk_rows=45), spec, scheduler="threads", partition_rows=45)
        ref = chunk_task(d["X"], d["y"], d["groups"], d["w"], 0, spec)
        np.testing.assert_array_equal(got.count, ref.count)
        np.testing.assert_allclose(got.sxx, ref.sxx, rtol=1e-10, atol=1e-9)

    @pytest.mark.parametrize("chunk_rows", [None, 40])
    def test_an_opened_source_is_not_opened_again(
        self, tmp_path: Path, rng: np.random.Generator, chunk_rows: int | None
    ) -> None:
        """An estimator given a source opened with its own ``chunk_rows`` (the command line's) uses that source."""
        source = self.open(tmp_path, _data(rng), chunk_rows=chunk_rows)
        assert open_source(source, chunk_rows=chunk_rows) is source
        assert not hasattr(source, "partition_rows")  # the partition size is an option of the pass

    def test_reopen_source_rechunks(self, tmp_path: Path, rng: np.random.Generator) -> None:
        d = _data(rng)
        source = self.open(tmp_path, d, chunk_rows=40)
        again = open_source(source, chunk_rows=100)
        assert again.row_chunks() == (100, 100, 30)
        assert again.sample_weight is not None and again.sample_weight.chunks[0] == (100, 100, 30)
        np.testing.assert_array_equal(again.X.compute(), d["X"])

    # --- views built only when asked for: shapes, chunks, row selections and distinct values without them ---

    def test_shapes_and_chunks_without_dask_views(self, tmp_path: Path, rng: np.random.Generator) -> None:
        d = _data(rng, n_targets=2)
        source = self.open(tmp_path, d, chunk_rows=45)
        assert source.shape("X") == d["X"].shape and source.shape("y") == d["y"].shape
        assert source.shape("groups") == (N_ROWS,) and source.shape("sample_weight") == (N_ROWS,)
        chunks = source.row_chunks()
        assert source.n_rows() == N_ROWS and source.n_features() == N_FEATURES
        assert _unbuilt(source) == set(ROLES)
        assert source.X.chunks[0] == chunks and source.X is source.X  # built once, then kept
        assert _unbuilt(source) == {"y", "groups", "sample_weight"}
        readers, _ = source.pass_readers()  # a built view that was not replaced is still read by its reader
        assert readers == {role: source.readers[role] for role in ROLES}  # type: ignore[index]
        assert open_source(d["X"], y=None, require_y=False).shape("y") is None

    @pytest.mark.parametrize("rows", [(0, N_ROWS), (17, 163), (40, 41), (NATIVE, 3 * NATIVE)])
    def test_row_selections_and_rechunks_equal_the_views(
        self, tmp_path: Path, rng: np.random.Generator, rows: tuple[int, int]
    ) -> None:
        d = _data(rng)
        a, b = rows
        source = self.open(tmp_path, d, chunk_rows=45)
        part = source.select_rows(a, b)
        assert _unbuilt(part) == set(ROLES)
        assert part.shape("X") == (b - a, N_FEATURES) and part.n_rows() == b - a
        assert part.row_chunks() == self.open(tmp_path, d, chunk_rows=45).X[a:b].chunks[0]
        assert part.pass_readers()[1] == a
        np.testing.assert_array_equal(part.X.compute(), d["X"][a:b])
        np.testing.assert_array_equal(part.groups.compute(), d["groups"][a:b])  # type: ignore[union-attr]
        again = open_source(source, chunk_rows=100)  # rechunked before any view is built
        assert _unbuilt(again) == set(ROLES) and again.row_chunks() == (100, 100, 30)
        assert again.sample_weight.chunks[0] == (100, 100, 30)  # type: ignore[union-attr]
        np.testing.assert_array_equal(again.X.compute(), d["X"])

    def test_distinct_values_through_readers_and_views(
        self, tmp_path: Path, rng: np.random.Generator
    ) -> None:
        import dataclasses

        d = _data(rng)
        d["groups"] = (np.arange(N_ROWS) * 7919) % 61  # many values, in no order
        source = self.open(tmp_path, d, chunk_rows=45)
        np.testing.assert_array_equal(source.distinct("groups"), np.unique(d["groups"]))
        assert _unbuilt(source) == set(ROLES)  # read through the reader
        np.testing.assert_array_equal(
            source.select_rows(17, 163).distinct("groups"), np.unique(d["groups"][17:163])
        )
        assert source.groups is not None  # built: the reader is still read
        np.testing.assert_array_equal(source.distinct("groups"), np.unique(d["groups"]))
        part = source.select_rows(30, 200)
        assert part.groups is not None  # a built view of a row selection: the reader's rows 30..199
        np.testing.assert_array_equal(part.distinct("groups"), np.unique(d["groups"][30:200]))
        np.testing.assert_array_equal(
            part.select_rows(5, 50).distinct("groups"), np.unique(d["groups"][35:80])
        )
        other = da.from_array(d["groups"] % 5, chunks=45)
        replaced = dataclasses.replace(source, groups=other)  # a replaced view is what counts
        np.testing.assert_array_equal(replaced.distinct("groups"), np.arange(5))
        with pytest.raises(ValueError, match="no y"):
            open_source(d["X"], y=None, require_y=False).distinct("y")


@pytest.mark.parametrize("block_rows", [1, 64, 100, 10**6])
def test_distinct_values_merges_blocks_read_in_parallel(tmp_path: Path, block_rows: int) -> None:
    """Blocks of whole stored chunks, reduced on threads and merged as their values pile up, give np.unique."""
    from streamridge.sources import distinct_values

    rng = np.random.default_rng(1)
    g = rng.integers(0, 700, 5000)
    g[rng.random(5000) < 0.3] = rng.integers(10**6, 2 * 10**6, 1)[0]  # a value many blocks share
    X = rng.normal(size=(5000, 2))
    write_zarr(tmp_path / "d.zarr", X, g.astype(float), groups=g, chunk_rows=64)
    reader = open_source(str(tmp_path / "d.zarr"), groups="groups").readers["groups"]  # type: ignore[index]
    assert reader is not None
    for a, b in [(0, 5000), (130, 4077), (64, 128), (5, 6)]:
        got = distinct_values(reader, a, b, block_rows)
        np.testing.assert_array_equal(got, np.unique(g[a:b]))
        assert got.dtype == g.dtype
    assert distinct_values(reader, 10, 10, block_rows).shape == (0,)


def _unbuilt(source: Source) -> set[str]:
    """Roles whose dask view was not built yet."""
    return {role for role in ROLES if type(source.__dict__.get(role)).__name__ == "_Lazy"}


class TestZarrV3(SourceTests):
    native_rows = NATIVE
    has_attrs = True
    zarr_format = 3

    def make(self, tmp_path, X, y=None, groups=None, w=None, *, feature_names=None):  # type: ignore[no-untyped-def]
        path = tmp_path / f"store-{uuid.uuid4().hex[:6]}.zarr"
        write_zarr(
            path,
            X,
            y,
            groups,
            w,
            chunk_rows=NATIVE,
            feature_names=feature_names,
            zarr_format=self.zarr_format,
        )
        return str(path), _names(groups, w)


class TestZarrV2(TestZarrV3):
    zarr_format = 2


class TestHDF5(SourceTests):
    native_rows = NATIVE
    has_attrs = True

    def make(self, tmp_path, X, y=None, groups=None, w=None, *, feature_names=None):  # type: ignore[no-untyped-def]
        path = tmp_path / f"data-{uuid.uuid4().hex[:6]}.h5"
        names = {"X": "/features/X", "y": "/targets/y"}
        write_hdf5(path, X, y, groups, w, chunk_rows=NATIVE, feature_names=feature_names, names=names)
        return str(path), {"x": "/features/X", "y": "targets/y", **_names(groups, w)}


class TestZarrSharded(SourceTests):
    """Zarr v3 shards of 4 inner chunks of ``NATIVE`` rows (the pass reads a shard's index, then one byte range)."""

    native_rows = NATIVE

    def make(self, tmp_path, X, y=None, groups=None, w=None, *, feature_names=None):  # type: ignore[no-untyped-def]
        import zarr

        path = tmp_path / f"sharded-{uuid.uuid4().hex[:6]}.zarr"
        root = zarr.open_group(path, mode="w", zarr_format=3)
        for name, a in {"X": X, "y": y, "groups": groups, "sample_weight": w}.items():
            if a is not None:
                a = np.asarray(a)
                chunks = (NATIVE, *a.shape[1:])
                root.create_array(name, data=a, chunks=chunks, shards=(4 * NATIVE, *a.shape[1:]))
        with warnings.catch_warnings():  # "consolidated metadata is not part of the v3 specification"
            warnings.simplefilter("ignore")
            zarr.consolidate_metadata(str(path))  # listed over HTTP too
        return str(path), _names(groups, w)

    # the grid's step is a shard and its read step an inner chunk; dask views split shards at will
    def test_readers_grid_matches_storage(self, tmp_path: Path, rng: np.random.Generator) -> None:
        readers, _ = self.open(tmp_path, _data(rng)).pass_readers()
        for role, reader in readers.items():
            assert reader is not None, role
            grid = reader.grid()
            assert (grid.n_rows, grid.step, grid.read_step) == (N_ROWS, 4 * NATIVE, NATIVE), role

    def test_auto_chunks_aligned_to_storage(self, tmp_path: Path, rng: np.random.Generator) -> None:
        chunks = self.open(tmp_path, _data(rng), memory_budget=_budget_for(50)).row_chunks()
        assert sum(chunks) == N_ROWS and max(chunks) <= 4 * NATIVE

    def test_auto_chunks_smaller_than_storage_chunk(self, tmp_path: Path, rng: np.random.Generator) -> None:
        chunks = self.open(tmp_path, _data(rng), memory_budget=_budget_for(3)).row_chunks()
        assert sum(chunks) == N_ROWS and max(chunks) <= 3
        bounds = set(np.cumsum((0, *chunks)).tolist())
        assert set(range(0, N_ROWS, NATIVE)) <= bounds  # no chunk straddles two inner chunks


class TestHDF5Gzip(TestHDF5):
    """Deflated chunks: the pass inflates them itself (local files and URLs alike)."""

    def make(self, tmp_path, X, y=None, groups=None, w=None, *, feature_names=None):  # type: ignore[no-untyped-def]
        path = tmp_path / f"gzip-{uuid.uuid4().hex[:6]}.h5"
        names = {"X": "/features/X", "y": "/targets/y"}
        write_hdf5(
            path,
            X,
            y,
            groups,
            w,
            chunk_rows=NATIVE,
            feature_names=feature_names,
            names=names,
            compression="gzip",
        )
        return str(path), {"x": "/features/X", "y": "targets/y", **_names(groups, w)}


class TestNpyDirectory(SourceTests):
    writable_reads = False  # memory-mapped, read-only

    def make(self, tmp_path, X, y=None, groups=None, w=None, *, feature_names=None):  # type: ignore[no-untyped-def]
        directory = tmp_path / f"npy-{uuid.uuid4().hex[:6]}"
        directory.mkdir()
        for name, a in {"X": X, "y": y, "groups": groups, "sample_weight": w}.items():
            if a is not None:
                np.save(directory / f"{name}.npy", a)
        return str(directory), _names(groups, w)


class TestNpyFile(TestNpyDirectory):
    def make(self, tmp_path, X, y=None, groups=None, w=None, *, feature_names=None):  # type: ignore[no-untyped-def]
        directory, kw = super().make(tmp_path, X, y, groups, w)
        os.rename(os.path.join(directory, "X.npy"), os.path.join(directory, "features.npy"))
        if w is not None:  # a name that is a path ending in .npy
            kw["sample_weight"] = os.path.join(directory, "sample_weight.npy")
        return os.path.join(directory, "features.npy"), {**kw, "x": "ignored"}


class TestNumpyArrays(SourceTests):
    named = False

    def make(self, tmp_path, X, y=None, groups=None, w=None, *, feature_names=None):  # type: ignore[no-untyped-def]
        return X, {"y": y, "groups": groups, "sample_weight": w}


class TestDaskArrays(SourceTests):
    native_rows = NATIVE
    named = False

    def make(self, tmp_path, X, y=None, groups=None, w=None, *, feature_names=None):  # type: ignore[no-untyped-def]
        def lazy(a: Any) -> Any:
            return None if a is None else da.from_array(a, chunks=(NATIVE, *a.shape[1:]))

        return lazy(X), {"y": lazy(y), "groups": lazy(groups), "sample_weight": lazy(w)}


def _names(groups: Any, w: Any) -> dict[str, Any]:
    return {
        "groups": None if groups is None else "groups",
        "sample_weight": None if w is None else "sample_weight",
    }


# --- the same stores over HTTP --------------------------------------------------------------


class _Served:
    """Mixin: write with the parent's ``make`` under the served root, open by URL."""

    remote = True

    @pytest.fixture(autouse=True)
    def _serve(self, http_root: tuple[Path, str]) -> None:
        self.root, self.base = http_root

    def make(self, tmp_path, X, y=None, groups=None, w=None, *, feature_names=None):  # type: ignore[no-untyped-def]
        path, kw = super().make(self.root, X, y, groups, w, feature_names=feature_names)  # type: ignore[misc]
        return f"{self.base}/{os.path.relpath(path, self.root)}", kw


class TestHTTPZarrV3(_Served, TestZarrV3):
    pass


class TestHTTPZarrV2(_Served, TestZarrV2):
    pass


class TestHTTPHDF5(_Served, TestHDF5):
    pass


class TestHTTPZarrSharded(_Served, TestZarrSharded):
    pass


class TestHTTPHDF5Gzip(_Served, TestHDF5Gzip):
    pass


# --- errors and helpers outside the conformance classes -------------------------------------


def test_unreachable_url_fails_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    """A refused connection is not retried: at most one attempt per metadata file zarr looks for
    (zarr.json, .zarray, .zattrs), a count rather than a time (scripts/bench_fail_fast.py times it)."""
    attempts: collections.Counter[Any] = collections.Counter()
    connect = socket.socket.connect

    def counted(self: socket.socket, address: Any) -> Any:
        attempts[address] += 1
        return connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", counted)
    with pytest.raises(
        SourceError,
        match=r"^cannot reach http://127\.0\.0\.1:1/x\.zarr: .*; check the address and the network$",
    ):
        open_source("http://127.0.0.1:1/x.zarr")
    assert list(attempts) == [("127.0.0.1", 1)]
    assert 1 <= attempts[("127.0.0.1", 1)] <= 3, attempts
    options = remote_options("http://127.0.0.1:1/x.zarr", None)  # a host that never answers: bounded
    assert options["client_kwargs"]["timeout"].sock_connect == HTTP_CONNECT_TIMEOUT == 10.0


def test_missing_url_path(http_root: tuple[Path, str]) -> None:
    with pytest.raises(SourceError, match="no zarr store at http"):
        open_source(f"{http_root[1]}/nothing-here.zarr")


@pytest.mark.parametrize("name", ["missing.zarr", "missing.h5", "missing.npy"])
def test_missing_file(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    with pytest.raises(SourceError, match=f"no such file or directory: {path}"):
        open_source(str(path))


def test_file_url_is_local(tmp_path: Path, rng: np.random.Generator) -> None:
    d = _data(rng)
    write_zarr(tmp_path / "s.zarr", d["X"], d["y"])
    source = open_source(f"file://{tmp_path}/s.zarr")
    np.testing.assert_array_equal(source.X.compute(), d["X"])


def test_arrays_beside_a_store(tmp_path: Path, rng: np.random.Generator) -> None:
    d = _data(rng)
    write_zarr(tmp_path / "s.zarr", d["X"], chunk_rows=NATIVE)
    source = open_source(str(tmp_path / "s.zarr"), y=d["y"], sample_weight=list(d["w"]), chunk_rows=50)
    assert source.y is not None and source.sample_weight is not None
    assert source.y.chunks[0] == source.sample_weight.chunks[0] == source.row_chunks()
    np.testing.assert_array_equal(source.sample_weight.compute(), d["w"])


def test_target_names_and_name_count(tmp_path: Path, rng: np.random.Generator) -> None:
    d = _data(rng, n_targets=2)
    write_zarr(tmp_path / "s.zarr", d["X"], d["y"], target_names=["a", "b"])
    assert open_source(str(tmp_path / "s.zarr")).target_names == ["a", "b"]
    write_hdf5(tmp_path / "s.h5", d["X"], d["y"], feature_names=["only", "two"])
    with pytest.raises(InputError, match=r"feature_names .* has 2 names but the data has 6"):
        open_source(str(tmp_path / "s.h5"))


def test_corrupt_files(tmp_path: Path) -> None:
    (tmp_path / "bad.zarr").mkdir()
    (tmp_path / "bad.zarr" / "zarr.json").write_text("{not json")
    (tmp_path / "bad.h5").write_bytes(b"not hdf5")
    for name in ("bad.zarr", "bad.h5"):
        with pytest.raises(SourceError, match=f"cannot read .*{name}"):
            open_source(str(tmp_path / name))


def test_bare_zarr_array_is_x(tmp_path: Path, rng: np.random.Generator) -> None:
    import zarr

    X = _data(rng)["X"]
    zarr.create_array(tmp_path / "x.zarr", data=X, chunks=(NATIVE, N_FEATURES))
    source = open_source(str(tmp_path / "x.zarr"), require_y=False, memory_budget=_budget_for(50))
    assert source.y is None and source.row_chunks()[0] == 40
    np.testing.assert_array_equal(source.X.compute(), X)
    with pytest.raises(SourceError, match="single array"):
        open_source(str(tmp_path / "x.zarr"))


@pytest.mark.parametrize(
    ("X", "y", "message"),
    [
        (np.zeros((4, 2, 2)), np.zeros(4), "X must be 2-D"),
        (np.zeros(4), np.zeros(4), r"reshape a single feature"),
        (np.zeros((0, 3)), np.zeros(0), "X has no rows"),
        (np.zeros((4, 3)), np.zeros((4, 2, 2)), "y must have shape"),
        (np.zeros((4, 3), dtype=complex), np.zeros(4), "X must be numeric"),
    ],
)
def test_bad_shapes_and_dtypes(X: np.ndarray, y: np.ndarray, message: str) -> None:
    with pytest.raises(InputError, match=message):
        open_source(X, y=y)


@pytest.mark.parametrize("chunk_rows", [0, -5, 2.5])
def test_bad_chunk_rows(chunk_rows: Any) -> None:
    with pytest.raises(ParameterError, match="chunk_rows must be an integer >= 1"):
        open_source(np.zeros((10, 2)), y=np.zeros(10), chunk_rows=chunk_rows)


def test_array_names_need_a_store() -> None:
    with pytest.raises(SourceError, match="pass y as an array"):
        open_source(np.zeros((10, 2)))
    assert open_source(np.zeros((10, 2)), require_y=False).y is None


def test_memmap_input_stays_on_disk(tmp_path: Path, rng: np.random.Generator) -> None:
    X = rng.normal(size=(5000, 20))
    np.save(tmp_path / "X.npy", X)
    source = open_source(np.load(tmp_path / "X.npy", mmap_mode="r"), require_y=False, chunk_rows=1000)
    assert len(pickle.dumps(source.X)) < X.nbytes // 10  # the graph holds the file name, not the data
    np.testing.assert_array_equal(source.X.compute(), X)


def test_unknown_directory_and_remote_npy(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="neither a zarr store nor"):
        open_source(str(tmp_path))
    with pytest.raises(SourceError, match=r"cannot read \.npy over a URL"):
        open_source("http://127.0.0.1:1/X.npy")


def test_write_is_atomic_and_replaces(tmp_path: Path, rng: np.random.Generator) -> None:
    d = _data(rng)
    writers: list[tuple[Callable[..., str], str]] = [(write_zarr, "s.zarr"), (write_hdf5, "s.h5")]
    for writer, name in writers:
        path = tmp_path / name
        writer(path, d["X"], d["y"])
        writer(path, d["X"][:10], d["y"][:10])
        assert open_source(str(path)).n_rows() == 10
        with pytest.raises(SourceError, match="already exists"):
            writer(path, d["X"], d["y"], overwrite=False)
    assert sorted(os.listdir(tmp_path)) == ["s.h5", "s.zarr"]  # no temporaries left behind


def test_write_dask_input(tmp_path: Path, rng: np.random.Generator) -> None:
    """Dask arrays, alone or beside NumPy ones, are written whole."""
    d = _data(rng)
    X = da.from_array(d["X"], chunks=33)
    write_zarr(tmp_path / "a.zarr", X, da.from_array(d["y"], chunks=50))
    write_zarr(tmp_path / "b.zarr", X, d["y"], d["groups"], da.from_array(d["w"], chunks=71), chunk_rows=40)
    write_hdf5(tmp_path / "c.h5", X, d["y"], d["groups"], d["w"], chunk_rows=40)
    for name in ("a.zarr", "b.zarr", "c.h5"):
        names = {"groups": "groups", "sample_weight": "sample_weight"} if name != "a.zarr" else {}
        source = open_source(str(tmp_path / name), **names)
        np.testing.assert_array_equal(source.X.compute(), d["X"])
        np.testing.assert_array_equal(source.y.compute(), d["y"])
        if name != "a.zarr":
            np.testing.assert_array_equal(source.groups.compute(), d["groups"])
            np.testing.assert_array_equal(source.sample_weight.compute(), d["w"])


def test_writers_take_the_same_rows_of_every_array_in_turn(tmp_path: Path, rng: np.random.Generator) -> None:
    """A stored chunk of every array before the next rows: values computed together (``predict --scores``)
    are asked for the same rows in a row."""
    d = _data(rng)
    asked: list[tuple[str, int]] = []

    class Recording:
        def __init__(self, name: str, a: np.ndarray) -> None:
            self.name, self.a, self.shape, self.dtype, self.ndim = name, a, a.shape, a.dtype, a.ndim

        def __getitem__(self, key: slice) -> np.ndarray:
            asked.append((self.name, key.start))
            return self.a[key]

    for writer, name in [(write_zarr, "s.zarr"), (write_hdf5, "s.h5")]:
        asked.clear()
        writer(tmp_path / name, Recording("X", d["X"]), Recording("y", d["y"]), chunk_rows=40)
        assert asked == [(role, s) for s in range(0, N_ROWS, 40) for role in ("X", "y")]
        source = open_source(str(tmp_path / name))
        np.testing.assert_array_equal(source.X.compute(), d["X"])
        np.testing.assert_array_equal(source.y.compute(), d["y"])


def test_processes_scheduler_reads_hdf5(tmp_path: Path, rng: np.random.Generator) -> None:
    d = _data(rng)
    write_hdf5(tmp_path / "s.h5", d["X"], d["y"], chunk_rows=NATIVE)
    source = open_source(str(tmp_path / "s.h5"), chunk_rows=60)
    X = source.X.compute(scheduler="processes", num_workers=2)
    np.testing.assert_array_equal(X, d["X"])


@pytest.mark.parametrize(
    ("n_rows", "native", "target", "expected"),
    [
        (10, 1, 4, (4, 4, 2)),
        (100, 30, 70, (60, 40)),
        (100, 30, 10, (30, 30, 30, 10)),  # a storage chunk within half the budget: whole
        (100, 30, 3, (3,) * 30 + (1,) * 10),  # beyond it: equal parts inside each storage chunk
        (5, 30, 100, (5,)),
        (7, 1, 0, (1,) * 7),
    ],
)
def test_choose_row_chunks(n_rows: int, native: int, target: int, expected: tuple[int, ...]) -> None:
    budget = max(target, 1) * 8 * 8
    chunks = choose_row_chunks(n_rows, 1, native_rows=native, chunk_rows=None, memory_budget=budget)
    assert chunks == expected


# --- zarr Group and h5py File/Group objects as data ----------------------------------------


def test_zarr_group_object_works_like_its_path(tmp_path: Path, rng: np.random.Generator) -> None:
    import zarr

    from streamridge import StreamRidgeCV

    d = _data(rng)
    path = write_zarr(
        tmp_path / "s.zarr", d["X"], d["y"], d["groups"], chunk_rows=NATIVE, feature_names=FEATURES
    )
    by_path = StreamRidgeCV(cv=3).fit(path)
    by_group = StreamRidgeCV(cv=3).fit(zarr.open_group(path, mode="r"))
    np.testing.assert_array_equal(by_group.coef_, by_path.coef_)
    assert list(by_group.feature_names_) == FEATURES
    source = open_source(zarr.open_group(path, mode="r"), groups="groups")
    assert "s.zarr" in source.description and source.groups is not None


def test_h5py_file_and_group_objects_work_like_the_path(tmp_path: Path, rng: np.random.Generator) -> None:
    import h5py

    from streamridge import StreamRidgeCV

    d = _data(rng)
    path = write_hdf5(tmp_path / "s.h5", d["X"], d["y"], names={"X": "/run/X", "y": "/run/y"})
    by_path = StreamRidgeCV(cv=3).fit(open_source(path, x="/run/X", y="/run/y"))
    with h5py.File(path, "r") as f:
        by_file = StreamRidgeCV(cv=3).fit(open_source(f, x="/run/X", y="/run/y"))
        by_group = StreamRidgeCV(cv=3).fit(f["run"])
    np.testing.assert_array_equal(by_file.coef_, by_path.coef_)
    np.testing.assert_array_equal(by_group.coef_, by_path.coef_)
