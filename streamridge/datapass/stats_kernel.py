"""The statistics pass's kernel: rows -> per (fold, class) cell :class:`~streamridge.stats.foldstats.FoldStats`.

:class:`StatsKernel` follows the pass's kernel protocol (:mod:`streamridge.datapass.driver`):
``start`` an accumulator, ``add`` rows into it, ``finish`` a task's statistics, ``merge`` two
of them by the Chan pairwise update, ``result`` the pass's statistics from the merged total.
In the lanes of a stateful feature map a group of lanes holds the folds of its own series only
where the folds are one per series (:func:`lane_scheme`); :func:`all_folds` spreads the pass's
total over all of them at the end.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np

from streamridge.datapass.spec import PassSpec, prepare_rows, spec_dict
from streamridge.stats.foldstats import FoldStats, merge

if TYPE_CHECKING:
    from streamridge.stats.kernel import CellAccumulator


class StatsKernel:
    """Rows -> :class:`FoldStats` of the fold x class cells of ``spec``.

    Parameters
    ----------
    spec : PassSpec
    n_features : int
        Features per row the statistics hold (X's columns, or a feature map's outputs).
    """

    def __init__(self, spec: PassSpec, n_features: int) -> None:
        self.spec = spec
        self.n_features = n_features

    @property
    def width(self) -> int:
        """Features per row the kernel takes."""
        return self.n_features

    @property
    def n_cells(self) -> int:
        """Cells the rows go to (folds x classes)."""
        return self.spec.scheme.n_folds * self.spec.n_classes

    def result_bytes(self) -> int:
        """Bytes of one task's statistics."""
        N, T = self.n_features, self.spec.n_targets
        return 8 * self.n_cells * (N * N + N * T + N + 2 * T + 2)

    def describe(self) -> dict[str, Any]:
        """JSON description of what the kernel computes (checkpoint fingerprints)."""
        return spec_dict(self.spec)

    def start(self) -> CellAccumulator:
        """An empty accumulator."""
        from streamridge.stats.kernel import (
            CellAccumulator,  # scipy's BLAS: imported by the pass, not by `import streamridge`
        )

        return CellAccumulator(self.n_cells, self.n_features, self.spec.n_targets)

    def add(
        self,
        acc: CellAccumulator,
        X: np.ndarray,
        y: Any,
        groups: Any,
        weights: Any,
        row_start: int,
        drop: np.ndarray | None = None,
    ) -> None:
        """Add the rows ``row_start ..`` of one block (``drop``: rows left out on purpose, a map's washout)."""
        g = None if groups is None else np.asarray(groups).reshape(-1)
        acc.add(*prepare_rows(X, y, g, weights, row_start, self.spec, drop))

    def finish(self, acc: CellAccumulator) -> FoldStats:
        """The task's statistics."""
        return acc.result(self.spec.scheme.n_folds, self.spec.n_classes)

    @staticmethod
    def merge(a: FoldStats, b: FoldStats) -> FoldStats:
        """Chan pairwise merge (``a``'s rows before ``b``'s), keeping the feature map's state after ``b``.

        The state after the last row of a stateful map's lanes comes back with the
        pass's result (a series continued by the next ``partial_fit``).
        """
        out = merge(a, b)
        state = getattr(b, "features_state", None)
        if state is not None:
            out.features_state = state  # type: ignore[attr-defined]
        return out

    def result(self, total: FoldStats | None) -> FoldStats:
        """The pass's statistics over all folds (zero without rows)."""
        total = all_folds(total, self.spec)
        if total is None:
            s = self.spec
            return FoldStats.zeros(s.scheme.n_folds, s.n_classes, self.n_features, s.n_targets)
        return total

    def narrowed(self, group_values: tuple[Any, ...] | None) -> StatsKernel:
        """The kernel of a lane group whose rows hold the series ``group_values`` (:func:`lane_scheme`)."""
        scheme = lane_scheme(self.spec.scheme, group_values)
        if scheme is self.spec.scheme:
            return self
        return StatsKernel(dataclasses.replace(self.spec, scheme=scheme), self.n_features)

    def finish_lane(self, out: FoldStats, rows_seen: int, state: Any) -> FoldStats | None:
        """A lane task's statistics with what the pass reads from them: the rows seen, the group's own
        folds (merged with other groups' by series id) and the map's state after the lane's last row;
        None where the lanes held no row."""
        if not rows_seen:
            return None
        out.meta["rows_seen"] = rows_seen
        if self.spec.scheme.kind == "logo":
            out.meta["scheme"] = self.spec.scheme.to_dict()
        out.features_state = state  # type: ignore[attr-defined]  # read by the pass after the last lane
        return out


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
    kernel.add(acc, X, y, groups, weights, row_start, drop)
    stats = kernel.finish(acc)
    stats.meta["rows_seen"] = row_start + X.shape[0]
    return stats


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
    full = spec.scheme.to_dict()
    if total.meta["scheme"].get("group_values") != full["group_values"]:
        meta, state = dict(total.meta), getattr(total, "features_state", None)
        empty = FoldStats.zeros(
            spec.scheme.n_folds, total.n_classes, total.n_features, total.n_targets, {"scheme": full}
        )
        total = merge(empty, total)
        total.meta = meta
        if state is not None:
            total.features_state = state  # type: ignore[attr-defined]
    total.meta["scheme"] = full
    return total
