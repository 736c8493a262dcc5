"""The data pass: row chunks -> per-chunk statistics -> merged :class:`FoldStats`.

Every chunk becomes one task of a pure NumPy kernel (:func:`chunk_task`) run on
the chosen scheduler with a bounded window of chunks in flight; results are
merged in chunk order by a pairwise (binary-counter) tree, so peak memory
depends on the chunk size, the window and N, never on the number of rows, and
the result for a given chunking does not depend on the scheduler or the
worker count.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import InputError, NonFiniteError, SchedulerError, SourceError, StreamRidgeError
from .folds import FoldScheme
from .stats import FoldStats, from_chunk


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
    features : FeatureMap or None
        A fitted feature map applied to X chunk by chunk before the statistics
        (see :mod:`streamridge.features.plan`).
    features_state : any
        State of a stateful map at the first row (``partial_fit`` continuing a
        series); None: every series starts from rest.  The state after the last
        row comes back in ``PassReport.extra["features_state"]``.
    """

    scheme: FoldScheme
    classes: tuple[Any, ...] | None
    n_targets: int
    skip_nonfinite: bool = False
    features: Any = None
    features_state: Any = None

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
    drop: np.ndarray | None = None,
) -> FoldStats:
    """Statistics of the rows ``row_start .. row_start + len(X) - 1`` (pure function).

    ``drop`` marks rows left out on purpose (a feature map's washout).

    Raises
    ------
    NonFiniteError
        If X, y or the weights hold NaN/inf and ``spec.skip_nonfinite`` is off.
    """
    m = X.shape[0]
    folds = spec.scheme.assign(row_start, m, None if groups is None else np.asarray(groups).reshape(-1))
    keep = np.ones(m, dtype=bool) if drop is None else ~np.asarray(drop, dtype=bool)
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
        Y = np.asarray(y)
        Y = Y[:, None] if Y.ndim == 1 else Y  # (also when every row of the chunk was dropped)
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


def _block(arr: Any, i: int) -> Any:
    if arr is None:
        return None
    return arr.blocks[i] if arr.ndim == 1 else arr.blocks[i, 0]


class _ChunkCalls(Sequence[tuple[tuple[Any, ...], tuple[Any, ...]]]):
    """``(blocks, (row_start, spec))`` of chunks ``first ..``, built when asked for.

    Slicing a dask array per chunk costs time and a few KiB per block; building
    them on demand keeps the memory of the pass independent of the chunk count.
    """

    def __init__(self, source: Any, starts: np.ndarray, first: int, spec: PassSpec) -> None:
        self.source, self.starts, self.first, self.spec = source, starts, first, spec

    def __len__(self) -> int:
        return len(self.starts) - self.first

    def __getitem__(self, j: Any) -> Any:
        if not 0 <= j < len(self):
            raise IndexError(j)
        i, s = self.first + j, self.source
        blocks = (_block(s.X, i), _block(s.y, i), _block(s.groups, i), _block(s.sample_weight, i))
        return blocks, (int(self.starts[i]), self.spec)


def spec_dict(spec: PassSpec) -> dict[str, Any]:
    """JSON description of a pass spec (checkpoint fingerprints)."""
    return {
        "scheme": spec.scheme.to_dict(),
        "classes": None if spec.classes is None else [str(c) for c in spec.classes],
        "n_targets": spec.n_targets,
        "skip_nonfinite": spec.skip_nonfinite,
        **({} if spec.features is None else {"features": _features_fingerprint(spec.features)}),
    }


def _features_fingerprint(fmap: Any) -> str:
    """Digest of a fitted map's description and arrays (checkpoints of a pass with a map)."""
    import hashlib
    import json

    from .features import encode

    obj, arrays = encode(fmap)
    h = hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode())
    for k in sorted(arrays):
        h.update(k.encode() + np.ascontiguousarray(arrays[k]).tobytes())
    return h.hexdigest()


