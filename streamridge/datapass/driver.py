"""The data pass: partitions of rows -> per-partition statistics -> merged :class:`FoldStats`.

:func:`plan_source` plans the partitions (runs of whole stored chunks,
:mod:`streamridge.datapass.partitions`); :func:`run_plan` runs a partition kernel on
each (:class:`StatsKernel` here, :class:`streamridge.model_selection.metric_pass.MetricKernel`
for the metric pass) on the chosen scheduler with a bounded window of
partitions in flight, and merges their results in row order by a fixed
pairwise tree on the workers, so peak memory depends on the read blocks, the
window and N, never on the number of rows, and the result for a given
partitioning does not depend on the scheduler or the worker count.
:func:`accumulate` adds checkpoints, progress and the pass report.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from streamridge.errors import InputError, NonFiniteError, SchedulerError, SourceError
from streamridge.folds.schemes import FoldScheme
from streamridge.stats.foldstats import FoldStats, merge

if TYPE_CHECKING:
    from streamridge.stats.kernel import CellAccumulator


@dataclass(frozen=True)
class PassSpec:
    """What a pass computes for every row: fold, class, targets.

    Parameters
    ----------
    scheme : FoldScheme
    classes : tuple or None
        Sorted class labels of a classifier: rows of class c go to class cell c
        and get target +1 in column c, -1 elsewhere (one column, +1 for
        classes[1], for two classes).  None for regression.
    n_targets : int
    skip_nonfinite : bool
        Drop rows with NaN/inf in X, y or weights instead of failing (they keep
        their row index, so folds do not shift).
    features : FeatureMap or None
        A fitted feature map applied to X chunk by chunk before the statistics
        (see :mod:`streamridge.datapass.plan`).
    features_state : any
        State of a stateful map at the first row (``partial_fit`` continuing a
        series); None: every series starts from rest.  The state after the last
        row comes back in ``PassReport.extra["features_state"]``.
    open_end : bool
        The last series may go on after the pass's last row (``partial_fit``): a washout that
        leaves out every row of the pass is not refused before it.
    """

    scheme: FoldScheme
    classes: tuple[Any, ...] | None
    n_targets: int
    skip_nonfinite: bool = False
    features: Any = None
    features_state: Any = None
    open_end: bool = False

    @property
    def n_classes(self) -> int:
        """Number of class cells (1 for regression)."""
        return 1 if self.classes is None else len(self.classes)


def code_targets(y: np.ndarray, classes: tuple[Any, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Class index and +1/-1 target coding of labels ``y``.

    Returns
    -------
    cls : array of int64 of shape (m,)
    Y : array of float64 of shape (m, 1) for two classes, (m, C) otherwise
    """
    labels = np.asarray(classes)
    y = np.asarray(y).reshape(-1)
    cls = np.searchsorted(labels, y)
    cls = np.clip(cls, 0, len(labels) - 1)
    unknown = labels[cls] != y
    if np.any(unknown):
        raise InputError(
            f"labels {np.unique(y[unknown])[:5].tolist()} are not among classes "
            f"{labels.tolist()}; pass all classes (classes=) on the first partial_fit"
        )
    if len(labels) == 2:
        return cls, np.where(cls == 1, 1.0, -1.0)[:, None]
    Y = -np.ones((y.shape[0], len(labels)))
    Y[np.arange(y.shape[0]), cls] = 1.0
    return cls, Y


def _nonfinite_rows(name: str, a: np.ndarray) -> np.ndarray | None:
    if a.dtype.kind not in "fc":
        return None
    ok = np.isfinite(a)
    if ok.all():
        return None
    return ~ok.reshape(a.shape[0], -1).all(axis=1)


