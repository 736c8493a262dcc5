"""Resumable passes: a pass killed with SIGKILL resumes from its checkpoint to the same statistics.

Also inside the lanes of a stateful feature map: a pass of a few long series is one task, which saves its
own progress (position, the map's states, its statistics accumulator) at the checkpoint interval.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from streamridge.datapass.checkpoint import FILE
from streamridge.datapass.driver import PassReport, accumulate
from streamridge.datapass.spec import PassSpec
from streamridge.errors import CheckpointError, ModelFileError
from streamridge.folds.schemes import FoldScheme
from streamridge.sources import open_source, write_zarr
from streamridge.sources._protocol import ArrayReader
from streamridge.stats.foldstats import load_stats
from tests.scale_utils import assert_stats_close, make_data, make_store, regression_spec

ROOT = Path(__file__).resolve().parents[2]
CHUNK_ROWS = 250
N_CHUNKS = 24

# A pass whose stored-chunk reads sleep 0.1 s, checkpointing after every partition.
SLOW_PASS = """
import sys, time
from streamridge.sources import _zarr, open_source
from streamridge.datapass.driver import accumulate
from tests.scale_utils import regression_spec
read = _zarr.ZarrReader.read
_zarr.ZarrReader.read = lambda self, a, b: (time.sleep(0.1), read(self, a, b))[1]
src = open_source(sys.argv[1], chunk_rows=int(sys.argv[3]))
accumulate(
    src, regression_spec(), scheduler="sync", checkpoint=sys.argv[2], checkpoint_every_s=0,
    partition_rows=int(sys.argv[3]),
)
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
        open_source(store, chunk_rows=CHUNK_ROWS),
        regression_spec(),
        checkpoint=directory,
        report=report,
        partition_rows=CHUNK_ROWS,
    )
    whole = accumulate(
        open_source(store, chunk_rows=CHUNK_ROWS), regression_spec(), partition_rows=CHUNK_ROWS
    )
    assert report.extra["resumed_chunks"] == covered
    assert report.chunks == N_CHUNKS - covered
    assert resumed.n_rows == whole.n_rows == CHUNK_ROWS * N_CHUNKS
    assert_stats_close(resumed, whole)
    for name in ("weight", "count", "mean_x", "mean_y", "sxx", "sxy", "syy"):  # bit for bit
        np.testing.assert_array_equal(getattr(resumed, name), getattr(whole, name), err_msg=name)
    assert "checkpoint" not in resumed.meta


def test_checkpoint_of_other_data_or_options_is_refused(store: str, tmp_path: Path) -> None:
    directory = tmp_path / "ckpt"
    accumulate(
        open_source(store, chunk_rows=CHUNK_ROWS),
        regression_spec(),
        checkpoint=directory,
        partition_rows=CHUNK_ROWS,
    )
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
            accumulate(open_source(path, chunk_rows=rows), spec, checkpoint=directory, partition_rows=rows)
        assert "\n" not in str(info.value), what
        assert (directory / FILE).read_bytes() == saved, f"{what}: the refused pass changed the checkpoint"


def test_same_path_new_content_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "data.zarr"
    X, y, _ = make_data(np.random.default_rng(1), 2000, 4)
    write_zarr(path, X, y, chunk_rows=500)
    accumulate(
        open_source(path, chunk_rows=500), regression_spec(), checkpoint=tmp_path / "ckpt", partition_rows=500
    )
    X2, y2, _ = make_data(np.random.default_rng(2), 2000, 4)
    write_zarr(path, X2, y2, chunk_rows=500)
    with pytest.raises(CheckpointError, match="arrays"):
        accumulate(
            open_source(path, chunk_rows=500),
            regression_spec(),
            checkpoint=tmp_path / "ckpt",
            partition_rows=500,
        )


def test_rows_edited_in_the_middle_are_refused(tmp_path: Path) -> None:
    """A chunk rewritten in place (same shape, same first and last rows) is detected."""
    import zarr

    path = tmp_path / "data.zarr"
    X, y, _ = make_data(np.random.default_rng(1), 2000, 4)
    write_zarr(path, X, y, chunk_rows=500)
    accumulate(
        open_source(path, chunk_rows=500), regression_spec(), checkpoint=tmp_path / "ckpt", partition_rows=500
    )
    time.sleep(0.01)
    arr = zarr.open_array(path / "X", mode="r+")
    arr[700:702] = arr[700:702] * 2 + 1  # rows in the middle only
    with pytest.raises(CheckpointError, match="arrays"):
        accumulate(
            open_source(path, chunk_rows=500),
            regression_spec(),
            checkpoint=tmp_path / "ckpt",
            partition_rows=500,
        )


