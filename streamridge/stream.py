"""The data pass: row chunks -> per-chunk statistics -> merged :class:`FoldStats`.

Every chunk becomes one task of a pure NumPy kernel (:func:`chunk_task`);
tasks are reduced by a balanced pairwise tree inside batches of chunks, and the
batches by a running merge on the driver, so peak memory depends on the chunk
size, the batch size and N, never on the number of rows.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import dask
import numpy as np

from .errors import InputError, NonFiniteError
from .folds import FoldScheme
from .stats import FoldStats, from_chunk, merge


@dataclass(frozen=True)
class PassSpec:
    """What a pass computes for every row: fold, class, targets.

    Parameters
    ----------
    scheme : FoldScheme
    classes : tuple or None
        Sorted class labels of a classifier: rows of class c go to class cell c
        and get target +1 in column c, -1 elsewhere (one column, +1 for
        classes[1], for two classes).  None for regression.
    n_targets : int
    skip_nonfinite : bool
        Drop rows with NaN/inf in X, y or weights instead of failing (they keep
        their row index, so folds do not shift).
    """

    scheme: FoldScheme
    classes: tuple[Any, ...] | None
    n_targets: int
    skip_nonfinite: bool = False

    @property
    def n_classes(self) -> int:
        """Number of class cells (1 for regression)."""
        return 1 if self.classes is None else len(self.classes)


def code_targets(y: np.ndarray, classes: tuple[Any, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Class index and +1/-1 target coding of labels ``y``.

    Returns
    -------
    cls : array of int64 of shape (m,)
    Y : array of float64 of shape (m, 1) for two classes, (m, C) otherwise
    """
    labels = np.asarray(classes)
    y = np.asarray(y).reshape(-1)
    cls = np.searchsorted(labels, y)
    cls = np.clip(cls, 0, len(labels) - 1)
    unknown = labels[cls] != y
    if np.any(unknown):
        raise InputError(
            f"labels {np.unique(y[unknown])[:5].tolist()} are not among classes "
            f"{labels.tolist()}; pass all classes (classes=) on the first partial_fit"
        )
    if len(labels) == 2:
        return cls, np.where(cls == 1, 1.0, -1.0)[:, None]
    Y = -np.ones((y.shape[0], len(labels)))
    Y[np.arange(y.shape[0]), cls] = 1.0
    return cls, Y


def _nonfinite_rows(name: str, a: np.ndarray) -> np.ndarray | None:
    if a.dtype.kind not in "fc":
        return None
    ok = np.isfinite(a)
    if ok.all():
        return None
    return ~ok.reshape(a.shape[0], -1).all(axis=1)


def chunk_task(
    X: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray | None,
    weights: np.ndarray | None,
    row_start: int,
    spec: PassSpec,
) -> FoldStats:
    """Statistics of the rows ``row_start .. row_start + len(X) - 1`` (pure function).

    Raises
    ------
    NonFiniteError
        If X, y or the weights hold NaN/inf and ``spec.skip_nonfinite`` is off.
    """
    m = X.shape[0]
    folds = spec.scheme.assign(row_start, m, None if groups is None else np.asarray(groups).reshape(-1))
    keep = np.ones(m, dtype=bool)
    for name, a in (("X", X), ("y", y), ("sample_weight", weights)):
        if a is None:
            continue
        bad = _nonfinite_rows(name, np.asarray(a))
        if bad is None:
            continue
        if not spec.skip_nonfinite:
            rows = (np.flatnonzero(bad)[:5] + row_start).tolist()
            raise NonFiniteError(
                f"{name} has NaN or inf in {int(bad.sum())} row(s) of the chunk of rows "
                f"{row_start}-{row_start + m - 1}, first at rows {rows}; clean the data or "
                "skip those rows (skip_nonfinite=True, --skip-nonfinite)"
            )
        keep &= ~bad
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64).reshape(-1)
        if np.any(w[keep] < 0):
            r = int(np.flatnonzero((w < 0) & keep)[0]) + row_start
            raise InputError(f"sample_weight must be non-negative; got a negative weight at row {r}")
    else:
        w = None
    if not keep.all():
        X, y, folds = X[keep], np.asarray(y)[keep], folds[keep]
        w = None if w is None else w[keep]
    if spec.classes is None:
        Y = np.asarray(y).reshape(X.shape[0], -1)
        cls = None
    else:
        cls, Y = code_targets(np.asarray(y), spec.classes)
    stats = from_chunk(np.asarray(X), Y, folds, cls, spec.scheme.n_folds, spec.n_classes, w)
    stats.meta["rows_seen"] = row_start + m
    return stats


