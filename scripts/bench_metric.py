"""The metric pass of ``streamridge fit --scoring`` against the statistics pass, and against another checkout.

Usage::

    python scripts/bench_metric.py --store DIR/s2e6.zarr --baseline TREE   # TREE: `git archive` of another commit

Runs ``python -m streamridge fit --data STORE --scoring SCORING --json`` in a fresh interpreter per
checkout, alternated, ``--repeats`` times, and prints the best ``pass_s`` and ``metric_pass_s`` of the
JSON report's ``timings``, their ratio, and the wall time of the command.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--store", required=True)
    p.add_argument("--scoring", default="explained_variance")  # R² and correlation need no metric pass
    p.add_argument("--baseline", type=Path, default=None)
    p.add_argument("--repeats", type=int, default=2)
    a = p.parse_args(argv)
    roots = [REPO] + ([a.baseline.resolve()] if a.baseline else [])
    out = os.path.join(tempfile.mkdtemp(prefix="bench-metric-"), "m.npz")
    runs: dict[Path, list[tuple[float, float, float]]] = {r: [] for r in roots}
    print(f"store {a.store}, scoring {a.scoring}, load average at start {os.getloadavg()[0]:.2f}")
    for _ in range(a.repeats):
        for root in roots:
            cmd = [
                sys.executable,
                "-m",
                "streamridge",
                "fit",
                "--data",
                a.store,
                "--scoring",
                a.scoring,
                "--out",
                out,
                "--overwrite",
                "--json",
            ]
            t = time.perf_counter()
            proc = subprocess.run(
                cmd,
                cwd=root,
                env=dict(os.environ, PYTHONPATH=str(root)),
                capture_output=True,
                text=True,
                check=True,
            )
            wall = time.perf_counter() - t
            timings = json.loads(proc.stdout)["timings"]
            runs[root].append((timings["pass_s"], timings["metric_pass_s"], wall))
    for root, r in runs.items():
        pass_s, metric_s, wall = (min(x[i] for x in r) for i in range(3))
        every = ", ".join(f"{m:.2f}" for _, m, _ in r)
        print(
            f"{root!s:40s} pass {pass_s:.2f} s  metric pass {metric_s:.2f} s (every run: {every})  "
            f"metric / pass {metric_s / pass_s:.2f}  command {wall:.2f} s"
        )
    print(f"load average at end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
