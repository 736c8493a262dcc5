"""``streamridge predict``: stream rows through a model and write the predictions atomically."""

from __future__ import annotations

import argparse
import contextlib
import os
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from streamridge.cli.output import emit
from streamridge.errors import ParameterError
from streamridge.io.outputs import MARKER, Output, Transaction, check_outputs

if TYPE_CHECKING:
    import numpy as np


class _RowBatches:
    """The rows of one or more outputs, computed together a batch of row chunks at a time.

    ``compute(start, stop)`` (chunk boundaries) returns one array per output,
    computed in parallel from one read of those rows; :meth:`output` gives each
    output as an array-like.  The writers (``write_zarr`` / ``write_hdf5``) ask
    for consecutive row slices in the calling thread, the same rows of every
    output in turn; each miss takes the next ``batch_chunks`` chunks and keeps
    them until they are consumed; a slice across the end of a batch keeps its
    rows already computed, so no chunk is computed (nor read) twice.  With
    :meth:`read_ahead`, the batch after the one taken is computed while the
    writer writes.  Workers only compute, so a failure never races with writes
    into the output.
    """

    def __init__(
        self, compute: Any, shapes: list[tuple[int, ...]], dtypes: list[Any], row_chunks: tuple[int, ...], *,
        batch_chunks: int, tick: Any = None,
    ) -> None:
        import numpy as np

        self._compute = compute
        self._outputs = [_Rows(self, i, shape, np.dtype(dtype)) for i, (shape, dtype) in enumerate(zip(shapes, dtypes))]
        self._n = int(shapes[0][0])
        self._bounds = np.cumsum((0, *row_chunks))
        self._batch = max(1, batch_chunks)
        self._tick = tick
        self._start = 0
        self._blocks = [np.empty((0, *out.shape[1:]), dtype=out.dtype) for out in self._outputs]
        self._ahead: Any = None  # an executor of one thread
        self._pending: Any = None  # ((lo, hi), future) of the batch computed ahead

    def output(self, i: int) -> _Rows:
        """Output ``i`` as an array-like of its rows (``shape``, ``dtype``, consecutive slices)."""
        return self._outputs[i]

    def read_ahead(self, executor: Any) -> None:
        """Compute the next batch on ``executor`` (one thread) while the current one is written.

        Memory: the outputs of two batches.  The caller shuts the executor down
        (waiting for a batch in flight) before whatever ``compute`` uses.
        """
        self._ahead = executor

    def rows(self, i: int, key: Any) -> np.ndarray:
        """Rows ``key`` (a slice) of output ``i``."""
        import numpy as np

        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError("rows are read as consecutive slices")
        start, stop, _ = key.indices(self._n)
        end = self._start + self._blocks[0].shape[0]  # a chunk boundary
        if not (self._start <= start and stop <= end):
            keep = self._start <= start < end  # a slice across the batch's end: its cached rows are kept
            lo = int(self._bounds[int(np.searchsorted(self._bounds, end if keep else start, side="right")) - 1])
            hi, new = self._take(lo, max(self._batch_end(lo), int(self._bounds[np.searchsorted(self._bounds, stop)])))
            if keep:
                self._blocks = [np.concatenate([b[start - self._start :], a]) for b, a in zip(self._blocks, new)]
                self._start = start
            else:
                self._start, self._blocks = lo, new
            if self._tick is not None:
                self._tick(hi - lo)
            if self._ahead is not None and hi < self._n:
                self._pending = ((hi, self._batch_end(hi)), self._ahead.submit(self._compute, hi, self._batch_end(hi)))
        return self._blocks[i][start - self._start : stop - self._start]

    def _batch_end(self, lo: int) -> int:
        """The chunk boundary ``batch_chunks`` chunks after the boundary ``lo`` (or the end)."""
        import numpy as np

        first = int(np.searchsorted(self._bounds, lo))
        return int(self._bounds[min(first + self._batch, len(self._bounds) - 1)])

    def _take(self, lo: int, hi: int) -> tuple[int, list[np.ndarray]]:
        """``(stop, arrays)`` of rows ``lo`` to at least ``hi``: the batch computed ahead where it starts at ``lo``."""
        import concurrent.futures

        import numpy as np

        pending, self._pending = self._pending, None
        if pending is not None:
            (plo, phi), future = pending
            if plo == lo:
                got = [np.asarray(a) for a in future.result()]
                if phi >= hi:
                    return phi, got
                rest = [np.asarray(a) for a in self._compute(phi, hi)]
                return hi, [np.concatenate([a, b]) for a, b in zip(got, rest)]
            concurrent.futures.wait([future])  # not the rows asked for: done with before computing them
        return hi, [np.asarray(a) for a in self._compute(lo, hi)]


