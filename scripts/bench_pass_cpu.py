"""One layout-matrix cell taken apart: wall, user and system CPU and minor faults of each stage.

Usage::

    python scripts/bench_pass_cpu.py zarr-1mb 50 float32 --mb 512
    python scripts/bench_pass_cpu.py zarr-4mb 50 float32 --partition-mb 64 16 8
    python scripts/bench_pass_cpu.py zarr-400mb 1000 float64 --cells 10x10
    perf record -g python scripts/bench_pass_cpu.py zarr-1mb 50 float32 --stages c --rounds 30

Writes the cell's data as ``bench_layouts.py`` does (under --dir, a temporary folder by default, kept for reruns), then in
one process, round robin for --rounds rounds, measures (a) the read-only pass, (b) the
statistics of the same rows in memory and (c) the pass, as ``bench_layouts.py`` defines them
(5 hash folds and one class, or ``--cells``), each with ``resource.getrusage`` around it.  With
``--partition-mb`` the pass (c) runs once per partition size (``partitions.PARTITION_BYTES``)
in every round, the baselines with the default; it prints c / (a + b) for each.  ``--stages``
runs only some of the stages (e.g. ``c`` alone, or ``ab``, under ``perf record``).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import bench_layouts
import bench_stream

import streamridge.datapass.partitions as partitions
from streamridge.datapass.driver import PassReport, accumulate
from streamridge.datapass.spec import PassSpec
from streamridge.folds.schemes import FoldScheme
from streamridge.sources import open_source


def _run(fn) -> tuple[float, float, float, int]:  # type: ignore[no-untyped-def]
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t = time.perf_counter()
    fn()
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    return wall, r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime, r1.ru_minflt - r0.ru_minflt


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bench_layouts.add_cell_arguments(p)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--partition-mb", type=int, nargs="+", default=None)
    p.add_argument("--scheduler", default="threads", help="scheduler of all three stages (default threads)")
    p.add_argument("--cells", default="5x1", help="FOLDSxCLASSES, e.g. 10x10 (default 5x1)")
    p.add_argument("--stages", default="abc", help="stages to run, of a, b and c (default all)")
    a = p.parse_args(argv)
    folds, n_classes = (int(v) for v in a.cells.split("x"))
    src = open_source(bench_layouts.cell_data(a.dir, a.layout, a.features, a.dtype, a.mb, n_classes))
    classes = tuple(float(c) for c in range(n_classes)) if n_classes > 1 else None
    spec = PassSpec(FoldScheme("hash", folds), classes, 1 if classes is None or n_classes == 2 else n_classes)
    args = argparse.Namespace(scheduler=a.scheduler, window=None, features=src.n_features())
    mem = open_source(np.asarray(src.X.compute()), y=np.asarray(src.y.compute()))
    default = partitions.PARTITION_BYTES
    sizes = [mb * 2**20 for mb in a.partition_mb] if a.partition_mb else [default]
    report = PassReport()

    def pass_with(size: int):  # type: ignore[no-untyped-def]
        def run() -> None:
            partitions.PARTITION_BYTES = size
            try:
                accumulate(src, spec, report=report, scheduler=a.scheduler)
            finally:
                partitions.PARTITION_BYTES = default

        return run

    stages = {
        "a": lambda: bench_stream.read_only(src, args, spec),
        "b": lambda: accumulate(mem, spec, scheduler=a.scheduler),
    }
    stages.update({f"c{s >> 20}": pass_with(s) for s in sizes})
    stages = {k: fn for k, fn in stages.items() if k[0] in a.stages}
    for fn in stages.values():  # warm-up
        fn()
    res: dict[str, list[tuple[float, float, float, int]]] = {k: [] for k in stages}
    for _ in range(a.rounds):
        for k, fn in stages.items():
            res[k].append(_run(fn))
    print(
        f"{a.layout} N={a.features} {a.dtype} {a.mb:g} MB, cells {a.cells}, {a.scheduler}, {a.rounds} rounds, "
        f"load {os.getloadavg()[0]:.2f}"
    )
    best = {}
    for k, v in res.items():
        arr = np.array(v)
        i = int(arr[:, 0].argmin())
        best[k] = arr[i, 0]
        name = "a read" if k == "a" else "b stats" if k == "b" else f"c pass, partitions of {k[1:]} MB"
        print(
            f"  {name:30s} best wall {arr[i, 0]:.3f} s  user {arr[i, 1]:.3f} s  sys {arr[i, 2]:.3f} s  "
            f"minflt {int(arr[i, 3])}   median wall {np.median(arr[:, 0]):.3f} s"
        )
    for k in stages:
        if k.startswith("c") and "a" in best and "b" in best:
            print(f"  c / (a + b), partitions of {k[1:]} MB: {best[k] / (best['a'] + best['b']):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
