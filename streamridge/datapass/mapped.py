"""A feature map inside the pass: raw rows -> the map's outputs, checked, before any kernel.

:class:`MappedKernel` wraps a kernel (statistics, metric tally) for the partitions of a
stateless map: every block of rows is mapped, then handed to the kernel, so each stored
chunk is read once and the results merge as the kernel's do.  The lanes of a stateful map
(:mod:`streamridge.datapass.lane_task`) map their chunks with :func:`map_chunk` and the
slices of their rounds with :func:`checked_input` and :func:`check_good`, so that every
layout gives the same features and names the same rows in its errors.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamridge.errors import NonFiniteError
from streamridge.features._base import FeatureMap, check_features


class MappedKernel:
    """A kernel taking raw rows: each block is mapped by a stateless ``features`` map, then added by ``inner``.

    Same protocol as the kernel it wraps (:mod:`streamridge.datapass.driver`); its
    results are ``inner``'s, of the map's outputs.

    Parameters
    ----------
    inner : kernel
        Takes the map's outputs (``inner.width`` of them).
    features : FeatureMap
        Fitted and stateless.
    skip_nonfinite : bool
        Rows with NaN/inf in X get NaN features (left out by a kernel that skips them) instead of an error.
    """

    def __init__(self, inner: Any, features: FeatureMap, *, skip_nonfinite: bool = False) -> None:
        if features is None or features.stateful:
            raise ValueError("MappedKernel takes a stateless feature map")
        self.inner, self.features, self.skip_nonfinite = inner, features, skip_nonfinite

    @property
    def width(self) -> int:
        """Features per row ``inner`` takes: the map's outputs."""
        return int(self.inner.width)

    @property
    def n_cells(self) -> int:
        """``inner``'s cells."""
        return int(self.inner.n_cells)

    def result_bytes(self) -> int:
        """Bytes of one task's result."""
        return int(self.inner.result_bytes())

    def describe(self) -> dict[str, Any]:
        """``inner``'s description (checkpoint fingerprints; the map is part of the pass's spec)."""
        return dict(self.inner.describe())

    def result(self, total: Any) -> Any:
        """``inner``'s result of the pass."""
        return self.inner.result(total)

    def start(self) -> Any:
        """An empty accumulator of ``inner``."""
        return self.inner.start()

    def add(
        self, acc: Any, X: np.ndarray, y: Any, groups: Any, weights: Any, row_start: int, drop: Any = None
    ) -> None:
        """Map the rows ``row_start ..`` of one block and add them."""
        g = flat(groups)
        fmap = self.features
        F, left_out, _ = map_chunk(fmap, np.asarray(X), row_start, g, fmap.init_state(), self.skip_nonfinite)
        if drop is not None:
            left_out = drop if left_out is None else left_out | drop
        self.inner.add(acc, F, y, g, weights, row_start, left_out)

    def finish(self, acc: Any) -> Any:
        """``inner``'s result of the task."""
        return self.inner.finish(acc)

    def merge(self, a: Any, b: Any) -> Any:
        """``inner``'s merge."""
        return self.inner.merge(a, b)


def flat(g: Any) -> np.ndarray | None:
    """Series ids as a 1-D array (None stays None)."""
    return None if g is None else np.asarray(g).reshape(-1)


def map_chunk(
    fmap: FeatureMap, X: np.ndarray, start: int, g: np.ndarray | None, state: Any, skip: bool
) -> tuple[np.ndarray, np.ndarray | None, Any]:
    """Features, rows to leave out (washout) and the new state of one chunk."""
    X, bad, keep = checked_input(fmap, X, start, g, state, skip)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported by check_good
        F, state = fmap.apply_chunk(X, start, g, state)
    check_good(F, bad, start, fmap)
    return F, None if keep is None else ~keep, state


def checked_input(
    fmap: FeatureMap, X: np.ndarray, start: int, g: np.ndarray | None, state: Any, skip: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Raw rows ready for the map (NaN rows zeroed when skipped), the rows with NaN, and the rows kept (washout).

    Raises
    ------
    NonFiniteError
        X has NaN/inf and they are not skipped, or the map is stateful (it would spoil
        the state of the rest of the series).
    """
    bad = (
        ~np.isfinite(X).all(axis=tuple(range(1, X.ndim)))
        if X.dtype.kind in "fc"
        else np.zeros(X.shape[0], bool)
    )
    if bad.any() and (fmap.stateful or not skip):
        rows = (np.flatnonzero(bad)[:5] + start).tolist()
        extra = (
            " (a stateful feature map cannot skip rows)"
            if skip
            else "; or skip those rows (skip_nonfinite=True, --skip-nonfinite)"
        )
        raise NonFiniteError(
            f"X has NaN or inf in {int(bad.sum())} row(s) of the chunk of rows {start}-{start + X.shape[0] - 1}, "
            f"first at rows {rows}; clean the data{extra}"
        )
    if bad.any():
        X = np.where(bad[:, None], 0.0, X)
    return X, bad, fmap.keep_mask(X.shape[0], g, state)


def check_good(F: Any, bad: np.ndarray, start: int, fmap: FeatureMap) -> None:
    """Non-finite features in rows whose raw input was finite: an error naming the rows; rows with NaN input
    get NaN features (dropped by the statistics kernel with ``skip_nonfinite``).

    Candidate maps' features (``F.parts``) are checked part by part, each naming its own map.
    """
    parts = getattr(F, "parts", None)
    if parts is not None:
        for part, m in zip(parts, fmap.candidates):  # type: ignore[attr-defined]
            if part is not None:
                check_good(part, bad, start, m)
        return
    if bad.any():
        G = F.copy()
        G[bad] = 0.0
        check_features(G, start, fmap)
        F[bad] = np.nan
        return
    check_features(F, start, fmap)
