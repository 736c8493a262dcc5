"""The task of a lane (or a group of lanes) of a stateful feature map: read, map with the state carried, add.

A lane task reads its chunks one at a time (memory of one chunk, whatever the lane's
length), maps them with the map's state carried from chunk to chunk, and adds the mapped
rows to the pass's kernel (statistics, a metric tally, predictions): :func:`lane_task`.
A group of lanes (:class:`streamridge.datapass.plan.LaneGroup`) takes its chunks in
rounds, chunk r of every lane mapped together (``apply_chunks``: one GEMM per reservoir
step for all their series), in slices of at most :data:`GROUP_BYTES` of features.
Over stored data a chunk's rows are read through the source's readers
(:func:`read_chunk`); over a dask array the chunk's blocks of every role are computed
together.  With a checkpoint, a group's task saves its :class:`GroupProgress`
(position, map states, the kernel's accumulator) as it goes, and a resumed task
continues from it, reading only the rows after it.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Generator
from typing import Any, TypeVar

import numpy as np

from streamridge.datapass.mapped import check_good, checked_input, flat, map_chunk
from streamridge.datapass.plan import ChunkRead, Lane, LaneGroup
from streamridge.errors import CheckpointError
from streamridge.features._base import FeatureMap

#: one mapped piece of a lane's rows: features, y, groups, weights, first row, rows left out (washout) or None
Piece = tuple[np.ndarray, Any, Any, Any, int, Any]
_R = TypeVar("_R")

#: bytes of the features a group maps at once: a round's chunks are mapped in slices of rows below it
GROUP_BYTES = 1 << 27

#: a read's whole stored units are decoded and kept for the next chunks where they hold at most this many
#: times its rows (plus one unit), else only its rows are read
CACHE_ROWS_FACTOR = 4


@dataclasses.dataclass
class GroupProgress:
    """Where the task of a :class:`LaneGroup` stands, enough to continue it bit for bit.

    Parameters
    ----------
    position : (int, int)
        ``(round, row)``: the rows before row ``row`` of chunk ``round`` of every lane,
        and all rows of the chunks before, are done.
    states : list
        The map's state of every lane at the position.
    rows_seen : int
        One past the last raw row read so far.
    stats : dict of str to array
        The statistics accumulator's state (:meth:`streamridge.stats.kernel.CellAccumulator.snapshot`).
    slice_bytes : int
        :data:`GROUP_BYTES` of the task: a round's rows are mapped in slices of a size set by it,
        and a position is a slice's end.
    """

    position: tuple[int, int]
    states: list[Any]
    rows_seen: int
    stats: dict[str, np.ndarray]
    slice_bytes: int


def lane_task(lane: Lane | LaneGroup, spec: Any, kernel: Any) -> Any:
    """``kernel``'s result of a lane's rows (or a group's lanes), the map applied with its state carried (pure).

    One accumulator takes every mapped piece of the task's rows.  A kernel with a
    ``narrowed(group_values)`` method gives the kernel of a group's own series; one with
    ``finish_lane(result, rows_seen, state)`` completes the result with the rows seen and
    the map's state after the last lane.

    Parameters
    ----------
    lane : Lane or LaneGroup
        From :func:`streamridge.datapass.plan.lane_calls`.
    spec : PassSpec
        With a fitted ``features`` map.
    kernel : kernel of the pass
        Takes the map's outputs.

    Raises
    ------
    NonFiniteError
        Raw X has NaN/inf (for a stateful map even with ``skip_nonfinite``: it would
        spoil the state of the rest of the series), or the map produced NaN/inf.
    """
    if isinstance(lane, LaneGroup) and hasattr(kernel, "narrowed"):
        kernel = kernel.narrowed(lane.group_values)
    acc = kernel.start()

    def add(F: np.ndarray, y: Any, g: Any, w: Any, start: int, drop: Any) -> None:
        kernel.add(acc, F, y, g, w, start, drop)

    if isinstance(lane, LaneGroup):
        states, rows_seen = _run_group(lane, spec, acc, add)
    else:
        state, rows_seen = drain(lane_pieces(lane, spec), add)
        states = [state]
    out = kernel.finish(acc)
    finish_lane = getattr(kernel, "finish_lane", None)
    return out if finish_lane is None else finish_lane(out, rows_seen, states[-1])


def _run_group(group: LaneGroup, spec: Any, acc: Any, add: Callable[..., None]) -> tuple[list[Any], int]:
    """Drain a group's pieces into ``add``, continued from and saving its progress where it has a saver."""
    if group.progress is not None:
        _restore(acc, group.progress)
    saver = group.saver
    if saver is not None:
        saver.begin()

    def reached(position: tuple[int, int], states: list[Any], rows_seen: int) -> None:
        if saver.due():  # the accumulator holds every row before the position
            saver.save(GroupProgress(position, states, rows_seen, acc.snapshot(), GROUP_BYTES))

    pieces = group_pieces(group, spec, group.progress, None if saver is None else reached)
    return drain(pieces, add)


def read_chunk(chunk: ChunkRead | tuple[Any, ...], cache: dict[int, Any] | None = None) -> list[Any]:
    """The arrays of one chunk's roles (None where a role is absent).

    A :class:`~streamridge.datapass.plan.ChunkRead` is read through its readers; ``cache``
    (one per task) keeps the whole read units last decoded for each role, where they are
    at most :data:`CACHE_ROWS_FACTOR` times the rows asked for: the chunks of series that
    share a stored chunk are then cut from one decode of it.  A tuple of dask blocks is
    computed together.
    """
    if isinstance(chunk, ChunkRead):
        return [
            None if r is None else _cached_read(r, i, chunk.lo, chunk.hi, cache)
            for i, r in enumerate(chunk.readers)
        ]
    from streamridge.datapass.executors import materialize_all

    return materialize_all(chunk)


def _cached_read(reader: Any, role: int, lo: int, hi: int, cache: dict[int, Any] | None) -> np.ndarray:
    grid = reader.grid() if cache is not None and hasattr(reader, "grid") else None
    if cache is None or grid is None or grid.unit <= 1:  # storage read at any row (memory, contiguous files)
        return np.asarray(reader.read(lo, hi))
    held = cache.get(role)
    if held is not None and held[0] <= lo and hi <= held[1]:
        return held[2][lo - held[0] : hi - held[0]]
    a, b = grid.floor(lo, unit=True), grid.ceil(hi, unit=True)
    if held is not None and held[0] <= lo < held[1]:  # the next rows: the units held are not decoded again
        a = held[1]
    if b - a > CACHE_ROWS_FACTOR * (hi - lo) + grid.unit:
        cache.pop(role, None)
        return np.asarray(reader.read(lo, hi))
    block = np.asarray(reader.read(a, b))
    if held is not None and a == held[1]:
        block, a = np.concatenate([held[2][lo - held[0] :], block]), lo
    cache[role] = (a, b, block)
    return block[lo - a : hi - a]


def lane_pieces(lane: Lane, spec: Any) -> Generator[Piece, None, tuple[Any, int]]:
    """The mapped rows of a lane, chunk by chunk, its state carried (after its warm-up rows, ``warmup=W``).

    Yields the pieces of :data:`Piece`; returns the map's state after the lane's last row and one
    past that row (0 when the lane had none).
    """
    fmap: FeatureMap = spec.features
    state = fmap.init_state() if lane.init is None else lane.init
    if lane.prefix is not None:
        rows, row = lane.prefix
        Xp, _, gp, _ = read_chunk(rows)
        with np.errstate(over="ignore", invalid="ignore"):  # the warm-up rows' features are discarded
            _, state = fmap.apply_chunk(np.asarray(Xp), row, flat(gp), state)
    cache: dict[int, Any] = {}
    rows_seen = 0
    for blocks, start in zip(lane.blocks, lane.starts):
        X, y, g, w = read_chunk(blocks, cache)
        g = flat(g)
        F, drop, state = map_chunk(fmap, np.asarray(X), start, g, state, spec.skip_nonfinite)
        rows_seen = start + F.shape[0]
        yield F, y, g, w, start, drop
    return state, rows_seen


def drain(pieces: Generator[Piece, None, _R], add: Callable[..., None]) -> _R:
    """Call ``add(*piece)`` for every piece of ``pieces`` (in order); return the generator's value."""
    while True:
        try:
            piece = next(pieces)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        add(*piece)


def _restore(acc: Any, progress: GroupProgress) -> None:
    """The accumulator of a task continued from ``progress``.

    Raises
    ------
    CheckpointError
        If the progress was saved with rounds sliced otherwise, or with statistics of another shape.
    """
    if progress.slice_bytes != GROUP_BYTES:
        raise CheckpointError(
            f"the checkpoint's lane progress was saved with slices of {progress.slice_bytes} bytes, "
            f"this version maps {GROUP_BYTES}; delete the checkpoint and rerun the pass"
        )
    try:
        acc.restore(progress.stats)
    except (KeyError, ValueError) as exc:
        raise CheckpointError(
            f"the checkpoint's lane progress does not fit the pass ({exc}); delete it and rerun the pass"
        ) from None


def group_pieces(
    group: LaneGroup,
    spec: Any,
    progress: GroupProgress | None = None,
    on_slice: Callable[[tuple[int, int], list[Any], int], None] | None = None,
) -> Generator[Piece, None, tuple[list[Any], int]]:
    """The mapped rows of a group of lanes: round r maps chunk r of every lane together (``apply_chunks``).

    A round's chunks are mapped in slices of rows (at most ``GROUP_BYTES`` of
    features at once, in one buffer reused slice after slice): a piece's
    features are a view of that buffer, so consume each piece before the next.

    Parameters
    ----------
    group : LaneGroup
    spec : PassSpec
    progress : GroupProgress or None
        Continue from its position and states: only the rows after it are read.
    on_slice : callable or None
        Called as ``on_slice(position, states, rows_seen)`` once the pieces of a
        slice are consumed (:class:`GroupProgress` has the meanings).

    Returns
    -------
    states : list
        The map's state after each lane's last row.
    rows_seen : int
        One past the last raw row of the group (0 when it had none).
    """
    fmap: FeatureMap = spec.features
    lanes = group.lanes
    if progress is None:
        states = [fmap.init_state() if lane.init is None else lane.init for lane in lanes]
        (first, skip), rows_seen = (0, 0), 0
    else:
        states, (first, skip), rows_seen = list(progress.states), progress.position, progress.rows_seen
    buf = np.empty((0, fmap.n_features_out_))
    cache: dict[int, Any] = {}  # stored units shared by the chunks of consecutive series: decoded once
    n_rounds = max(len(lane.blocks) for lane in lanes)
    for r in range(first, n_rounds):
        skip = skip if r == first else 0  # rows of this round done before a resume
        active = [j for j, lane in enumerate(lanes) if r < len(lane.blocks)]
        chunks = []
        for j in active:
            block = _tail(lanes[j].blocks[r], skip)
            if block is None:
                continue
            X, y, g, w = read_chunk(block, cache)
            g, start = flat(g), lanes[j].starts[r] + skip
            X, bad, keep = checked_input(fmap, np.asarray(X), start, g, states[j], spec.skip_nonfinite)
            rows_seen = max(rows_seen, start + X.shape[0])
            if X.shape[0]:
                chunks.append((j, X, y, g, w, start, bad, keep))
        if not chunks:
            continue
        done = (
            None
            if on_slice is None
            else functools.partial(_slice_done, on_slice, (r, n_rounds), skip, states, rows_seen)
        )
        buf = yield from _round_pieces(fmap, chunks, states, buf, len(active), done)
    return states, rows_seen


def _slice_done(
    on_slice: Callable[..., None],
    rounds: tuple[int, int],
    skip: int,
    states: list[Any],
    rows_seen: int,
    end: int,
    last: bool,
) -> None:
    """``on_slice`` at the end of a slice of round ``rounds[0]`` of ``rounds[1]`` (rows ``skip + end`` of the
    round done; ``last``: all of them); not at the end of the last round (the task returns its result then)."""
    r, n_rounds = rounds
    if not last:
        on_slice((r, skip + end), states, rows_seen)
    elif r + 1 < n_rounds:
        on_slice((r + 1, 0), states, rows_seen)


def _tail(chunk: Any, skip: int) -> Any:
    """The rows of a chunk from its row ``skip`` on (None when it has none)."""
    if not skip:
        return chunk
    if isinstance(chunk, ChunkRead):
        return ChunkRead(chunk.readers, chunk.lo + skip, chunk.hi) if chunk.lo + skip < chunk.hi else None
    return tuple(None if b is None else b[skip:] for b in chunk)


def _round_pieces(
    fmap: FeatureMap,
    chunks: list[tuple[Any, ...]],
    states: list[Any],
    buf: np.ndarray,
    n_lanes: int,
    done: Callable[[int, bool], None] | None = None,
) -> Generator[Piece, None, np.ndarray]:
    """One round's chunks mapped slice by slice into ``buf`` (grown if needed, returned), piece by piece.

    The slices are of rows set by ``n_lanes``, the lanes of the round (``chunks``
    may hold only those with rows left after a resume); ``done(end, last)`` is
    called once a slice's pieces are consumed: rows up to ``end`` of the chunks
    are done (``last``: all of them).  Candidate maps (:func:`_candidate_pieces`) are
    mapped and consumed one candidate at a time, in slices set by the widest candidate.
    """
    maps = getattr(fmap, "candidates", None)
    width = max(m.n_features_out_ for m in maps) if maps else fmap.n_features_out_
    step = max(1, GROUP_BYTES // (8 * max(1, width) * n_lanes))
    rows_in_round = max(c[1].shape[0] for c in chunks)
    for a in range(0, rows_in_round, step):
        part = [c for c in chunks if c[1].shape[0] > a]
        rows = slice(a, a + step)
        items = [(X[rows], start + a, _cut(g, rows), states[j]) for j, X, _y, g, _w, start, _b, _k in part]
        n = sum(item[0].shape[0] for item in items)
        buf = buf if buf.shape[0] >= n else np.empty((n, width))
        if maps:
            new = yield from _candidate_pieces(fmap, part, items, rows, a, buf)
        else:
            with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported by check_good
                mapped = fmap.apply_chunks(items, out=buf)
            new = []
            for (_j, _x, y, g, w, start, bad, keep), (F, state) in zip(part, mapped):
                check_good(F, bad[rows], start + a, fmap)
                yield F, _cut(y, rows), _cut(g, rows), _cut(w, rows), start + a, _dropped(keep, rows)
                new.append(state)
        for (j, *_), state in zip(part, new):
            states[j] = state
        if done is not None:
            done(a + step, a + step >= rows_in_round)
    return buf


def _candidate_pieces(
    fmap: Any,
    part: list[tuple[Any, ...]],
    items: list[tuple[Any, ...]],
    rows: slice,
    a: int,
    buf: np.ndarray,
) -> Generator[Piece, None, list[Any]]:
    """The pieces of one slice of candidate maps, candidate after candidate; returns the lanes' new states.

    Candidate g's features of a lane are yielded as ``fmap.only(g, F)`` (the candidates'
    features with its part only): its kernel takes them while they are in cache, and the
    slice's buffer holds one candidate's features, not all of them.
    """
    maps = fmap.candidates
    new: list[list[Any]] = [[] for _ in part]
    for g, m in enumerate(maps):
        with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported by check_good
            out = buf.reshape(-1)[: buf.shape[0] * m.n_features_out_].reshape(buf.shape[0], -1)
            mapped = m.apply_chunks([(X, r, cut, s[g]) for X, r, cut, s in items], out=out)
        for i, ((_j, _x, y, grp, w, start, bad, keep), (F, state)) in enumerate(zip(part, mapped)):
            check_good(F, bad[rows], start + a, m)
            yield (
                fmap.only(g, F),
                _cut(y, rows),
                _cut(grp, rows),
                _cut(w, rows),
                start + a,
                _dropped(keep, rows),
            )
            new[i].append(state)
    return [tuple(s) for s in new]


def _dropped(keep: np.ndarray | None, rows: slice) -> np.ndarray | None:
    """The rows of a slice left out (washout), or None."""
    return None if keep is None else ~keep[rows]


def _cut(v: Any, rows: slice) -> Any:
    return None if v is None else v[rows]
