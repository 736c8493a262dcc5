"""``streamridge predict``: stream rows through a model and write the predictions atomically."""

from __future__ import annotations

import argparse
import contextlib
import os
import time
import warnings
from typing import TYPE_CHECKING, Any

from .cli_output import emit
from .errors import ParameterError
from .outputs import MARKER, Output, Transaction, check_outputs

if TYPE_CHECKING:
    import numpy as np


class _RowBatches:
    """Array-like of rows computed a batch of row chunks at a time, in the calling thread's order.

    The writer (``write_zarr`` / ``write_hdf5``) asks for consecutive row slices
    in the calling thread; each miss computes the next ``batch_chunks`` chunks
    (``compute(start, stop)`` of chunk boundaries, in parallel) and keeps them
    until they are consumed; a slice across the end of a batch keeps its rows
    already computed, so no chunk is computed twice.  Workers only compute, so
    a failure never races with writes into the output.
    """

    def __init__(
        self, compute: Any, shape: tuple[int, ...], dtype: Any, row_chunks: tuple[int, ...], *, batch_chunks: int,
        tick: Any = None,
    ) -> None:
        import numpy as np

        self._compute = compute
        self.shape = shape
        self.dtype = np.dtype(dtype)
        self.ndim = len(self.shape)
        self._bounds = np.cumsum((0, *row_chunks))
        self._batch = max(1, batch_chunks)
        self._tick = tick
        self._start, self._block = 0, np.empty((0, *self.shape[1:]), dtype=self.dtype)

    def __getitem__(self, key: Any) -> np.ndarray:
        import numpy as np

        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError("rows are read as consecutive slices")
        start, stop, _ = key.indices(self.shape[0])
        end = self._start + self._block.shape[0]  # a chunk boundary
        if not (self._start <= start and stop <= end):
            keep = self._start <= start < end  # a slice across the batch's end: its cached rows are kept
            first = int(np.searchsorted(self._bounds, end if keep else start, side="right")) - 1
            last = max(min(first + self._batch, len(self._bounds) - 1), int(np.searchsorted(self._bounds, stop)))
            lo, hi = int(self._bounds[first]), int(self._bounds[last])
            new = np.asarray(self._compute(lo, hi))
            if keep:
                self._start, self._block = start, np.concatenate([self._block[start - self._start :], new])
            else:
                self._start, self._block = lo, new
            if self._tick is not None:
                self._tick(hi - lo)
        return self._block[start - self._start : stop - self._start]


def _dask_batches(array: Any, *, batch_chunks: int, tick: Any) -> _RowBatches:
    """Rows of a dask array (the predictions of a feature map, or of rows with series ids)."""
    import numpy as np

    return _RowBatches(
        lambda lo, hi: array[lo:hi].compute(), tuple(int(n) for n in array.shape), np.dtype(array.dtype),
        tuple(int(c) for c in array.chunks[0]), batch_chunks=batch_chunks, tick=tick,
    )


def _reader_batches(source: Any, rows_fn: Any, stack: Any, *, batch_chunks: int, tick: Any) -> _RowBatches:
    """``rows_fn`` of X's rows read through the source's reader, a block of whole stored chunks per thread.

    No dask, and every stored chunk of X is decoded once per output array (the
    source's row chunks may cut a stored chunk in parts: 50,000-row chunks were
    decoded three times through the dask views).  A block is about one of the
    source's row chunks (its memory budget), or one stored chunk where that is
    larger; a thread per core holds one, or fewer threads where blocks are so
    large that two of them would exceed ``PREFETCH_BYTES`` (a 400 MB stored
    chunk: one thread).  ``rows_fn`` converts rows a tile at a time, so a block
    is never copied as float64.  The threads are shut down by ``stack`` (an
    ``ExitStack``).
    """
    import bisect
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    from .parallel import n_cpus
    from .partitions import PREFETCH_BYTES, block_ranges

    readers, lo = source.pass_readers()
    reader = readers["X"]
    n = source.n_rows()
    step = source.row_chunks()[0]
    empty = rows_fn(np.empty((0, source.n_features()), dtype=reader.dtype))  # the outputs' dtype and width
    blocks = [(a - lo, b - lo) for a, b in block_ranges(reader, lo, lo + n, step)]
    block_bytes = max(b - a for a, b in blocks) * source.n_features() * np.dtype(reader.dtype).itemsize
    workers = n_cpus() if 2 * block_bytes <= PREFETCH_BYTES else max(1, min(n_cpus(), PREFETCH_BYTES // block_bytes))
    pool = stack.enter_context(ThreadPoolExecutor(workers, thread_name_prefix="streamridge-predict"))

    def one(a: int, b: int) -> np.ndarray:
        return rows_fn(reader.read(lo + a, lo + b))

    bounds = np.cumsum((0, *(b - a for a, b in blocks))).tolist()

    def compute(a: int, b: int) -> np.ndarray:  # a and b are block boundaries
        cuts = bounds[bisect.bisect_left(bounds, a) : bisect.bisect_left(bounds, b) + 1]
        parts = list(pool.map(one, cuts[:-1], cuts[1:]))
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    chunks = tuple(b - a for a, b in blocks)
    return _RowBatches(compute, (n, *empty.shape[1:]), empty.dtype, chunks, batch_chunks=batch_chunks, tick=tick)


def _progress(enabled: bool, total: int) -> Any:
    """A tqdm bar (``update``/``close``) or None."""
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="rows", unit_scale=True, desc="predict")


def cmd_predict(args: argparse.Namespace) -> int:
    """``streamridge predict``: stream X through the model, write predictions atomically."""
    from .model_io import load_model_core
    from .sources import open_source, write_hdf5, write_zarr

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
    with contextlib.ExitStack() as stack:  # the progress bar and the reading threads, closed on any exit
        bar = _progress(not (args.quiet or args.json), n * (2 if classifier and args.scores else 1))
        if bar is not None:
            stack.callback(bar.close)
        tick = None if bar is None else bar.update
        if getattr(model, "features_", None) is None and args.groups is None:  # rows through the reader: no dask
            fns = (model._predict_rows, model._decision_rows if classifier and args.scores else None)
            values = [None if f is None else _reader_batches(source, f, stack, batch_chunks=batch, tick=tick) for f in fns]
        else:  # a feature map (series ids for a stateful one): the dask views
            groups = None if args.groups is None else open_source(
                args.data, x=args.x, y=None, groups=args.groups, chunk_rows=args.chunk_rows, require_y=False,
                storage_options=args.storage_options,
            ).groups
            extra = () if groups is None else (groups,)  # series ids only for a stateful feature map
            pred = model.predict(source.X, *extra)
            scores = model.decision_function(source.X, *extra) if classifier and args.scores else None
            values = [None if a is None else _dask_batches(a, batch_chunks=batch, tick=tick) for a in (pred, scores)]
        shape = values[0].shape  # type: ignore[union-attr]
        t0 = time.perf_counter()
        with warnings.catch_warnings(), Transaction() as tx, tx.writing(out) as tmp:
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
        arrays = " and ".join(facts["arrays"])
        print(
            f"wrote {arrays} of shape {tuple(shape)} for {n:,} rows to {out} "
            f"in {seconds:.3g} s ({n / max(seconds, 1e-9):,.0f} rows/s)"
        )
    return 0
