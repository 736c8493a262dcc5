"""The metric pass with a stateful feature map: the lanes of the statistics pass, tallies instead of statistics.

A stateful map (reservoirs, delays, a Pipeline or Concat holding one) carries its
state along each series, so the metric pass cannot map chunks independently as it
does for a stateless map (:class:`streamridge.model_selection.metric_pass.MetricKernel`).  It runs
the lanes of the statistics pass instead (:func:`streamridge.datapass.plan.lane_calls`:
the same lanes, lane groups and warm-up prefixes, so every row gets the features the
statistics pass saw, washout rows left out), hands every mapped piece of rows to
:func:`streamridge.model_selection.metric_pass.tally_rows` (fold k's models on fold k's rows) and
reduces the lanes' tallies by the same fixed tree
(:func:`streamridge.datapass.executors.reduce_partitions`): for a given chunking the result
does not depend on the scheduler or the worker count.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamridge.datapass.driver import PassSpec
from streamridge.model_selection.metric_pass import MetricPlan, Tally, tally_rows


def metric_pass_lanes(
    source: Any,
    spec: PassSpec,
    plan: MetricPlan,
    *,
    row_offset: int = 0,
    scheduler: Any = None,
    window: int | None = None,
    progress: Any = False,
) -> Tally:
    """:func:`streamridge.model_selection.metric_pass.metric_pass` for a spec with a stateful ``features`` map (same parameters).

    Returns
    -------
    RegressionTally or ClassTally
        The tally of every fold and model.
    """
    from streamridge.datapass.driver import _chunk_error, _progress_bar
    from streamridge.datapass.executors import reduce_partitions
    from streamridge.datapass.lanes import _block
    from streamridge.datapass.plan import lane_layout
    from streamridge.datapass.scheduling import open_scheduler

    chunks, starts, calls = lane_layout(source, spec, [int(c) for c in source.X.chunks[0]], row_offset, _block)
    lanes = [lane for _, (lane, _s) in calls]

    def rows(i: int) -> int:
        return int(sum(chunks[lanes[i].first : lanes[i].stop]))

    def name_error(i: int, exc: Exception) -> Exception:
        return _chunk_error(exc, source, int(starts[lanes[i].first]), rows(i), lanes[i].first)

    bar = _progress_bar(progress, int(sum(chunks)), desc="metric pass")
    try:
        with open_scheduler(scheduler) as sched:
            total = reduce_partitions(
                metric_lane_task,
                lambda i: (lanes[i], spec, plan),
                len(lanes),
                _merge,
                sched,
                window=window,
                on_done=lambda i, _: bar(rows(i)),
                name_error=name_error,
            )
    finally:
        bar(None)
    return plan.empty() if total is None else total


def metric_lane_task(lane: Any, spec: PassSpec, plan: MetricPlan) -> Tally:
    """Tally of a lane's (or a lane group's) rows, mapped with the state carried as in the statistics pass (pure).

    The rows come from the generators the statistics pass itself uses
    (:func:`streamridge.datapass.plan.lane_pieces` and
    :func:`~streamridge.datapass.plan.group_pieces`), so every row gets the same
    features, warm-up and washout.

    Parameters
    ----------
    lane : Lane or LaneGroup
        From :func:`streamridge.datapass.plan.lane_calls`.
    spec : PassSpec
        With a fitted stateful ``features`` map.
    plan : MetricPlan

    Raises
    ------
    NonFiniteError
        As the statistics pass: NaN/inf in raw X, or features that are not finite.
    """
    from streamridge.datapass.plan import LaneGroup, drain, group_pieces, lane_pieces

    tally = plan.empty()

    def add(F: np.ndarray, y: Any, g: Any, w: Any, start: int, drop: Any) -> None:
        tally_rows(tally, F, y, g, w, start, spec, plan, drop)

    drain(group_pieces(lane, spec) if isinstance(lane, LaneGroup) else lane_pieces(lane, spec), add)
    return tally


def _merge(a: Tally, b: Tally) -> Tally:
    return a.merge(b)  # type: ignore[arg-type]
