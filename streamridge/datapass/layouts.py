"""The two layouts of a pass: partitions of stored chunks, or lanes of series of a stateful feature map.

A layout (:class:`Partitions`, :class:`Lanes`) is planned over a source for a kernel
(:func:`plan_tasks`) into the tasks the driver runs (:func:`streamridge.datapass.driver.run_pass`):
``len(tasks)`` tasks in row order, task ``i`` the call ``tasks.function(*tasks.args(i, ...))``
on a worker, ``tasks.where(i)`` its rows (errors), ``tasks.size(i)`` its row count
(progress) and ``tasks.describe()`` the layout (checkpoint fingerprints).
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from typing import Any

from streamridge.datapass import partition_task
from streamridge.datapass.partitions import (
    SUB_BLOCK_BYTES,
    LargeChunkWarning,
    streams_pieces,
    task_plan,
)
from streamridge.datapass.single_total import plan_statistics
from streamridge.sources import ROLES


@dataclass(frozen=True)
class Partitions:
    """Partitions of whole stored chunks of the source, each one task reading its rows once.

    Parameters
    ----------
    rows : int or None
        Rows per partition asked for (rounded to whole stored chunks); None: from the
        data and the memory budget (:func:`streamridge.datapass.partitions.plan_pass`).
    memory_budget : int or None
        Bytes one task may use (default :func:`default_memory_budget`).
    features : FeatureMap or None
        A fitted stateless map applied to every block before the kernel
        (:class:`~streamridge.datapass.mapped.MappedKernel`).
    skip_nonfinite : bool
        With ``features``: rows with NaN/inf in X get NaN features instead of an error.
    whole_reads : bool
        The kernel takes whole read blocks, not sub-blocks, where they are not decoded
        in pieces: fewer, longer calls, for a kernel whose fixed cost per call outweighs
        its work per row (the metric pass, predict).
    warn : bool
        Warn of stored chunks larger than the read budget
        (:class:`~streamridge.datapass.partitions.LargeChunkWarning`).
    single_total : bool
        Statistics of at least ``SINGLE_TOTAL_BYTES`` are one running total of one partition
        (:func:`~streamridge.datapass.single_total.single_total_plan`; ``rows`` is then not used).
    """

    rows: int | None = None
    memory_budget: int | None = None
    features: Any = None
    skip_nonfinite: bool = False
    whole_reads: bool = False
    warn: bool = True
    single_total: bool = False


@dataclass(frozen=True)
class Lanes:
    """Lanes of consecutive chunks of the source's series, the map's state carried (:mod:`streamridge.datapass.plan`).

    Parameters
    ----------
    spec : PassSpec
        With a fitted stateful ``features`` map, its state at the first row and the folds.
    statistics : bool
        Refuse, before the pass, a washout that would leave every row out (the statistics pass).
    """

    spec: Any
    statistics: bool = False


def pass_layout(
    spec: Any,
    *,
    partition_rows: int | None = None,
    memory_budget: int | None = None,
    whole_reads: bool = False,
    warn: bool = True,
    statistics: bool = False,
    single_total: bool = False,
) -> Partitions | Lanes:
    """The layout of a pass with ``spec``: :class:`Lanes` for a stateful map, else :class:`Partitions`.

    ``partition_rows``, ``memory_budget``, ``whole_reads``, ``warn`` and ``single_total`` are the
    partitions' options (the lanes are cut at the source's chunks); ``statistics`` the lanes' (the
    statistics pass).
    """
    if spec.features is not None and spec.features.stateful:
        return Lanes(spec, statistics=statistics)
    return Partitions(
        partition_rows,
        memory_budget,
        spec.features,
        spec.skip_nonfinite,
        whole_reads=whole_reads,
        warn=warn,
        single_total=single_total,
    )


def plan_tasks(layout: Any, source: Any, kernel: Any, row_offset: int = 0) -> Any:
    """The tasks of ``layout`` (default :class:`Partitions`) over ``source`` for ``kernel``; tasks planned
    already (:class:`PartitionTasks`, :class:`LaneTasks`) are returned as they are."""
    if isinstance(layout, (PartitionTasks, LaneTasks)):
        return layout
    if isinstance(layout, Lanes):
        return LaneTasks(source, kernel, layout, row_offset)
    return PartitionTasks(source, kernel, layout or Partitions(), row_offset)


class PartitionTasks:
    """The partitions of a pass: task ``i`` reads reader rows ``plan.rows(i)`` (:func:`~streamridge.datapass.partition_task.run_partition`)."""

    #: tasks save no progress of their own into a checkpoint
    saves_inside = False

    def __init__(self, source: Any, kernel: Any, layout: Partitions, row_offset: int) -> None:
        if (
            layout.features is not None
        ):  # (the feature maps are imported with a map only: they need scikit-learn)
            from streamridge.datapass.mapped import MappedKernel

            kernel = MappedKernel(kernel, layout.features, skip_nonfinite=layout.skip_nonfinite)
        self.source, self.kernel, self.row_offset = source, kernel, row_offset
        with warnings.catch_warnings():
            if not layout.warn:
                warnings.simplefilter("ignore", LargeChunkWarning)
            self.readers, self.lo, self.hi, plan = plan_source(
                source,
                n_cells=kernel.n_cells,
                stats_bytes=kernel.result_bytes(),
                width=kernel.width,
                memory_budget=layout.memory_budget,
                partition_rows=layout.rows,
                single_total=layout.single_total,
            )
        if layout.whole_reads and not streams_pieces(self.readers["X"], plan):
            plan = dataclasses.replace(
                plan, sub_rows=plan.read_rows
            )  # fewer, longer runs of each cell's rows
        self.plan = plan
        self.function = partition_task.run_partition  # looked up when planned: a replaced one is used

    def __len__(self) -> int:
        return len(self.plan)

    @property
    def total_rows(self) -> int:
        """Rows of the pass."""
        return self.hi - self.lo

    def size(self, i: int) -> int:
        """Rows of task ``i``."""
        a, b = self.plan.rows(i)
        return b - a

    def rows_before(self, i: int) -> int:
        """Rows of the tasks before task ``i``."""
        return (self.plan.rows(i)[0] if i < len(self) else self.hi) - self.lo

    def where(self, i: int) -> tuple[int, int, int]:
        """``(first global row, rows, partition index)`` of task ``i`` (its errors name them)."""
        a, b = self.plan.rows(i)
        return self.row_offset + a - self.lo, b - a, i

    def args(
        self, i: int, *, first: int, sched: Any, saver: Any = None, progress: Any = None
    ) -> tuple[Any, ...]:
        """The arguments of task ``i`` of ``first ..`` on ``sched``."""
        a, b = self.plan.rows(i)
        plan = task_plan(self.plan, i, first, len(self), sched.n_workers, local=sched.local)
        return _windowed(self.readers, a, b), a, b, plan, self.kernel, self.row_offset + (a - self.lo)

    def describe(self) -> dict[str, Any]:
        """The partition boundaries (checkpoint fingerprints)."""
        return dict(self.plan.describe())

    def report(self, done: int) -> dict[str, Any]:
        """What a pass resumed after ``done`` tasks read, for its report."""
        n = len(self)
        return {
            "rows": self.total_rows - self.rows_before(done),
            "chunks": n - done,
            "resumed_chunks": done,
            "partitions": n,
            "read_rows": self.plan.read_rows,
            "sub_rows": self.plan.sub_rows,
        }


class LaneTasks:
    """The lanes (and lane groups) of a stateful map: task ``i`` runs ``lane_task(lane, spec, kernel)``.

    With candidate maps and few lanes, each lane is one task per subset of the candidates
    (:func:`_candidate_parts`); the tasks of a lane are consecutive.
    """

    #: a lane group's task saves its progress inside its lanes into a checkpoint
    saves_inside = True

    def __init__(self, source: Any, kernel: Any, layout: Lanes, row_offset: int) -> None:
        from streamridge.datapass import lane_task
        from streamridge.datapass.plan import lane_layout

        self.source, self.kernel, self.spec = source, kernel, layout.spec
        chunks = (
            list(source.row_chunks())
            if hasattr(source, "row_chunks")
            else [int(c) for c in source.X.chunks[0]]
        )
        self.chunks, self.starts, calls = lane_layout(
            source, layout.spec, chunks, row_offset, statistics=layout.statistics
        )
        lanes = [lane for _, (lane, _s) in calls]
        self.parts = _candidate_parts(layout.spec, kernel, len(lanes))
        self.lanes = [lane for lane in lanes for _ in self.parts]  # task i: lane i // P, part i % P
        self.rows = [
            rows * (p + 1) // len(self.parts) - rows * p // len(self.parts)
            for rows in (int(sum(self.chunks[lane.first : lane.stop])) for lane in lanes)
            for p in range(len(self.parts))
        ]
        self.readers = _readers_of(source)[0]
        self.function = lane_task.lane_task  # looked up when planned: a replaced one is used

    def __len__(self) -> int:
        return len(self.lanes)

    @property
    def total_rows(self) -> int:
        """Rows of the pass."""
        return int(sum(self.chunks))

    def size(self, i: int) -> int:
        """Rows of task ``i``."""
        return self.rows[i]

    def rows_before(self, i: int) -> int:
        """Rows of the tasks before task ``i``."""
        return int(sum(self.rows[:i]))

    def where(self, i: int) -> tuple[int, int, int]:
        """``(first global row, rows, first chunk index)`` of task ``i`` (its errors name them)."""
        first = self.lanes[i].first
        return int(self.starts[first]), self.rows[i], first

    def args(
        self, i: int, *, first: int, sched: Any, saver: Any = None, progress: Any = None
    ) -> tuple[Any, ...]:
        """The arguments of task ``i``: a lane group carries its checkpoint's ``saver`` and saved ``progress``."""
        from streamridge.datapass.plan import LaneGroup

        lane = self.lanes[i]
        if saver is not None and isinstance(lane, LaneGroup):
            lane = LaneGroup(lane.lanes, lane.group_values, progress=progress, saver=saver)
        spec, kernel = self.parts[i % len(self.parts)]
        return lane, spec or self.spec, kernel or self.kernel

    def describe(self) -> dict[str, Any]:
        """The chunks and the lanes (checkpoint fingerprints)."""
        return {"row_chunks": self.chunks, "lanes": [[lane.first, lane.stop] for lane in self.lanes]}

    def report(self, done: int) -> dict[str, Any]:
        """What a pass resumed after ``done`` tasks read, for its report (``resumed_chunks``: chunks covered)."""
        first = self.lanes[done].first if done < len(self) else len(self.chunks)
        return {
            "rows": int(sum(self.chunks[first:])),
            "chunks": len(self.chunks) - first,
            "resumed_chunks": first,
            "partitions": len(self),
        }


