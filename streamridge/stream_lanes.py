"""The pass with a feature map: lanes of chunks, merged in order on the driver.

A stateful feature map (reservoirs, delays) carries its state along a series
of rows, so its pass runs lanes of consecutive chunks (one lane = one task,
:mod:`streamridge.features.plan`) rather than the independent partitions of
:mod:`streamridge.partitions`.  Lane results are merged in chunk order by a
binary counter on the driver (:class:`streamridge.executors.TreeMerger`);
checkpoints save the merged statistics at lane ends.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .errors import StreamRidgeError
from .stats import FoldStats, merge
from .stream import (
    PassReport,
    PassSpec,
    _chunk_error,
    _peak_rss_mb,
    _progress_bar,
    _readers_of,
    chunk_task,
    spec_dict,
)


def accumulate_lanes(
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
    """:func:`streamridge.stream.accumulate` for a spec with ``features`` (same parameters)."""
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
        readers, _ = _readers_of(source)
        fp = fingerprint(readers, spec_dict(spec), row_offset, {"row_chunks": chunks}, getattr(source, "description", ""))
        resumed = ckpt.resume(fp)
        if resumed is not None:
            partials, done = resumed
            for _, s in partials:
                base = merge(base, s)
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
                    ckpt.save([(-1, merger.total())], at, fp)
    finally:
        bar(None)
    total = merger.total()
    if ckpt is not None and fp is not None:
        ckpt.save([(-1, total)], len(chunks), fp)
    if report is not None:
        report.rows += int(sum(chunks[done:]))
        report.chunks += len(chunks) - done
        report.seconds += time.perf_counter() - t0
        report.extra["scheduler"] = describe(scheduler)
        report.extra["peak_rss_mb"] = _peak_rss_mb()
        report.extra["resumed_chunks"] = done
    total.meta.update(meta or {})
    total.meta.pop("checkpoint", None)
    total.meta["rows_seen"] = row_offset + int(X.shape[0])
    return total




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


