"""Plans for heavy statistics (many cells or large N) over few stored chunks: no stub partition, and two lanes
where stored chunks leave a few uneven partitions.  Every plan is a function of the data's shape and chunks only:
the statistics stay bit-identical on every scheduler and equal to one in-memory accumulation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr

from streamridge.datapass import partitions
from streamridge.datapass.driver import PassReport, accumulate
from streamridge.datapass.partitions import Plan, plan_pass
from streamridge.datapass.spec import PassSpec
from streamridge.datapass.stats_kernel import chunk_task
from streamridge.folds.schemes import FoldScheme
from streamridge.sources import open_source
from streamridge.sources._protocol import ArrayReader, RowGrid
from tests.scale_utils import assert_stats_close


class _Chunked(ArrayReader):
    """A declared float32 array of ``step``-row stored chunks; ``overlap_reads`` as zarr (decodes outside the GIL)."""

    def __init__(self, shape: tuple[int, int], step: int, overlap: bool = True) -> None:
        super().__init__()
        self.shape, self.dtype, self.step, self.overlap_reads = shape, np.dtype(np.float32), step, overlap

    def grid(self) -> RowGrid:
        return RowGrid(self.shape[0], step=self.step)


def _plan(rows: int, N: int, chunk: int, n_cells: int, overlap: bool = True) -> Plan:
    readers = {"X": _Chunked((rows, N), chunk, overlap), "y": None, "groups": None, "sample_weight": None}
    return plan_pass(readers, 0, rows, n_cells=n_cells, stats_bytes=8 * n_cells * N * N, memory_budget=2**33)


def _sizes(plan: Plan) -> list[int]:
    return [b - a for a, b in (plan.rows(i) for i in range(len(plan)))]


def test_heavy_statistics_leave_no_stub_partition() -> None:
    """128 MB of float32 at N = 1000, 5 cells, 4 MB chunks: main planned 16,768 + 16,768 + 18 rows (a third
    accumulator of 40 MB, symmetrized and merged, for 18 rows); now two partitions of whole chunks."""
    plan = _plan(33_554, 1000, 1048, 5, overlap=False)
    sizes = _sizes(plan)
    assert len(sizes) == 2 and sum(sizes) == 33_554 and min(sizes) > 15_000, sizes
    assert plan.rows(1)[0] % 1048 == 0 and plan.lanes == 1


def test_uneven_heavy_partitions_become_two_lanes() -> None:
    """3.2 stored chunks of 40 MB at N = 1000 (bench_layouts zarr-40mb, pass 1.64x read + stats): main planned
    4 partitions of 1, 1, 1 and 0.2 chunks; now one partition whose sub-blocks alternate between two lanes."""
    plan = _plan(33_554, 1000, 10_485, 5)
    assert len(plan) == 1 and plan.lanes == 2 and plan.prefetch
    assert plan.read_rows == 10_485
    per_block = -(-plan.read_rows // plan.sub_rows)
    assert per_block % 2 == 0 and plan.sub_rows * per_block - plan.read_rows < per_block  # equal sub-blocks
    serial = _plan(33_554, 1000, 10_485, 5, overlap=False)  # reads that hold the GIL are not serialized
    assert len(serial) == 2 and serial.lanes == 1
    light = _plan(671_088, 50, 209_715, 5)  # light statistics: balanced partitions as before
    assert len(light) >= 2 and light.lanes == 1
    many = _plan(33_554, 1000, 1048, 100)  # 10 x 10 cells: one partition, one accumulator (800 MB)
    assert len(many) == 1 and many.lanes == 1


@pytest.mark.parametrize(
    "read_rows, sub_rows", [(10_485, 4000), (4192, 4000), (262_144, 10_485), (7, 3), (1, 1)]
)
def test_lane_sub_blocks_split_read_blocks_evenly(read_rows: int, sub_rows: int) -> None:
    sub = partitions._lane_sub_rows(read_rows, sub_rows, 2)
    k = -(-read_rows // sub)
    assert sub <= max(sub_rows, 1) and (k % 2 == 0 or read_rows == 1)
    assert k * sub - read_rows < k


def test_two_lanes_of_uneven_chunks_are_bit_identical_on_every_scheduler(tmp_path: Path, monkeypatch) -> None:
    """A pass planned as two lanes over 3.1 stored chunks: the same bits on threads, sync and processes, and the
    statistics of one in-memory accumulation to 1e-12."""
    monkeypatch.setattr(partitions, "PARTITION_BYTES", 2**20)  # small data, the plan of a large one
    monkeypatch.setattr(partitions, "ROWS_PER_CELL", 100)
    monkeypatch.setattr(partitions, "SUB_BLOCK_BYTES", 2**18)
    rng = np.random.default_rng(8)
    rows, N, chunk = 5000, 100, 1600
    X = (rng.standard_normal((rows, N)) + 1e3).astype(np.float32)
    y = X[:, :3].sum(1) + rng.standard_normal(rows)
    root = zarr.open_group(str(tmp_path / "c.zarr"), mode="w")
    root.create_array("X", data=X, chunks=(chunk, N))
    root.create_array("y", data=y, chunks=(chunk,))
    spec = PassSpec(FoldScheme("hash", 5), None, 1)
    src = open_source(str(tmp_path / "c.zarr"))
    readers, _ = src.pass_readers()
    plan = plan_pass(readers, 0, rows, n_cells=5, stats_bytes=8 * 5 * N * N, memory_budget=2**30)
    assert len(plan) == 1 and plan.lanes == 2
    report = PassReport()
    got = accumulate(src, spec, scheduler="threads", report=report, memory_budget=2**30)
    assert report.extra["partitions"] == 1
    assert_stats_close(got, chunk_task(X, y, None, None, 0, spec), rtol=1e-12)
    for sched in ("sync", "processes"):
        again = accumulate(open_source(str(tmp_path / "c.zarr")), spec, scheduler=sched, memory_budget=2**30)
        for name in ("count", "weight", "mean_x", "mean_y", "sxx", "sxy", "syy"):
            assert np.array_equal(getattr(again, name), getattr(got, name)), (sched, name)
