"""Series (group id) bookkeeping shared by the stateful maps and the pass.

Stateful maps (:class:`~streamridge.features.EchoStateNetwork`,
:class:`~streamridge.features.Delays`) read rows as time steps; ``groups`` names
the series of every row.  Each series must be one contiguous run of rows in time
order; a series id that comes back after another series is an error naming the row.
A map's state saved in a checkpoint goes through :func:`encode_state` and :func:`decode_state`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamridge.errors import CheckpointError, FoldError, InputError
from streamridge.folds.schemes import plain


def run_heads(groups: np.ndarray | None, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions and ids of the first row of every run of equal group ids.

    Parameters
    ----------
    groups : array of shape (n_rows,) or None
        None: one series (id 0).
    n_rows : int

    Returns
    -------
    pos : array of int64 of shape (n_runs,)
        Always starts with 0 when ``n_rows > 0``.
    ids : array of shape (n_runs,)
    """
    if n_rows == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    if groups is None:
        return np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
    g = np.asarray(groups).reshape(-1)
    change = np.flatnonzero(g[1:] != g[:-1]) + 1
    pos = np.concatenate([[0], change]).astype(np.int64)
    return pos, g[pos]


def check_contiguous(pos: np.ndarray, ids: np.ndarray, row_start: int = 0) -> None:
    """Raise if a series id occurs in two separate runs (rows of a series not contiguous).

    Parameters
    ----------
    pos : array of int of shape (n_runs,)
        Row of the first row of each run, relative to ``row_start``.
    ids : array of shape (n_runs,)
        Series id of each run, consecutive runs having different ids.
    row_start : int
        Global index of row 0 (for the message).

    Raises
    ------
    InputError
    """
    if len(ids) < 2:
        return
    counts = np.unique(ids, return_counts=True)[1]
    if np.all(counts == 1):
        return
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    dup = np.flatnonzero(sorted_ids[1:] == sorted_ids[:-1]) + 1
    k = int(min(order[dup]))  # the earliest run that repeats an earlier series
    raise InputError(
        f"series {plain(ids[k])!r} starts again at row {int(pos[k]) + row_start} after other series; "
        "stateful feature maps need the rows of each series contiguous and in time order "
        "(sort the data by series, then time)"
    )


