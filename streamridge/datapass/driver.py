"""The pass driver: one function runs a kernel over the rows of a source, in either layout, on any scheduler.

A pass is a reduction in dask's sense (``dask/array/reductions.py``: chunk, combine,
aggregate).  The *kernel* is the chunk and combine steps; the *layout*
(:mod:`streamridge.datapass.layouts`) cuts the rows into tasks:

- partitions of whole stored chunks, each read once by its task
  (:mod:`streamridge.datapass.partitions`, :mod:`streamridge.datapass.partition_task`),
  a stateless feature map applied to every block (:mod:`streamridge.datapass.mapped`);
- lanes of the series of a stateful feature map, the map's state carried along each series
  (:mod:`streamridge.datapass.plan`, :mod:`streamridge.datapass.lane_task`).

:func:`run_pass` runs the tasks on the scheduler (:mod:`streamridge.datapass.scheduling`)
with a bounded window in flight and merges their results by a fixed pairwise tree on the
workers (:mod:`streamridge.datapass.executors`), so memory does not grow with the rows and
the result for a given layout does not depend on the scheduler or the worker count; with a
checkpoint it saves the tree's partials (and the lanes' progress) and resumes bit for bit
(:mod:`streamridge.datapass.checkpoint`).  :func:`iter_pass` yields the tasks' results in
row order instead (``predict`` writes them as they come).  :func:`accumulate` is the
statistics pass; where its statistics are large (many targets) it runs one partition whose
statistics are one running total, shared by the cores by cells (:func:`single_total`), so it
holds one copy of them, not the tree's.

The kernel protocol
-------------------
``start()``
    An empty accumulator.
``add(acc, X, y, groups, weights, row_start, drop=None)``
    Rows ``row_start ..`` into ``acc``, in place (``drop``: rows left out on purpose, a map's washout).
``finish(acc)``
    The task's result.
``merge(a, b)``
    Two results (``a``'s rows before ``b``'s); associative.
``result(total)``
    The pass's result from the merged total (None: no task ran).
``width``, ``n_cells``, ``result_bytes()``
    Features per row it takes, cells its rows are spread over, bytes of a task's result:
    the planner sizes blocks and memory by them.

Optional: ``describe()`` (checkpoint fingerprints), ``narrowed(group_values)`` and
``finish_lane(result, rows_seen, state)`` (:func:`streamridge.datapass.lane_task.lane_task`).
:class:`~streamridge.datapass.stats_kernel.StatsKernel`,
:class:`~streamridge.model_selection.metric_pass.MetricKernel` and
:class:`~streamridge.datapass.predict.PredictKernel` are the three kernels.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from streamridge.datapass import executors
from streamridge.datapass.candidates import candidate_stats_kernel, is_candidates
from streamridge.datapass.layouts import Lanes, Partitions, pass_layout, plan_tasks, x_shape
from streamridge.datapass.scheduling import describe, open_scheduler, pass_session, runs_here
from streamridge.datapass.spec import PassSpec
from streamridge.datapass.stats_kernel import StatsKernel
from streamridge.errors import ParameterError, SchedulerError, SourceError

Progress = bool | Callable[[int], None]


@dataclass
class PassReport:
    """Timing of a pass."""

    rows: int = 0
    chunks: int = 0
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rows_per_s(self) -> float:
        """Throughput of the pass."""
        return self.rows / self.seconds if self.seconds > 0 else float("nan")


def run_pass(
    source: Any,
    kernel: Any,
    layout: Partitions | Lanes | None = None,
    *,
    row_offset: int = 0,
    scheduler: Any = None,
    window: int | None = None,
    checkpoint: str | os.PathLike[str] | None = None,
    checkpoint_every_s: float = 10.0,
    progress: Progress = False,
    desc: str = "data pass",
    report: PassReport | None = None,
) -> Any:
    """``kernel.result`` of the merged results of ``kernel`` over every task of ``layout`` over ``source``.

    Parameters
    ----------
    source : Source
        Readers of X (M, N), y, optional groups and sample_weight.
    kernel : kernel
        See the module docstring.
    layout : Partitions, Lanes or None
        How the rows are cut into tasks (default :class:`Partitions` chosen by the planner).
    row_offset : int
        Global index of the source's first row (continuing ``partial_fit`` calls or shards).
    scheduler : None, "threads", "sync", "processes", "local:N", address, Client or Session
        See :mod:`streamridge.datapass.scheduling`; a :class:`~streamridge.datapass.scheduling.Session`
        is used as it is (a ``local:N`` spec starts its cluster while the pass is planned).
    window : int or None
        Tasks in flight (default: workers + 2).
    checkpoint : path or None
        Directory of a resumable checkpoint (:mod:`streamridge.datapass.checkpoint`; the kernel's
        results are statistics).
    checkpoint_every_s : float
        Minimum seconds between checkpoint saves.
    progress : bool or callable
        Show a tqdm bar (rows/s, ETA) named ``desc``, or call ``progress(rows_done)`` per task.
    report : PassReport or None
        Filled with rows, tasks (``chunks``), seconds and ``extra`` facts.
    """
    with pass_session(scheduler) as session:
        tasks = plan_tasks(layout, source, kernel, row_offset)
        resume = _Resume(checkpoint, checkpoint_every_s, source, tasks, row_offset)
        n, done = len(tasks), resume.done
        bar = progress_bar(progress, tasks.total_rows, initial=tasks.rows_before(done), desc=desc)
        t0 = time.perf_counter()
        try:
            with open_scheduler(session) as sched:

                def args(i: int) -> tuple[Any, ...]:
                    return tasks.args(
                        i, first=done, sched=sched, saver=resume.saver(i), progress=resume.progress(i)
                    )

                def on_done(i: int, snapshot: Any) -> None:
                    bar(tasks.size(i))
                    resume.saved(i, snapshot)

                total = executors.reduce_partitions(
                    tasks.function,
                    args,
                    n,
                    tasks.kernel.merge,
                    sched,
                    first=done,
                    stack=resume.stack,
                    window=window,
                    on_done=on_done,
                    name_error=_namer(source, tasks),
                )
                resume.finished(total)
        finally:
            bar(None)
        seconds = time.perf_counter() - t0  # (not the close of a cluster started for this pass)
    if report is not None:
        facts = tasks.report(done)
        report.rows += facts.pop("rows")
        report.chunks += facts.pop("chunks")
        report.seconds += seconds
        report.extra.update(scheduler=describe(scheduler), peak_rss_mb=peak_rss_mb(), **facts)
    return tasks.kernel.result(total)


def iter_pass(
    source: Any,
    kernel: Any,
    layout: Partitions | Lanes | None = None,
    *,
    row_offset: int = 0,
    scheduler: Any = None,
    window: int | None = None,
    progress: Progress = False,
    desc: str = "data pass",
) -> Generator[Any, None, None]:
    """The results of ``kernel`` on every task of ``layout``, one per task in row order (no reduction).

    The tasks after the one yielded run while the caller uses it (``window`` in flight);
    closing the iterator stops the pass.  Parameters as :func:`run_pass`.
    """
    with pass_session(scheduler) as session:
        tasks = plan_tasks(layout, source, kernel, row_offset)
        bar = progress_bar(progress, tasks.total_rows, desc=desc)
        try:
            with open_scheduler(session) as sched:
                results = executors.ordered_results(
                    tasks.function,
                    lambda i: tasks.args(i, first=0, sched=sched),
                    len(tasks),
                    sched,
                    window=window,
                    name_error=_namer(source, tasks),
                )
                with contextlib.closing(results):  # its tasks stop with this iterator
                    for i, result in results:
                        bar(tasks.size(i))
                        yield result
        finally:
            bar(None)


def accumulate(
    source: Any,
    spec: PassSpec,
    *,
    row_offset: int = 0,
    scheduler: Any = None,
    progress: Progress = False,
    meta: dict[str, Any] | None = None,
    report: PassReport | None = None,
    checkpoint: str | os.PathLike[str] | None = None,
    checkpoint_every_s: float = 10.0,
    window: int | None = None,
    memory_budget: int | None = None,
    partition_rows: int | None = None,
) -> Any:
    """The statistics pass: per (fold, class) :class:`FoldStats` of the rows of ``source``.

    :func:`run_pass` with a :class:`~streamridge.datapass.stats_kernel.StatsKernel`, in
    partitions (a stateless map applied to every block) or, with a stateful map, in lanes.

    Parameters
    ----------
    source, row_offset, scheduler, progress, report, checkpoint, checkpoint_every_s, window
        As :func:`run_pass`.
    spec : PassSpec
    meta : dict
        Added to the statistics' metadata.
    memory_budget : int or None
        Bytes one task may use; too small for the statistics is an :class:`InputError` naming the size.
    partition_rows : int or None
        Rows per partition asked for (rounded to whole stored chunks); None: from the data.

    Returns
    -------
    FoldStats, or a list of them
        One per candidate where ``spec.features`` is a set of candidate maps
        (:class:`~streamridge.datapass.candidates.CandidatesKernel`: every chunk read once
        for all of them); ``report.extra["features_state"]``: a stateful map's state after
        the last row (a tuple of them for candidates).
    """
    width = _width(source, spec)
    candidates = is_candidates(spec.features)
    if candidates and checkpoint is not None:
        raise ParameterError(
            "a checkpoint holds the statistics of one feature map; fit candidate maps without checkpoint"
        )
    kernel = candidate_stats_kernel(spec) if candidates else StatsKernel(spec, width)
    layout = pass_layout(
        spec,
        partition_rows=partition_rows,
        memory_budget=memory_budget,
        statistics=True,
        single_total=single_total(scheduler, checkpoint),
    )
    result = run_pass(
        source,
        kernel,
        layout,
        row_offset=row_offset,
        scheduler=scheduler,
        window=window,
        checkpoint=checkpoint,
        checkpoint_every_s=checkpoint_every_s,
        progress=progress,
        report=report,
    )
    every = result if candidates else [result]
    states = [getattr(stats, "features_state", None) for stats in every]
    if report is not None and any(state is not None for state in states):
        report.extra["features_state"] = tuple(states) if candidates else states[0]
    for stats in every:
        stats.meta.update(meta or {})
        stats.meta.pop("checkpoint", None)
        stats.meta["rows_seen"] = row_offset + x_shape(source)[0]
    return result  # type: ignore[no-any-return]


def single_total(scheduler: Any, checkpoint: Any) -> bool:
    """Whether a statistics pass adds statistics of at least ``SINGLE_TOTAL_BYTES`` into one running total.

    On this machine's cores without a checkpoint: the pass then holds one copy of
    its statistics (:func:`streamridge.datapass.single_total.single_total_plan`).  A
    cluster elsewhere keeps its partitions (merged on its workers, one result
    fetched), and so does a checkpointed pass (saved after each partition).
    """
    return checkpoint is None and runs_here(scheduler)


def _width(source: Any, spec: PassSpec) -> int:
    """Features per row of the statistics: X's columns, or a map's outputs."""
    n_in = x_shape(source)[1]
    if spec.features is None:
        return n_in
    spec.features.check_width(n_in)
    return int(spec.features.n_features_out_)


class _Resume:
    """A pass's checkpoint: the partials and lane progress it resumes from, and its saves."""

    def __init__(self, directory: Any, every_s: float, source: Any, tasks: Any, row_offset: int) -> None:
        self.done, self.ckpt, self.fp = 0, None, None
        self.stack: list[tuple[int, Any]] = []
        self._inside: dict[int, Any] = {}  # lane groups' progress saved inside their lanes
        self.n, self.lanes = len(tasks), bool(tasks.saves_inside)
        if directory is None:
            return
        from streamridge.datapass.checkpoint import Checkpointer, fingerprint

        self.ckpt = Checkpointer(directory, every_s)
        self.fp = fingerprint(
            tasks.readers,
            tasks.kernel.describe(),
            row_offset,
            tasks.describe(),
            getattr(source, "description", ""),
        )
        resumed = self.ckpt.resume(self.fp)
        if resumed is not None:
            self.stack, self.done = resumed
        if self.lanes:
            self._inside = self.ckpt.lane_progress(self.fp, self.done)

    def saver(self, i: int) -> Any:
        """Where task ``i`` saves its progress inside its lanes (None without a checkpoint)."""
        if self.ckpt is None or not self.lanes:
            return None
        return self.ckpt.lane_saver(i, self.fp)  # type: ignore[arg-type]

    def progress(self, i: int) -> Any:
        """The progress task ``i`` saved inside its lanes, or None."""
        return self._inside.pop(i, None)

    def saved(self, i: int, snapshot: Any) -> None:
        """After task ``i`` joined the tree: save the partials where due."""
        if self.ckpt is not None and snapshot is not None and i + 1 < self.n and self.ckpt.due():
            self.ckpt.save(snapshot(), i + 1, self.fp)  # type: ignore[arg-type]
            if self.lanes:
                self.ckpt.drop_lanes(i + 1)

    def finished(self, total: Any) -> None:
        """A completed pass is checkpointed as one partial (a resume of it merges nothing)."""
        if self.ckpt is not None and self.done < self.n:
            self.ckpt.save([] if total is None else [(-1, total)], self.n, self.fp)  # type: ignore[arg-type]
            if self.lanes:
                self.ckpt.drop_lanes(self.n)


