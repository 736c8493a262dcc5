"""Throughput of the pass on each scheduler, and how far their statistics differ.

Usage::

    python scripts/bench_schedulers.py                   # M=1,000,000 x N=200 zarr store
    python scripts/bench_schedulers.py --rows 200000 --schedulers threads local:2

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
from _bench_data import write

from streamridge.folds import FoldScheme
from streamridge.sources import open_source
from streamridge.stream import PassSpec, accumulate

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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--features", type=int, default=200)
    p.add_argument("--schedulers", nargs="+", default=["threads", "local:2", "processes", "sync"])
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--dir", default=None)
    args = p.parse_args(argv)
    root = args.dir or tempfile.mkdtemp(prefix="bench-sched-")
    path = os.path.join(root, "data.zarr")
    print(
        f"M={args.rows} N={args.features} float32 zarr, cores={os.cpu_count()}, load at start {os.getloadavg()[0]:.2f}"
    )
    try:
        write(path, args.rows, args.features)
        source = open_source(path)
        print(f"  {len(source.X.chunks[0])} chunks of {source.X.chunks[0][0]} rows")
        results = {}
        for sched in args.schedulers:
            ts = []
            for _ in range(args.repeats):
                t = time.perf_counter()
                results[sched] = accumulate(source, SPEC, scheduler=sched)
                ts.append(time.perf_counter() - t)
            results[sched + "_s"] = min(ts)
        base = results.get("threads_s")
        for sched in args.schedulers:
            s = results[sched + "_s"]
            ratio = f"{s / base:.2f}x the threads time" if base else ""
            diff = max_rel_diff(results[sched], results["threads"]) if "threads" in results else float("nan")
            print(
                f"{sched:10s} {s:7.2f} s  {args.rows / s:>10,.0f} rows/s  {ratio}  max rel diff vs threads {diff:.1e}"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"load at end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
