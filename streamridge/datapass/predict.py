"""``predict``'s pass: a fitted model's outputs for every row, in row order, each stored chunk read once.

:class:`PredictKernel` is a kernel of the pass driver whose results are not reduced but
handed on in row order (:func:`streamridge.datapass.driver.iter_pass`) and written as
they come: the predictions (and a classifier's scores) of a task's rows.  Without a
feature map, or with a stateless one, the rows are read in partitions of the source's
row chunks (:func:`predict_blocks`); a stateful map's series run in the lanes and lane
groups of the statistics pass, each series' state carried in row order
(:func:`lane_predict_blocks`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Iterator
from typing import Any

import numpy as np

from streamridge.datapass.driver import iter_pass
from streamridge.datapass.layouts import Lanes, Partitions, plan_tasks

#: float64 bytes of a stateless map's outputs computed at a time (they stay in cache for the product)
MAP_TILE_BYTES = 4 * 2**20
#: bytes of lane group outputs ``predict`` may hold at once (a stateful map's series run in lanes): two
#: results of one group per thread; a source whose largest group exceeds its share is mapped chunk after
#: chunk through the dask views instead
LANE_OUTPUT_BYTES = 256 * 2**20

#: a task's result: its rows' outputs as ``(first row, (predictions,) or (predictions, scores))`` blocks in row order
Blocks = list[tuple[int, tuple[np.ndarray, ...]]]


class PredictKernel:
    """Rows -> a model's outputs, kept in row order (the results are written, not merged into one).

    The kernel protocol of :mod:`streamridge.datapass.driver`; a task's result is a list
    of ``(first row, outputs)`` blocks in row order, ``merge`` joins two such lists.

    Parameters
    ----------
    model : fitted estimator
        ``coef_``, ``intercept_``, ``features_`` (a map, or None) and the output shaping of
        :mod:`streamridge.estimators` (``_linear_rows``, ``_shape_predictions``, ...).
    scores : bool
        A classifier's scores (decision function) beside its labels.
    mapped : bool
        The rows are the map's outputs already (the lanes of a stateful map); else raw rows,
        mapped here by a stateless map if the model has one.
    """

    n_cells = 1

    def __init__(self, model: Any, *, scores: bool = False, mapped: bool = False) -> None:
        self.model, self.scores, self.mapped = model, scores, mapped
        self.coef, self.intercept = np.atleast_2d(model.coef_), np.atleast_1d(model.intercept_)
        self.width = int(model.n_features_in_)

    def result_bytes(self) -> int:
        """No statistics: a task holds its rows' outputs only."""
        return 0

    def start(self) -> list[tuple[int, np.ndarray]]:
        """No rows yet."""
        return []

    def add(
        self,
        acc: list[Any],
        X: np.ndarray,
        y: Any,
        groups: Any,
        weights: Any,
        row_start: int,
        drop: Any = None,
    ) -> None:
        """The linear model of rows ``row_start ..`` (all of them: a washout leaves rows out of the statistics only)."""
        acc.append((row_start, self.linear(X, row_start)))

    def finish(self, acc: list[tuple[int, np.ndarray]]) -> Blocks:
        """The outputs of the task's rows, in row order (a lane group adds its lanes' rows round by round)."""
        if not acc:
            return []
        acc.sort(key=lambda piece: piece[0])
        linear = np.concatenate([p for _, p in acc]) if len(acc) > 1 else acc[0][1]
        return [(acc[0][0], self.outputs(linear))]

    @staticmethod
    def merge(a: Blocks, b: Blocks) -> Blocks:
        """Both tasks' blocks, in row order."""
        return sorted(a + b, key=lambda block: block[0])

    @staticmethod
    def result(total: Blocks | None) -> Blocks:
        """The blocks (no rows: none)."""
        return [] if total is None else total

    def linear(self, X: np.ndarray, start: int) -> np.ndarray:
        """``(m, outputs)`` float64: the model of the rows, after a stateless map if any.

        A map's outputs are computed ``MAP_TILE_BYTES`` at a time, so a wide map
        (thousands of random features) never holds a block's outputs at once.
        """
        if self.mapped:
            return np.asarray(X @ self.coef.T + self.intercept)
        fmap = getattr(self.model, "features_", None)
        if fmap is None:
            return np.asarray(self.model._linear_rows(X))
        from streamridge.features import check_features

        tile = max(1, MAP_TILE_BYTES // (8 * max(int(fmap.n_features_out_), 1)))
        out = np.empty((X.shape[0], self.coef.shape[0]))
        for s in range(0, X.shape[0], tile):
            e = min(X.shape[0], s + tile)
            with np.errstate(over="ignore", invalid="ignore"):
                F, _ = fmap.apply_chunk(np.asarray(X[s:e], dtype=np.float64), start + s, None, None)
            check_features(F, start + s, fmap)
            np.matmul(F, self.coef.T, out=out[s:e])
        out += self.intercept
        return out

    def empty(self) -> tuple[np.ndarray, ...]:
        """The outputs of no rows (their dtypes and widths)."""
        return self.outputs(np.empty((0, self.coef.shape[0])))

    def outputs(self, linear: np.ndarray) -> tuple[np.ndarray, ...]:
        """``(predictions,)``, or ``(labels, scores)`` of a classifier with ``scores`` (the labels are the scores')."""
        model = self.model
        if not hasattr(model, "decision_function"):
            return (np.asarray(model._shape_predictions(linear)),)
        decision = np.asarray(model._shape_scores(linear))
        return (model._labels_of(decision), decision) if self.scores else (model._labels_of(decision),)


def predict_blocks(
    model: Any, source: Any, *, scores: bool = False, progress: Any = False, window: int | None = None
) -> Iterator[tuple[int, tuple[np.ndarray, ...]]]:
    """The outputs of ``model`` (no map, or a stateless one) for every row of ``source``, block by block in row order.

    Partitions of about one of the source's row chunks (whole stored chunks, each read
    once; the kernel takes a read block at a time where it is not decoded in pieces),
    computed on the cores' threads, ``window`` of them in flight (default: workers + 2).
    """
    kernel = PredictKernel(model, scores=scores)
    layout = Partitions(
        rows=source.row_chunks()[0], whole_reads=True, warn=False
    )  # a row's work is T N flops
    yield from _flat(iter_pass(source, kernel, layout, window=window, progress=progress, desc="predict"))


def lane_predict_blocks(
    model: Any, source: Any, *, scores: bool = False, progress: Any = False
) -> Iterator[tuple[int, tuple[np.ndarray, ...]]] | None:
    """The outputs of a model with a stateful map, its series mapped as the statistics pass maps them, or None.

    The lanes and lane groups of the statistics pass (:mod:`streamridge.datapass.plan`: the chunks
    of each series in row order, the map's state carried; several series in lockstep), a group
    per task; a group covers consecutive rows.  None (use the dask views) for a map with
    ``warmup`` (the pass's approximation; predictions carry the state exactly), or where two
    results of the largest group per thread would exceed :data:`LANE_OUTPUT_BYTES` (one long series).
    """
    from streamridge.datapass.spec import PassSpec
    from streamridge.folds.schemes import FoldScheme
    from streamridge.parallel import n_cpus

    fmap = model.features_
    if getattr(fmap, "warmup", None) or source.n_rows() == 0:
        return None
    spec = PassSpec(FoldScheme("hash", 2), None, 1, features=fmap)  # folds and classes unused: no statistics
    kernel = PredictKernel(model, scores=scores, mapped=True)
    tasks = plan_tasks(Lanes(spec), source, kernel)
    workers = max(1, min(n_cpus(), len(tasks)))
    largest = max(tasks.size(i) for i in range(len(tasks)))
    if largest * kernel.coef.shape[0] * (2 if scores else 1) * 8 * 2 * workers > LANE_OUTPUT_BYTES:
        return None
    return _flat(iter_pass(source, kernel, tasks, progress=progress, desc="predict"))


def _flat(results: Generator[Blocks, None, None]) -> Iterator[tuple[int, tuple[np.ndarray, ...]]]:
    """The blocks of the tasks' results, in order; closing it stops the pass."""
    with contextlib.closing(results):
        for blocks in results:
            yield from blocks
