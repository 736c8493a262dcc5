"""One partition whose statistics are one running total: the plan of a statistics pass of many targets.

Partitions each hold a copy of the statistics, and their merge tree a few more
(:func:`streamridge.stats.memory.pass_copies`); where the statistics are at least
``SINGLE_TOTAL_BYTES`` (many targets: ``K x N x T``), :func:`single_total_plan` plans
the pass as one partition instead; :func:`plan_statistics` chooses between the two.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamridge.datapass.partitions import PREFETCH_BYTES, Plan, mb_text, plan_pass, read_sizes
from streamridge.errors import InputError
from streamridge.stats.memory import SINGLE_TOTAL_BYTES

# rows per cell of a sub-block of one running total (single_total_plan), at the least: its rank-k updates of
# N x T for every tile ran at 34 GFLOP/s with 32 rows per cell, 41.5 with 100, 43.6 with 256 (N = 1024, T =
# 10,000, 5 cells, one thread), and the read block they are cut from grows with T
SINGLE_TOTAL_CELL_ROWS = 100


def plan_statistics(
    readers: dict[str, Any],
    lo: int,
    hi: int,
    *,
    n_cells: int,
    stats_bytes: int,
    memory_budget: int,
    partition_rows: int | None = None,
    single_total: bool = False,
) -> Plan:
    """:func:`single_total_plan` where ``single_total`` is asked for and the statistics are at least
    ``SINGLE_TOTAL_BYTES``, else :func:`~streamridge.datapass.partitions.plan_pass` (``partition_rows``
    is then used)."""
    if single_total and stats_bytes >= SINGLE_TOTAL_BYTES:
        return single_total_plan(
            readers, lo, hi, n_cells=n_cells, stats_bytes=stats_bytes, memory_budget=memory_budget
        )
    return plan_pass(
        readers,
        lo,
        hi,
        n_cells=n_cells,
        stats_bytes=stats_bytes,
        memory_budget=memory_budget,
        partition_rows=partition_rows,
    )


def single_total_plan(
    readers: dict[str, Any], lo: int, hi: int, *, n_cells: int, stats_bytes: int, memory_budget: int
) -> Plan:
    """One partition of rows ``[lo, hi)`` whose statistics are one running total, shared by cells.

    Partitions each hold a copy of the statistics, and their merge tree a few
    more (:func:`streamridge.stats.memory.pass_copies`); where the statistics
    are large (many targets: ``K x N x T``), the pass instead adds every row
    into one accumulator, in row order, its cores sharing the cells of every
    sub-block (:func:`task_plan`; bit for bit the statistics of one thread).
    The task then holds one copy of the statistics, a tile per thread and a
    read block of X and y (two when reading ahead), sized by the width of both
    arrays: the targets' part of a row is the larger one there.

    Raises
    ------
    InputError
        If the budget cannot hold one copy of the statistics and a row.
    """
    X, y = readers["X"], readers.get("y")
    N = int(np.prod(X.shape[1:], dtype=np.int64))
    T = 0 if y is None else int(np.prod(y.shape[1:], dtype=np.int64))
    row64 = 8 * max(N + T, 1)  # X and y as float64
    if memory_budget < stats_bytes + 4 * row64:
        raise InputError(
            f"the statistics need {mb_text(stats_bytes)} (folds x classes x N x (N + T) x 8 bytes, one running "
            f"total) but the memory budget is {mb_text(memory_budget)}; raise memory_budget to at least "
            f"{mb_text(stats_bytes + 4 * row64 + 2**20)} or use fewer features, targets, folds or classes"
        )
    read_rows, sub_rows = read_sizes(X, row64, memory_budget - stats_bytes, n_cells, what="X and y")
    least = SINGLE_TOTAL_CELL_ROWS * n_cells
    if sub_rows < least:  # rows enough per cell for efficient rank-k updates
        grid = X.grid()
        unit = grid.unit if grid.regular else 1
        read_rows = sub_rows = max(read_rows, -(-least // unit) * unit)
    stored = N * np.dtype(X.dtype).itemsize + (0 if y is None else T * np.dtype(y.dtype).itemsize)
    remote = any(getattr(r, "remote", False) for r in readers.values() if r is not None)
    prefetch = (remote or bool(getattr(X, "overlap_reads", False))) and 2 * read_rows * stored <= min(
        PREFETCH_BYTES, (memory_budget - stats_bytes) // 4
    )
    step = max(1, hi)  # one partition
    return Plan(
        lo,
        hi,
        step,
        None,
        read_rows,
        sub_rows,
        prefetch,
        pieces=False,
        remote=remote,
        share_cells=n_cells,
        single_total=True,
    )