class _Rows:
    """One output of a :class:`_RowBatches`."""

    def __init__(self, batches: _RowBatches, index: int, shape: tuple[int, ...], dtype: np.dtype[Any]) -> None:
        self._batches, self._index = batches, index
        self.shape, self.dtype, self.ndim = shape, dtype, len(shape)

    def __getitem__(self, key: Any) -> np.ndarray:
        return self._batches.rows(self._index, key)


def _dask_batches(arrays: list[Any], *, batch_chunks: int, tick: Any) -> _RowBatches:
    """Rows of dask arrays of the same row chunks (the predictions of a feature map, or of rows with series
    ids; and the scores), each batch computed in one graph: X read once for all."""
    import dask

    return _RowBatches(
        lambda lo, hi: dask.compute(*(a[lo:hi] for a in arrays)), [tuple(int(n) for n in a.shape) for a in arrays],
        [a.dtype for a in arrays], tuple(int(c) for c in arrays[0].chunks[0]), batch_chunks=batch_chunks, tick=tick,
    )


def _threads(stack: Any, workers: int) -> ThreadPoolExecutor:
    """``workers`` computing threads, BLAS limited to the cores left to each (threaded BLAS beside them took
    1.8x the time: 10 classes' scores); shut down, and BLAS restored, by ``stack`` (an ``ExitStack``)."""
    from streamridge.parallel import blas_controller, n_cpus

    pool = stack.enter_context(ThreadPoolExecutor(workers, thread_name_prefix="streamridge-predict"))
    stack.enter_context(blas_controller().limit(limits=max(1, n_cpus() // workers)))
    return pool


def _joined(parts: list[tuple[np.ndarray, ...]]) -> list[np.ndarray]:
    """Each output's rows of consecutive parts, in one array."""
    import numpy as np

    return [np.concatenate(p) if len(p) > 1 else p[0] for p in zip(*parts)]


def _batches(
    compute: Any, empty: tuple[np.ndarray, ...], n: int, row_chunks: tuple[int, ...], *, batch_chunks: int, tick: Any
) -> _RowBatches:
    """A :class:`_RowBatches` of ``n`` rows of outputs shaped and typed as ``empty`` (their zero-row arrays)."""
    return _RowBatches(
        compute, [(n, *e.shape[1:]) for e in empty], [e.dtype for e in empty], row_chunks, batch_chunks=batch_chunks,
        tick=tick,
    )


def _reader_batches(source: Any, rows_fn: Any, stack: Any, *, batch_chunks: int, tick: Any) -> _RowBatches:
    """``rows_fn`` of X's rows read through the source's reader, a block of whole stored chunks per thread.

    No dask, and every stored chunk of X is decoded once (the source's row
    chunks may cut a stored chunk in parts: 50,000-row chunks were decoded
    three times through the dask views).  ``rows_fn`` returns a tuple of
    arrays, one per output (the predictions, and the scores), of rows and the
    index of their first row (a stateless map's rows).  A block is about
    one of the source's row chunks (its memory budget), or one stored chunk
    where that is larger; a thread per core holds one, or fewer threads where
    blocks are so large that two of them would exceed ``PREFETCH_BYTES`` (a
    400 MB stored chunk: one thread), and BLAS has the cores left to each
    thread.  ``rows_fn`` converts rows a tile at a time, so a block is never
    copied as float64.  The threads are shut down, and BLAS's threads
    restored, by ``stack`` (an ``ExitStack``).
    """
    import bisect

    import numpy as np

    from streamridge.datapass.partitions import PREFETCH_BYTES, block_ranges
    from streamridge.parallel import n_cpus

    readers, lo = source.pass_readers()
    reader = readers["X"]
    n = source.n_rows()
    step = source.row_chunks()[0]
    empty = rows_fn(np.empty((0, source.n_features()), dtype=reader.dtype), 0)  # the outputs' dtypes and widths
    blocks = [(a - lo, b - lo) for a, b in block_ranges(reader, lo, lo + n, step)]
    block_bytes = max(b - a for a, b in blocks) * source.n_features() * np.dtype(reader.dtype).itemsize
    workers = n_cpus() if 2 * block_bytes <= PREFETCH_BYTES else max(1, min(n_cpus(), PREFETCH_BYTES // block_bytes))
    pool = _threads(stack, workers)

    def one(a: int, b: int) -> tuple[np.ndarray, ...]:
        return tuple(rows_fn(reader.read(lo + a, lo + b), a))

    bounds = np.cumsum((0, *(b - a for a, b in blocks))).tolist()

    def compute(a: int, b: int) -> list[np.ndarray]:  # a and b are block boundaries
        cuts = bounds[bisect.bisect_left(bounds, a) : bisect.bisect_left(bounds, b) + 1]
        return _joined(list(pool.map(one, cuts[:-1], cuts[1:])))

    return _batches(compute, empty, n, tuple(b - a for a, b in blocks), batch_chunks=batch_chunks, tick=tick)


#: bytes of lane group outputs ``predict`` may hold at once (a stateful map's series run in lanes): two
#: batches of one group per thread; a source whose largest group exceeds its share is mapped chunk after
#: chunk through the dask views
LANE_OUTPUT_BYTES = 256 * 2**20


def _lane_batches(model: Any, source: Any, scores: bool, stack: Any, *, tick: Any) -> _RowBatches | None:
    """The outputs of a model with a stateful map, its series mapped as the pass maps them, or None.

    The lanes and lane groups of the statistics pass (:func:`streamridge.datapass.plan.lane_calls`:
    the chunks of each series in row order, the map's state carried; several series in lockstep), one
    group per thread, each reading its rows through the source's readers.  A group covers consecutive
    rows, so its outputs are one block of the written arrays.  None (use the dask views) for a map with
    ``warmup`` (the pass's approximation; predictions carry the state exactly), or where the outputs of
    two batches of the largest group per thread would exceed :data:`LANE_OUTPUT_BYTES` (one long series).
    """
    import numpy as np

    from streamridge.datapass import plan
    from streamridge.datapass.driver import PassSpec
    from streamridge.datapass.lanes import _block
    from streamridge.folds.schemes import FoldScheme
    from streamridge.parallel import n_cpus

    fmap = model.features_
    if getattr(fmap, "warmup", None) or source.n_rows() == 0:
        return None
    spec = PassSpec(FoldScheme("hash", 2), None, 1, features=fmap)  # folds and classes unused: no statistics
    chunks, _, calls = plan.lane_layout(source, spec, list(source.row_chunks()), 0, _block)
    bounds = np.cumsum((0, *chunks)).astype(np.int64)
    lanes = [lane for _, (lane, _s) in calls]
    rows = [(int(bounds[lane.first]), int(bounds[lane.stop])) for lane in lanes]
    coef, b = np.atleast_2d(model.coef_), np.atleast_1d(model.intercept_)
    workers = max(1, min(n_cpus(), len(lanes)))
    if max(hi - lo for lo, hi in rows) * coef.shape[0] * (2 if scores else 1) * 8 * 2 * workers > LANE_OUTPUT_BYTES:
        return None

    outputs = _outputs_fn(model, scores)

    def one(i: int) -> tuple[np.ndarray, ...]:
        lane, (lo, hi) = lanes[i], rows[i]
        linear = np.empty((hi - lo, coef.shape[0]))

        def add(F: np.ndarray, y: Any, g: Any, w: Any, start: int, drop: Any) -> None:
            np.matmul(F, coef.T, out=linear[start - lo : start - lo + F.shape[0]])

        pieces = plan.group_pieces(lane, spec) if isinstance(lane, plan.LaneGroup) else plan.lane_pieces(lane, spec)
        plan.drain(pieces, add)
        linear += b
        return outputs(linear)

    pool = _threads(stack, workers)
    index = {lo: i for i, (lo, _) in enumerate(rows)} | {rows[-1][1]: len(rows)}

    def compute(a: int, c: int) -> list[np.ndarray]:  # a and c are group boundaries
        return _joined(list(pool.map(one, range(index[a], index[c]))))

    empty = outputs(np.empty((0, coef.shape[0])))
    return _batches(compute, empty, source.n_rows(), tuple(hi - lo for lo, hi in rows), batch_chunks=workers, tick=tick)


#: float64 bytes of a stateless map's outputs computed at a time by ``predict`` (they stay in cache for the product)
MAP_TILE_BYTES = 4 * 2**20


def _linear_fn(model: Any) -> Any:
    """``(X rows, first row index) -> (m, outputs)`` float64: the model, after a stateless feature map if any.

    A map's outputs are computed ``MAP_TILE_BYTES`` at a time, so a wide map
    (thousands of random features) never holds a block's outputs at once.
    """
    fmap = getattr(model, "features_", None)
    if fmap is None:
        return lambda X, start: model._linear_rows(X)
    import numpy as np

    from streamridge.features._dask import _stateless

    coef, b = np.atleast_2d(model.coef_), np.atleast_1d(model.intercept_)
    tile = max(1, MAP_TILE_BYTES // (8 * max(int(fmap.n_features_out_), 1)))

    def mapped(X: Any, start: int) -> Any:
        out = np.empty((X.shape[0], coef.shape[0]))
        for s in range(0, X.shape[0], tile):
            e = min(X.shape[0], s + tile)
            np.matmul(_stateless(fmap, X[s:e], start + s), coef.T, out=out[s:e])
        out += b
        return out

    return mapped


def _outputs_fn(model: Any, scores: bool) -> Any:
    """The linear model's ``(m, outputs)`` values to ``(predictions,)``, or ``(predictions, scores)`` (a
    classifier's labels are those of its scores)."""
    import numpy as np

    if not hasattr(model, "decision_function"):
        return lambda linear: (np.asarray(model._shape_predictions(linear)),)

    def labels(linear: Any) -> tuple[Any, ...]:
        decision = np.asarray(model._shape_scores(linear))
        return (model._labels_of(decision), decision) if scores else (model._labels_of(decision),)

    return labels


def _rows_fn(model: Any, scores: bool) -> Any:
    """``(X rows, first row index)`` to the outputs of :func:`_outputs_fn`, from one product; a stateless
    feature map is applied first."""
    linear, outputs = _linear_fn(model), _outputs_fn(model, scores)
    return lambda X, start: outputs(linear(X, start))


def _progress(enabled: bool, total: int) -> Any:
    """A tqdm bar (``update``/``close``) or None."""
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="rows", unit_scale=True, desc="predict")


def cmd_predict(args: argparse.Namespace) -> int:
    """``streamridge predict``: stream X through the model, write predictions atomically."""
    from streamridge.io.model_file import load_model_core
    from streamridge.sources import open_source, write_hdf5, write_zarr

    (out,) = check_outputs([Output(args.out, "predictions")], [args.data, args.model], overwrite=args.overwrite)
    model = load_model_core(args.model)  # X is a source: no scikit-learn needed
    source = open_source(
        args.data, x=args.x, y=None, chunk_rows=args.chunk_rows, require_y=False, storage_options=args.storage_options
    )
    if source.n_features() != model.n_features_in_:  # raw inputs, before a feature map
        raise ParameterError(
            f"X in {args.data} has {source.n_features()} features but the model {args.model} was fitted on "
            f"{model.n_features_in_}; use the same features (--x NAME)"
        )
    classifier = hasattr(model, "decision_function")
    n = source.n_rows()
    batch = 4 * (os.cpu_count() or 1)
    write = write_hdf5 if out.lower().endswith((".h5", ".hdf5")) else write_zarr
    scores = classifier and args.scores
    with contextlib.ExitStack() as stack:  # the progress bar and the reading threads, closed on any exit
        bar = _progress(not (args.quiet or args.json), n)
        if bar is not None:
            stack.callback(bar.close)
        tick = None if bar is None else bar.update
        fmap = getattr(model, "features_", None)
        if fmap is None or not fmap.stateful:  # rows through the reader, no dask (series ids are not needed)
            batches = _reader_batches(source, _rows_fn(model, scores), stack, batch_chunks=batch, tick=tick)
        else:  # a stateful feature map: each series' state carried in row order
            series = source if args.groups is None else open_source(
                args.data, x=args.x, y=None, groups=args.groups, chunk_rows=args.chunk_rows, require_y=False,
                storage_options=args.storage_options,
            )
            lanes = _lane_batches(model, series, scores, stack, tick=tick)
            if lanes is not None:  # the series in lanes, as the pass runs them
                batches = lanes
            else:  # chunk after chunk through the dask views
                extra = () if args.groups is None else (series.groups,)
                if scores:
                    decision = model.decision_function(source.X, *extra)
                    arrays = [model._labels_of(decision), decision]
                else:
                    arrays = [model.predict(source.X, *extra)]
                batches = _dask_batches(arrays, batch_chunks=batch, tick=tick)
        # the next batch computed while this one is written; shut down (LIFO) before the reading threads
        batches.read_ahead(stack.enter_context(ThreadPoolExecutor(1, thread_name_prefix="streamridge-ahead")))
        values = [batches.output(0), batches.output(1) if scores else None]
        shape = values[0].shape  # type: ignore[union-attr]
        t0 = time.perf_counter()
        with (
            warnings.catch_warnings(),
            Transaction(overwrite=args.overwrite) as tx,
            tx.writing(out, "predictions") as tmp,
        ):
            warnings.simplefilter("ignore")  # zarr: fixed-length strings have no v3 spec yet
            rows = source.row_chunks()[0]
            names = {"X": "predictions", "y": "scores"}
            write(tmp, values[0], values[1], chunk_rows=rows, names=names, root_attrs={MARKER: "predictions"})
    seconds = time.perf_counter() - t0
    facts = {
        "model": os.path.abspath(args.model),
        "data": source.description,
        "rows": n,
        "shape": list(shape),
        "arrays": ["predictions"] + (["scores"] if values[1] is not None else []),
        "out": out,
        "seconds": seconds,
        "rows_per_s": n / seconds if seconds > 0 else None,
    }
    if args.json:
        emit(facts, as_json=True)
    elif not args.quiet:
        written = " and ".join(facts["arrays"])
        print(
            f"wrote {written} of shape {tuple(shape)} for {n:,} rows to {out} "
            f"in {seconds:.3g} s ({n / max(seconds, 1e-9):,.0f} rows/s)"
        )
    return 0