@dataclass
class PassReport:
    """Timing of a pass."""

    rows: int = 0
    chunks: int = 0
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rows_per_s(self) -> float:
        """Throughput of the pass."""
        return self.rows / self.seconds if self.seconds > 0 else float("nan")


def _blocks(arr: Any, n_chunks: int) -> list[Any]:
    if arr is None:
        return [None] * n_chunks
    d = arr.to_delayed().reshape(-1) if arr.ndim == 1 else arr.to_delayed()[:, 0]
    return list(d)


def _tree(parts: list[Any]) -> Any:
    merge_d = dask.delayed(merge, pure=True)
    level = parts
    while len(level) > 1:
        nxt = [merge_d(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def accumulate(
    source: Any,
    spec: PassSpec,
    *,
    row_offset: int = 0,
    scheduler: Any = None,
    batch_chunks: int | None = None,
    progress: bool | Callable[[int], None] = False,
    meta: dict[str, Any] | None = None,
    report: PassReport | None = None,
) -> FoldStats:
    """Run the pass over a :class:`~streamridge.sources.Source`.

    Parameters
    ----------
    source : Source
        Dask arrays X (M, N), y, optional groups and sample_weight with equal row chunks.
    spec : PassSpec
    row_offset : int
        Global index of the source's first row (continuing ``partial_fit`` calls
        or shards of a larger dataset).
    scheduler : str, dask.distributed.Client or None
        Passed to ``dask.compute``; None uses the threaded scheduler.
    batch_chunks : int or None
        Chunks per batch (each batch is tree-reduced, then merged on the driver).
    progress : bool or callable
        Show a tqdm bar (rows/s, ETA) or call ``progress(rows_done)``.

    Returns
    -------
    FoldStats
    """
    X = source.X
    chunks = X.chunks[0]
    n_chunks = len(chunks)
    starts = np.concatenate([[0], np.cumsum(chunks)[:-1]]).astype(np.int64) + row_offset
    xb, yb = _blocks(X, n_chunks), _blocks(source.y, n_chunks)
    gb, wb = _blocks(source.groups, n_chunks), _blocks(source.sample_weight, n_chunks)
    task = dask.delayed(chunk_task, pure=True)
    parts = [
        task(xb[i], yb[i], gb[i], wb[i], int(starts[i]), spec)
        for i in range(n_chunks)
    ]
    if batch_chunks is None:
        batch_chunks = max(8, 4 * _n_workers(scheduler))
    total = FoldStats.zeros(spec.scheme.n_folds, spec.n_classes, X.shape[1], spec.n_targets, meta)
    total.meta["rows_seen"] = row_offset
    bar = _progress_bar(progress, int(X.shape[0]))
    t0 = time.perf_counter()
    try:
        for b in range(0, n_chunks, batch_chunks):
            (part,) = dask.compute(_tree(parts[b : b + batch_chunks]), scheduler=scheduler)
            total = merge(total, part)
            bar(int(sum(chunks[b : b + batch_chunks])))
    finally:
        bar(None)
    if report is not None:
        report.rows += int(X.shape[0])
        report.chunks += n_chunks
        report.seconds += time.perf_counter() - t0
    total.meta["rows_seen"] = max(int(total.meta.get("rows_seen", 0)), row_offset + int(X.shape[0]))
    total.meta.update(meta or {})
    return total


def _n_workers(scheduler: Any) -> int:
    if scheduler is None or scheduler in ("threads", "threading", "processes", "multiprocessing"):
        import os

        return os.cpu_count() or 1
    if hasattr(scheduler, "nthreads"):
        try:
            return max(1, sum(scheduler.nthreads().values()))
        except Exception:  # noqa: BLE001 - a client that cannot answer: assume one worker
            return 1
    return 1


def _progress_bar(progress: bool | Callable[[int], None], total: int) -> Callable[[int | None], None]:
    """A callable taking rows done (None closes the bar)."""
    if callable(progress):
        fn = progress
        return lambda n: None if n is None else fn(n)
    if not progress:
        return lambda n: None
    from tqdm.auto import tqdm

    bar = tqdm(total=total, unit="rows", unit_scale=True, desc="data pass", smoothing=0.1)

    def update(n: int | None) -> None:
        if n is None:
            bar.close()
        else:
            bar.update(n)

    return update
