"""How a stateful map's lane tasks split over the workers of a ``local:2`` cluster, by worker-saturation.

Usage::

    python scripts/bench_lane_split.py                       # ESN 200 units, 64 series x 12,500 steps, 8 passes each
    python scripts/bench_lane_split.py --passes 4 --saturation 1.0 1.1

One warm ``local:N`` cluster (as ``scheduler="local:N"`` starts it); for each
pass the scheduler's ``WORKER_SATURATION`` is set to the next value in turn
(alternated), the pass is run with dask's task stream recorded, and the number
of lane tasks each worker ran and the wall time are printed.  streamridge starts
its clusters at 1.0; dask's default is 1.1 (two tasks held by a one-thread worker).
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))

import streamridge as sr
from streamridge.datapass.scheduling import scheduler_session
from streamridge.features import EchoStateNetwork


def main() -> None:
    from bench_features import make_raw, write_zarr
    from distributed import get_task_stream

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--series", type=int, default=64)
    ap.add_argument("--steps", type=int, default=12_500)
    ap.add_argument("--chunk-rows", type=int, default=3125)
    ap.add_argument("--units", type=int, default=200)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--passes", type=int, default=8, help="passes per saturation value")
    ap.add_argument("--saturation", type=float, nargs="+", default=[1.1, 1.0])
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="bench_lane_split_")
    try:
        u, y, g = make_raw(args.series, args.steps)
        raw = write_zarr(os.path.join(root, "raw.zarr"), u, y, g, chunk_rows=args.chunk_rows)
        est = dict(
            cv="groups", features=EchoStateNetwork(args.units, seed=1).fit(u), chunk_rows=args.chunk_rows
        )
        results: dict[float, list[tuple[float, list[int]]]] = {s: [] for s in args.saturation}
        with scheduler_session(f"local:{args.workers}") as cluster:
            client = cluster.client()
            scheduler = cluster.future.result()[0].scheduler  # the LocalCluster's scheduler, in this process
            sr.StreamRidgeCV(**est, scheduler=client).compute_stats(raw, groups="groups")  # warm-up
            for _ in range(args.passes):
                for s in args.saturation:
                    scheduler.WORKER_SATURATION = s
                    with get_task_stream(client) as ts:
                        t0 = time.perf_counter()
                        sr.StreamRidgeCV(**est, scheduler=client).compute_stats(raw, groups="groups")
                        wall = time.perf_counter() - t0
                    split = collections.Counter(r["worker"] for r in ts.data if "call_task" in str(r["key"]))
                    results[s].append((wall, sorted(split.values())))
        print(
            f"ESN {args.units} units, {args.series} series x {args.steps} steps, chunks of {args.chunk_rows}, "
            f"local:{args.workers}, load {os.getloadavg()[0]:.1f}"
        )
        for s, runs in results.items():
            walls = [w for w, _ in runs]
            splits = collections.Counter(tuple(sp) for _, sp in runs)
            print(
                f"  saturation {s}: lane tasks per worker {dict(splits)}; wall {min(walls):.2f}-{max(walls):.2f} s, "
                f"mean {sum(walls) / len(walls):.2f} s"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
