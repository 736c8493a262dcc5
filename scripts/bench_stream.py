"""Is the data pass I/O-bound or compute-bound, and how close is it to the sum of its parts?

Usage::

    python scripts/bench_stream.py                       # M=2,000,000 x N=200 float32
    python scripts/bench_stream.py --rows 200000 --formats zarr

For each format (zarr with its default compression, HDF5 chunked, .npy) it writes
the same rows under --dir (a temporary directory by default) and measures, in
one run, with the same scheduler, threads, window and row chunks:

  (a) read   every stored chunk read and decoded by the pass's partitions (a
             kernel that only counts rows, :class:`ReadOnlyKernel`);
  (b) stats  the full ``accumulate`` over the same rows already in memory
             (read before the clock starts);
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

from streamridge.datapass.driver import PassReport, accumulate

try:
    from streamridge.datapass.spec import PassSpec
except ImportError:  # another checkout's module layout (bench_layouts.py --compare)
    from streamridge.datapass.driver import PassSpec  # type: ignore[attr-defined,no-redef]
from streamridge.folds.schemes import FoldScheme
from streamridge.sources import open_source

SPEC = PassSpec(FoldScheme("hash", 5), None, 1)


class ReadOnlyKernel:
    """A pass kernel that only counts rows: the same partitions and reads as the pass, no statistics."""

    def start(self) -> list[int]:
        return [0]

    def add(self, acc: list[int], X: Any, y: Any, groups: Any, weights: Any, row_start: int) -> None:
        acc[0] += int(X.shape[0])

    def finish(self, acc: list[int]) -> int:
        return acc[0]

    @staticmethod
    def merge(a: int, b: int) -> int:
        return a + b


def best(fn: Any, repeats: int) -> float:
    """Smallest wall time of ``repeats`` calls."""
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return min(ts)


def read_only(source: Any, args: argparse.Namespace, spec: PassSpec = SPEC, *, pieces: bool = False) -> None:
    """(a): every stored chunk read and decoded by the pass machinery (the plan ``accumulate`` makes for ``spec``), no statistics.

    Large stored chunks are decoded whole, as before they could be decoded in
    pieces (the baseline stays comparable across versions); ``pieces=True``
    decodes them as the pass does.
    """
    import inspect

    from streamridge.datapass.executors import reduce_partitions
    from streamridge.datapass.partitions import plan_pass, task_plan
    from streamridge.datapass.scheduling import open_scheduler

    try:
        from streamridge.datapass.layouts import default_memory_budget
        from streamridge.datapass.partition_task import run_partition
        from streamridge.datapass.stats_kernel import StatsKernel

        stats_bytes = StatsKernel(spec, args.features).result_bytes()
    except ImportError:  # another checkout's module layout (bench_layouts.py --compare)
        from streamridge.datapass.driver import _stats_bytes, default_memory_budget  # type: ignore[attr-defined,no-redef]
        from streamridge.datapass.partitions import run_partition  # type: ignore[attr-defined,no-redef]

        stats_bytes = _stats_bytes(spec, args.features)

    readers, lo = source.pass_readers()
    hi = lo + source.n_rows()
    kw = {"pieces": pieces} if "pieces" in inspect.signature(plan_pass).parameters else {}
    plan = plan_pass(
        readers,
        lo,
        hi,
        n_cells=spec.scheme.n_folds * spec.n_classes,
        stats_bytes=stats_bytes,
        memory_budget=default_memory_budget(),
        partition_rows=getattr(args, "chunk_rows", None),
        **kw,
    )
    kernel = ReadOnlyKernel()
    with open_scheduler(args.scheduler) as sched:
        total = reduce_partitions(
            run_partition,
            lambda i: (
                readers,
                *plan.rows(i),
                task_plan(plan, i, 0, len(plan), sched.n_workers),
                kernel,
                plan.rows(i)[0],
            ),
            len(plan),
            kernel.merge,
            sched,
            window=args.window,
        )
    assert total == hi - lo


def measure(path: str, args: argparse.Namespace) -> dict[str, float]:
    """(a), (b), (c) and the BLAS variants of (b) for one data set."""
    source = open_source(path, chunk_rows=args.chunk_rows)
    out = {"a_read_s": best(lambda: read_only(source, args), args.repeats)}
    X = np.asarray(source.X.compute())
    y = np.asarray(source.y.compute())
    mem = open_source(X, y=y, chunk_rows=args.chunk_rows)
    rows = args.chunk_rows
    out["b_stats_s"] = best(
        lambda: accumulate(mem, SPEC, scheduler=args.scheduler, window=args.window, partition_rows=rows),
        args.repeats,
    )
    for blas in (1, 2):
        with threadpool_limits(limits=blas):
            out[f"b_sync_blas{blas}_s"] = best(
                lambda: accumulate(mem, SPEC, scheduler="sync", partition_rows=rows), args.repeats
            )
    report = PassReport()
    out["c_pass_s"] = best(
        lambda: accumulate(
            source, SPEC, scheduler=args.scheduler, window=args.window, report=report, partition_rows=rows
        ),
        args.repeats,
    )
    out["chunks"] = report.extra["partitions"]
    out["chunk_rows"] = source.n_rows() // max(1, report.extra["partitions"])
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--features", type=int, default=200)
    p.add_argument("--formats", nargs="+", default=["zarr", "hdf5", "npy"], choices=["zarr", "hdf5", "npy"])
    p.add_argument("--dir", default=None, help="where to write the data (default: a temporary directory)")
    p.add_argument("--keep", action="store_true", help="keep the data (and reuse it when present)")
    p.add_argument("--chunk-rows", type=int, default=None, help="rows per partition (default: automatic)")
    p.add_argument(
        "--store-chunk-rows", type=int, default=None, help="rows per stored chunk (default: about 4 MiB)"
    )
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
            stored = f"-c{args.store_chunk_rows}" if args.store_chunk_rows else ""
            path = os.path.join(root, f"{args.rows}x{args.features}{stored}-{name}")
            if not (args.keep and os.path.exists(path)):
                t = time.perf_counter()
                write(path, args.rows, args.features, fmt=fmt, chunk_rows=args.store_chunk_rows)
                print(f"  wrote {fmt}: {du(path) / 1e9:.2f} GB in {time.perf_counter() - t:.0f} s")
            r = measure(path, args)
            a, b, c = r["a_read_s"], r["b_stats_s"], r["c_pass_s"]
            print(
                f"{fmt:5s} partitions={r['chunks']}x~{r['chunk_rows']} rows  (a) read {a:.2f} s  (b) stats {b:.2f} s  "
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
