"""Throughput of the pass on each scheduler, and how far their statistics differ.

Usage::

    python scripts/bench_schedulers.py                   # M=1,000,000 x N=200 zarr store
    python scripts/bench_schedulers.py --rows 200000 --schedulers threads local:2
    python scripts/bench_schedulers.py --rows 2000000 --chunk-rows 50000 --store DIR/m2.zarr   # the benchmarks' 2e6 store

Schedulers are alternated (threads, local:2, ..., threads, local:2, ...) so that
each repeat sees the same load.  CPU time is the whole machine's busy time (run it on an idle machine).

Writes one zarr store, runs ``accumulate`` over it with every scheduler (same
row chunks; the best of --repeats; start-up of a local cluster or process pool
is included, as a user would see it) and prints rows/s, the ratio to
``threads`` and the largest relative difference of every statistic from the
``threads`` result.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

import numpy as np
import psutil
from _bench_data import write

from streamridge.datapass.driver import accumulate
from streamridge.datapass.spec import PassSpec
from streamridge.folds.schemes import FoldScheme
from streamridge.sources import open_source

SPEC = PassSpec(FoldScheme("hash", 5), None, 1)


def max_rel_diff(a, b) -> float:  # type: ignore[no-untyped-def]
    """Largest difference of any statistic, relative to that statistic's largest entry."""
    worst = 0.0
    for name in ("weight", "mean_x", "mean_y", "sxx", "sxy", "syy"):
        x, y = getattr(a, name), getattr(b, name)
        worst = max(worst, float(np.abs(x - y).max() / max(np.abs(y).max(), 1e-300)))
    if not np.array_equal(a.count, b.count):
        worst = float("inf")
    return worst


def cpu_seconds() -> float:
    """Busy CPU time of the whole machine (user, nice, system, irq and softirq, all cores).

    ``local:N`` workers are forked by a forkserver, which reaps them, so this
    process's children's rusage does not hold them: the machine's counters do
    (run it on an otherwise idle machine).  Steal time (another guest's) and
    guest time (already in user) are not counted.
    """
    t = psutil.cpu_times()
    return float(sum(getattr(t, f, 0.0) for f in ("user", "nice", "system", "irq", "softirq")))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--features", type=int, default=200)
    p.add_argument("--schedulers", nargs="+", default=["threads", "local:2", "processes", "sync"])
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--dir", default=None)
    p.add_argument("--chunk-rows", type=int, default=None, help="rows per stored chunk (default about 4 MiB)")
    p.add_argument("--store", default=None, help="zarr store to use, written there if missing and kept")
    args = p.parse_args(argv)
    root = args.dir or tempfile.mkdtemp(prefix="bench-sched-")
    path = args.store or os.path.join(root, "data.zarr")
    print(
        f"M={args.rows} N={args.features} float32 zarr, cores={os.cpu_count()}, load at start {os.getloadavg()[0]:.2f}"
    )
    try:
        if not (args.store and os.path.exists(path)):
            write(path, args.rows, args.features, chunk_rows=args.chunk_rows)
        source = open_source(path)
        rows = int(source.X.shape[0])
        print(f"  {len(source.X.chunks[0])} chunks of {source.X.chunks[0][0]} rows")
        results, times, cpus = {}, {s: [] for s in args.schedulers}, {s: [] for s in args.schedulers}
        for _ in range(args.repeats):
            for sched in args.schedulers:
                t, c = time.perf_counter(), cpu_seconds()
                results[sched] = accumulate(source, SPEC, scheduler=sched)
                times[sched].append(time.perf_counter() - t)
                cpus[sched].append(cpu_seconds() - c)
        base = min(times["threads"]) if "threads" in times else None
        base_cpu = min(cpus["threads"]) if "threads" in cpus else None
        for sched in args.schedulers:
            s, c = min(times[sched]), min(cpus[sched])
            ratio = (
                f"{s / base:.2f}x the threads time, CPU {c:.2f} s = {c / base_cpu:.2f}x"
                if base and base_cpu
                else ""
            )
            diff = max_rel_diff(results[sched], results["threads"]) if "threads" in results else float("nan")
            every = " ".join(f"{x:.2f}" for x in times[sched])
            print(
                f"{sched:10s} {s:7.2f} s  {rows / s:>10,.0f} rows/s  {ratio}  max rel diff vs threads {diff:.1e}"
                f"  (every run: {every} s)"
            )
    finally:
        if args.store is None:
            shutil.rmtree(path, ignore_errors=True)
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)
    print(f"load at end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