def test_npy_edited_in_place_is_refused(tmp_path: Path) -> None:
    """A .npy file changed in the middle (size kept) is detected by its modification time and sampled hash."""
    X, y, _ = make_data(np.random.default_rng(1), 3000, 4)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    accumulate(
        open_source(tmp_path, chunk_rows=500),
        regression_spec(),
        checkpoint=tmp_path / "ckpt",
        partition_rows=500,
    )
    mapped = np.load(tmp_path / "X.npy", mmap_mode="r+")
    mapped[1500] += 1
    mapped.flush()
    del mapped
    with pytest.raises(CheckpointError, match="arrays"):
        accumulate(
            open_source(tmp_path, chunk_rows=500),
            regression_spec(),
            checkpoint=tmp_path / "ckpt",
            partition_rows=500,
        )


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


# --- stateful feature maps: a lane group's task saves its progress inside its lanes

SERIES, SERIES_ROWS, LANE_CHUNK = 3, 1200, 300  # three series of four chunks: one lane group, four rounds
STATS = ("weight", "count", "mean_x", "mean_y", "sxx", "sxy", "syy")

# A pass over a few long series (one lane group, one task) on worker processes, saving inside its lanes.
LANE_PASS = """
import sys
from tests.datapass.test_resume import lane_pass
from streamridge.datapass.driver import accumulate
src, spec = lane_pass(sys.argv[1], int(sys.argv[3]), int(sys.argv[4]))
accumulate(src, spec, scheduler="processes", checkpoint=sys.argv[2], checkpoint_every_s=0)
"""


def write_series(directory: Path, series_rows: int, seed: int = 3) -> Path:
    """A directory of .npy files: X (3 columns), y and the ids of ``SERIES`` contiguous series."""
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    M = SERIES * series_rows
    np.save(directory / "X.npy", rng.standard_normal((M, 3)))
    np.save(directory / "y.npy", rng.standard_normal(M))
    np.save(directory / "groups.npy", np.repeat(np.array([7, 2, 5]), series_rows))
    return directory


def lane_pass(
    directory: str, chunk_rows: int, units: int, fmap: Any = None, seed: int = 0
) -> tuple[Any, PassSpec]:
    """The source (chunks of ``chunk_rows``) and the pass options (5 hashed folds, a fitted stateful map)."""
    from streamridge.features import EchoStateNetwork

    src = open_source(directory, groups="groups", chunk_rows=chunk_rows)
    fmap = EchoStateNetwork(units, seed=1, washout=30, leak_rate=0.6) if fmap is None else fmap
    fmap.fit(np.load(Path(directory) / "X.npy"))
    return src, PassSpec(FoldScheme("hash", 5, seed=seed), None, 1, features=fmap)


def _maps() -> list[Any]:
    from streamridge.features import Concat, Delays, EchoStateNetwork

    return [
        EchoStateNetwork(40, seed=1, washout=30, leak_rate=0.6),
        Delays(3),
        Concat([EchoStateNetwork(20, seed=2), Delays(2)]),
    ]