def accumulate(
    source: Any,
    spec: PassSpec,
    *,
    row_offset: int = 0,
    scheduler: Any = None,
    progress: bool | Callable[[int], None] = False,
    meta: dict[str, Any] | None = None,
    report: PassReport | None = None,
    checkpoint: str | os.PathLike[str] | None = None,
    checkpoint_every_s: float = 10.0,
    window: int | None = None,
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
    scheduler : None, "threads", "sync", "processes", "local:N", address or Client
        See :mod:`streamridge.scheduling`.
    progress : bool or callable
        Show a tqdm bar (rows/s, ETA) or call ``progress(rows_done)``.
    meta : dict
        Added to the statistics' metadata.
    report : PassReport
        Filled with rows, chunks and seconds.
    checkpoint : path or None
        Directory of a resumable checkpoint (see :mod:`streamridge.checkpoint`).
    checkpoint_every_s : float
        Minimum seconds between checkpoint saves.
    window : int or None
        Chunks in flight (default: workers + 2).

    Returns
    -------
    FoldStats
    """
    from .checkpoint import Checkpointer, fingerprint
    from .executors import TreeMerger, run_in_order
    from .scheduling import describe, open_scheduler

    X = source.X
    chunks = [int(c) for c in X.chunks[0]]
    starts = np.concatenate([[0], np.cumsum(chunks)[:-1]]).astype(np.int64) + row_offset
    width = X.shape[1] if spec.features is None else spec.features.n_features_out_
    base = FoldStats.zeros(spec.scheme.n_folds, spec.n_classes, width, spec.n_targets, meta)
    done = 0
    ckpt = fp = None
    if checkpoint is not None:
        ckpt = Checkpointer(checkpoint, checkpoint_every_s)
        fp = fingerprint(source, spec_dict(spec), row_offset)
        resumed = ckpt.resume(fp)
        if resumed is not None:
            base, done = resumed
            base.meta.pop("checkpoint", None)
    task, calls, sizes = _calls(source, spec, starts, done)
    merger = TreeMerger(base)
    bar = _progress_bar(progress, int(X.shape[0]), initial=int(sum(chunks[:done])))
    t0 = time.perf_counter()
    try:
        with open_scheduler(scheduler) as sched:
            parts = run_in_order(task, calls, sched, window=window)
            at = done
            for j, part in enumerate(_named_failures(parts, source, starts, chunks, done, sizes)):
                merger.push(part)
                if report is not None and hasattr(part, "features_state"):
                    report.extra["features_state"] = part.features_state
                bar(int(sum(chunks[at : at + sizes[j]])))
                at += sizes[j]
                if ckpt is not None and fp is not None and at < len(chunks) and ckpt.due():
                    ckpt.maybe_save(merger.total(), at, fp, force=True)
    finally:
        bar(None)
    total = merger.total()
    if ckpt is not None and fp is not None:
        ckpt.maybe_save(total, len(chunks), fp, force=True)
    if report is not None:
        report.rows += int(sum(chunks[done:]))
        report.chunks += len(chunks) - done
        report.seconds += time.perf_counter() - t0
        report.extra["scheduler"] = describe(scheduler)
        report.extra["peak_rss_mb"] = _peak_rss_mb()
        report.extra["resumed_chunks"] = done
    total.meta.update(meta or {})
    total.meta["rows_seen"] = row_offset + int(X.shape[0])
    return total


def _calls(source: Any, spec: PassSpec, starts: np.ndarray, done: int) -> tuple[Callable[..., FoldStats], Sequence[Any], list[int]]:
    """The task, its calls and the chunks per call: one chunk per call, or lanes of chunks with a feature map."""
    if spec.features is None:
        calls = _ChunkCalls(source, starts, done, spec)
        return chunk_task, calls, [1] * len(calls)
    from .features.plan import lane_calls, lane_task

    lanes = lane_calls(source, spec, starts, done, _block)
    return lane_task, lanes, [lane.stop - lane.first for _, (lane, _s) in lanes]


def _named_failures(parts: Any, source: Any, starts: np.ndarray, chunks: list[int], first: int, sizes: list[int] | None = None) -> Any:
    """Yield from ``parts``; turn a foreign exception of chunk i into a one-line :class:`SourceError`.

    Errors of streamridge itself (bad values, a lost scheduler) pass unchanged;
    anything else (a codec error of a corrupted or truncated chunk, an I/O error)
    names the chunk's rows and the data set.  A cluster that lost every worker
    raises :class:`SchedulerError`.
    """
    i, j = first, 0
    it = iter(parts)
    while True:
        try:
            part = next(it)
        except StopIteration:
            return
        except StreamRidgeError:
            raise
        except Exception as exc:
            raise _chunk_error(exc, source, int(starts[i]), chunks[i], i) from exc
        yield part
        i += 1 if sizes is None else sizes[j]
        j += 1


def _chunk_error(exc: Exception, source: Any, start: int, m: int, i: int) -> StreamRidgeError:
    lines = str(exc).strip().splitlines()
    what = f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    where = f"chunk {i} (rows {start}-{start + m - 1}) of {getattr(source, 'description', 'the data')}"
    if type(exc).__module__.startswith("distributed"):
        return SchedulerError(f"the dask cluster failed on {where}: {what}")
    return SourceError(f"cannot read {where}: {what}; the stored chunk may be corrupted or truncated")


def _peak_rss_mb() -> float | None:
    """Peak resident memory of this process so far, in MB (None where unknown)."""
    try:
        import resource

        kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    except (ImportError, OSError):
        return None
    return kb / 1024 if sys.platform.startswith("linux") else kb / 2**20  # bytes on macOS


def _progress_bar(progress: bool | Callable[[int], None], total: int, initial: int = 0) -> Callable[[int | None], None]:
    """A callable taking rows done since the last call (None closes the bar)."""
    if callable(progress):
        fn = progress
        return lambda n: None if n is None else fn(n)
    if not progress:
        return lambda n: None
    from tqdm.auto import tqdm

    bar = tqdm(total=total, initial=initial, unit="rows", unit_scale=True, desc="data pass", smoothing=0.1)

    def update(n: int | None) -> None:
        if n is None:
            bar.close()
        else:
            bar.update(n)

    return update
