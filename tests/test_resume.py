"""Resumable passes: a pass killed with SIGKILL resumes from its checkpoint to the same statistics."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from streamridge.checkpoint import FILE
from streamridge.errors import CheckpointError, ModelFileError
from streamridge.sources import open_source, write_zarr
from streamridge.stats import load_stats
from streamridge.stream import PassReport, accumulate

from .scale_utils import assert_stats_close, make_data, make_store, regression_spec

ROOT = Path(__file__).resolve().parents[1]
CHUNK_ROWS = 250
N_CHUNKS = 24

# A pass whose stored-chunk reads sleep 0.1 s, checkpointing after every partition.
SLOW_PASS = """
import sys, time
from streamridge.sources import _zarr, open_source
from streamridge.stream import accumulate
from tests.scale_utils import regression_spec
read = _zarr.ZarrReader.read
_zarr.ZarrReader.read = lambda self, a, b: (time.sleep(0.1), read(self, a, b))[1]
src = open_source(sys.argv[1], chunk_rows=int(sys.argv[3]))
accumulate(src, regression_spec(), scheduler="sync", checkpoint=sys.argv[2], checkpoint_every_s=0)
"""


def _chunks_done(path: Path) -> int:
    try:
        return int(load_stats(path).meta["checkpoint"]["partitions_done"])
    except (ModelFileError, KeyError):
        return -1


def _run_and_kill(store: str, directory: Path) -> int:
    """Start the slow pass, SIGKILL it once its checkpoint covers 3 or more (not all) chunks."""
    cmd = [sys.executable, "-c", SLOW_PASS, store, str(directory), str(CHUNK_ROWS)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if (directory / FILE).exists() and 3 <= _chunks_done(directory / FILE) < N_CHUNKS:
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=10)
                return _chunks_done(directory / FILE)
            time.sleep(0.02)
        raise AssertionError(
            f"the pass ended before it could be killed: {proc.communicate()[1].decode()[-2000:]}"
        )
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    path, *_ = make_store(
        tmp_path_factory.mktemp("resume") / "data.zarr",
        np.random.default_rng(5),
        CHUNK_ROWS * N_CHUNKS,
        8,
        chunk_rows=CHUNK_ROWS,
    )
    return path


def test_killed_pass_resumes_to_same_stats(store: str, tmp_path: Path) -> None:
    directory = tmp_path / "ckpt"
    covered = _run_and_kill(store, directory)
    assert 3 <= covered < N_CHUNKS

    report = PassReport()
    resumed = accumulate(
        open_source(store, chunk_rows=CHUNK_ROWS), regression_spec(), checkpoint=directory, report=report
    )
    whole = accumulate(open_source(store, chunk_rows=CHUNK_ROWS), regression_spec())
    assert report.extra["resumed_chunks"] == covered
    assert report.chunks == N_CHUNKS - covered
    assert resumed.n_rows == whole.n_rows == CHUNK_ROWS * N_CHUNKS
    assert_stats_close(resumed, whole)
    for name in ("weight", "count", "mean_x", "mean_y", "sxx", "sxy", "syy"):  # bit for bit
        np.testing.assert_array_equal(getattr(resumed, name), getattr(whole, name), err_msg=name)
    assert "checkpoint" not in resumed.meta


def test_checkpoint_of_other_data_or_options_is_refused(store: str, tmp_path: Path) -> None:
    directory = tmp_path / "ckpt"
    accumulate(open_source(store, chunk_rows=CHUNK_ROWS), regression_spec(), checkpoint=directory)
    assert _chunks_done(directory / FILE) == N_CHUNKS

    other, *_ = make_store(
        tmp_path / "other.zarr", np.random.default_rng(6), CHUNK_ROWS * N_CHUNKS, 8, chunk_rows=500
    )
    saved = (directory / FILE).read_bytes()
    refused = {  # what differs -> the fingerprint entries the message names
        "other store": (other, regression_spec(), CHUNK_ROWS, "arrays, data, partitions"),
        "other seed": (store, regression_spec(seed=1), CHUNK_ROWS, "options"),
        "other folds": (store, regression_spec(n_folds=4), CHUNK_ROWS, "options"),
        "other chunks": (store, regression_spec(), 2 * CHUNK_ROWS, "partitions"),
    }
    for what, (path, spec, rows, differs) in refused.items():
        with pytest.raises(
            CheckpointError, match=rf"other data or options \(differs in: {differs}\)"
        ) as info:
            accumulate(open_source(path, chunk_rows=rows), spec, checkpoint=directory)
        assert "\n" not in str(info.value), what
        assert (directory / FILE).read_bytes() == saved, f"{what}: the refused pass changed the checkpoint"


def test_same_path_new_content_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "data.zarr"
    X, y, _ = make_data(np.random.default_rng(1), 2000, 4)
    write_zarr(path, X, y, chunk_rows=500)
    accumulate(open_source(path, chunk_rows=500), regression_spec(), checkpoint=tmp_path / "ckpt")
    X2, y2, _ = make_data(np.random.default_rng(2), 2000, 4)
    write_zarr(path, X2, y2, chunk_rows=500)
    with pytest.raises(CheckpointError, match="arrays"):
        accumulate(open_source(path, chunk_rows=500), regression_spec(), checkpoint=tmp_path / "ckpt")


def test_rows_edited_in_the_middle_are_refused(tmp_path: Path) -> None:
    """A chunk rewritten in place (same shape, same first and last rows) is detected."""
    import zarr

    path = tmp_path / "data.zarr"
    X, y, _ = make_data(np.random.default_rng(1), 2000, 4)
    write_zarr(path, X, y, chunk_rows=500)
    accumulate(open_source(path, chunk_rows=500), regression_spec(), checkpoint=tmp_path / "ckpt")
    time.sleep(0.01)
    arr = zarr.open_array(path / "X", mode="r+")
    arr[700:702] = arr[700:702] * 2 + 1  # rows in the middle only
    with pytest.raises(CheckpointError, match="arrays"):
        accumulate(open_source(path, chunk_rows=500), regression_spec(), checkpoint=tmp_path / "ckpt")


def test_npy_edited_in_place_is_refused(tmp_path: Path) -> None:
    """A .npy file changed in the middle (size kept) is detected by its modification time and sampled hash."""
    X, y, _ = make_data(np.random.default_rng(1), 3000, 4)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    accumulate(open_source(tmp_path, chunk_rows=500), regression_spec(), checkpoint=tmp_path / "ckpt")
    mapped = np.load(tmp_path / "X.npy", mmap_mode="r+")
    mapped[1500] += 1
    mapped.flush()
    del mapped
    with pytest.raises(CheckpointError, match="arrays"):
        accumulate(open_source(tmp_path, chunk_rows=500), regression_spec(), checkpoint=tmp_path / "ckpt")


def test_numpy_arrays_fingerprint_by_content_not_by_name() -> None:
    """In-memory arrays get random dask names (no hash of every byte per fit); a checkpoint still hashes the rows."""
    from streamridge.sources import DaskReader

    rng = np.random.default_rng(5)
    X, y = rng.standard_normal((1000, 4)), rng.standard_normal(1000)
    a, b = (DaskReader(open_source(X, y=y, chunk_rows=300).X) for _ in range(2))
    assert a.array.name != b.array.name
    assert a.fingerprint() == b.fingerprint()
    X2 = X.copy()
    X2[999, 3] += 1e-9
    assert DaskReader(open_source(X2, y=y, chunk_rows=300).X).fingerprint() != a.fingerprint()


def test_numpy_arrays_are_not_copied_into_the_dask_graph() -> None:
    """dask's from_array copied every in-memory array (160 MB per fit at 100k x 200); the blocks are views now."""
    from streamridge.sources import open_source as open_

    X = np.random.default_rng(6).standard_normal((1000, 3))
    src = open_(X, y=np.zeros(1000), chunk_rows=300)
    blocks = [v for k, v in dict(src.X.dask).items() if isinstance(v, np.ndarray)]
    assert len(blocks) == 4 and all(np.shares_memory(b, X) for b in blocks)
    np.testing.assert_array_equal(src.X.compute(), X)