def prepare_rows(
    X: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray | None,
    weights: np.ndarray | None,
    row_start: int,
    spec: PassSpec,
    drop: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Rows ``row_start ..`` as the kernel takes them: X, coded targets Y, flat cell ids, weights.

    Fold ids come from the scheme (row index / group), class ids from the
    labels; rows with NaN/inf are dropped when ``spec.skip_nonfinite``;
    ``drop`` marks rows left out on purpose (a feature map's washout).

    Raises
    ------
    NonFiniteError
        If X, y or the weights hold NaN/inf and ``spec.skip_nonfinite`` is off.
    InputError
        A negative weight, or a label outside the classes.
    """
    m = X.shape[0]
    folds = spec.scheme.assign(row_start, m, None if groups is None else np.asarray(groups).reshape(-1))
    keep = np.ones(m, dtype=bool) if drop is None else ~np.asarray(drop, dtype=bool)
    for name, a in (("X", X), ("y", y), ("sample_weight", weights)):
        if a is None:
            continue
        bad = _nonfinite_rows(name, np.asarray(a))
        if bad is None:
            continue
        if not spec.skip_nonfinite:
            rows = (np.flatnonzero(bad)[:5] + row_start).tolist()
            raise NonFiniteError(
                f"{name} has NaN or inf in {int(bad.sum())} row(s) of the chunk of rows "
                f"{row_start}-{row_start + m - 1}, first at rows {rows}; clean the data or "
                "skip those rows (skip_nonfinite=True, --skip-nonfinite)"
            )
        keep &= ~bad
    w = None
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64).reshape(-1)
        if np.any(w[keep] < 0):
            r = int(np.flatnonzero((w < 0) & keep)[0]) + row_start
            raise InputError(f"sample_weight must be non-negative; got a negative weight at row {r}")
    if not keep.all():
        X, y, folds = X[keep], np.asarray(y)[keep], folds[keep]
        w = None if w is None else w[keep]
    if spec.classes is None:
        Y = np.asarray(y)
        Y = Y[:, None] if Y.ndim == 1 else Y  # (also when every row of the chunk was dropped)
        cells = folds
    else:
        cls, Y = code_targets(np.asarray(y), spec.classes)
        cells = folds * spec.n_classes + cls
    return np.asarray(X), Y, cells, w


class StatsKernel:
    """The pass's per-partition kernel: rows -> :class:`FoldStats` (fold x class cells).

    A kernel has ``start()`` (a fresh accumulator), ``add(acc, X, y, groups,
    weights, row_start)`` (rows into it, in place), ``finish(acc)`` (the
    partition's result) and ``merge(a, b)`` (two results, associative).  A
    second pass with another statistic plugs in another kernel.
    """

    def __init__(self, spec: PassSpec, n_features: int) -> None:
        self.spec = spec
        self.n_features = n_features

    def start(self) -> CellAccumulator:
        """An empty accumulator."""
        from streamridge.stats.kernel import (
            CellAccumulator,  # scipy's BLAS: imported by the pass, not by `import streamridge`
        )

        s = self.spec
        return CellAccumulator(s.scheme.n_folds * s.n_classes, self.n_features, s.n_targets)

    def add(self, acc: CellAccumulator, X: np.ndarray, y: Any, groups: Any, weights: Any, row_start: int) -> None:
        """Add the rows ``row_start ..`` of one sub-block."""
        g = None if groups is None else np.asarray(groups).reshape(-1)
        Xr, Y, cells, w = prepare_rows(X, y, g, weights, row_start, self.spec)
        acc.add(Xr, Y, cells, w)

    def finish(self, acc: CellAccumulator) -> FoldStats:
        """The partition's statistics."""
        return acc.result(self.spec.scheme.n_folds, self.spec.n_classes)

    @staticmethod
    def merge(a: FoldStats, b: FoldStats) -> FoldStats:
        """Chan pairwise merge."""
        return merge(a, b)


def chunk_task(
    X: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray | None,
    weights: np.ndarray | None,
    row_start: int,
    spec: PassSpec,
    *,
    drop: np.ndarray | None = None,
) -> FoldStats:
    """Statistics of the in-memory rows ``row_start .. row_start + len(X) - 1`` (pure function).

    ``drop`` marks rows left out on purpose (a feature map's washout).
    """
    kernel = StatsKernel(spec, X.shape[1])
    acc = kernel.start()
    g = None if groups is None else np.asarray(groups).reshape(-1)
    acc.add(*prepare_rows(X, y, g, weights, row_start, spec, drop))
    stats = kernel.finish(acc)
    stats.meta["rows_seen"] = row_start + X.shape[0]
    return stats


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


def spec_dict(spec: PassSpec) -> dict[str, Any]:
    """JSON description of a pass spec (checkpoint fingerprints)."""
    return {
        "scheme": spec.scheme.to_dict(),
        "classes": None if spec.classes is None else [str(c) for c in spec.classes],
        "n_targets": spec.n_targets,
        "skip_nonfinite": spec.skip_nonfinite,
        **({} if spec.features is None else {"features": _features_fingerprint(spec.features)}),
    }


def _features_fingerprint(fmap: Any) -> str:
    """Digest of a fitted map's description and arrays (checkpoints of a pass with a map)."""
    import hashlib
    import json

    from streamridge.features import encode

    obj, arrays = encode(fmap)
    h = hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode())
    for k in sorted(arrays):
        h.update(k.encode() + np.ascontiguousarray(arrays[k]).tobytes())
    return h.hexdigest()


def default_memory_budget() -> int:
    """Bytes one task of the pass may use: a quarter of available memory, 256 MiB to 8 GiB."""
    try:
        import psutil

        avail = int(psutil.virtual_memory().available)
    except Exception:  # no psutil or no answer: be conservative
        return 2**28
    return int(min(max(avail // 4, 2**28), 2**33))


def _stats_bytes(spec: PassSpec, n_features: int) -> int:
    N, T = n_features, spec.n_targets
    return 8 * spec.scheme.n_folds * spec.n_classes * (N * N + N * T + N + 2 * T + 2)


def _windowed(readers: dict[str, Any], start: int, stop: int) -> dict[str, Any]:
    """Readers restricted to one partition (in-memory arrays ship only its rows)."""
    return {role: None if r is None else (r.window(start, stop) if hasattr(r, "window") else r) for role, r in readers.items()}


def accumulate(
    source: Any,
    spec: PassSpec,
    *,
    row_offset: int = 0,
    scheduler: Any = None,
    progress: bool | Callable[[int], None] = False,
    meta: dict[str, Any] | None = None,
    report: PassReport | None = None,
    checkpoint: str | os.PathLike[str] | None = None,
    checkpoint_every_s: float = 10.0,
    window: int | None = None,
    memory_budget: int | None = None,
    kernel: Any = None,
) -> FoldStats:
    """Run the pass over a :class:`~streamridge.sources.Source`.

    The rows are cut into partitions (runs of whole stored chunks, see
    :mod:`streamridge.datapass.partitions`); each partition is one task that reads its
    stored chunks once and accumulates them in place; partition results are
    merged by a fixed tree on the workers (:mod:`streamridge.datapass.executors`).

    Parameters
    ----------
    source : Source
        Readers of X (M, N), y, optional groups and sample_weight.
    spec : PassSpec
    row_offset : int
        Global index of the source's first row (continuing ``partial_fit`` calls
        or shards of a larger dataset).
    scheduler : None, "threads", "sync", "processes", "local:N", address or Client
        See :mod:`streamridge.datapass.scheduling`.
    progress : bool or callable
        Show a tqdm bar (rows/s, ETA) or call ``progress(rows_done)`` per partition.
    meta : dict
        Added to the statistics' metadata.
    report : PassReport
        Filled with rows, partitions (``chunks``) and seconds.
    checkpoint : path or None
        Directory of a resumable checkpoint (see :mod:`streamridge.datapass.checkpoint`).
    checkpoint_every_s : float
        Minimum seconds between checkpoint saves.
    window : int or None
        Partitions in flight (default: workers + 2).
    memory_budget : int or None
        Bytes one task may use (default :func:`default_memory_budget`); too
        small for the statistics is an :class:`InputError` naming the size.
    kernel : object or None
        The per-partition kernel (default :class:`StatsKernel`).

    Returns
    -------
    FoldStats
    """
    if isinstance(scheduler, str) and scheduler.startswith("local"):  # the workers start while the pass is planned
        from streamridge.datapass.scheduling import scheduler_session

        with scheduler_session(scheduler) as starting:
            return accumulate(
                source, spec, row_offset=row_offset, scheduler=starting, progress=progress, meta=meta, report=report,
                checkpoint=checkpoint, checkpoint_every_s=checkpoint_every_s, window=window,
                memory_budget=memory_budget, kernel=kernel,
            )
    if spec.features is not None and spec.features.stateful:  # state carried along series: lanes of chunks
        from streamridge.datapass.lanes import accumulate_lanes

        return accumulate_lanes(
            source, spec, row_offset=row_offset, scheduler=scheduler, progress=progress, meta=meta, report=report,
            checkpoint=checkpoint, checkpoint_every_s=checkpoint_every_s, window=window,
        )
    from streamridge.datapass.checkpoint import Checkpointer, fingerprint
    from streamridge.datapass.scheduling import describe

    N = _width(source, spec)
    kernel = kernel or _default_kernel(spec, N)
    readers, lo, hi, plan = plan_source(
        source, n_cells=spec.scheme.n_folds * spec.n_classes, stats_bytes=_stats_bytes(spec, N), width=N,
        memory_budget=memory_budget,
    )
    done, ckpt, fp = 0, None, None
    stack: list[tuple[int, FoldStats]] = []
    if checkpoint is not None:
        ckpt = Checkpointer(checkpoint, checkpoint_every_s)
        fp = fingerprint(readers, spec_dict(spec), row_offset, plan.describe(), getattr(source, "description", ""))
        resumed = ckpt.resume(fp)
        if resumed is not None:
            stack, done = resumed
    n = len(plan)
    bar = _progress_bar(progress, hi - lo, initial=plan.rows(done)[0] - lo if done < n else hi - lo)

    def on_done(i: int, snapshot: Any) -> None:
        a, b = plan.rows(i)
        bar(b - a)
        if ckpt is not None and fp is not None and snapshot is not None and i + 1 < n and ckpt.due():
            ckpt.save(snapshot(), i + 1, fp)

    t0 = time.perf_counter()
    try:
        total = run_plan(
            source, readers, plan, kernel, row_offset=row_offset, scheduler=scheduler, first=done, stack=stack,
            window=window, on_done=on_done,
        )
        if ckpt is not None and fp is not None and done < n:
            ckpt.save(_final_stack(total), n, fp)
    finally:
        bar(None)
    total = total if total is not None else FoldStats.zeros(spec.scheme.n_folds, spec.n_classes, N, spec.n_targets)
    if report is not None:
        report.rows += hi - (plan.rows(done)[0] if done < n else hi)
        report.chunks += n - done
        report.seconds += time.perf_counter() - t0
        report.extra.update(
            scheduler=describe(scheduler), peak_rss_mb=_peak_rss_mb(), resumed_chunks=done, partitions=n,
            read_rows=plan.read_rows, sub_rows=plan.sub_rows,
        )
    total.meta.update(meta or {})
    total.meta.pop("checkpoint", None)
    total.meta["rows_seen"] = row_offset + (hi - lo)
    return total


def plan_source(
    source: Any, *, n_cells: int, stats_bytes: int, width: int, memory_budget: int | None = None
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
    """
    from streamridge.datapass.partitions import SUB_BLOCK_BYTES, plan_pass

    readers, lo = _readers_of(source)
    hi = lo + _x_shape(source)[0]
    plan = plan_pass(
        readers, lo, hi, n_cells=n_cells, stats_bytes=stats_bytes,
        memory_budget=memory_budget or default_memory_budget(), partition_rows=getattr(source, "partition_rows", None),
    )
    if width > _x_shape(source)[1]:  # a feature map widens the rows: sub-blocks sized by the mapped width
        plan = dataclasses.replace(plan, sub_rows=max(1, min(plan.sub_rows, SUB_BLOCK_BYTES // (8 * width))))
    return readers, lo, hi, plan


def run_plan(
    source: Any,
    readers: dict[str, Any],
    plan: Any,
    kernel: Any,
    *,
    row_offset: int = 0,
    scheduler: Any = None,
    first: int = 0,
    stack: Any = (),
    window: int | None = None,
    on_done: Callable[[int, Any], None] | None = None,
) -> Any:
    """Run ``kernel`` over the partitions ``first ..`` of ``plan`` and merge their results by the fixed tree.

    Each partition's task reads its rows once (:func:`streamridge.datapass.partitions.run_partition`);
    a failed task's error names its rows.  Returns the merged result (merged onto ``stack``),
    or None where there was nothing to merge.
    """
    from streamridge.datapass.executors import reduce_partitions
    from streamridge.datapass.partitions import run_partition, task_plan
    from streamridge.datapass.scheduling import open_scheduler

    lo, n = plan.lo, len(plan)
    workers, local = [1], [False]  # set when the scheduler is open

    def args(i: int) -> tuple[Any, ...]:
        a, b = plan.rows(i)
        return _windowed(readers, a, b), a, b, task_plan(plan, i, first, n, workers[0], local=local[0]), kernel, row_offset + (a - lo)

    def name_error(i: int, exc: Exception) -> Exception:
        a, b = plan.rows(i)
        return _chunk_error(exc, source, row_offset + a - lo, b - a, i)

    with open_scheduler(scheduler) as sched:
        workers[0], local[0] = sched.n_workers, sched.local
        return reduce_partitions(
            run_partition, args, n, kernel.merge, sched, first=first, stack=stack, window=window, on_done=on_done,
            name_error=name_error,
        )


def _width(source: Any, spec: PassSpec) -> int:
    """Features per row of the statistics: X's columns, or a (stateless) map's outputs."""
    n_in = _x_shape(source)[1]
    if spec.features is None:
        return n_in
    spec.features.check_width(n_in)
    return int(spec.features.n_features_out_)


def _default_kernel(spec: PassSpec, n_features: int) -> Any:
    if spec.features is None:
        return StatsKernel(spec, n_features)
    from streamridge.datapass.plan import MappedKernel

    return MappedKernel(spec, n_features)


def _final_stack(total: Any) -> list[tuple[int, Any]]:
    """A completed pass is checkpointed as one partial (a resume of it merges nothing)."""
    return [] if total is None else [(-1, total)]


def _x_shape(source: Any) -> tuple[int, int]:
    """Rows and columns of X; a :class:`~streamridge.sources.Source` tells them without building its dask view."""
    if hasattr(source, "n_rows") and hasattr(source, "n_features"):
        return int(source.n_rows()), int(source.n_features())
    return int(source.X.shape[0]), int(source.X.shape[1])


def _readers_of(source: Any) -> tuple[dict[str, Any], int]:
    if hasattr(source, "pass_readers"):
        return source.pass_readers()
    from streamridge.sources import DaskReader

    return {role: None if getattr(source, role, None) is None else DaskReader(getattr(source, role)) for role in ("X", "y", "groups", "sample_weight")}, 0


def _chunk_error(exc: Exception, source: Any, start: int, m: int, i: int) -> Exception:
    """The error of a failed partition task, named by its rows.

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
    from streamridge.datapass.executors import raised_reading

    if not raised_reading(exc):
        exc.add_note(f"streamridge: raised by the task of {where}")
        return exc
    return SourceError(f"cannot read {where}: {what}; the stored chunk may be corrupted or truncated")


def _peak_rss_mb() -> float | None:
    """Peak resident memory of this process so far, in MB (None where unknown)."""
    try:
        import resource

        kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    except (ImportError, OSError):
        return None
    return kb / 1024 if sys.platform.startswith("linux") else kb / 2**20  # bytes on macOS


def _progress_bar(
    progress: bool | Callable[[int], None], total: int, initial: int = 0, desc: str = "data pass"
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
