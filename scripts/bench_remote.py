"""The data pass over HTTP: the layouts of ``bench_layouts.py`` served by ``serve_http.py``, with latency.

Usage::

    python scripts/bench_remote.py                                   # zarr-1mb, zarr-40mb, zarr-sharded, hdf5; 0 and 20 ms
    python scripts/bench_remote.py --layouts zarr-4mb zarr2-blosc --latency-ms 0 50 --features 200 1000
    python scripts/bench_remote.py --compare OLD_TREE    # also each cell with another checkout's streamridge

For each layout x N x dtype it writes the data set once, then for each latency starts
``scripts/serve_http.py`` (aiohttp: byte ranges, keep-alive, each answer ``latency`` ms late) on
127.0.0.1 and measures in one child process per cell, as ``bench_layouts.py`` does, over the URL:

  (f) fetch  every stored object of X and y fetched by fsspec at once (``fs.cat`` of all keys):
             the bytes the server delivers with the best concurrency, no decoding;
  (a) read   the pass's own plan and reads with a kernel that only counts rows;
  (b) stats  ``accumulate`` over the same rows in memory;
  (c) pass   ``accumulate`` over the URL;

and prints c / (a + b) (the same measure as the local matrix) and a / f, the pass's reads against
the server's best delivery of the same bytes (latency hidden by concurrency).  The server runs on
this machine, so its CPU is shared with the pass; compare within a run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time

import bench_layouts
from serve_http import served

HERE = os.path.dirname(os.path.abspath(__file__))


def fetch_all(path: str, url: str, repeats: int) -> float:
    """(f): best time of fetching every file of the data set under ``path`` from ``url`` at once."""
    import fsspec

    fs = fsspec.filesystem("http")
    if os.path.isfile(path):  # HDF5: the whole file
        urls = [url]
    else:
        urls = [
            f"{url}/{os.path.relpath(os.path.join(d, f), path)}"
            for d, _, files in os.walk(path)
            for f in files
            if not f.endswith((".json", ".zarray", ".zattrs", ".zgroup"))
        ]
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fs.cat(urls)
        best = min(best, time.perf_counter() - t)
    return best


def _label(tree: str | None, args: argparse.Namespace) -> str:
    return "" if not args.compare else ("old " if tree else "new ")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mb", type=float, default=128, help="MB of X per data set (default 128)")
    p.add_argument("--features", type=int, nargs="+", default=[200])
    p.add_argument(
        "--layouts",
        nargs="+",
        default=["zarr-1mb", "zarr-40mb", "zarr-sharded", "hdf5"],
        choices=list(bench_layouts.LAYOUTS),
    )
    p.add_argument("--dtypes", nargs="+", default=["float32"])
    p.add_argument("--latency-ms", type=float, nargs="+", default=[0.0, 20.0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--dir", default=None)
    p.add_argument(
        "--compare",
        default=None,
        metavar="TREE",
        help="another checkout (e.g. `git archive main`): every cell also with its streamridge, alternating",
    )
    args = p.parse_args(argv)
    root = args.dir or tempfile.mkdtemp(prefix="bench-remote-")
    print(f"{args.mb:g} MB of X per data set, cores={os.cpu_count()}, load at start {os.getloadavg()[0]:.2f}")
    try:
        for layout in args.layouts:
            if bench_layouts.LAYOUTS[layout][0] == "npy":
                raise SystemExit(".npy files are not read over URLs")
            for N in args.features:
                for dtype in args.dtypes:
                    name = f"{layout}-{N}-{dtype}" + (
                        ".h5" if bench_layouts.LAYOUTS[layout][0] == "hdf5" else ""
                    )
                    path = os.path.join(root, name)
                    rows = bench_layouts._rows_for(layout, args.mb, N, dtype)
                    bench_layouts.write(path, layout, rows, N, dtype, 1)
                    trees = [None, *([args.compare] if args.compare else [])]
                    for tree in trees:
                        local = bench_layouts._run_child(
                            json.dumps({"path": path, "folds": 5, "classes": 1}), args.repeats, tree
                        )
                        print(
                            f"{_label(tree, args)}{layout:13s} N={N:<5d} {dtype:8s} local file   (a) {local['a']:.3f} s "
                            f"(b) {local['b']:.3f} s (c) {local['c']:.3f} s  c/(a+b) = {local['c'] / (local['a'] + local['b']):.2f}",
                            flush=True,
                        )
                    for latency in args.latency_ms:
                        with served(root, latency) as base:
                            url = f"{base}/{name}"
                            f = fetch_all(path, url, args.repeats)
                            for tree in trees:
                                r = bench_layouts._run_child(
                                    json.dumps({"path": url, "folds": 5, "classes": 1}), args.repeats, tree
                                )
                                print(
                                    f"{_label(tree, args)}{layout:13s} N={N:<5d} {dtype:8s} http {latency:4g} ms (f) {f:.3f} s "
                                    f"(a) {r['a']:.3f} s (b) {r['b']:.3f} s (c) {r['c']:.3f} s  "
                                    f"c/(a+b) = {r['c'] / (r['a'] + r['b']):.2f}  a/f = {r['a'] / f:.2f}  "
                                    f"CPU a {r['cpu']['a']:.2f} c {r['cpu']['c']:.2f} s  load {os.getloadavg()[0]:.2f}",
                                    flush=True,
                                )
                    shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
