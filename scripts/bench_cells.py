"""Statistics of many cells in one partition: cell threads against one thread, in one run.

Usage::

    python scripts/bench_cells.py                         # 10 x 10 cells, N = 50 ... 1000, 128 MB of float64 rows
    python scripts/bench_cells.py --cells 5x1 23x1 10x2 --features 200

A pass whose statistics are too heavy to cut its rows into partitions (10 folds x 10 classes at
N = 200 is 32 MB of statistics per task, at N = 1000 800 MB) runs as one partition; before cell
threads its kernel used one core of the machine.  For each cell count and N this times
``accumulate`` over the same in-memory rows (one partition, threads scheduler) with cell threads
(the default) and with them switched off, alternately, best of --repeats, checks that the
statistics are bit-identical, and prints the ratio.
"""

from __future__ import annotations

import argparse
import functools
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from streamridge.datapass.driver import accumulate
from streamridge.datapass.spec import PassSpec
from streamridge.folds.schemes import FoldScheme
from streamridge.sources import open_source
from streamridge.stats.kernel import CellAccumulator

FIELDS = ("count", "weight", "mean_x", "mean_y", "sxx", "sxy", "syy")


def _best(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cells", nargs="+", default=["10x10"], help="FOLDSxCLASSES (default 10x10)")
    p.add_argument("--features", type=int, nargs="+", default=[50, 100, 200, 300, 500, 700, 1000])
    p.add_argument("--mb", type=float, default=128, help="MB of float64 rows (default 128)")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    use_threads = CellAccumulator.use_threads

    def one_thread(self: CellAccumulator, pool: Any, n: int) -> None:
        use_threads(self, pool, 1)

    print(
        f"cores={os.cpu_count()}, load at start {os.getloadavg()[0]:.2f}; {args.mb:g} MB of float64 rows, one partition"
    )
    for cells in args.cells:
        K, C = (int(v) for v in cells.split("x"))
        for N in args.features:
            M = int(args.mb * 2**20) // (8 * N)
            rng = np.random.default_rng(0)
            X = rng.normal(size=(M, N)) + 3
            y = rng.integers(0, C, M).astype(float) if C > 1 else X @ rng.normal(size=N)
            spec = PassSpec(
                FoldScheme("hash", K), tuple(float(c) for c in range(C)) if C > 1 else None, C if C > 2 else 1
            )
            src = open_source(X, y=y, chunk_rows=M)
            accumulate(src, spec, partition_rows=M)  # the first allocation of the statistics in this process
            times: dict[str, float] = {"threads": float("inf"), "one": float("inf")}
            results: dict[str, Any] = {}
            for _ in range(2):  # alternate
                for key in ("threads", "one"):
                    CellAccumulator.use_threads = use_threads if key == "threads" else one_thread  # type: ignore[method-assign]
                    t, results[key] = _best(
                        functools.partial(accumulate, src, spec, partition_rows=M), args.repeats
                    )
                    times[key] = min(times[key], t)
            CellAccumulator.use_threads = use_threads  # type: ignore[method-assign]
            same = all(
                np.array_equal(getattr(results["threads"], f), getattr(results["one"], f)) for f in FIELDS
            )
            print(
                f"{cells:6s} N={N:<5d} M={M:<8d} cell threads {times['threads']:.3f} s  one thread {times['one']:.3f} s  "
                f"ratio {times['threads'] / times['one']:.2f}  bit-identical {same}  load {os.getloadavg()[0]:.2f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
