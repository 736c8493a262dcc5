"""What each thread of a pass does, when: reads, kernel calls and finishes on a text timeline.

Usage::

    python scripts/pass_timeline.py zarr2-blosc 50 float32
    PYTHONPATH=OLD_TREE python scripts/pass_timeline.py zarr2-blosc 50 float32   # another checkout

Writes (or reuses, under --dir) the data set of one ``bench_layouts.py`` cell, runs the pass
(5 hash folds, one class, threads) --warm times, then once more with every reader ``read``,
kernel ``add`` and ``finish`` wrapped in a timer, and prints one line per thread (R read,
k kernel, F finish) and the time each thread spent in each kind of call.  The wrappers cost
a little; compare timelines with each other, not with ``bench_layouts.py``'s seconds.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import threading
import time
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))
import bench_layouts

import streamridge.datapass.stats_kernel as stream
from streamridge.datapass.driver import accumulate
from streamridge.datapass.spec import PassSpec
from streamridge.folds.schemes import FoldScheme
from streamridge.sources import open_source


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bench_layouts.add_cell_arguments(p)
    p.add_argument("--warm", type=int, default=3)
    p.add_argument("--width", type=int, default=100)
    a = p.parse_args(argv)
    src = open_source(bench_layouts.cell_data(a.dir, a.layout, a.features, a.dtype, a.mb))
    spec = PassSpec(FoldScheme("hash", 5), None, 1)
    for _ in range(a.warm):
        accumulate(src, spec)
    events: list[tuple[str, str, float, float]] = []
    t0 = [0.0]

    def wrap(owner: Any, name: str, tag: str) -> None:
        real = getattr(owner, name)

        def timed(*args: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return real(*args, **kw)
            finally:
                who = f"{threading.current_thread().name}/{threading.get_native_id()}"  # read threads share names
                events.append((who, tag, t - t0[0], time.perf_counter() - t0[0]))

        setattr(owner, name, timed)

    readers, _ = src.pass_readers()
    for cls in {type(r) for r in readers.values() if r is not None}:
        wrap(cls, "read", "R")
    wrap(stream.StatsKernel, "add", "k")
    wrap(stream.StatsKernel, "finish", "F")
    t0[0] = time.perf_counter()
    accumulate(src, spec)
    total = time.perf_counter() - t0[0]
    print(
        f"{a.layout} N={a.features} {a.dtype} {a.mb:g} MB: pass {total * 1000:.1f} ms (timed), load {os.getloadavg()[0]:.2f}"
    )
    busy: dict[str, dict[str, float]] = collections.defaultdict(lambda: collections.defaultdict(float))
    for name in sorted({e[0] for e in events}):
        line = [" "] * a.width
        for who, tag, s, e in events:
            if who == name:
                busy[name][tag] += e - s
                for j in range(int(s / total * a.width), min(a.width, int(e / total * a.width) + 1)):
                    line[j] = tag
        spent = ", ".join(f"{tag} {sec * 1000:.1f} ms" for tag, sec in sorted(busy[name].items()))
        print(f"{name[:28]:28s}|{''.join(line)}| {spent}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
