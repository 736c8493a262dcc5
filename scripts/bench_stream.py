"""Is the data pass I/O-bound or compute-bound, and how close is it to the sum of its parts?

Usage::

    python scripts/bench_stream.py                       # M=2,000,000 x N=200 float32
    python scripts/bench_stream.py --rows 200000 --formats zarr

For each format (zarr with its default compression, HDF5 chunked, .npy) it writes
the same rows under --dir (a temporary directory by default) and measures, in
one run, with the same scheduler, threads, window and row chunks:

  (a) read   every chunk read and decoded (a kernel that returns the row count);
  (b) stats  the statistics kernel (``stream.chunk_task``) on the same chunks
             already in memory (read before the clock starts);
  (c) pass   the full ``accumulate`` (read + statistics + merge);

and prints (c)/((a)+(b)) (no overlap of I/O and compute; goal <= 1.1) and
(c)/max((a),(b)) (perfect overlap gives 1).  (b) is also timed on one worker
thread with BLAS on 1 and on 2 threads.  Timings are the best of --repeats.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from typing import Any

import numpy as np
from _bench_data import du, write
from threadpoolctl import threadpool_limits

from streamridge.executors import run_in_order
from streamridge.folds import FoldScheme
from streamridge.scheduling import open_scheduler
from streamridge.sources import open_source
from streamridge.stream import PassSpec, accumulate, chunk_task

SPEC = PassSpec(FoldScheme("hash", 5), None, 1)


def _rows(X: np.ndarray, y: np.ndarray, groups: Any, weights: Any, start: int, spec: PassSpec) -> int:
    """Read-only kernel: the blocks are already read and decoded when it runs."""
    return int(X.shape[0])


def _calls(
    source: Any, blocks: list[tuple[Any, Any]] | None = None
) -> list[tuple[tuple[Any, ...], tuple[Any, ...]]]:
    starts = np.concatenate([[0], np.cumsum(source.X.chunks[0])[:-1]])
    if blocks is None:
        blocks = [(source.X.blocks[i, 0], source.y.blocks[i]) for i in range(len(starts))]
    return [((X, y, None, None), (int(s), SPEC)) for (X, y), s in zip(blocks, starts)]


def best(fn: Any, repeats: int) -> float:
    """Smallest wall time of ``repeats`` calls."""
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return min(ts)


def drain(fn: Any, calls: Any, scheduler: str, window: int | None) -> None:
    """Run ``fn`` over every call on the scheduler, discarding results in order."""
    with open_scheduler(scheduler) as sched:
        for _ in run_in_order(fn, calls, sched, window=window):
            pass


def stats_times(source: Any, calls: Any, args: argparse.Namespace) -> dict[str, float]:
    """(b) on the pass scheduler and on one worker with BLAS on 1 and 2 threads, chunks in memory."""
    in_memory = [
        (np.asarray(X.compute(scheduler="sync")), np.asarray(y.compute(scheduler="sync")))
        for (X, y, _, _), _ in calls
    ]
    mem_calls = _calls(source, in_memory)
    out = {"b_stats_s": best(lambda: drain(chunk_task, mem_calls, args.scheduler, args.window), args.repeats)}
    for blas in (1, 2):
        with threadpool_limits(limits=blas):
            out[f"b_sync_blas{blas}_s"] = best(
                lambda: drain(chunk_task, mem_calls, "sync", None), args.repeats
            )
    return out


def measure(path: str, args: argparse.Namespace) -> dict[str, float]:
    """(a), (b), (c) and the BLAS variants of (b) for one data set."""
    source = open_source(path, chunk_rows=args.chunk_rows)
    calls = _calls(source)
    out = {"a_read_s": best(lambda: drain(_rows, calls, args.scheduler, args.window), args.repeats)}
    out.update(stats_times(source, calls, args))
    out["c_pass_s"] = best(
        lambda: accumulate(source, SPEC, scheduler=args.scheduler, window=args.window), args.repeats
    )
    out["chunks"] = len(calls)
    out["chunk_rows"] = int(source.X.chunks[0][0])
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--features", type=int, default=200)
    p.add_argument("--formats", nargs="+", default=["zarr", "hdf5", "npy"], choices=["zarr", "hdf5", "npy"])
    p.add_argument("--dir", default=None, help="where to write the data (default: a temporary directory)")
    p.add_argument("--keep", action="store_true", help="keep the data (and reuse it when present)")
    p.add_argument("--chunk-rows", type=int, default=None, help="rows per pass chunk (default: automatic)")
    p.add_argument("--scheduler", default="threads")
    p.add_argument("--window", type=int, default=None)
    p.add_argument("--repeats", type=int, default=2)
    args = p.parse_args(argv)
    root = args.dir or tempfile.mkdtemp(prefix="bench-stream-")
    os.makedirs(root, exist_ok=True)
    load = os.getloadavg()
    print(
        f"M={args.rows} N={args.features} float32, scheduler={args.scheduler}, cores={os.cpu_count()}, load at start {load[0]:.2f}"
    )
    try:
        for fmt in args.formats:
            name = {"zarr": "data.zarr", "hdf5": "data.h5", "npy": "npy"}[fmt]
            path = os.path.join(root, f"{args.rows}x{args.features}-{name}")
            if not (args.keep and os.path.exists(path)):
                t = time.perf_counter()
                write(path, args.rows, args.features, fmt=fmt)
                print(f"  wrote {fmt}: {du(path) / 1e9:.2f} GB in {time.perf_counter() - t:.0f} s")
            r = measure(path, args)
            a, b, c = r["a_read_s"], r["b_stats_s"], r["c_pass_s"]
            print(
                f"{fmt:5s} chunks={r['chunks']}x{r['chunk_rows']} rows  (a) read {a:.2f} s  (b) stats {b:.2f} s  "
                f"(c) pass {c:.2f} s = {args.rows / c:,.0f} rows/s  "
                f"c/(a+b) = {c / (a + b):.2f}  c/max(a,b) = {c / max(a, b):.2f}  "
                f"(b) 1 worker: BLAS 1 thread {r['b_sync_blas1_s']:.2f} s, 2 threads {r['b_sync_blas2_s']:.2f} s "
                f"(ratio {r['b_sync_blas1_s'] / r['b_sync_blas2_s']:.2f})"
            )
            if not args.keep:
                shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)
    finally:
        if not args.keep and args.dir is None:
            shutil.rmtree(root, ignore_errors=True)
    print(f"load at end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
