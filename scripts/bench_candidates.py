"""G candidate echo state networks in one pass vs G separate passes, and the map-time ratio.

Usage::

    python scripts/bench_candidates.py                                  # 27 ESNs of 200 units, 16 series x 1,000 steps
    python scripts/bench_candidates.py --series 64 --steps 12500        # the full size (64 series x 12,500 steps)
    python scripts/bench_candidates.py --units 100 --repeats 3 --dir /data/bench
    python scripts/bench_candidates.py --series 2 --steps 20000 --scheduler threads   # few long series

The candidates are ``EchoStateNetwork.grid(spectral_radius=[0.7, 0.9, 1.1], leak_rate=[0.1, 0.3, 1.0],
input_scaling=[0.5, 1.0, 2.0], n_units=UNITS)`` (G = 27) on a zarr store of 2 float32 inputs and a target
(written by this script), one fold per series (leave one series out).  Every run is a fresh interpreter, BLAS on
one thread, the passes on ``--scheduler`` (default ``sync``: one thread), so times compare like with like; peak
RSS is that process's (with ``processes``, the driver's only).
Measured in the same run, alternated ``--repeats`` times (best of each):

  one pass      ``StreamRidgeCV(features=candidates).fit``: the pass's time (``timings_["pass_s"]``: read,
                every candidate's map and statistics) and the process's peak RSS;
  G passes      ``compute_stats`` of each candidate alone, one after the other in one process: the sum of the
                pass times (``timings_["pass_s"]``) and the peak RSS;
  one read      every stored chunk of the store read and decoded, nothing else;
  map alone     one candidate's map over all rows (series in lockstep groups of 16, as the pass's lanes),
                no statistics (the median candidate: leak rate 0.3).

Printed: the times, the saving, the ratio of the one pass's time per candidate to a separate pass's, less
one read each (goal at most 1.15), and the map-time ratio (one pass - one read) / (G x map alone), which
also counts every candidate's statistics.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
GRID = {"spectral_radius": [0.7, 0.9, 1.1], "leak_rate": [0.1, 0.3, 1.0], "input_scaling": [0.5, 1.0, 2.0]}


def candidates(units: int) -> list:
    """The 27 candidate maps."""
    from streamridge.features import EchoStateNetwork

    return EchoStateNetwork.grid(n_units=units, seed=1, **GRID)


def write_store(path: str, series: int, steps: int, chunk_rows: int) -> None:
    """Inputs u ~ U(0, 0.5) (2 columns), a NARMA-like target, series ids, in a zarr store."""
    from streamridge.sources import write_zarr

    rng = np.random.default_rng(0)
    u = rng.uniform(0, 0.5, (series * steps, 2)).astype(np.float32)
    y = np.zeros(series * steps, dtype=np.float32)
    y[1:] = 0.5 * u[:-1, 0] + 0.3 * u[:-1, 1] ** 2
    write_zarr(path, u, y, np.repeat(np.arange(series), steps), chunk_rows=chunk_rows)


def child(kind: str, store: str, units: int, chunk_rows: int, scheduler: str = "sync") -> dict:
    """One measurement in this (fresh) process, BLAS on one thread, the pass on ``scheduler``."""
    from threadpoolctl import threadpool_limits

    import streamridge as sr

    maps = candidates(units)
    with threadpool_limits(1):
        if kind == "one":
            est = sr.StreamRidgeCV(
                cv="groups", features=maps, scheduler=scheduler, chunk_rows=chunk_rows, progress=False
            )
            est.fit(store, groups="groups")
            return {"time": est.timings_["pass_s"]}
        if kind == "separate":
            total = 0.0
            for m in maps:
                est = sr.StreamRidgeCV(
                    cv="groups", features=m, scheduler=scheduler, chunk_rows=chunk_rows, progress=False
                )
                est.compute_stats(store, groups="groups")
                total += est.timings_["pass_s"]
            return {"time": total}
        if kind == "read":
            return {"time": read_all(store)}
        return {"time": map_alone(maps[len(maps) // 2], store)}


def read_all(store: str) -> float:
    """Seconds to read and decode every stored chunk of every array."""
    import zarr

    t0 = time.perf_counter()
    root = zarr.open_group(store, mode="r")
    for name in ("X", "y", "groups"):
        a = root[name]
        step = a.chunks[0]
        for start in range(0, a.shape[0], step):
            a[start : start + step]
    return time.perf_counter() - t0


def map_alone(fmap, store: str) -> float:
    """Seconds of the map over all rows, series in lockstep groups of 16 into one reused buffer (no statistics)."""
    import zarr

    root = zarr.open_group(store, mode="r")
    u, g = np.asarray(root["X"][:], dtype=np.float64), root["groups"][:]
    fmap.fit_width(u.shape[1])
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1], True])
    spans = list(itertools.pairwise(starts))
    buf = np.empty((0, fmap.n_features_out_))
    t0 = time.perf_counter()
    for i in range(0, len(spans), 16):
        group = spans[i : i + 16]
        rows = sum(b - a for a, b in group)
        buf = buf if buf.shape[0] >= rows else np.empty((rows, fmap.n_features_out_))
        fmap.apply_chunks([(u[a:b], int(a), g[a:b], fmap.init_state()) for a, b in group], out=buf)
    return time.perf_counter() - t0


def measure(kind: str, args: argparse.Namespace, store: str) -> tuple[float, float]:
    """(seconds, peak RSS in MiB) of one child run."""
    argv = [
        sys.executable,
        __file__,
        "--child",
        kind,
        "--store",
        store,
        "--units",
        str(args.units),
        "--chunk-rows",
        str(args.chunk_rows),
        "--scheduler",
        args.scheduler,
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"the {kind} run failed")
    return json.loads(out.strip().splitlines()[-1])["time"], usage.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--series", type=int, default=16)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--units", type=int, default=200)
    ap.add_argument("--chunk-rows", type=int, default=12_500)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument(
        "--dir", default=None, help="where the store is written (default: a new temporary directory)"
    )
    ap.add_argument(
        "--scheduler",
        default="sync",
        help="the passes' scheduler (default sync: one thread); 'threads' shares the candidates and rows among the cores",
    )
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--store", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.store, args.units, args.chunk_rows, args.scheduler)))
        return
    store = os.path.join(args.dir or tempfile.mkdtemp(prefix="bench_candidates_"), "raw.zarr")
    write_store(store, args.series, args.steps, args.chunk_rows)
    G = len(candidates(args.units))
    runs: dict[str, list[tuple[float, float]]] = {k: [] for k in ("one", "separate", "read", "map")}
    for _ in range(args.repeats):
        for kind in runs:
            runs[kind].append(measure(kind, args, store))
    (t1, m1), (tg, mg), (tr, _), (tm, _) = (min(runs[k]) for k in runs)
    m1, mg = (max(r[1] for r in runs[k]) for k in ("one", "separate"))
    rows = args.series * args.steps
    print(
        f"{G} ESN candidates of {args.units} units, {args.series} series x {args.steps:,} steps ({rows:,} rows), "
        f"one fold per series, scheduler {args.scheduler} (BLAS on 1 thread), best of {args.repeats} alternated; "
        f"load {os.getloadavg()[0]:.1f}"
    )
    print(f"one pass, all candidates   {t1:9.2f} s   peak RSS {m1:7.0f} MiB")
    print(f"{G} separate passes         {tg:9.2f} s   peak RSS {mg:7.0f} MiB   ({tg / t1:.2f}x the one pass)")
    print(f"one read of the store      {tr:9.3f} s")
    print(f"one candidate's map alone  {tm:9.3f} s")
    print(
        f"per candidate, one pass vs separate (less one read each) = {(t1 - tr) / (tg - G * tr):.2f} (goal <= 1.15)"
    )
    print(
        f"map-time ratio (one pass - one read) / ({G} x map alone, statistics included) = {(t1 - tr) / (G * tm):.2f}"
    )


if __name__ == "__main__":
    main()
