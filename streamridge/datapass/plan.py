"""The pass's hook for feature maps.

A stateless map runs inside the normal partition pass (:mod:`streamridge.datapass.partitions`):
:class:`MappedKernel` maps every sub-block of a partition before the statistics kernel,
so each stored chunk is read once and results merge on the workers.

A stateful map carries its state along a series, so its pass runs *lanes*: a lane is
a run of consecutive chunks whose map state is carried from one to the next; lanes are
independent, run in parallel, and their results are reduced by the same fixed tree as
partitions (:mod:`streamridge.datapass.lanes`).

* stateless map: every chunk is a lane (:func:`plan_lanes`; the pass uses :class:`MappedKernel`);
* stateful map (exact): a lane is a maximal run of chunks in which each chunk
  continues the series of the chunk before it (so series run in parallel, and
  the chunks of one series in row order);
* stateful map with ``warmup=W``: every chunk is a lane, and a chunk that continues
  a series first runs the map over the W rows before it (from rest) and discards them.

A lane task reads its chunks one at a time (memory of one chunk, whatever the
lane's length), maps them, and returns the merged statistics of the lane.  Over
stored data it reads each chunk's rows through the source's readers (:class:`ChunkRead`);
over a dask array it computes the chunk's blocks of every role together.  With one
fold per series (``cv="groups"``) a group of lanes returns the folds of its own series
only (:func:`lane_scheme`); the pass spreads the merged result over all folds at the
end (:func:`all_folds`).  With a checkpoint, a group's task saves its
:class:`GroupProgress` (position, map states, statistics accumulator) as it goes, and
a resumed task continues from it, reading only the rows after it.
This module is the only place the pass knows about feature maps
(:func:`streamridge.datapass.driver.accumulate` uses :class:`MappedKernel`;
:mod:`streamridge.datapass.lanes` calls :func:`lane_calls` and :func:`lane_task`).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable, Generator
from typing import Any, TypeVar

import numpy as np

from streamridge.errors import CheckpointError, NonFiniteError
from streamridge.features._base import FeatureMap, check_features
from streamridge.features._series import (
    check_contiguous,
    check_washout,
    chunk_heads,
    merge_chunk_heads,
    series_runs,
)
from streamridge.sources import ROLES  # the roles of a source a lane reads, in the order of a chunk's arrays

#: one mapped piece of a lane's rows: features, y, groups, weights, first row, rows left out (washout) or None
Piece = tuple[np.ndarray, Any, Any, Any, int, Any]
_R = TypeVar("_R")


def stored_series_runs(reader: Any, lo: int, starts: np.ndarray, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`series_runs` of a group column read through its reader (rows ``lo ..``), whole chunks of the
    pass at a time, about :data:`RUN_READ_ROWS` rows a read."""
    offset = int(starts[0]) if len(starts) else 0
    bounds = [int(s) - offset for s in starts] + [n_rows]
    heads, firsts, a = [], [], 0
    for i in range(1, len(bounds)):
        if bounds[i] - bounds[a] >= RUN_READ_ROWS or i == len(bounds) - 1:
            heads.append(chunk_heads(reader.read(lo + bounds[a], lo + bounds[i])))
            firsts.append(offset + bounds[a])
            a = i
    pos, ids = merge_chunk_heads(heads, np.asarray(firsts, dtype=np.int64))
    check_contiguous(pos, ids)
    return pos, ids


#: rows of the group column read at once by :func:`stored_series_runs`
RUN_READ_ROWS = 1 << 20


def _stored_readers(source: Any) -> tuple[tuple[Any, ...], int] | None:
    """The readers of X, y, groups, weights and their first row, or None where a role is a dask array."""
    if not hasattr(source, "pass_readers"):
        return None
    from streamridge.sources import DaskReader

    readers, lo = source.pass_readers()
    roles = tuple(readers.get(role) for role in ROLES)
    if any(isinstance(r, DaskReader) for r in roles):
        return None
    return roles, int(lo)


