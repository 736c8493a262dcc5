"""Peak memory of a fit does not grow with the row count.

Usage::

    python scripts/bench_memory.py                        # M=500,000 and 4,000,000, N=200
    python scripts/bench_memory.py --rows 100000 800000 --features 100
    python scripts/bench_memory.py --store BIG.zarr       # measure one existing store only
    python scripts/bench_memory.py --arenas cli 16        # each fit with the CLI's arena cap and with glibc's default

``--arenas``: ``cli`` leaves ``MALLOC_ARENA_MAX`` unset, so the CLI caps glibc's malloc
arenas at 2 (``cli._limit_malloc_arenas``); a number sets ``MALLOC_ARENA_MAX`` in the
child, which turns the cap off (16 = glibc's default of 8 per core on this 2-core machine).

Writes zarr stores (same N, same storage chunks, hence the same pass chunks)
and runs ``python -m streamridge fit --data STORE --out MODEL --quiet --json`` in a
child process per store; the child's peak resident set size comes from
``os.wait4`` (its own rusage, not the maximum over every child).  Prints the peak
per store and the ratio largest / smallest (goal <= 1.2).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from _bench_data import du, write


def fit_peak(
    store: str, out: str, extra: list[str], arenas: str = "cli"
) -> tuple[float, float, dict, tuple[float, float]]:
    """Peak RSS (MiB), wall seconds, the JSON summary and (user, system) CPU seconds of one CLI fit in a child."""
    cmd = [
        sys.executable,
        "-m",
        "streamridge",
        "fit",
        "--data",
        store,
        "--out",
        out,
        "--quiet",
        "--json",
        *extra,
    ]
    t = time.perf_counter()
    if os.path.exists(out):
        os.unlink(out)  # the model of the previous fit
    env = dict(os.environ)
    env.pop("MALLOC_ARENA_MAX", None)
    if arenas != "cli":
        env["MALLOC_ARENA_MAX"] = arenas
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    stdout = proc.stdout.read() if proc.stdout else b""
    stderr = proc.stderr.read() if proc.stderr else b""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"fit failed ({proc.returncode}): {stderr.decode()[-2000:]}")
    return usage.ru_maxrss / 1024, wall, json.loads(stdout.decode() or "{}"), (usage.ru_utime, usage.ru_stime)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, nargs="+", default=[500_000, 4_000_000])
    p.add_argument("--features", type=int, default=200)
    p.add_argument("--dir", default=None)
    p.add_argument("--store", default=None, help="measure this existing store instead of writing new ones")
    p.add_argument("--scheduler", default=None)
    p.add_argument(
        "--arenas", nargs="+", default=["cli"], help="'cli' (the CLI's cap) and/or MALLOC_ARENA_MAX values"
    )
    args = p.parse_args(argv)
    extra = [] if args.scheduler is None else ["--scheduler", args.scheduler]
    root = args.dir or tempfile.mkdtemp(prefix="bench-memory-")
    os.makedirs(root, exist_ok=True)
    print(f"cores={os.cpu_count()}, load at start {os.getloadavg()[0]:.2f}")
    peaks = []
    try:
        stores = [args.store] if args.store else []
        for rows in [] if args.store else args.rows:
            path = os.path.join(root, f"{rows}x{args.features}.zarr")
            t = time.perf_counter()
            write(path, rows, args.features)
            print(f"  wrote {path}: {du(path) / 1e9:.2f} GB in {time.perf_counter() - t:.0f} s")
            stores.append(path)
        for store in stores:
            for arenas in args.arenas:
                peak, wall, summary, (user, system) = fit_peak(
                    store, os.path.join(root, "model.npz"), extra, arenas
                )
                rows = summary.get("rows", 0)
                rate = summary.get("timings", {}).get("rows_per_s", float("nan"))
                print(
                    f"{os.path.basename(store)} arenas={arenas}: rows={rows} peak RSS {peak:,.0f} MiB, wall {wall:.1f} s, "
                    f"user {user:.1f} s, system {system:.1f} s, pass {rate:,.0f} rows/s (load {os.getloadavg()[0]:.2f})"
                )
                if arenas == args.arenas[0]:
                    peaks.append(peak)
            if not args.store:
                shutil.rmtree(store)
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)
    if len(peaks) > 1:
        print(f"peak ratio largest/smallest M: {peaks[-1] / peaks[0]:.3f} (goal <= 1.2)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