def _namer(source: Any, tasks: Any) -> Callable[[int, Exception], Exception]:
    def name_error(i: int, exc: Exception) -> Exception:
        return task_error(exc, source, *tasks.where(i))

    return name_error


def task_error(exc: Exception, source: Any, start: int, m: int, i: int) -> Exception:
    """The error of a failed task, named by its rows.

    A failure while reading or decoding (an ``OSError``, or raised inside the
    storage, codec or dask layers) becomes a one-line :class:`SourceError`
    naming the partition and its rows; any other exception is not blamed on
    the data: it is returned as it is, with the partition noted on it.
    """
    lines = str(exc).strip().splitlines()
    what = f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    where = f"partition {i} (rows {start}-{start + m - 1}) of {getattr(source, 'description', 'the data')}"
    if type(exc).__module__.startswith("distributed"):
        return SchedulerError(f"the dask cluster failed on {where}: {what}")
    if not executors.raised_reading(exc):
        exc.add_note(f"streamridge: raised by the task of {where}")
        return exc
    return SourceError(f"cannot read {where}: {what}; the stored chunk may be corrupted or truncated")


def peak_rss_mb() -> float | None:
    """Peak resident memory of this process so far, in MB (None where unknown)."""
    try:
        import resource

        kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    except (ImportError, OSError):
        return None
    return kb / 1024 if sys.platform.startswith("linux") else kb / 2**20  # bytes on macOS


def progress_bar(
    progress: Progress, total: int, initial: int = 0, desc: str = "data pass"
) -> Callable[[int | None], None]:
    """A callable taking rows done since the last call (None closes the bar)."""
    if callable(progress):
        fn = progress
        return lambda n: None if n is None else fn(n)
    if not progress:
        return lambda n: None
    from tqdm.auto import tqdm

    bar = tqdm(total=total, initial=initial, unit="rows", unit_scale=True, desc=desc, smoothing=0.1)

    def update(n: int | None) -> None:
        if n is None:
            bar.close()
        else:
            bar.update(n)

    return update