def lane_chunks(source: Any, spec: Any, chunks: list[int], row_offset: int = 0) -> tuple[list[int], Any]:
    """The chunks the lanes run over, and the series runs they were cut at (or None).

    An exact stateful map over stored data: the source's chunks cut at series
    heads into pieces of about ``n_rows / (MIN_TASKS * LANE_GROUP)`` rows or
    more, so that there are lanes enough for lane groups on every core.  A chunk
    holding many series (narrow raw inputs make chunks of millions of rows) was
    one lane: one task, on one core.  The series inside a piece still run in
    lockstep (:meth:`apply_chunks`), so many short series do not become as many
    lanes.  Otherwise (stateless or ``warmup`` maps, dask arrays, no series ids)
    the source's chunks.  Pass the runs to :func:`lane_calls` (``runs=``).
    """
    fmap = spec.features
    stored = _stored_readers(source)
    if not fmap.stateful or getattr(fmap, "warmup", None) or stored is None or stored[0][2] is None or not chunks:
        return list(chunks), None
    n_rows = int(sum(chunks))
    bounds = np.cumsum([0, *chunks]).astype(np.int64)
    heads, ids = stored_series_runs(stored[0][2], stored[1], bounds[:-1] + row_offset, n_rows)
    local = heads - row_offset
    target = max(1, -(-n_rows // (MIN_TASKS * LANE_GROUP)))
    cuts = [bounds]
    for a, b in itertools.pairwise(bounds.tolist()):
        inner = local[(local > a) & (local < b)]
        if len(inner) and b - a > target:  # the first head at or after every multiple of the target
            at = np.searchsorted(inner, np.arange(a + target, b, target))
            cuts.append(inner[np.unique(at[at < len(inner)])])
    return np.diff(np.unique(np.concatenate(cuts))).astype(int).tolist(), (heads, ids)


def lane_layout(
    source: Any, spec: Any, chunks: list[int], row_offset: int, block: Any, *, statistics: bool = False
) -> tuple[list[int], np.ndarray, list[Any]]:
    """``(chunks, starts, calls)`` of a pass's lanes: :func:`lane_chunks`, the global first row of every
    chunk, and :func:`lane_calls` over them.

    ``statistics=True`` (the statistics pass): refuse, before the pass, a washout that would leave
    every row out (:func:`check_washout`).
    """
    chunks, runs = lane_chunks(source, spec, chunks, row_offset)
    starts = np.concatenate([[0], np.cumsum(chunks)[:-1]]).astype(np.int64) + row_offset
    return chunks, starts, lane_calls(source, spec, starts, 0, block, runs=runs, statistics=statistics)


#: lanes of independent series run together by one task (one GEMM per reservoir step for all their series):
#: at least LANE_GROUP, more when there are many lanes (wider GEMMs per step, cheaper per series) while
#: keeping at least MIN_TASKS tasks, or when the lanes hold few series (see LOCKSTEP_SERIES); at most
#: MAX_LANE_GROUP; a function of the lane and series counts only, so the reduction tree (and a resumed
#: pass) does not depend on the scheduler
LANE_GROUP = 8
MAX_LANE_GROUP = 32
MIN_TASKS = 8
#: series a lane group should step together at least: a reservoir step of fewer rows is mostly Python
#: overhead, which holds the GIL, so the groups' threads would not run in parallel; lanes that already hold
#: several series each keep groups of LANE_GROUP.  64 series of 12,500 rows, one per lane, in groups of 16
#: against groups of 8 (scripts/ab_lockstep_series.py 16 / 1 --only-pass --series 64 --steps 12500
#: --chunk-rows 3125, and scripts/bench_features.py --only-pass --cv 5 --default-chunks): 200 units
#: 1.52-1.59 s against 2.62-2.99 s on 16 cores; 50 units 0.38 s against 0.56-0.58 s on 2 cores
LOCKSTEP_SERIES = 16

#: bytes of the features a group maps at once: a round's chunks are mapped in slices of rows below it
GROUP_BYTES = 1 << 27


def group_size(n_lanes: int, n_series: int | None = None) -> int:
    """Lanes per task for ``n_lanes`` exact lanes holding ``n_series`` series runs between them.

    At least :data:`LANE_GROUP`; at least ``n_lanes // MIN_TASKS``; with ``n_series``,
    enough lanes to step :data:`LOCKSTEP_SERIES` series together on average; at most
    :data:`MAX_LANE_GROUP`.
    """
    size = max(LANE_GROUP, n_lanes // MIN_TASKS)
    if n_series:
        size = max(size, -(-LOCKSTEP_SERIES * n_lanes // n_series))
    return max(1, min(MAX_LANE_GROUP, size))


class ChunkRead:
    """Rows ``lo .. hi - 1`` of X, y, groups and weights, read through the source's readers by the task.

    The chunks of a lane over stored data (zarr, HDF5, .npy, in-memory arrays):
    a task reads each chunk's rows itself, with nothing of dask to ship or to run.
    """

    __slots__ = ("hi", "lo", "readers")

    def __init__(self, readers: tuple[Any, ...], lo: int, hi: int) -> None:
        self.readers, self.lo, self.hi = readers, lo, hi

    def read(self, cache: dict[int, Any] | None = None) -> list[np.ndarray | None]:
        """The arrays of the roles (None where a role is absent).

        ``cache`` (one per task) keeps the whole read units last decoded for
        each role, where they are at most :data:`CACHE_ROWS_FACTOR` times the
        rows asked for: the chunks of series that share a stored chunk are
        then cut from one decode of it.
        """
        return [None if r is None else _cached_read(r, i, self.lo, self.hi, cache) for i, r in enumerate(self.readers)]


#: a read's whole stored units are decoded and kept for the next chunks where they hold at most this many
#: times its rows (plus one unit), else only its rows are read
CACHE_ROWS_FACTOR = 4


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


def read_chunk(chunk: ChunkRead | tuple[Any, ...], cache: dict[int, Any] | None = None) -> list[Any]:
    """The arrays of one chunk: a :class:`ChunkRead` (through ``cache``, one per task), or a tuple of dask
    blocks computed together."""
    if isinstance(chunk, ChunkRead):
        return chunk.read(cache)
    from streamridge.datapass.executors import materialize_all

    return materialize_all(chunk)


class Lane:
    """Chunks ``first .. stop - 1`` of the pass and the warm-up rows before them (a plain class:
    dask must not look inside it, the task reads the blocks itself).

    ``blocks``: per chunk a :class:`ChunkRead` (stored data) or a tuple of the roles' dask blocks (a
    dask array, computed together so upstream work shared by X and y runs once); ``prefix``: the
    warm-up rows as such a chunk and their first global row, or None.
    """

    def __init__(self, first: int, stop: int, blocks: list[Any], starts: list[int],
                 prefix: tuple[Any, int] | None, init: Any = None) -> None:
        self.first, self.stop, self.blocks, self.starts, self.prefix = first, stop, blocks, starts, prefix
        self.init = init  # the map's state before the lane (None: from rest)


class LaneGroup:
    """Consecutive lanes run by one task, their chunks taken in rounds (chunk r of every lane together).

    ``group_values``: the sorted series ids of the group's rows when the folds are one per series
    (``cv="groups"``): the task's statistics then hold those folds only (:func:`lane_scheme`).
    ``progress``: a :class:`GroupProgress` to continue from (a checkpoint), or None; ``saver``: where
    the task saves its progress as it goes (``due()`` and ``save(progress)``,
    :class:`streamridge.datapass.checkpoint.LaneSaver`), or None.
    """

    def __init__(
        self,
        lanes: list[Lane],
        group_values: tuple[Any, ...] | None = None,
        *,
        progress: GroupProgress | None = None,
        saver: Any = None,
    ) -> None:
        self.lanes, self.group_values = lanes, group_values
        self.first, self.stop = lanes[0].first, lanes[-1].stop
        self.progress, self.saver = progress, saver


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


def plan_lanes(fmap: FeatureMap, starts: np.ndarray, n_rows_end: int, heads: np.ndarray) -> list[tuple[int, int, int | None]]:
    """``(first chunk, stop chunk, warm-up start row or None)`` of every lane.

    Parameters
    ----------
    fmap : the fitted map
    starts : global first row of every chunk
    n_rows_end : global index one past the last row
    heads : global first rows of the series runs (sorted)
    """
    n = len(starts)
    if not fmap.stateful:
        return [(i, i + 1, None) for i in range(n)]
    cont = ~np.isin(starts, heads)  # chunk i continues the series of chunk i - 1
    warmup = getattr(fmap, "warmup", None)
    if warmup:
        out: list[tuple[int, int, int | None]] = []
        for i in range(n):
            if not cont[i]:
                out.append((i, i + 1, None))
                continue
            series_start = int(heads[np.searchsorted(heads, starts[i], side="right") - 1])
            out.append((i, i + 1, max(series_start, int(starts[i]) - int(warmup))))
        return out
    firsts = [i for i in range(n) if i == 0 or not cont[i]]
    return [(a, b, None) for a, b in zip(firsts, [*firsts[1:], n])]


def lane_calls(
    source: Any, spec: Any, starts: np.ndarray, first: int, block: Any, *, runs: Any = None, statistics: bool = False
) -> list[tuple[tuple[()], tuple[Lane | LaneGroup, Any]]]:
    """Calls ``((), (lane, spec))`` of the lanes starting at chunk ``first`` or later.

    Exact lanes of a stateful map come in groups of :func:`group_size` (:class:`LaneGroup`):
    one task runs their series together.

    Parameters
    ----------
    source : the Source of the pass
    spec : PassSpec with ``features`` set (fitted)
    starts : global first row of every chunk
    first : chunks before this one are done (a resumed checkpoint ends at a lane end)
    block : function (array, chunk index) -> dask block
    runs : the series runs ``(heads, ids)`` already read (:func:`lane_chunks`), or None
    statistics : the statistics pass: :func:`check_washout` before any lane runs (not for a
        ``partial_fit`` batch, whose first and last series may go on across calls)
    """
    fmap = spec.features
    n_rows, width = (source.n_rows(), source.n_features()) if hasattr(source, "n_rows") else source.X.shape
    fmap.check_width(int(width))
    n_rows = int(n_rows)
    offset = int(starts[0]) if len(starts) else 0
    ends = [int(s) - offset for s in starts[1:]] + [n_rows]  # local row one past every chunk
    stored = _stored_readers(source)  # stored data: tasks read rows through the readers, not dask blocks
    empty = np.zeros(0, dtype=np.int64)
    if not fmap.stateful:
        heads, ids = empty, empty
    elif runs is not None:
        heads, ids = runs
    elif stored is not None and stored[0][2] is not None:
        heads, ids = stored_series_runs(stored[0][2], stored[1], starts, n_rows)
    else:
        heads, ids = series_runs(source.groups, starts)
    if statistics and fmap.stateful and not spec.open_end:
        check_washout(fmap, heads, ids, offset + n_rows)

    def chunk(lo: int, hi: int, i: int | None, roles: tuple[str, ...] = ROLES) -> Any:
        """Local rows ``lo .. hi - 1`` (chunk ``i`` of the pass, or None) of ``roles``, the others None."""
        if stored is not None:
            readers, first_row = stored
            a, b = first_row + lo, first_row + hi
            kept = tuple(
                None if r is None or name not in roles else r.window(a, b) if hasattr(r, "window") else r
                for r, name in zip(readers, ROLES)
            )  # in-memory arrays: a task ships its chunks' rows only
            return ChunkRead(kept, a, b)
        arrays = [getattr(source, name) if name in roles else None for name in ROLES]
        if i is not None:
            return tuple(block(arr, i) for arr in arrays)
        return tuple(None if arr is None else arr[lo:hi] for arr in arrays)

    lanes: list[Lane] = []
    for a, b, warm in plan_lanes(fmap, starts, offset + n_rows, heads):
        if a < first < b:  # cannot happen: checkpoints are saved at lane ends of the same plan
            raise CheckpointError(f"the checkpoint ends inside a lane of chunks {a}-{b - 1}; delete it and rerun the pass")
        if a < first:
            continue
        blocks = [chunk(int(starts[i]) - offset, ends[i], i) for i in range(a, b)]
        prefix = None
        if warm is not None:
            prefix = (chunk(warm - offset, int(starts[a]) - offset, None, ("X", "groups")), warm)
        init = spec.features_state if a == 0 and fmap.stateful else None
        lanes.append(Lane(a, b, blocks, [int(s) for s in starts[a:b]], prefix, init))
    if fmap.stateful and not getattr(fmap, "warmup", None):  # exact lanes: independent series, run together
        size = group_size(len(lanes), len(heads))
        groups = [lanes[i : i + size] for i in range(0, len(lanes), size)]
        end = offset + int(source.X.shape[0])
        bounds = [(int(starts[g[0].first]), int(starts[g[-1].stop]) if g[-1].stop < len(starts) else end) for g in groups]
        values = _group_values(spec.scheme, heads, ids, bounds)
        return [((), (LaneGroup(g, v), spec)) for g, v in zip(groups, values)]
    return [((), (lane, spec)) for lane in lanes]


def _group_values(scheme: Any, heads: np.ndarray, ids: np.ndarray, bounds: list[tuple[int, int]]) -> list[tuple[Any, ...] | None]:
    """Sorted series ids of the rows ``lo .. hi - 1`` of every ``(lo, hi)`` (folds one per series), else None each."""
    if scheme.kind != "logo" or len(heads) == 0:
        return [None] * len(bounds)
    out: list[tuple[Any, ...] | None] = []
    for lo, hi in bounds:
        a = max(0, int(np.searchsorted(heads, lo, side="right")) - 1)  # the run holding row lo
        b = int(np.searchsorted(heads, hi, side="left"))
        out.append(tuple(np.unique(ids[a:b]).tolist()))
    return out


def lane_scheme(scheme: Any, group_values: tuple[Any, ...] | None) -> Any:
    """The fold scheme of a lane group's statistics: with one fold per series, the folds of its own
    series only (an eighth of the memory and transfer with 64 series in groups of 8; merged by series id,
    :func:`streamridge.stats.foldstats.merge`), else the pass's scheme."""
    if group_values is None or scheme.kind != "logo" or not group_values:
        return scheme
    return dataclasses.replace(scheme, n_folds=len(group_values), group_values=group_values)


def all_folds(total: Any, spec: Any) -> Any:
    """The pass's result over all the scheme's folds (lane groups' results hold their own series' folds only).

    Merging with empty statistics is exact (0 + x), so a fold's numbers are those of its lane group.
    """
    if total is None or spec.scheme.kind != "logo" or "scheme" not in total.meta:
        return total
    from streamridge.stats.foldstats import FoldStats, merge

    full = spec.scheme.to_dict()
    if total.meta["scheme"].get("group_values") != full["group_values"]:
        meta, state = dict(total.meta), getattr(total, "features_state", None)
        empty = FoldStats.zeros(spec.scheme.n_folds, total.n_classes, total.n_features, total.n_targets, {"scheme": full})
        total = merge(empty, total)
        total.meta = meta
        if state is not None:
            total.features_state = state  # type: ignore[attr-defined]
    total.meta["scheme"] = full
    return total


def lane_task(lane: Lane | LaneGroup, spec: Any) -> Any:
    """Merged statistics of a lane's chunks (or a group's lanes, in row order), the map applied with its state carried (pure).

    Raises
    ------
    NonFiniteError
        Raw X has NaN/inf (for a stateful map even with ``skip_nonfinite``: it would
        spoil the state of the rest of the series), or the map produced NaN/inf.
    """
    from streamridge.datapass.driver import chunk_task
    from streamridge.stats.foldstats import merge

    if isinstance(lane, LaneGroup):
        return _group_task(lane, spec)
    merged: list[Any] = [None]  # each chunk's statistics merged as they come (one result held at a time)

    def add(F: np.ndarray, y: Any, g: Any, w: Any, start: int, drop: Any) -> None:
        part = chunk_task(F, y, g, w, start, spec, drop=drop)
        merged[0] = part if merged[0] is None else merge(merged[0], part)

    state = drain(lane_pieces(lane, spec), add)
    out = merged[0]
    if spec.features.stateful and out is not None:
        out.features_state = state  # type: ignore[attr-defined]  # read by the pass after the last lane
    return out


def lane_pieces(lane: Lane, spec: Any) -> Generator[Piece, None, Any]:
    """The mapped rows of a lane, chunk by chunk, its state carried (after its warm-up rows, ``warmup=W``).

    Yields the pieces of :data:`Piece`; returns the map's state after the lane's last row.
    """
    fmap: FeatureMap = spec.features
    state = fmap.init_state() if lane.init is None else lane.init
    if lane.prefix is not None:
        rows, row = lane.prefix
        Xp, _, gp, _ = read_chunk(rows)
        with np.errstate(over="ignore", invalid="ignore"):  # the warm-up rows' features are discarded
            _, state = fmap.apply_chunk(np.asarray(Xp), row, _flat(gp), state)
    cache: dict[int, Any] = {}
    for blocks, start in zip(lane.blocks, lane.starts):
        X, y, g, w = read_chunk(blocks, cache)
        g = _flat(g)
        F, drop, state = _map_chunk(fmap, np.asarray(X), start, g, state, spec.skip_nonfinite)
        yield F, y, g, w, start, drop
    return state


def drain(pieces: Generator[Piece, None, _R], add: Callable[..., None]) -> _R:
    """Call ``add(*piece)`` for every piece of ``pieces`` (in order); return the generator's value."""
    while True:
        try:
            piece = next(pieces)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        add(*piece)


class MappedKernel:
    """The partition kernel of a pass with a stateless map: map each sub-block, then accumulate it.

    Same protocol as :class:`streamridge.datapass.driver.StatsKernel` (``start``, ``add``,
    ``finish``, ``merge``); the statistics are those of the map's outputs.

    Parameters
    ----------
    spec : PassSpec
        With a fitted stateless ``features`` map.
    n_features : int
        The map's output width.
    """

    def __init__(self, spec: Any, n_features: int) -> None:
        from streamridge.datapass.driver import StatsKernel

        if spec.features is None or spec.features.stateful:
            raise ValueError("MappedKernel takes a stateless feature map")
        self.spec, self.inner = spec, StatsKernel(spec, n_features)

    def start(self) -> Any:
        """An empty accumulator of the mapped width."""
        return self.inner.start()

    def add(self, acc: Any, X: np.ndarray, y: Any, groups: Any, weights: Any, row_start: int) -> None:
        """Map the rows ``row_start ..`` of one sub-block and add their statistics."""
        from streamridge.datapass.driver import prepare_rows

        g = _flat(groups)
        fmap = self.spec.features
        F, drop, _ = _map_chunk(fmap, np.asarray(X), row_start, g, fmap.init_state(), self.spec.skip_nonfinite)
        acc.add(*prepare_rows(F, y, g, weights, row_start, self.spec, drop))

    def finish(self, acc: Any) -> Any:
        """The partition's statistics."""
        return self.inner.finish(acc)

    @staticmethod
    def merge(a: Any, b: Any) -> Any:
        """Chan pairwise merge."""
        from streamridge.stats.foldstats import merge

        return merge(a, b)


def merge_lanes(a: Any, b: Any) -> Any:
    """Merge of two lanes' results (``a`` before ``b`` in row order) keeping the map's state after ``b``.

    The state after the last row comes back with the pass's result (a series
    continued by the next ``partial_fit``).
    """
    from streamridge.stats.foldstats import merge

    out = merge(a, b)
    state = getattr(b, "features_state", None)
    if state is not None:
        out.features_state = state  # type: ignore[attr-defined]
    return out


def _group_task(group: LaneGroup, spec: Any) -> Any:
    """:func:`lane_task` of a group: round r maps chunk r of every lane together (:func:`group_pieces`).

    All the group's rows go into one statistics accumulator finished once, as the
    sub-blocks of a partition do: no per-chunk result and merge, which with many
    folds (one per series) cost more than the map.
    """
    from streamridge.datapass.driver import StatsKernel, prepare_rows

    scheme = lane_scheme(spec.scheme, group.group_values)
    spec = dataclasses.replace(spec, scheme=scheme)
    kernel = StatsKernel(spec, spec.features.n_features_out_)
    acc = kernel.start()
    if group.progress is not None:
        _restore(acc, group.progress)
    saver = group.saver
    if saver is not None:
        saver.begin()

    def add(F: np.ndarray, y: Any, g: Any, w: Any, start: int, drop: Any) -> None:
        acc.add(*prepare_rows(F, y, g, w, start, spec, drop))

    def reached(position: tuple[int, int], states: list[Any], rows_seen: int) -> None:
        if saver.due():  # the accumulator holds every row before the position
            saver.save(GroupProgress(position, states, rows_seen, acc.snapshot(), GROUP_BYTES))

    pieces = group_pieces(group, spec, group.progress, None if saver is None else reached)
    states, rows_seen = drain(pieces, add)
    if not rows_seen:
        return None
    out = kernel.finish(acc)
    out.meta["rows_seen"] = rows_seen
    if scheme.kind == "logo":  # merged with other groups' results by series id
        out.meta["scheme"] = scheme.to_dict()
    out.features_state = states[-1]  # type: ignore[attr-defined]  # read by the pass after the last group
    return out


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
            g, start = _flat(g), lanes[j].starts[r] + skip
            X, bad, keep = _checked_input(fmap, np.asarray(X), start, g, states[j], spec.skip_nonfinite)
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
    are done (``last``: all of them).
    """
    step = max(1, GROUP_BYTES // (8 * max(1, fmap.n_features_out_) * n_lanes))
    rows_in_round = max(c[1].shape[0] for c in chunks)
    for a in range(0, rows_in_round, step):
        part = [c for c in chunks if c[1].shape[0] > a]
        rows = slice(a, a + step)
        items = [(X[rows], start + a, _cut(g, rows), states[j]) for j, X, _y, g, _w, start, _b, _k in part]
        n = sum(item[0].shape[0] for item in items)
        buf = buf if buf.shape[0] >= n else np.empty((n, fmap.n_features_out_))
        with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported by _check_good
            mapped = fmap.apply_chunks(items, out=buf)
        for (j, _x, y, g, w, start, bad, keep), (F, state) in zip(part, mapped):
            _check_good(F, bad[rows], start + a, fmap)
            yield F, _cut(y, rows), _cut(g, rows), _cut(w, rows), start + a, None if keep is None else ~keep[rows]
            states[j] = state
        if done is not None:
            done(a + step, a + step >= rows_in_round)
    return buf


def _cut(v: Any, rows: slice) -> Any:
    return None if v is None else v[rows]


def _flat(g: Any) -> np.ndarray | None:
    return None if g is None else np.asarray(g).reshape(-1)


def _map_chunk(fmap: FeatureMap, X: np.ndarray, start: int, g: np.ndarray | None, state: Any, skip: bool) -> tuple[np.ndarray, np.ndarray | None, Any]:
    """Features, rows to leave out (washout) and the new state of one chunk."""
    X, bad, keep = _checked_input(fmap, X, start, g, state, skip)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported by _check_good
        F, state = fmap.apply_chunk(X, start, g, state)
    _check_good(F, bad, start, fmap)
    return F, None if keep is None else ~keep, state


def _checked_input(fmap: FeatureMap, X: np.ndarray, start: int, g: np.ndarray | None, state: Any, skip: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Raw rows ready for the map (NaN rows zeroed when skipped), the rows with NaN, and the rows kept (washout)."""
    bad = ~np.isfinite(X).all(axis=tuple(range(1, X.ndim))) if X.dtype.kind in "fc" else np.zeros(X.shape[0], bool)
    if bad.any() and (fmap.stateful or not skip):
        rows = (np.flatnonzero(bad)[:5] + start).tolist()
        extra = " (a stateful feature map cannot skip rows)" if skip else "; or skip those rows (skip_nonfinite=True, --skip-nonfinite)"
        raise NonFiniteError(
            f"X has NaN or inf in {int(bad.sum())} row(s) of the chunk of rows {start}-{start + X.shape[0] - 1}, "
            f"first at rows {rows}; clean the data{extra}"
        )
    if bad.any():
        X = np.where(bad[:, None], 0.0, X)
    return X, bad, fmap.keep_mask(X.shape[0], g, state)


def _check_good(F: np.ndarray, bad: np.ndarray, start: int, fmap: FeatureMap) -> None:
    """Non-finite features in rows whose raw input was finite: an error naming the rows; rows with NaN input
    get NaN features (dropped by the statistics kernel with ``skip_nonfinite``)."""
    if bad.any():
        G = F.copy()
        G[bad] = 0.0
        check_features(G, start, fmap)
        F[bad] = np.nan
        return
    check_features(F, start, fmap)
