"""The metric pass with a stateful feature map: the lanes of the statistics pass, tallies instead of statistics.

A stateful map (reservoirs, delays, a Pipeline or Concat holding one) carries its
state along each series, so the metric pass cannot map chunks independently as it
does for a stateless map (:func:`streamridge.metric_pass.metric_chunk`).  It runs
the lanes of the statistics pass instead (:func:`streamridge.features.plan.lane_calls`:
the same lanes, lane groups and warm-up prefixes, so every row gets the features the
statistics pass saw, washout rows left out), hands every mapped piece of rows to
:func:`streamridge.metric_pass.tally_rows` (fold k's models on fold k's rows) and
reduces the lanes' tallies by the same fixed tree
(:func:`streamridge.executors.reduce_partitions`): for a given chunking the result
does not depend on the scheduler or the worker count.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any

import numpy as np

from .metric_pass import MetricPlan, Tally, tally_rows
from .stream import PassSpec

#: one mapped piece of rows: features, y, groups, weights, first row, rows left out (washout) or None
Piece = tuple[np.ndarray, Any, Any, Any, int, Any]


def metric_pass_lanes(
    source: Any,
    spec: PassSpec,
    plan: MetricPlan,
    *,
    row_offset: int = 0,
    scheduler: Any = None,
    window: int | None = None,
) -> Tally:
    """:func:`streamridge.metric_pass.metric_pass` for a spec with a stateful ``features`` map (same parameters).

    Returns
    -------
    RegressionTally or ClassTally
        The tally of every fold and model.
    """
    from .executors import reduce_partitions
    from .features.plan import lane_calls
    from .scheduling import open_scheduler
    from .stream import _chunk_error
    from .stream_lanes import _block

    chunks = [int(c) for c in source.X.chunks[0]]
    starts = np.concatenate([[0], np.cumsum(chunks)[:-1]]).astype(np.int64) + row_offset
    lanes = [lane for _, (lane, _s) in lane_calls(source, spec, starts, 0, _block)]

    def name_error(i: int, exc: Exception) -> Exception:
        rows = int(sum(chunks[lanes[i].first : lanes[i].stop]))
        return _chunk_error(exc, source, int(starts[lanes[i].first]), rows, lanes[i].first)

    with open_scheduler(scheduler) as sched:
        total = reduce_partitions(
            metric_lane_task,
            lambda i: (lanes[i], spec, plan),
            len(lanes),
            _merge,
            sched,
            window=window,
            name_error=name_error,
        )
    return plan.empty() if total is None else total


def metric_lane_task(lane: Any, spec: PassSpec, plan: MetricPlan) -> Tally:
    """Tally of a lane's (or a lane group's) rows, mapped with the state carried as in the statistics pass (pure).

    Parameters
    ----------
    lane : Lane or LaneGroup
        From :func:`streamridge.features.plan.lane_calls`.
    spec : PassSpec
        With a fitted stateful ``features`` map.
    plan : MetricPlan
    """
    tally = plan.empty()
    for F, y, g, w, start, drop in lane_rows(lane, spec):
        tally_rows(tally, F, y, g, w, start, spec, plan, drop)
    return tally


def lane_rows(lane: Any, spec: PassSpec) -> Iterator[Piece]:
    """The mapped rows of a lane (or lane group) in the order the statistics pass maps them.

    A :class:`~streamridge.features.plan.Lane` yields one piece per chunk, after
    running the map over its warm-up rows (``warmup=W``); a
    :class:`~streamridge.features.plan.LaneGroup` yields round by round (chunk r of
    every lane together, one ``apply_chunks`` call per slice of rows, as
    ``plan._group_task``).  The features of a piece may be a view of a buffer that
    the next piece overwrites: consume each before asking for the next.

    Yields
    ------
    F : array of float64 of shape (m, n_features_out)
    y, groups, weights : the piece's rows (groups and weights flat or None)
    row_start : int
    drop : bool array of shape (m,) or None
        Rows the statistics pass leaves out (washout).

    Raises
    ------
    NonFiniteError
        As the statistics pass: NaN/inf in raw X, or features that are not finite.
    """
    from .features.plan import LaneGroup

    if isinstance(lane, LaneGroup):
        yield from _group_rows(lane, spec)
        return
    from .executors import _materialize, materialize_all
    from .features.plan import _flat, _map_chunk

    fmap = spec.features
    state = fmap.init_state() if lane.init is None else lane.init
    if lane.prefix is not None:
        Xp, gp, row = lane.prefix
        with np.errstate(over="ignore", invalid="ignore"):  # the warm-up rows' features are discarded
            _, state = fmap.apply_chunk(_materialize(Xp), row, _flat(_materialize(gp)), state)
    for blocks, start in zip(lane.blocks, lane.starts):
        X, y, g, w = materialize_all(blocks)
        g = _flat(g)
        F, drop, state = _map_chunk(fmap, np.asarray(X), start, g, state, spec.skip_nonfinite)
        yield F, y, g, w, start, drop


def _group_rows(group: Any, spec: PassSpec) -> Iterator[Piece]:
    """:func:`lane_rows` of a lane group: round r maps chunk r of every lane together."""
    from .executors import materialize_all
    from .features.plan import _checked_input, _flat

    fmap = spec.features
    lanes = group.lanes
    states = [fmap.init_state() if lane.init is None else lane.init for lane in lanes]
    buf = np.empty((0, fmap.n_features_out_))
    for r in range(max(len(lane.blocks) for lane in lanes)):
        chunks = []
        for j, lane in enumerate(lanes):
            if r < len(lane.blocks):
                X, y, g, w = materialize_all(lane.blocks[r])
                g, start = _flat(g), lane.starts[r]
                X, bad, keep = _checked_input(fmap, np.asarray(X), start, g, states[j], spec.skip_nonfinite)
                chunks.append((j, X, y, g, w, start, bad, keep))
        buf = yield from _round_rows(fmap, chunks, states, buf)


def _round_rows(
    fmap: Any, chunks: list[tuple[Any, ...]], states: list[Any], buf: np.ndarray
) -> Generator[Piece, None, np.ndarray]:
    """One round's chunks mapped slice by slice into ``buf`` (as ``plan._map_round``); returns the buffer."""
    from .features.plan import GROUP_BYTES, _check_good, _cut

    step = max(1, GROUP_BYTES // (8 * max(1, fmap.n_features_out_) * len(chunks)))
    for a in range(0, max(c[1].shape[0] for c in chunks), step):
        part = [c for c in chunks if c[1].shape[0] > a]
        rows = slice(a, a + step)
        items = [(X[rows], start + a, _cut(g, rows), states[j]) for j, X, _y, g, _w, start, _b, _k in part]
        n = sum(item[0].shape[0] for item in items)
        buf = buf if buf.shape[0] >= n else np.empty((n, fmap.n_features_out_))
        with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported by _check_good
            mapped = fmap.apply_chunks(items, out=buf)
        for (j, _x, y, g, w, start, bad, keep), (F, state) in zip(part, mapped):
            _check_good(F, bad[rows], start + a, fmap)
            yield F, y[rows], _cut(g, rows), _cut(w, rows), start + a, None if keep is None else ~keep[rows]
            states[j] = state
    return buf


def _merge(a: Tally, b: Tally) -> Tally:
    return a.merge(b)  # type: ignore[arg-type]
