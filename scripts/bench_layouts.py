"""The data pass on every storage layout: pass / (read-only + stats-only) and peak RSS per cell.

Usage::

    python scripts/bench_layouts.py                                  # a small default matrix
    python scripts/bench_layouts.py --rows 2000000 --features 50 200 1000 \\
        --layouts zarr-1mb zarr-4mb zarr-40mb zarr-400mb zarr-sharded zarr2-blosc hdf5-gzip hdf5 npy \\
        --dtypes float32 float64 --cells 5x1 10x10

Each cell (layout x N x dtype x folds-x-classes) runs in its own child process
(so its peak RSS is its own) and measures, in one run on the same stored data
with default settings:

  (a) read   every stored chunk read and decoded by the pass's partitions
             (``bench_stream.ReadOnlyKernel``: same plan, same reads, no statistics);
  (b) stats  ``accumulate`` over the same rows already in memory;
  (c) pass   ``accumulate`` over the stored data;
  (a') read  as (a), with large stored chunks decoded in pieces as the pass does
             (printed where the installed streamridge can; (a) decodes them whole);

and prints c / (a + b) (goal <= 1.15), the same ratio of the stages' median rounds, and the child's
peak RSS after the first (c).  Timings
are the best of --repeats, taken round robin (c, a, b, c, a, b, ...) after a warm-up pass with
statistics of the measured size; on a shared machine compare ratios, not seconds.  ``--min-seconds S``
goes on with the rounds (all stages alike) until the passes (c) took S seconds in all, so that a
0.1 s cell is the best of as much of the machine's time as a 1 s cell.  Each line also gives the
process's minor page faults in each stage's best round.
``--compare TREE`` measures every cell also with the streamridge of another checkout
(alternating, on the same stored data).  The CPU time
ratio (process CPU, all threads, best of --repeats) says whether the pass does more work
than reading plus statistics; it moves little with the machine's load, where wall-clock
ratios of sub-second cells move by +-30 % at a load of 3-4 on 2 cores.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

LAYOUTS = {  # name -> (format, stored chunk MB, options)
    "zarr-1mb": ("zarr3", 1, {}),
    "zarr-4mb": ("zarr3", 4, {}),
    "zarr-40mb": ("zarr3", 40, {}),
    "zarr-400mb": ("zarr3", 400, {}),
    "zarr-sharded": ("zarr3", 1, {"shard_mb": 64}),
    "zarr2-blosc": ("zarr2", 4, {}),
    "hdf5-gzip": ("hdf5", 4, {"compression": "gzip"}),
    "hdf5": ("hdf5", 4, {}),
    "npy": ("npy", 0, {}),
}


def write(path: str, layout: str, rows: int, N: int, dtype: str, n_classes: int) -> None:
    """Write X (rows x N, dtype) and y (labels when n_classes > 1) in ``layout``."""
    fmt, mb, opts = LAYOUTS[layout]
    rng = np.random.default_rng(0)
    item = np.dtype(dtype).itemsize
    step = max(1, min(rows, int(mb * 2**20) // (N * item))) if mb else rows
    block = max(step, 2**26 // (N * item) // step * step) if mb else min(rows, 2**26 // (N * item))
    X = y = None
    if fmt.startswith("zarr"):
        import zarr

        root = zarr.open_group(path, mode="w", zarr_format=3 if fmt == "zarr3" else 2)
        kw: dict[str, Any] = {}
        if "shard_mb" in opts:
            kw["shards"] = (max(step, int(opts["shard_mb"] * 2**20) // (N * item) // step * step), N)
        if fmt == "zarr2":
            from numcodecs import Blosc

            kw["compressors"] = Blosc()
        X = root.create_array("X", shape=(rows, N), dtype=dtype, chunks=(step, N), **kw)
        y = root.create_array("y", shape=(rows,), dtype="float64", chunks=(step,))
    elif fmt == "hdf5":
        import h5py

        f = h5py.File(path, "w")
        X = f.create_dataset("X", shape=(rows, N), dtype=dtype, chunks=(step, N), **opts)
        y = f.create_dataset("y", shape=(rows,), dtype="float64", chunks=(step,))
    else:
        os.makedirs(path)
        X = np.lib.format.open_memmap(os.path.join(path, "X.npy"), mode="w+", dtype=dtype, shape=(rows, N))
        y = np.lib.format.open_memmap(os.path.join(path, "y.npy"), mode="w+", dtype="float64", shape=(rows,))
    w = rng.standard_normal(N)
    for s in range(0, rows, block):
        x = (rng.standard_normal((min(block, rows - s), N)) + 3).astype(dtype)
        t = x.astype(np.float64) @ w
        X[s : s + len(x)] = x
        y[s : s + len(x)] = (
            np.digitize(t, np.quantile(t, np.linspace(0, 1, n_classes + 1)[1:-1])) if n_classes > 1 else t
        )
    if fmt == "hdf5":
        f.close()
    elif fmt == "npy":
        X.flush()
        y.flush()


def measure(path: str, folds: int, n_classes: int, repeats: int, min_seconds: float = 0.0) -> dict[str, Any]:
    """(a), (b), (c) of one stored data set (run in the child).

    Rounds go on past ``repeats`` until the passes (c) have taken ``min_seconds`` in all (at most 100 rounds),
    so that a short cell's best times come from as many seconds of the machine as a long cell's.
    """
    sys.path.insert(0, os.path.dirname(__file__))
    import bench_stream  # the same read-only kernel and plan as bench_stream.py

    import streamridge
    from streamridge.datapass.driver import PassReport, accumulate

    try:
        from streamridge.datapass.spec import PassSpec
    except ImportError:  # another checkout's module layout (--compare)
        from streamridge.datapass.driver import PassSpec  # type: ignore[attr-defined,no-redef]
    from streamridge.folds.schemes import FoldScheme
    from streamridge.sources import open_source

    src = open_source(path)
    classes = tuple(float(c) for c in range(n_classes)) if n_classes > 1 else None
    T = 1 if classes is None or n_classes == 2 else n_classes
    spec = PassSpec(FoldScheme("hash", folds), classes, T)

    args = argparse.Namespace(scheduler="threads", window=None, features=src.n_features())
    # warm-up with the measured statistics' size: the first allocation of 800 MB of statistics in a process
    # cost up to 1.5 s of system time (transparent huge pages compacted after the data were just written),
    # which (c), measured first, paid and (b) did not
    warm_y = np.zeros(1000) if classes is None else np.full(1000, classes[0])
    accumulate(open_source(np.zeros((1000, src.n_features())), y=warm_y), spec)
    report = PassReport()
    stages = {
        "c": lambda: accumulate(src, spec, report=report),
        "a": lambda: bench_stream.read_only(src, args, spec),
    }
    keys = "cab"
    if (
        "pieces" in inspect.signature(bench_stream.read_only).parameters
    ):  # (a'): large chunks decoded in pieces
        stages["p"] = lambda: bench_stream.read_only(src, args, spec, pieces=True)
        keys += "p"
    ts: dict[str, list[float]] = {k: [] for k in keys}
    cs: dict[str, list[float]] = {k: [] for k in keys}
    fs: dict[str, list[int]] = {k: [] for k in keys}  # minor page faults of the process (all threads)
    r = 0
    while r < repeats or (sum(ts["c"]) < min_seconds and r < 100):
        # round robin, so that no stage alone runs in a colder or warmer process
        for key in keys:
            if key == "b" and "b" not in stages:
                mem = open_source(np.asarray(src.X.compute()), y=np.asarray(src.y.compute()))
                stages["b"] = functools.partial(accumulate, mem, spec)
            f = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            t, c = time.perf_counter(), time.process_time()
            stages[key]()
            ts[key].append(time.perf_counter() - t)
            cs[key].append(time.process_time() - c)
            fs[key].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f)
            if r == 0 and key == "c":
                peak = _peak_rss_mb()  # the pass only, so far
        r += 1
    out: dict[str, Any] = {("a_pieces" if k == "p" else k): min(v) for k, v in ts.items()}
    out["peak_rss_mb"] = peak
    out["rounds"] = r
    out["partitions"] = report.extra["partitions"]
    out["cpu"] = {k: min(v) for k, v in cs.items()}
    out["median"] = {k: float(np.median(v)) for k, v in ts.items()}  # of the rounds: less luck than the best
    out["faults"] = {k: v[ts[k].index(min(ts[k]))] for k, v in fs.items()}  # in each stage's best round
    out["streamridge"] = os.path.dirname(os.path.dirname(streamridge.__file__))
    return out


def _run_child(child: str, repeats: int, tree: str | None, min_seconds: float = 0.0) -> dict[str, Any]:
    """One cell measured in a fresh process, with streamridge from ``tree`` (another checkout) when given."""
    env = dict(os.environ)
    if tree:
        env["PYTHONPATH"] = os.path.abspath(tree)
    cmd = [
        sys.executable,
        __file__,
        "--child",
        child,
        "--repeats",
        str(repeats),
        "--min-seconds",
        str(min_seconds),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout
    return json.loads(out.splitlines()[-1])


def add_cell_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments naming one cell's data set: layout, features, dtype, --mb, --dir."""
    p.add_argument("layout", choices=sorted(LAYOUTS))
    p.add_argument("features", type=int)
    p.add_argument("dtype")
    p.add_argument("--mb", type=float, default=128)
    p.add_argument(
        "--dir",
        default=os.path.join(tempfile.gettempdir(), "streamridge-bench-pass-cpu"),
        help="data sets (kept for reruns)",
    )


