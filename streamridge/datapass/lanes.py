"""The pass with a stateful feature map: lanes of chunks, reduced by the pass's fixed tree.

A stateful feature map (reservoirs, delays) carries its state along a series
of rows, so its pass runs lanes of consecutive chunks (one lane = one task,
:mod:`streamridge.datapass.plan`) rather than the independent partitions of
:mod:`streamridge.datapass.partitions`.  Lane results are reduced exactly as partition
results are (:func:`streamridge.datapass.executors.reduce_partitions`): a binary-counter
tree whose shape depends only on the number of lanes, merged on the workers of
a dask cluster (the driver fetches one result per pass), and checkpointed as
the tree's partials at lane ends, so a resumed pass is bit-identical to an
uninterrupted one.  A lane group's task also saves its own progress inside its
lanes at the checkpoint interval (:class:`streamridge.datapass.checkpoint.LaneSaver`):
a pass of a few long series, one task, resumes where it stopped, bit for bit.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from streamridge.datapass.driver import (
    PassReport,
    PassSpec,
    _chunk_error,
    _final_stack,
    _peak_rss_mb,
    _progress_bar,
    _readers_of,
    spec_dict,
)
from streamridge.stats.foldstats import FoldStats


def accumulate_lanes(
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
) -> FoldStats:
    """:func:`streamridge.datapass.driver.accumulate` for a spec with a stateful ``features`` map (same parameters).

    ``report.extra["resumed_chunks"]`` counts the chunks of the lanes a checkpoint
    covered; ``report.extra["features_state"]`` is the map's state after the last row.
    """
    from streamridge.datapass import plan
    from streamridge.datapass.checkpoint import Checkpointer, fingerprint
    from streamridge.datapass.executors import reduce_partitions
    from streamridge.datapass.scheduling import describe, open_scheduler

    X = source.X
    chunks, starts, calls = plan.lane_layout(source, spec, [int(c) for c in X.chunks[0]], row_offset, _block, statistics=True)
    lanes = [lane for _, (lane, _s) in calls]
    rows = [int(sum(chunks[lane.first : lane.stop])) for lane in lanes]
    n = len(lanes)
    done, ckpt, fp = 0, None, None
    stack: list[tuple[int, Any]] = []
    inside: dict[int, Any] = {}  # lane groups' progress saved inside their lanes
    if checkpoint is not None:
        ckpt = Checkpointer(checkpoint, checkpoint_every_s)
        readers, _ = _readers_of(source)
        layout = {"row_chunks": chunks, "lanes": [[lane.first, lane.stop] for lane in lanes]}
        fp = fingerprint(readers, spec_dict(spec), row_offset, layout, getattr(source, "description", ""))
        resumed = ckpt.resume(fp)
        if resumed is not None:
            stack, done = resumed
        inside = ckpt.lane_progress(fp, done)
    bar = _progress_bar(progress, int(X.shape[0]), initial=int(sum(rows[:done])))

    def args(i: int) -> tuple[Any, Any]:
        lane, lane_spec = calls[i][1]
        if ckpt is None or fp is None or not isinstance(lane, plan.LaneGroup):
            return lane, lane_spec
        saver, saved = ckpt.lane_saver(i, fp), inside.pop(i, None)
        group = plan.LaneGroup(lane.lanes, lane.group_values, progress=saved, saver=saver)
        return group, lane_spec

    def on_done(i: int, snapshot: Any) -> None:
        bar(rows[i])
        if ckpt is not None and fp is not None and snapshot is not None and i + 1 < n and ckpt.due():
            ckpt.save(snapshot(), i + 1, fp)
            ckpt.drop_lanes(i + 1)

    def name_error(i: int, exc: Exception) -> Exception:
        return _chunk_error(exc, source, int(starts[lanes[i].first]), rows[i], lanes[i].first)

    t0 = time.perf_counter()
    try:
        with open_scheduler(scheduler) as sched:
            total = reduce_partitions(
                plan.lane_task, args, n, plan.merge_lanes, sched, first=done, stack=stack,
                window=window, on_done=on_done, name_error=name_error,
            )
            if ckpt is not None and fp is not None and done < n:
                ckpt.save(_final_stack(total), n, fp)
                ckpt.drop_lanes(n)
    finally:
        bar(None)
    total = plan.all_folds(total, spec)  # lane groups' results hold their own series' folds
    width = spec.features.n_features_out_
    if total is None:
        total = FoldStats.zeros(spec.scheme.n_folds, spec.n_classes, width, spec.n_targets)
    _report(report, total, chunks, lanes, done, time.perf_counter() - t0, describe(scheduler))
    total.meta.update(meta or {})
    total.meta.pop("checkpoint", None)
    total.meta["rows_seen"] = row_offset + int(X.shape[0])
    return total


def _report(report: PassReport | None, total: Any, chunks: list[int], lanes: list[Any], done: int, seconds: float, scheduler: str) -> None:
    if report is None:
        return
    first = lanes[done].first if done < len(lanes) else len(chunks)
    report.rows += int(sum(chunks[first:]))
    report.chunks += len(chunks) - first
    report.seconds += seconds
    report.extra.update(
        scheduler=scheduler, peak_rss_mb=_peak_rss_mb(), resumed_chunks=first, partitions=len(lanes),
    )
    state = getattr(total, "features_state", None)
    if state is not None:
        report.extra["features_state"] = state


def _block(arr: Any, i: int) -> Any:
    if arr is None:
        return None
    return arr.blocks[i] if arr.ndim == 1 else arr.blocks[i, 0]
