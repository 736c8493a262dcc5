"""Apply a fitted map to a dask array lazily (predict on lazy inputs, fitting later pipeline steps)."""

from __future__ import annotations

from typing import Any

import numpy as np

from streamridge.features._base import FeatureMap, check_features


def _stateless(fmap: FeatureMap, block: np.ndarray, row_start: int) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        F, _ = fmap.apply_chunk(np.asarray(block, dtype=np.float64), row_start, None, None)
    check_features(F, row_start, fmap)
    return F


def _step(
    fmap: FeatureMap, block: np.ndarray, row_start: int, groups: Any, state: Any
) -> tuple[np.ndarray, Any]:
    g = None if groups is None else np.asarray(groups).reshape(-1)
    with np.errstate(over="ignore", invalid="ignore"):
        F, new = fmap.apply_chunk(np.asarray(block, dtype=np.float64), row_start, g, state)
    check_features(F, row_start, fmap)
    return F, new


def map_dask(fmap: FeatureMap, X: Any, groups: Any = None) -> Any:
    """``fmap`` applied to the row chunks of dask array X (lazy).

    Stateless maps map every chunk independently; stateful maps chain the chunks
    in row order, each task taking the previous one's state (series given by the
    dask or NumPy array ``groups``, checked to be contiguous when computed).

    Returns
    -------
    dask array of float64 of shape (n_rows, n_features_out), X's row chunks
    """
    import dask
    import dask.array as da

    X = X.rechunk({1: -1})
    starts = np.concatenate([[0], np.cumsum(X.chunks[0])[:-1]]).astype(np.int64)
    n_out = fmap.n_features_out_
    if not fmap.stateful:
        return X.map_blocks(
            lambda b, block_info=None: _stateless(fmap, b, int(starts[block_info[0]["chunk-location"][0]])),
            dtype=np.float64,
            chunks=(X.chunks[0], (n_out,)),
        )
    if groups is not None:
        g = (
            groups
            if hasattr(groups, "dask")
            else da.from_array(np.asarray(groups).reshape(-1), chunks=(X.chunks[0],))
        )
        g = g.rechunk((X.chunks[0],))
        _check_runs_lazy(g, starts)
        gblocks = list(g.to_delayed().reshape(-1))
    else:
        gblocks = [None] * len(starts)
    state: Any = fmap.init_state()
    parts = []
    for b, gb, s, m in zip(X.to_delayed().reshape(-1), gblocks, starts, X.chunks[0]):
        out = dask.delayed(_step, nout=2)(fmap, b, int(s), gb, state)
        state = out[1]
        parts.append(da.from_delayed(out[0], shape=(int(m), n_out), dtype=np.float64))
    return da.concatenate(parts, axis=0) if parts else da.zeros((0, n_out), chunks=((0,), (n_out,)))


def _check_runs_lazy(groups: Any, starts: np.ndarray) -> None:
    """Raise now if the (dask) series ids are not contiguous (reads the group column once)."""
    from streamridge.features._series import series_runs

    series_runs(groups, starts)