def cell_data(directory: str, layout: str, N: int, dtype: str, mb: float, n_classes: int = 1) -> str:
    """The path of one cell's data set under ``directory``, written unless it is there."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(
        directory, f"{layout}-{N}-{dtype}-{mb:g}" + (f"-{n_classes}" if n_classes > 1 else "")
    )
    if not os.path.exists(path):
        write(path, layout, _rows_for(layout, mb, N, dtype), N, dtype, n_classes)
        quiesce()
    return path


def quiesce() -> None:
    """Write the page cache's dirty pages to disk now, so that no cell is measured while the kernel does it.

    Linux writes dirty pages back about 30 s after they were written (``vm.dirty_expire_centisecs``):
    without this, the 128 MB or more written for one cell (or freed, with ``discard``) was flushed while
    a later cell was being timed.
    """
    os.sync()


def _rows_for(layout: str, mb: float, N: int, dtype: str) -> int:
    """Rows holding ``mb`` MB of X, and at least one whole stored chunk of ``layout``."""
    return int(max(mb, LAYOUTS[layout][1]) * 2**20) // (N * np.dtype(dtype).itemsize)


def _peak_rss_mb() -> float:
    """This process's peak RSS: VmHWM (ru_maxrss may report the parent's peak inherited at fork)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=None, help="rows per data set (default: from --mb)")
    p.add_argument(
        "--mb", type=float, default=128, help="MB of X per data set, at least one stored chunk (default 128)"
    )
    p.add_argument("--features", type=int, nargs="+", default=[200])
    p.add_argument(
        "--layouts", nargs="+", default=["zarr-4mb", "zarr-40mb", "hdf5", "npy"], choices=list(LAYOUTS)
    )
    p.add_argument("--dtypes", nargs="+", default=["float32"])
    p.add_argument("--cells", nargs="+", default=["5x1"], help="FOLDSxCLASSES, e.g. 5x1 10x10")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument(
        "--min-seconds",
        type=float,
        default=0.0,
        help="go on past --repeats rounds until a cell's passes (c) took this long in all (at most 100 rounds)",
    )
    p.add_argument("--dir", default=None)
    p.add_argument(
        "--compare",
        default=None,
        metavar="TREE",
        help="another checkout (e.g. `git archive main`): each cell is also measured with its streamridge, "
        "alternating with this one, on the same stored data",
    )
    p.add_argument("--rounds", type=int, default=1, help="alternations of this tree and --compare per cell")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        spec = json.loads(args.child)
        print(
            json.dumps(measure(spec["path"], spec["folds"], spec["classes"], args.repeats, args.min_seconds))
        )
        return 0
    root = args.dir or tempfile.mkdtemp(prefix="bench-layouts-")
    print(
        f"M={args.rows or f'{args.mb:g} MB of X (at least 1 stored chunk)'}, cores={os.cpu_count()}, load at start {os.getloadavg()[0]:.2f}; ratio = c/(a+b), goal <= 1.15"
    )
    try:
        for layout in args.layouts:
            for N in args.features:
                for dtype in args.dtypes:
                    for cells in args.cells:
                        folds, n_classes = (int(v) for v in cells.split("x"))
                        path = os.path.join(root, f"{layout}-{N}-{dtype}-{n_classes}")
                        rows = args.rows or _rows_for(layout, args.mb, N, dtype)
                        write(path, layout, rows, N, dtype, n_classes)
                        quiesce()
                        child = json.dumps({"path": path, "folds": folds, "classes": n_classes})
                        for rnd in range(args.rounds):
                            for tree in [None, *([args.compare] if args.compare else [])]:
                                r = _run_child(child, args.repeats, tree, args.min_seconds)
                                label = (
                                    "" if not args.compare else ("old " if tree else "new ") + f"#{rnd + 1} "
                                )
                                print(
                                    f"{label}{layout:13s} N={N:<5d} {dtype:8s} cells={cells:6s} M={rows:<8d} "
                                    f"partitions={r['partitions']:<4d} rounds={r['rounds']:<3d} "
                                    f"(a) read {r['a']:.2f} s (b) stats {r['b']:.2f} s (c) pass {r['c']:.2f} s  "
                                    f"c/(a+b) = {r['c'] / (r['a'] + r['b']):.2f}  "
                                    + (
                                        f"median of rounds {r['median']['c'] / (r['median']['a'] + r['median']['b']):.2f}  "
                                        if "median" in r
                                        else ""
                                    )
                                    + f"peak RSS {r['peak_rss_mb']:.0f} MiB  "
                                    f"CPU c/(a+b) = {r['cpu']['c'] / (r['cpu']['a'] + r['cpu']['b']):.2f} "
                                    f"(CPU a {r['cpu']['a']:.2f} b {r['cpu']['b']:.2f} c {r['cpu']['c']:.2f} s)  "
                                    + (
                                        f"faults a {r['faults']['a']} b {r['faults']['b']} c {r['faults']['c']}  "
                                        if "faults" in r
                                        else ""
                                    )
                                    + (
                                        f"(a') read in pieces {r['a_pieces']:.2f} s "
                                        f"c/(a'+b) = {r['c'] / (r['a_pieces'] + r['b']):.2f}  "
                                        if "a_pieces" in r
                                        else ""
                                    )
                                    + f"load {os.getloadavg()[0]:.2f}",
                                    flush=True,
                                )
                        shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)
                        quiesce()
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)
    print(f"load at end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
