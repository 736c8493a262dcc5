"""The partition planner: which rows each task of the pass reads, and how.

A partition is a contiguous run of stored chunks of X (tens to hundreds of MB
of input by default).  Its task (:mod:`streamridge.datapass.partition_task`) reads
every stored chunk of X, y, groups and sample_weight in its rows exactly once, in
read blocks of whole stored chunks (at most ``read_bytes`` decoded, or one stored
chunk when a single chunk is larger), and feeds the kernel sub-blocks of ``sub_rows``
rows.  Memory per task: one read block of X, one stored chunk of each 1-D array, one
sub-block and the partition's result, whatever the number of rows or the partition size.
A partition of the last, incomplete wave of tasks (beside an idle core), and
every partition of a pass whose reads are a large share of its work and whose
large stored chunks decode in pieces (few features, few cells:
``Plan.read_bound``), reads its next block while the statistics of the
current one run, when both blocks fit ``PREFETCH_BYTES`` and the reader
decodes outside the GIL (zarr, HDF5 files).  A read block that is one stored
chunk of several sub-blocks, from a reader that can decode it in pieces (zstd,
zlib and gzip zarr chunks), is decoded one sub-block at a time
(:func:`streams_pieces`, :mod:`streamridge.sources.pieces`).

Partition boundaries are stored chunk boundaries of every array (their common
multiple for regular grids), so no stored chunk of y, groups or weights is
decoded by two partitions either; only when the arrays' chunkings have no
common boundary within 16 partition targets does a partition boundary fall
inside a stored chunk of the 1-D arrays (read by both neighbours).

Statistics of at least ``SINGLE_TOTAL_BYTES`` (many targets) are planned as one
partition instead (:func:`~streamridge.datapass.single_total.single_total_plan`): one running total, one copy of the
statistics, and read blocks sized by the rows of X and y together.

Plans are O(1) in memory for regular grids (a step, not a list), so an array
declaring 1e12 rows costs nothing to plan.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from streamridge.errors import InputError

PARTITION_BYTES = 64 * 2**20  # target input bytes of X per partition
READ_BYTES = 32 * 2**20  # float64 bytes of X per read block (whole stored chunks; at least one)
PREFETCH_BYTES = 128 * 2**20  # two read blocks (decoded) up to this size: the next is read while one is used
SUB_BLOCK_BYTES = 16 * 2**20  # float64 bytes of X per kernel call (BLAS-efficient rank-k updates)
ROWS_PER_CELL = 2048  # default partitions hold at least this many rows per cell: a partition's fixed cost
# (zeroing, symmetrizing and merging K x C x N x N statistics) stays a few % of its rank-k updates
BALANCE_BELOW = 16  # passes of fewer partitions get an even number of equal ones (see _balanced)
ALIGN_SLACK = 16  # common boundaries further apart than this many targets are not waited for
# A pass is read-bound where the kernel's ~N^2 flops per row are at most READ_BOUND_FLOPS per byte read
# (N <= 64 x itemsize: N = 256 float32, 512 float64) and its rows are spread over at most READ_BOUND_CELLS
# cells: reading is then 40-70 % of read + statistics (5 x 1 cells at N = 50 and 200; 18-30 % at N = 1000,
# 22-33 % with 10 x 10 cells).  Such a pass reads ahead in every wave of tasks (see task_plan) only where its
# stored chunks decode in pieces; with whole stored chunks a read thread beside every computing task costs
# more than it saves: without it the 20 narrow 5 x 1 cells of zarr (1 MB, 4 MB, sharded, v2 blosc) and HDF5
# at 512 MB take 0.72-1.14x (median 0.90) the time and 19-88 MiB less peak (scripts/bench_layouts.py
# --mb 512 --cells 5x1; docs/benchmarks.md, section 3)
# threads share the cells of a sub-block from this many features: one partition of 10 x 10 (5 x 2) cells over
# 128 MB took 0.62-0.67x (0.57-0.63x) of one thread's time at N = 200-1000 (100-1000), 0.94-1.39x (0.93) at
# N = 50-100 (50), where a cell's run is a few hundred rows of little BLAS work (scripts/bench_cells.py)
SHARE_CELLS_MIN_FEATURES = 100
READ_BOUND_FLOPS = 64
READ_BOUND_CELLS = 16


class LargeChunkWarning(UserWarning):
    """A stored chunk is larger than the read budget (read once, processed in sub-blocks)."""


@dataclass(frozen=True)
class Plan:
    """Partitions of rows ``[lo, hi)`` of the readers, and how a task reads them.

    Regular plans have boundaries ``lo``, the multiples of ``step`` inside
    ``(lo, hi)``, and ``hi``; irregular plans list their boundaries.
    ``prefetch``: a task may read its next block while it uses one (see
    :func:`task_plan`).  ``lanes``: accumulators of a task, each taking every
    ``lanes``-th sub-block on a thread of its own (see :func:`run_partition`).
    ``pieces``: read blocks that are one stored chunk larger than a sub-block
    are decoded in sub-block pieces where the reader can (see
    :func:`streams_pieces`), ahead on a thread of the task where
    ``prefetch``; the statistics do not depend on it.  ``read_bound``:
    reading is a large share of a row's work (few features, few cells, see
    ``READ_BOUND_FLOPS``) and stored chunks decode in pieces, so every task
    (not only those of the last wave) reads ahead where ``prefetch`` allows it.  ``remote``: an array is read
    over the network (a URL), where a read mostly waits: every task reads
    ahead, on every scheduler, and reads a block's 1-D arrays beside X.
    ``share_cells``: the number of cells where threads sharing the cells of
    a sub-block pay (``SHARE_CELLS_MIN_FEATURES``), else 0; ``cell_threads``:
    how many a task uses (set by :func:`task_plan` where cores would idle;
    the statistics are bit-identical for any number).  ``single_total``: one
    partition of all the rows, its statistics one running total that the
    pass's cores share by cells (see :func:`~streamridge.datapass.single_total.single_total_plan`).
    """

    lo: int
    hi: int
    step: int
    bounds: tuple[int, ...] | None
    read_rows: int
    sub_rows: int
    prefetch: bool = False
    lanes: int = 1
    pieces: bool = True
    read_bound: bool = False
    remote: bool = False
    share_cells: int = 0
    cell_threads: int = 1
    single_total: bool = False

    def __len__(self) -> int:
        if self.bounds is not None:
            return len(self.bounds) - 1
        inner = (self.hi - 1) // self.step - self.lo // self.step
        return inner + 1

    def rows(self, i: int) -> tuple[int, int]:
        """Reader rows ``[start, stop)`` of partition ``i``."""
        if self.bounds is not None:
            return self.bounds[i], self.bounds[i + 1]
        k0 = self.lo // self.step + 1
        start = self.lo if i == 0 else (k0 + i - 1) * self.step
        return start, min(self.hi, (k0 + i) * self.step)

    def describe(self) -> dict[str, Any]:
        """JSON description (checkpoint fingerprints): the partition boundaries."""
        if self.bounds is not None:
            import hashlib

            return {"bounds": hashlib.sha256(np.asarray(self.bounds, np.int64).tobytes()).hexdigest()[:16]}
        return {"lo": self.lo, "hi": self.hi, "step": self.step}


def plan_pass(
    readers: dict[str, Any],
    lo: int,
    hi: int,
    *,
    n_cells: int,
    stats_bytes: int,
    memory_budget: int,
    partition_rows: int | None = None,
    pieces: bool = True,
) -> Plan:
    """Plan the partitions of reader rows ``[lo, hi)``.

    Parameters
    ----------
    readers : dict of role to ArrayReader or None
    lo, hi : int
    n_cells : int
        Folds x classes (sub-blocks hold enough rows per cell for BLAS).
    stats_bytes : int
        Bytes of one partition's statistics.
    memory_budget : int
        Bytes a task may use: statistics (4 copies while merging; one as one running total) + a read block.
    partition_rows : int or None
        Rows per partition asked for (rounded to whole stored chunks); None
        chooses about ``PARTITION_BYTES`` of X, and at least ``ROWS_PER_CELL``
        rows per cell.
    pieces : bool
        Whether large stored chunks may be decoded in pieces (``Plan.pieces``;
        False plans as before pieces existed, e.g. for a read baseline).

    Raises
    ------
    InputError
        If the budget cannot hold the statistics themselves.
    """
    X = readers["X"]
    N = int(np.prod(X.shape[1:], dtype=np.int64))
    row64 = 8 * max(N, 1)
    need = 4 * stats_bytes
    if memory_budget < need + 4 * row64:
        raise InputError(
            f"the statistics need {mb_text(need)} per task (folds x classes x N x N x 8 bytes, 4 copies while "
            f"merging) but the memory budget is {mb_text(memory_budget)}; raise memory_budget to at least "
            f"{mb_text(need + 2**20)} or use fewer features, folds or classes"
        )
    read_rows, sub_rows = read_sizes(X, row64, memory_budget - need, n_cells)
    block = read_rows * N * np.dtype(X.dtype).itemsize  # decoded bytes of one read block
    remote = any(getattr(r, "remote", False) for r in readers.values() if r is not None)
    prefetch = (remote or bool(getattr(X, "overlap_reads", False))) and 2 * block <= min(
        PREFETCH_BYTES, (memory_budget - need) // 4
    )
    grids = {role: r.grid() for role, r in readers.items() if r is not None}
    target = partition_rows or max(
        PARTITION_BYTES // max(1, N * np.dtype(X.dtype).itemsize), ROWS_PER_CELL * n_cells, 1
    )
    row_bytes = N * np.dtype(X.dtype).itemsize
    narrow = N <= READ_BOUND_FLOPS * np.dtype(X.dtype).itemsize and n_cells <= READ_BOUND_CELLS
    if all(g.regular for g in grids.values()):
        common, step = _regular_step(grids, target)
        balanced = None
        if partition_rows is None:  # sizes asked for are kept
            step, balanced = _balanced(lo, hi, common, step, row_bytes, stats_bytes)
        plan = Plan(lo, hi, step, balanced, read_rows, sub_rows, prefetch, remote=remote)
    else:
        bounds = _irregular_bounds(grids, lo, hi, target)
        plan = Plan(lo, hi, 1, bounds, read_rows, sub_rows, prefetch, remote=remote)
    if partition_rows is None and len(plan) == 1 and _worth_two_lanes(hi - lo, row_bytes, stats_bytes):
        plan = dataclasses.replace(plan, lanes=2)
    elif partition_rows is None and _lanes_instead(plan, row_bytes, stats_bytes):
        plan = dataclasses.replace(plan, step=max(1, hi), bounds=None, lanes=2)
    if plan.lanes > 1:
        plan = dataclasses.replace(plan, sub_rows=_lane_sub_rows(plan.read_rows, plan.sub_rows, plan.lanes))
    if N >= SHARE_CELLS_MIN_FEATURES and n_cells >= 4:
        plan = dataclasses.replace(plan, share_cells=n_cells)
    if not pieces or (streams_pieces(X, plan) and not pieces_pay(X, plan, stats_bytes)):
        return dataclasses.replace(plan, pieces=False)
    if not streams_pieces(
        X, plan
    ):  # whole stored chunks: a read thread in every wave only competes (READ_BOUND_FLOPS)
        return plan
    if not plan.prefetch and getattr(X, "overlap_reads", False) and ahead_slots(X, plan):
        plan = dataclasses.replace(plan, prefetch=True)  # reading ahead holds a few sub-blocks, not a block
    return dataclasses.replace(plan, read_bound=narrow)


def _worth_two_lanes(rows: int, row_bytes: int, stats_bytes: int) -> bool:
    """A lone partition (one huge stored chunk, or stored chunks as large as the data) of enough rows.

    Its sub-blocks then alternate between two accumulators on two threads
    (:func:`run_partition`), so the statistics of a pass that cannot be cut
    into partitions still use two cores; a pure function of the plan, so the
    result does not depend on the scheduler.
    """
    data = rows * row_bytes
    return data >= 2 * SUB_BLOCK_BYTES and _light_stats(stats_bytes, data // 2)


def _lanes_instead(plan: Plan, row_bytes: int, stats_bytes: int) -> bool:
    """Whether a few uneven partitions with heavy statistics run better as one partition of two lanes.

    Stored chunks as large as a partition leave few partitions of unequal
    size (3.2 stored chunks of 40 MB: 4 partitions, the last a fifth of the
    others; 2 workers then take 2 chunk-times for 3.2 chunks of work), and
    with statistics too heavy for another partition (:func:`_light_stats`)
    the planner cannot even them out.  One partition whose sub-blocks
    alternate between two accumulators splits the work at sub-block
    granularity with no more accumulators than before (two lanes against at
    least two partitions); its reads are serial, so only for readers that
    decode ahead outside the GIL (``plan.prefetch``).  A pure function of
    the plan: statistics stay bit-identical across schedulers.
    """
    n = len(plan)
    if not plan.prefetch or not 2 <= n < BALANCE_BELOW:
        return False
    total = plan.hi - plan.lo
    if _light_stats(stats_bytes, total * row_bytes // (n + n % 2)):
        return False  # light statistics: _balanced evens the partitions out
    sizes = [b - a for a, b in (plan.rows(i) for i in range(n))]
    return n % 2 == 1 or (max(sizes) - min(sizes)) * 8 * n > total


def _lane_sub_rows(read_rows: int, sub_rows: int, lanes: int) -> int:
    """Sub-block rows that cut a read block into a multiple of ``lanes`` about equal sub-blocks.

    The lanes of a task meet after every read block, so a block of 3
    sub-blocks on 2 lanes keeps one lane idle for a third of it.
    """
    k = lanes * -(-read_rows // (lanes * max(1, sub_rows)))
    return max(1, -(-read_rows // k))


def _light_stats(stats_bytes: int, rows_bytes: int) -> bool:
    """Whether one more accumulator (partition or lane) is cheap: its statistics under a quarter of its rows."""
    return 4 * stats_bytes <= rows_bytes


def task_plan(plan: Plan, i: int, first: int, n: int, n_workers: int, *, local: bool = False) -> Plan:
    """The plan partition ``i`` of ``first .. n - 1`` runs with: prefetching and cell threads where cores would idle.

    With ``local`` (the workers are this machine's cores: the threads or
    processes scheduler, or a ``local:N`` cluster), a wave of fewer tasks than workers (one partition
    of heavy statistics, or the last wave) gives each of its tasks the idle
    cores as ``cell_threads``, which share the cells of every sub-block
    where ``plan.share_cells`` holds at least two per thread, so that one
    partition of many cells uses every core (scripts/bench_cells.py).  Where
    all the partitions left make one wave, each takes the cores in proportion
    to its rows (at least one), so that a large partition beside a small one
    leaves no core idle once the small one is done (a 400 MB stored chunk
    beside one of 112 MB: scripts/bench_layouts.py --mb 512 --layouts
    zarr-400mb).  The workers of a cluster elsewhere keep one thread each.

    Partitions of the last, incomplete wave of ``n_workers`` tasks run beside
    idle workers, so their reads may overlap their statistics (a read thread
    per task).  Elsewhere every core already computes and a read thread only
    competes, unless the pass is ``read_bound``: then a task waiting on the
    decode of its next pieces leaves its core idle, and decoding ahead keeps it
    busy.  Reading ahead in every wave does not pay elsewhere: with
    N = 1000 x 10 x 10 cells it costs up to 25 %, with N = 50 x 10 x 10 cells
    it gains nothing and holds up to 80 MiB more, and with whole stored chunks
    of a few MB it makes narrow passes about 10 % slower at 512 MB, median over
    the cells (scripts/bench_layouts.py).  One worker (the ``sync`` scheduler) never reads ahead,
    unless the data are ``remote`` (a read waits on the network, not a core).
    The statistics do not depend on it.
    """
    last = i >= n - (n - first) % max(1, n_workers)
    alone = plan.remote or (plan.read_bound and n_workers > 1) or last
    out = dataclasses.replace(plan, prefetch=False) if plan.prefetch and not alone else plan
    running = (n - first) % n_workers if last and n_workers > 1 else n_workers  # tasks of this task's wave
    threads = n_workers // max(1, running)
    if (
        1 < n - first <= n_workers
    ):  # one wave: the cores by rows (stored chunks of 400 MB and 112 MB: 2 and 1)
        rows = [b - a for a, b in map(plan.rows, range(first, n))]
        threads = max(1, min(n_workers, round(n_workers * rows[i - first] / max(1, sum(rows)))))
    if local and plan.single_total and threads > 1 and plan.share_cells >= 2:
        return dataclasses.replace(out, cell_threads=min(threads, plan.share_cells))
    if local and plan.lanes == 1 and threads > 1 and plan.share_cells >= 2 * threads:
        out = dataclasses.replace(out, cell_threads=threads)
    return out


def read_sizes(X: Any, row64: int, budget: int, n_cells: int, *, what: str = "X") -> tuple[int, int]:
    """Rows of X per read (whole stored read units) and per kernel call.

    A read block is at most ``READ_BYTES`` (as float64) and a quarter of the
    budget left after the statistics; a single stored chunk larger than that
    is read whole (each stored chunk is decoded once), with a warning when it
    exceeds the budget itself.
    """
    grid = X.grid()
    read_budget = max(row64, budget // 4)  # the read block, its float64 sub-block copies and the 1-D chunks
    rows = max(1, min(read_budget, READ_BYTES) // row64)
    unit = grid.unit if grid.regular else 1
    chunk = grid.read_step or grid.max_chunk_rows()
    if chunk * row64 > read_budget and chunk > 1:
        warnings.warn(
            f"stored chunks of {what} hold {chunk} rows ({mb_text(chunk * row64)} as float64), more than the read "
            f"budget of {mb_text(read_budget)}; each is read once and processed in sub-blocks",
            LargeChunkWarning,
            stacklevel=4,
        )
    read_rows = max(unit, (rows // unit) * unit)
    sub = max(SUB_BLOCK_BYTES // row64, 64 * n_cells, 4 * (row64 // 8), 256)
    sub = min(sub, max(1, read_budget // row64), read_rows)
    return int(read_rows), int(max(1, sub))


def _regular_step(grids: dict[str, Any], target: int) -> tuple[int, int]:
    """The common stored-chunk step of the arrays and a partition step of about ``target`` rows."""
    x = grids["X"].step
    common = x
    for g in grids.values():
        common = common * g.step // math.gcd(common, g.step)
    if common > ALIGN_SLACK * max(target, x):
        common = x  # no common boundary within reach: 1-D arrays' chunks at the edges are read twice
    return common, max(common, (target // common) * common)


def _balanced(
    lo: int, hi: int, common: int, step: int, row_bytes: int, stats_bytes: int
) -> tuple[int, tuple[int, ...] | None]:
    """``step`` evened out: partitions of about equal size, an even number of them when there are few.

    A pass of 3 partitions on 2 workers leaves one idle for a third of it, and
    a small last partition does the same; with few partitions (under
    ``BALANCE_BELOW``) their number is rounded to the nearest integer, made
    even, and their sizes made equal in whole common stored chunks (listed
    boundaries, so the last partition takes the rows past the last whole
    chunk: 32 chunks and 16 rows were 9 + 9 + 9 + 5 chunks, now 16 + 16).
    A pure function of the data's shape and chunks, never of the worker
    count: statistics stay bit-identical across schedulers.  Not when a
    partition's statistics are more than a quarter of its input (a second
    partition then costs more than it saves: 10 x 10 cells at N = 1000 split
    in two peaked at 3.2 GiB instead of 1.1): then no more partitions than
    the target gives, but no stub either (16,768 + 16,768 + 18 rows).

    Returns
    -------
    step : int
    bounds : tuple of int or None
        Listed partition boundaries (``Plan.bounds``), or None for ``step``'s.
    """
    n = len(Plan(lo, hi, step, None, 1, 1))
    if n >= BALANCE_BELOW or (n == 1 and (hi - lo) * row_bytes < 2 * SUB_BLOCK_BYTES):
        return step, None
    n = max(1, round((hi - lo) / step))
    if _light_stats(stats_bytes, (hi - lo) * row_bytes // (n + n % 2)):
        bounds = _even_bounds(lo, hi, common, n + n % 2)
        if len(bounds) % 2 == 0 and len(bounds) > 3:  # an odd number of partitions (too few stored chunks)
            bounds = _even_bounds(lo, hi, common, len(bounds) - 2)
        return (step, None) if len(bounds) < 3 else (1, bounds)
    # one more partition would cost more memory and merging than it saves (10 x 10 cells at N = 1000):
    # no more of them, but no stub either (16,768 + 16,768 + 18 rows)
    if n == 1 == len(Plan(lo, hi, step, None, 1, 1)):
        return step, None
    even = -(-(hi - lo) // n)
    step2 = max(common, -(-even // common) * common)
    return (step2 if len(Plan(lo, hi, step2, None, 1, 1)) >= min(2, n) else step), None


def _even_bounds(lo: int, hi: int, common: int, n: int) -> tuple[int, ...]:
    """Boundaries of ``n`` partitions of ``[lo, hi)`` as equal as multiples of ``common`` allow (fewer if too few)."""
    cuts = [lo]
    for k in range(1, n):
        c = round((lo + k * (hi - lo) / n) / common) * common
        if cuts[-1] < c < hi:
            cuts.append(c)
    return (*cuts, hi)


def _irregular_bounds(grids: dict[str, Any], lo: int, hi: int, target: int) -> tuple[int, ...]:
    """Partition boundaries at common stored boundaries, about ``target`` rows apart."""
    sets = [_boundaries(g, lo, hi) for g in grids.values()]
    common = sets[0]
    for s in sets[1:]:
        common = np.intersect1d(common, s)
    x = sets[0] if len(common) <= 2 else common
    out = [lo]
    while out[-1] < hi:
        i = int(np.searchsorted(x, out[-1] + target, side="left"))
        out.append(int(x[i]) if i < len(x) else hi)
    return tuple(out)


def _boundaries(grid: Any, lo: int, hi: int) -> np.ndarray:
    if grid.bounds is not None:
        b = np.asarray(grid.bounds, dtype=np.int64)
    else:
        b = np.arange(0, grid.n_rows + 1, grid.step, dtype=np.int64)
    return np.unique(np.concatenate([[lo, hi], b[(b > lo) & (b < hi)]]))


def mb_text(n: float) -> str:
    return f"{n / 2**20:.1f} MiB" if n < 2**30 else f"{n / 2**30:.2f} GiB"


def streams_pieces(X: Any, plan: Plan) -> bool:
    """Whether read blocks are single stored chunks of several sub-blocks that ``X`` decodes in pieces."""
    codec = getattr(X, "stream_codec", None)
    grid = X.grid()
    if not plan.pieces or codec is None or codec() is None or not grid.regular or grid.read_step:
        return False
    return plan.read_rows == grid.step and grid.step > plan.sub_rows


def pieces_pay(X: Any, plan: Plan, stats_bytes: int) -> bool:
    """Whether decoding in pieces lowers the peak, or decodes ahead for at most ``PREFETCH_BYTES`` more.

    In pieces the task holds the compressed chunk (up to a decoded chunk's
    size; of a local file, one piece of it), the pieces alive and the statistics, which fill as the rows come;
    decoded whole, the compressed and the decoded chunk while decoding, then
    the decoded chunk beside the statistics.  Pieces lower the peak when the
    statistics and the pieces alive are smaller than a decoded chunk: 5 x 1
    cells over 400 MB chunks peaked 250-340 MiB lower.  Where they are not
    (10 x 10 cells at N = 1000: 800 MB of statistics beside a 400 MB chunk
    peaked 44-75 MiB higher in pieces), pieces decoded ahead
    (:func:`ahead_slots`) still pay: the chunk's decode overlaps the
    statistics instead of preceding them, for at most the pieces alive more
    than a whole decode, which the read-ahead budget bounds.
    """
    lanes = max(1, plan.lanes)
    slots = ahead_slots(X, plan) if getattr(X, "overlap_reads", False) else 0
    rows = (slots or lanes) * plan.sub_rows
    return slots > 0 or stats_bytes + rows * _row_bytes(X) < X.grid().step * _row_bytes(X)


def ahead_slots(X: Any, plan: Plan) -> int:
    """Pieces alive at once when decoding ahead (0: no room, decoded in the task's thread).

    Deep where ``PIECE_DEPTH`` queued pieces, the one decoding and the
    lanes' pieces in use fit one decoded stored chunk and ``PREFETCH_BYTES``;
    else lean, one piece ahead of the lanes' (10 x 10 cells at N = 1000:
    51 MB float64 sub-blocks, 2 alive rather than 5); else none (pieces
    larger than half the read-ahead budget).
    """
    from streamridge.sources.pieces import PIECE_DEPTH

    lanes = max(1, plan.lanes)
    for slots in (PIECE_DEPTH + 1 + lanes, lanes + 1):
        rows = slots * plan.sub_rows
        if rows <= X.grid().step and rows * _row_bytes(X) <= PREFETCH_BYTES:
            return slots
    return 0


def _row_bytes(X: Any) -> int:
    """Bytes of one row of ``X`` as stored (its dtype)."""
    return int(np.prod(X.shape[1:], dtype=np.int64)) * np.dtype(X.dtype).itemsize