@pytest.fixture(scope="module")
def series(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(write_series(tmp_path_factory.mktemp("series") / "data", SERIES_ROWS))


_READ = ArrayReader.read


def _x_reads(monkeypatch: pytest.MonkeyPatch, fail_after: int | None = None) -> list[tuple[int, int]]:
    """The row ranges read from X.npy from now on; the read after ``fail_after`` of them raises OSError."""
    reads: list[tuple[int, int]] = []
    real = _READ

    def read(self: Any, start: int, stop: int) -> np.ndarray:
        if str(getattr(self, "path", "")).endswith("X.npy"):
            if fail_after is not None and len(reads) >= fail_after:
                raise OSError("disk went away")
            reads.append((start, stop))
        return real(self, start, stop)

    monkeypatch.setattr(ArrayReader, "read", read)
    return reads


def _after(
    position: tuple[int, int], chunk_rows: int, series_rows: int = SERIES_ROWS
) -> list[tuple[int, int]]:
    """The X reads of the lanes from ``position`` (round, row) on: each round's chunk of every series in turn."""
    r, row = position
    out = []
    for k in range(r, series_rows // chunk_rows):
        skip = row if k == r else 0
        out += [
            (s * series_rows + k * chunk_rows + skip, s * series_rows + (k + 1) * chunk_rows)
            for s in range(SERIES)
        ]
    return out


def _lane_position(directory: Path) -> tuple[int, int]:
    with np.load(directory / "lane-0.npz") as z:
        meta = json.loads(z["meta_json"].tobytes().decode())
    return int(meta["position"][0]), int(meta["position"][1])


def _same(a: Any, b: Any) -> None:
    for name in STATS:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


@pytest.mark.parametrize("fmap", _maps(), ids=lambda m: type(m).__name__)
def test_few_series_pass_saves_inside_its_lanes_and_resumes_from_there(
    series: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmap: Any
) -> None:
    """Three series, one lane group (one task): the source fails at the first read of round 2 (the 7th chunk of
    X); the task has saved its progress after rounds 0 and 1, so the resumed pass reads rounds 2 and 3 only
    and its statistics (and the map's state after the last row) equal an uninterrupted pass bit for bit."""
    src, spec = lane_pass(series, LANE_CHUNK, 0, fmap)
    before, after = PassReport(), PassReport()
    whole = accumulate(src, spec, scheduler="sync", report=before)
    ck = tmp_path / "ck"
    _x_reads(monkeypatch, fail_after=2 * SERIES)
    with pytest.raises(Exception, match="disk went away"):
        accumulate(src, spec, scheduler="sync", checkpoint=ck, checkpoint_every_s=0)
    assert sorted(os.listdir(ck)) == ["lane-0.npz"]  # no lane group ended: the task's own progress only
    assert _lane_position(ck) == (2, 0)
    reads = _x_reads(monkeypatch)
    resumed = accumulate(src, spec, scheduler="sync", checkpoint=ck, checkpoint_every_s=0, report=after)
    assert reads == _after((2, 0), LANE_CHUNK)
    _same(resumed, whole)
    for a, b in zip(_leaves(after.extra["features_state"]), _leaves(before.extra["features_state"])):
        np.testing.assert_array_equal(a, b)
    assert sorted(os.listdir(ck)) == [FILE]  # the complete pass's partials; the lane's progress is dropped


def _leaves(state: Any) -> list[Any]:
    if isinstance(state, (tuple, list)):
        return [leaf for s in state for leaf in _leaves(s)]
    return [np.asarray(state) if state is not None else "none"]


def test_resume_inside_a_round_of_slices(
    series: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A round's rows are mapped in slices (here 100 rows): the map fails in slice 3 of round 1 (its 6th call),
    the task saved after slice 2 (row 200 of round 1), and the resumed pass reads each series from that row."""
    import streamridge.datapass.lane_task as lane_task
    from streamridge.features import EchoStateNetwork

    src, spec = lane_pass(series, LANE_CHUNK, 40)
    monkeypatch.setattr(lane_task, "GROUP_BYTES", 100 * 8 * 40 * SERIES)
    whole = accumulate(src, spec, scheduler="sync")
    real, calls = EchoStateNetwork.apply_chunks, [0]

    def failing(self: Any, items: Any, **kw: Any) -> Any:
        calls[0] += 1
        if calls[0] == 6:
            raise RuntimeError("the map stopped")
        return real(self, items, **kw)

    monkeypatch.setattr(EchoStateNetwork, "apply_chunks", failing)
    with pytest.raises(RuntimeError, match="the map stopped"):
        accumulate(src, spec, scheduler="sync", checkpoint=tmp_path / "ck", checkpoint_every_s=0)
    monkeypatch.setattr(EchoStateNetwork, "apply_chunks", real)
    assert _lane_position(tmp_path / "ck") == (1, 200)
    reads = _x_reads(monkeypatch)
    resumed = accumulate(src, spec, scheduler="sync", checkpoint=tmp_path / "ck")
    assert reads == _after((1, 200), LANE_CHUNK)
    _same(resumed, whole)


def test_saving_inside_lanes_changes_no_bit(series: str, tmp_path: Path) -> None:
    """A pass that saves after every slice equals one without a checkpoint, on threads too."""
    src, spec = lane_pass(series, LANE_CHUNK, 40)
    whole = accumulate(src, spec, scheduler="sync")
    saved = accumulate(src, spec, scheduler="threads", checkpoint=tmp_path / "ck", checkpoint_every_s=0)
    _same(saved, whole)


def _kill_when_saved(cmd: list[str], directory: Path) -> None:
    """Run ``cmd`` in a process group of its own; SIGKILL the group once ``directory`` holds a lane's progress."""
    proc = subprocess.Popen(cmd, cwd=ROOT, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 120
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if (directory / "lane-0.npz").exists():
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
                return
            time.sleep(0.01)
        raise AssertionError(
            f"the pass ended before it could be killed: {proc.communicate()[1].decode()[-2000:]}"
        )
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_killed_pass_on_worker_processes_resumes_inside_its_lanes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lane group runs in a worker process, which saves its progress; the pass (and its workers) killed
    with SIGKILL resumes from the saved position: it reads only the rows after it, to the same statistics,
    resumed in this process or on worker processes again."""
    rows, chunk, units = 12_000, 750, 60  # 16 rounds
    data = str(write_series(tmp_path / "data", rows))
    ck = tmp_path / "ck"
    _kill_when_saved([sys.executable, "-c", LANE_PASS, data, str(ck), str(chunk), str(units)], ck)
    assert FILE not in os.listdir(ck)
    position = _lane_position(ck)
    assert position < (rows // chunk, 0)
    shutil.copytree(ck, tmp_path / "ck2")
    src, spec = lane_pass(data, chunk, units)
    whole = accumulate(src, spec, scheduler="sync")
    reads = _x_reads(monkeypatch)
    _same(accumulate(src, spec, scheduler="sync", checkpoint=ck), whole)
    assert reads == _after(position, chunk, rows)
    _same(accumulate(src, spec, scheduler="processes", checkpoint=tmp_path / "ck2"), whole)


def test_lane_progress_of_other_options_or_a_newer_format_is_refused(
    series: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src, spec = lane_pass(series, LANE_CHUNK, 20)
    ck = tmp_path / "ck"
    _x_reads(monkeypatch, fail_after=2 * SERIES)
    with pytest.raises(Exception, match="disk went away"):
        accumulate(src, spec, scheduler="sync", checkpoint=ck, checkpoint_every_s=0)
    _, other = lane_pass(series, LANE_CHUNK, 20, seed=1)
    with pytest.raises(
        CheckpointError, match=r"lane-0\.npz was made from other data or options \(differs in: options\)"
    ):
        accumulate(src, other, scheduler="sync", checkpoint=ck)
    with np.load(ck / "lane-0.npz") as z:
        arrays = {k: np.array(z[k]) for k in z.files}
    meta = json.loads(arrays["meta_json"].tobytes().decode())
    arrays["meta_json"] = np.frombuffer(json.dumps({**meta, "format_version": 2}).encode(), dtype=np.uint8)
    np.savez(ck / "lane-0.npz", **arrays)
    with pytest.raises(CheckpointError, match=r"lane-0\.npz is of format 2, written by a newer streamridge"):
        accumulate(src, spec, scheduler="sync", checkpoint=ck)


def test_checkpoint_of_a_newer_format_is_refused(store: str, tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    accumulate(
        open_source(store, chunk_rows=CHUNK_ROWS), regression_spec(), checkpoint=ck, partition_rows=CHUNK_ROWS
    )
    with np.load(ck / FILE) as z:
        arrays = {k: np.array(z[k]) for k in z.files}
    meta = json.loads(arrays["meta_json"].tobytes().decode())
    meta["checkpoint"]["version"] = 3
    arrays["meta_json"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(ck / FILE, **arrays)
    with pytest.raises(
        CheckpointError, match=r"checkpoint\.npz is of format 3, written by a newer streamridge"
    ):
        accumulate(
            open_source(store, chunk_rows=CHUNK_ROWS),
            regression_spec(),
            checkpoint=ck,
            partition_rows=CHUNK_ROWS,
        )


def test_lane_progress_needs_the_directory_where_the_task_runs(tmp_path: Path) -> None:
    """A worker that does not see the checkpoint directory (not on shared storage) stops the pass in one line."""
    from streamridge.datapass.checkpoint import LaneSaver

    saver = LaneSaver(str(tmp_path / "elsewhere"), 0, 0.0, {})
    with pytest.raises(
        CheckpointError, match="elsewhere does not exist where the pass runs; put it on storage"
    ):
        saver.save(None)
    assert not (tmp_path / "elsewhere").exists()