def _candidate_parts(spec: Any, kernel: Any, n_lanes: int) -> list[tuple[Any, Any]]:
    """``(spec, kernel)`` of each part of the candidate maps a lane's tasks run (``(None, None)``: all of them).

    Candidate maps are independent: with fewer lanes than ``MIN_TASKS`` they are split
    into consecutive subsets (:func:`~streamridge.datapass.candidates.candidate_subsets`), each
    lane one task per subset, so the cores (or a cluster's workers) share the candidates
    as well as the rows; each task reads its lane's rows and maps its own candidates.
    """
    from streamridge.datapass.candidates import (
        CandidatesKernel,
        CandidateSubset,
        candidate_subsets,
        is_candidates,
    )
    from streamridge.datapass.plan import MIN_TASKS

    if not (is_candidates(spec.features) and isinstance(kernel, CandidatesKernel)):
        return [(None, None)]
    subsets = candidate_subsets(len(kernel.kernels), n_lanes, MIN_TASKS)
    if len(subsets) == 1:
        return [(None, None)]
    return [
        (dataclasses.replace(spec, features=spec.features.subset(m)), CandidateSubset(kernel, m))
        for m in subsets
    ]


def default_memory_budget() -> int:
    """Bytes one task of the pass may use: a quarter of available memory, 256 MiB to 8 GiB."""
    try:
        import psutil

        avail = int(psutil.virtual_memory().available)
    except Exception:  # no psutil or no answer: be conservative
        return 2**28
    return int(min(max(avail // 4, 2**28), 2**33))


def plan_source(
    source: Any,
    *,
    n_cells: int,
    stats_bytes: int,
    width: int,
    memory_budget: int | None = None,
    partition_rows: int | None = None,
    single_total: bool = False,
) -> tuple[dict[str, Any], int, int, Any]:
    """``(readers, lo, hi, plan)``: the source's readers, their rows ``[lo, hi)`` and the partitions of a pass.

    Parameters
    ----------
    source : Source
    n_cells : int
        Cells the kernel's rows go to (folds x classes).
    stats_bytes : int
        Bytes of one partition's result.
    width : int
        Features per row the kernel works on (a feature map's outputs): sub-blocks are sized by it.
    memory_budget : int or None
        Bytes one task may use (default :func:`default_memory_budget`).
    partition_rows : int or None
        Rows per partition asked for; None: chosen by the planner.
    single_total : bool
        Large statistics are one running total (:func:`~streamridge.datapass.single_total.plan_statistics`).
    """
    readers, lo = _readers_of(source)
    hi = lo + x_shape(source)[0]
    plan = plan_statistics(
        readers,
        lo,
        hi,
        n_cells=n_cells,
        stats_bytes=stats_bytes,
        memory_budget=memory_budget or default_memory_budget(),
        partition_rows=partition_rows,
        single_total=single_total,
    )
    if width > x_shape(source)[1]:  # a feature map widens the rows: sub-blocks sized by the mapped width
        plan = dataclasses.replace(plan, sub_rows=max(1, min(plan.sub_rows, SUB_BLOCK_BYTES // (8 * width))))
    return readers, lo, hi, plan


def x_shape(source: Any) -> tuple[int, int]:
    """Rows and columns of X; a :class:`~streamridge.sources.Source` tells them without building its dask view."""
    if hasattr(source, "n_rows") and hasattr(source, "n_features"):
        return int(source.n_rows()), int(source.n_features())
    return int(source.X.shape[0]), int(source.X.shape[1])


def _readers_of(source: Any) -> tuple[dict[str, Any], int]:
    if hasattr(source, "pass_readers"):
        return source.pass_readers()  # type: ignore[no-any-return]
    from streamridge.sources import DaskReader

    return {
        role: None if getattr(source, role, None) is None else DaskReader(getattr(source, role))
        for role in ROLES
    }, 0


def _windowed(readers: dict[str, Any], start: int, stop: int) -> dict[str, Any]:
    """Readers restricted to one partition (in-memory arrays ship only its rows)."""
    return {
        role: None if r is None else (r.window(start, stop) if hasattr(r, "window") else r)
        for role, r in readers.items()
    }
