"""``streamridge predict``: stream rows through a model and write the predictions atomically.

The outputs come from the pass (:mod:`streamridge.datapass.predict`), block by block in row
order, a few blocks computed ahead while one is written; :class:`RowStream` hands them to the
writers, which take consecutive row slices of each output in turn.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from streamridge.cli.output import emit
from streamridge.errors import ParameterError
from streamridge.io.outputs import MARKER, Output, Transaction, check_outputs

if TYPE_CHECKING:
    import numpy as np

Block = tuple[int, tuple[Any, ...]]


class RowStream:
    """Outputs of consecutive row blocks, ``(first row, arrays)`` from ``blocks``, as array-likes sliced in order.

    The writers (``write_zarr`` / ``write_hdf5``) ask for consecutive row slices, the same rows
    of every output in turn: a slice takes the blocks it needs from ``blocks`` (once each) and
    a block is let go once every output has been served past it, so memory holds the blocks
    a slice spans, whatever the row count.

    Parameters
    ----------
    blocks : iterator of (int, tuple of arrays)
        Every row once, in order.
    n : int
        Rows of every output.
    empty : tuple of arrays
        The outputs of no rows (their dtypes and widths).
    """

    def __init__(self, blocks: Iterator[Block], n: int, empty: tuple[Any, ...]) -> None:
        import numpy as np

        self._blocks, self._n = blocks, n
        self._outputs = [_Rows(self, i, (n, *e.shape[1:]), np.dtype(e.dtype)) for i, e in enumerate(empty)]
        self._held: list[Block] = []  # blocks not yet served to every output, in row order
        self._end = 0  # one past the last row taken from ``blocks``
        self._served = [0] * len(empty)

    def close(self) -> None:
        """Close ``blocks`` (a generator: its pass stops and its threads are joined here and now).

        Called once the last row is taken: a generator left to the garbage collector is closed in
        whichever thread the collector runs, which can be a thread being started, holding a lock of
        :mod:`threading` that joining the pass's threads needs (a deadlock).
        """
        close = getattr(self._blocks, "close", None)
        if close is not None:
            close()

    def output(self, i: int) -> _Rows:
        """Output ``i`` as an array-like of its rows (``shape``, ``dtype``, consecutive slices)."""
        return self._outputs[i]

    def rows(self, i: int, key: Any) -> np.ndarray:
        """Rows ``key`` (a slice) of output ``i``.

        Raises
        ------
        ValueError
            A slice before rows already let go (the rows are read once, in order).
        """
        import numpy as np

        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError("rows are read as consecutive slices")
        start, stop, _ = key.indices(self._n)
        first = self._held[0][0] if self._held else self._end
        if start < first:
            raise ValueError(
                f"rows {start}-{stop - 1} were already written; the rows are read once, in order"
            )
        while self._end < stop:
            block = next(self._blocks, None)
            if block is None:
                raise RuntimeError(f"the outputs ended at row {self._end} of {self._n}")
            self._held.append(block)
            self._end = block[0] + block[1][0].shape[0]
            if self._end >= self._n:
                self.close()
        parts = [
            arrays[i][max(start, a) - a : min(stop, a + arrays[i].shape[0]) - a]
            for a, arrays in self._held
            if a < stop and a + arrays[i].shape[0] > start
        ]
        self._served[i] = max(self._served[i], stop)
        done = min(self._served)
        while self._held and self._held[0][0] + self._held[0][1][0].shape[0] <= done:
            self._held.pop(0)
        if not parts:
            return self._outputs[i].empty()
        return parts[0] if len(parts) == 1 else np.concatenate(parts)


class _Rows:
    """One output of a :class:`RowStream`."""

    def __init__(self, stream: RowStream, index: int, shape: tuple[int, ...], dtype: np.dtype[Any]) -> None:
        self._stream, self._index = stream, index
        self.shape, self.dtype, self.ndim = shape, dtype, len(shape)

    def __getitem__(self, key: Any) -> np.ndarray:
        return self._stream.rows(self._index, key)

    def empty(self) -> np.ndarray:
        """No rows of this output."""
        import numpy as np

        return np.empty((0, *self.shape[1:]), dtype=self.dtype)


def _dask_batches(arrays: list[Any], *, batch_chunks: int, progress: Any = False) -> Iterator[Block]:
    """Rows of dask arrays of the same row chunks (the predictions of a map with ``warmup``, or of a lane
    group too large to hold; and the scores), ``batch_chunks`` chunks computed in one graph (X read
    once for all), the next batch while one is written."""
    import itertools
    from concurrent.futures import ThreadPoolExecutor

    import dask
    import numpy as np

    from streamridge.datapass.driver import progress_bar

    bounds = np.cumsum((0, *(int(c) for c in arrays[0].chunks[0]))).tolist()
    cuts = [*bounds[:-1:batch_chunks], bounds[-1]]
    bar = progress_bar(progress, bounds[-1], desc="predict")

    def compute(lo: int, hi: int) -> tuple[Any, ...]:
        return tuple(np.asarray(a) for a in dask.compute(*(a[lo:hi] for a in arrays)))

    try:
        with ThreadPoolExecutor(1, thread_name_prefix="streamridge-ahead") as ahead:
            ranges = list(itertools.pairwise(cuts))
            pending = ahead.submit(compute, *ranges[0]) if ranges else None
            for k, (lo, hi) in enumerate(ranges):
                assert pending is not None
                got = pending.result()
                pending = ahead.submit(compute, *ranges[k + 1]) if k + 1 < len(ranges) else None
                bar(hi - lo)
                yield lo, got
    finally:
        bar(None)


def _blocks(
    model: Any, source: Any, series: Any, args: argparse.Namespace, scores: bool, progress: bool
) -> tuple[Iterator[Block], tuple[Any, ...]]:
    """The outputs block by block, and their zero-row arrays: through the reader (no map, or a stateless
    one: series ids are not needed); a stateful map's series in lanes, as the pass runs them; else
    chunk after chunk through the dask views."""
    from streamridge.datapass.predict import PredictKernel, lane_predict_blocks, predict_blocks

    empty = PredictKernel(model, scores=scores).empty()
    fmap = getattr(model, "features_", None)
    if fmap is None or not fmap.stateful:
        return predict_blocks(model, source, scores=scores, progress=progress), empty
    lanes = lane_predict_blocks(model, series, scores=scores, progress=progress)
    if lanes is not None:
        return lanes, empty
    import numpy as np

    extra = () if args.groups is None else (series.groups,)
    if scores:
        decision = model.decision_function(source.X, *extra)
        arrays = [model._labels_of(decision), decision]
    else:
        arrays = [model.predict(source.X, *extra)]
    empty = tuple(np.empty((0, *a.shape[1:]), dtype=a.dtype) for a in arrays)
    return _dask_batches(arrays, batch_chunks=4 * (os.cpu_count() or 1), progress=progress), empty


def cmd_predict(args: argparse.Namespace) -> int:
    """``streamridge predict``: stream X through the model, write predictions atomically."""
    from streamridge.io.model_file import load_model_core
    from streamridge.sources import open_source, write_hdf5, write_zarr

    (out,) = check_outputs(
        [Output(args.out, "predictions")], [args.data, args.model], overwrite=args.overwrite
    )
    model = load_model_core(args.model)  # X is a source: no scikit-learn needed
    source = open_source(
        args.data,
        x=args.x,
        y=None,
        chunk_rows=args.chunk_rows,
        require_y=False,
        storage_options=args.storage_options,
    )
    if source.n_features() != model.n_features_in_:  # raw inputs, before a feature map
        raise ParameterError(
            f"X in {args.data} has {source.n_features()} features but the model {args.model} was fitted on "
            f"{model.n_features_in_}; use the same features (--x NAME)"
        )
    n = source.n_rows()
    write = write_hdf5 if out.lower().endswith((".h5", ".hdf5")) else write_zarr
    scores = hasattr(model, "decision_function") and args.scores
    fmap = getattr(model, "features_", None)
    series = source
    if (
        fmap is not None and fmap.stateful and args.groups is not None
    ):  # each series' state carried in row order
        series = open_source(
            args.data,
            x=args.x,
            y=None,
            groups=args.groups,
            chunk_rows=args.chunk_rows,
            require_y=False,
            storage_options=args.storage_options,
        )
    with contextlib.ExitStack() as stack:  # the pass's threads stop on any exit, before the output is removed
        blocks, empty = _blocks(model, source, series, args, scores, not (args.quiet or args.json))
        stream = RowStream(stack.enter_context(contextlib.closing(blocks)), n, empty)  # type: ignore[type-var]
        values = [stream.output(0), stream.output(1) if scores else None]
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