def merge_chunk_heads(
    heads: list[tuple[np.ndarray, np.ndarray]], starts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Global run heads from per-chunk run heads (a run crossing a chunk boundary is one run).

    Parameters
    ----------
    heads : list of (pos, ids) per chunk, ``pos`` relative to the chunk's first row
    starts : array of int of shape (n_chunks,)
        Global first row of every chunk.

    Returns
    -------
    pos : array of int64 (global rows), ids : array
    """
    all_pos: list[np.ndarray] = []
    all_ids: list[np.ndarray] = []
    last: Any = _NOTHING
    for (pos, ids), s in zip(heads, starts):
        if len(ids) == 0:
            continue
        if last is not _NOTHING and ids[0] == last:
            pos, ids = pos[1:], ids[1:]
        if len(ids):
            all_pos.append(pos + int(s))
            all_ids.append(ids)
            last = ids[-1]
    if not all_pos:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    return np.concatenate(all_pos).astype(np.int64), np.concatenate(all_ids)


class _Nothing:
    def __repr__(self) -> str:
        return "<no series>"


_NOTHING: Any = _Nothing()
NO_SERIES: Any = _NOTHING
"""State marker: no series seen yet (the next row starts a series)."""


def encode_state(state: Any, prefix: str = "state") -> tuple[Any, dict[str, np.ndarray]]:
    """A stateful map's state as JSON and arrays (a checkpoint), for :func:`decode_state`.

    States are built of None, :data:`NO_SERIES`, tuples, lists, Python numbers
    and strings, NumPy scalars and arrays (series ids, time steps, state vectors,
    histories); every value comes back with its type and bits.

    Parameters
    ----------
    state : the state
    prefix : str
        Names of the arrays: ``prefix0``, ``prefix1``, ...

    Returns
    -------
    description : JSON-serializable object
    arrays : dict of str to array

    Raises
    ------
    CheckpointError
        A value of another type (a series id that is a Python object, say).
    """
    arrays: dict[str, np.ndarray] = {}

    def enc(v: Any) -> Any:
        if isinstance(v, (np.ndarray, np.generic)) and np.asarray(v).dtype.kind != "O":
            key = f"{prefix}{len(arrays)}"
            arrays[key] = np.asarray(v)
            return {"array" if isinstance(v, np.ndarray) else "scalar": key}
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if v is NO_SERIES:
            return {"no_series": True}
        if isinstance(v, (tuple, list)):
            return {type(v).__name__: [enc(x) for x in v]}
        raise CheckpointError(
            f"a feature map's state holds a {type(v).__name__}, which a checkpoint cannot save; "
            "use numeric or string series ids"
        )

    return enc(state), arrays


def decode_state(description: Any, arrays: Any) -> Any:
    """The state :func:`encode_state` described (``arrays``: a mapping of its arrays)."""
    if not isinstance(description, dict):
        return description
    if "no_series" in description:
        return NO_SERIES
    if "tuple" in description:
        return tuple(decode_state(v, arrays) for v in description["tuple"])
    if "list" in description:
        return [decode_state(v, arrays) for v in description["list"]]
    if "array" in description:
        return np.array(arrays[description["array"]])
    if "scalar" in description:
        return np.asarray(arrays[description["scalar"]])[()]
    raise ValueError(f"unknown state entry {sorted(description)}")


def check_washout(fmap: Any, heads: np.ndarray, ids: np.ndarray, end: int) -> None:
    """Raise :class:`FoldError` if the map's washout leaves out every row of every series.

    Parameters
    ----------
    fmap : the fitted map (:meth:`FeatureMap.rows_left_out`)
    heads : global first row of every series run (sorted)
    ids : series id of every run
    end : global row one past the last row of the pass
    """
    w = fmap.rows_left_out()
    if w == 0 or len(heads) == 0:
        return
    lengths = np.diff(np.append(heads, end))
    k = int(np.argmax(lengths))
    if lengths[k] > w:
        return
    sid = plain(ids[k])
    raise FoldError(
        f"the feature map's washout of {w} rows is at least as long as the longest series (series {sid!r}, "
        f"{int(lengths[k])} rows), so every row would be left out of the statistics; use a washout shorter "
        f"than {int(lengths[k])} rows or longer series"
    )


def chunk_heads(block: Any) -> tuple[np.ndarray, np.ndarray]:
    g = np.asarray(block).reshape(-1)
    return run_heads(g, g.shape[0])


def series_runs(groups: Any, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First row and id of every series run, checked contiguous (reads the group column once).

    Parameters
    ----------
    groups : dask array of shape (n_rows,) with the chunks of the pass, array, or None
    starts : array of int of shape (n_chunks,)
        Global first row of every chunk.

    Returns
    -------
    pos : array of int64 (global rows), ids : array
    """
    if groups is None:
        return np.asarray(starts[:1], dtype=np.int64), np.zeros(min(1, len(starts)), dtype=np.int64)
    if not hasattr(groups, "dask"):
        g = np.asarray(groups).reshape(-1)
        pos, ids = run_heads(g, g.shape[0])
        pos = pos + int(starts[0]) if len(starts) else pos
    else:
        import dask
        from dask.threaded import get as threads  # a callable: dask imports distributed to resolve a name

        blocks = groups.reshape(-1).to_delayed().reshape(-1)
        heads = dask.compute(*[dask.delayed(chunk_heads)(b) for b in blocks], scheduler=threads)
        pos, ids = merge_chunk_heads(list(heads), np.asarray(starts))
    check_contiguous(pos, ids)
    return pos, ids
