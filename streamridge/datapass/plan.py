"""The lanes of a stateful feature map: which chunks of rows each task of the pass maps, in which order.

A stateful map (reservoirs, delays) carries its state along a series of rows, so its
pass runs *lanes*: a lane is a run of consecutive chunks whose map state is carried
from one to the next; lanes are independent, run in parallel, and their results are
reduced by the same fixed tree as partitions (:mod:`streamridge.datapass.executors`).

* stateless map: every chunk is a lane (:func:`plan_lanes`; the pass maps a stateless map
  inside its partitions instead, :class:`streamridge.datapass.mapped.MappedKernel`);
* stateful map (exact): a lane is a maximal run of chunks in which each chunk
  continues the series of the chunk before it (so series run in parallel, and
  the chunks of one series in row order);
* stateful map with ``warmup=W``: every chunk is a lane, and a chunk that continues
  a series first runs the map over the W rows before it (from rest) and discards them.

Exact lanes run in groups (:class:`LaneGroup`, :func:`group_size`): one task steps the
series of its lanes together.  Over stored data a lane's chunks are :class:`ChunkRead`
row ranges its task reads through the source's readers; over a dask array they are the
chunk's blocks of every role, computed together.  The task itself, which reads, maps and
feeds a kernel, is :mod:`streamridge.datapass.lane_task`.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from streamridge.errors import CheckpointError
from streamridge.features._base import FeatureMap
from streamridge.features._series import (
    check_contiguous,
    check_washout,
    chunk_heads,
    merge_chunk_heads,
    series_runs,
)
from streamridge.sources import ROLES


def stored_series_runs(
    reader: Any, lo: int, starts: np.ndarray, n_rows: int
) -> tuple[np.ndarray, np.ndarray]:
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
    if (
        not fmap.stateful
        or getattr(fmap, "warmup", None)
        or stored is None
        or stored[0][2] is None
        or not chunks
    ):
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
    source: Any, spec: Any, chunks: list[int], row_offset: int, block: Any = None, *, statistics: bool = False
) -> tuple[list[int], np.ndarray, list[Any]]:
    """``(chunks, starts, calls)`` of a pass's lanes: :func:`lane_chunks`, the global first row of every
    chunk, and :func:`lane_calls` over them (``block`` default :func:`dask_block`).

    ``statistics=True`` (the statistics pass): refuse, before the pass, a washout that would leave
    every row out (:func:`check_washout`).
    """
    chunks, runs = lane_chunks(source, spec, chunks, row_offset)
    starts = np.concatenate([[0], np.cumsum(chunks)[:-1]]).astype(np.int64) + row_offset
    calls = lane_calls(source, spec, starts, 0, block or dask_block, runs=runs, statistics=statistics)
    return chunks, starts, calls


def dask_block(arr: Any, i: int) -> Any:
    """Block ``i`` along the rows of a dask array of one column block (None stays None)."""
    if arr is None:
        return None
    return arr.blocks[i] if arr.ndim == 1 else arr.blocks[i, 0]


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
    a task reads each chunk's rows itself (:func:`streamridge.datapass.lane_task.read_chunk`),
    with nothing of dask to ship or to run.
    """

    __slots__ = ("hi", "lo", "readers")

    def __init__(self, readers: tuple[Any, ...], lo: int, hi: int) -> None:
        self.readers, self.lo, self.hi = readers, lo, hi


class Lane:
    """Chunks ``first .. stop - 1`` of the pass and the warm-up rows before them (a plain class:
    dask must not look inside it, the task reads the blocks itself).

    ``blocks``: per chunk a :class:`ChunkRead` (stored data) or a tuple of the roles' dask blocks (a
    dask array, computed together so upstream work shared by X and y runs once); ``prefix``: the
    warm-up rows as such a chunk and their first global row, or None.
    """

    def __init__(
        self,
        first: int,
        stop: int,
        blocks: list[Any],
        starts: list[int],
        prefix: tuple[Any, int] | None,
        init: Any = None,
    ) -> None:
        self.first, self.stop, self.blocks, self.starts, self.prefix = first, stop, blocks, starts, prefix
        self.init = init  # the map's state before the lane (None: from rest)


class LaneGroup:
    """Consecutive lanes run by one task, their chunks taken in rounds (chunk r of every lane together).

    ``group_values``: the sorted series ids of the group's rows when the folds are one per series
    (``cv="groups"``): the task's statistics then hold those folds only
    (:func:`streamridge.datapass.stats_kernel.lane_scheme`).
    ``progress``: a :class:`streamridge.datapass.lane_task.GroupProgress` to continue from (a
    checkpoint), or None; ``saver``: where
    the task saves its progress as it goes (``due()`` and ``save(progress)``,
    :class:`streamridge.datapass.checkpoint.LaneSaver`), or None.
    """

    def __init__(
        self,
        lanes: list[Lane],
        group_values: tuple[Any, ...] | None = None,
        *,
        progress: Any = None,
        saver: Any = None,
    ) -> None:
        self.lanes, self.group_values = lanes, group_values
        self.first, self.stop = lanes[0].first, lanes[-1].stop
        self.progress, self.saver = progress, saver


def plan_lanes(
    fmap: FeatureMap, starts: np.ndarray, n_rows_end: int, heads: np.ndarray
) -> list[tuple[int, int, int | None]]:
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
    source: Any,
    spec: Any,
    starts: np.ndarray,
    first: int,
    block: Any,
    *,
    runs: Any = None,
    statistics: bool = False,
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
            raise CheckpointError(
                f"the checkpoint ends inside a lane of chunks {a}-{b - 1}; delete it and rerun the pass"
            )
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
        bounds = [
            (int(starts[g[0].first]), int(starts[g[-1].stop]) if g[-1].stop < len(starts) else end)
            for g in groups
        ]
        values = _group_values(spec.scheme, heads, ids, bounds)
        return [((), (LaneGroup(g, v), spec)) for g, v in zip(groups, values)]
    return [((), (lane, spec)) for lane in lanes]


def _group_values(
    scheme: Any, heads: np.ndarray, ids: np.ndarray, bounds: list[tuple[int, int]]
) -> list[tuple[Any, ...] | None]:
    """Sorted series ids of the rows ``lo .. hi - 1`` of every ``(lo, hi)`` (folds one per series), else None each."""
    if scheme.kind != "logo" or len(heads) == 0:
        return [None] * len(bounds)
    out: list[tuple[Any, ...] | None] = []
    for lo, hi in bounds:
        a = max(0, int(np.searchsorted(heads, lo, side="right")) - 1)  # the run holding row lo
        b = int(np.searchsorted(heads, hi, side="left"))
        out.append(tuple(np.unique(ids[a:b]).tolist()))
    return out
