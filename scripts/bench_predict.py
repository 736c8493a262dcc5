"""``streamridge predict`` of a large store against reading it, and against another checkout.

Usage::

    python scripts/bench_predict.py --store DIR/s2e6.zarr                    # 2e6 x 200, 50,000-row chunks (written if missing)
    python scripts/bench_predict.py --store DIR/s2e6.zarr --baseline TREE   # TREE: `git archive` of another commit
    python scripts/bench_predict.py --store DIR/s2e6.zarr --classes 10      # a classifier, predictions and scores
    python scripts/bench_predict.py --store DIR/s2e6.zarr --map-units 500   # a random-hidden-layer map (stateless)

The store is ``bench_schedulers.py``'s: M x N float32 X and y, zstd, ``--chunk-rows`` rows per stored
chunk (default 2,000,000 x 200, 50,000-row chunks).  A model is fitted on it once (``streamridge fit``);
with ``--classes K`` a classifier of K classes (quantiles of y) fitted on its first 200,000 rows, and
``predict`` writes the scores too (``--scores``); with ``--map-units U`` a regression on a random hidden
layer of U tanh units (``RandomHidden``, a stateless map) fitted on the first 200,000 rows.
Measured in one run, each in a fresh interpreter, checkouts alternated, best of ``--repeats``:

  read       every stored chunk of X read and decoded once through the source's reader, on the
             cores' threads (the machine's floor for any pass over X)
  predict    ``streamridge predict --model M --data STORE --out P --overwrite --quiet``

and prints wall time, CPU time (user + system) and peak RSS of each, and predict / read.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

READ = """
import sys
from concurrent.futures import ThreadPoolExecutor
from streamridge.parallel import n_cpus
try:
    from streamridge.sources.blocks import block_ranges
except ImportError:  # another checkout's module layout (--baseline)
    from streamridge.datapass.partitions import block_ranges
from streamridge.sources import open_source
src = open_source(sys.argv[1], require_y=False)
readers, lo = src.pass_readers()
X = readers["X"]
with ThreadPoolExecutor(n_cpus()) as pool:
    rows = sum(pool.map(lambda r: X.read(*r).shape[0], block_ranges(X, lo, lo + src.n_rows(), src.row_chunks()[0])))
assert rows == src.n_rows()
"""

CLASSIFIER = """
import sys
import numpy as np
import zarr
from streamridge import StreamRidgeClassifierCV
from streamridge.io.model_file import save_model
g = zarr.open_group(sys.argv[1], mode="r")
X, y = g["X"][:200_000], g["y"][:200_000]
k = int(sys.argv[3])
labels = np.digitize(y, np.quantile(y, np.arange(1, k) / k))
save_model(StreamRidgeClassifierCV(cv=5).fit(X, labels), sys.argv[2])
"""

MAPPED = """
import sys
import zarr
from streamridge import StreamRidgeCV
from streamridge.features import RandomHidden
from streamridge.io.model_file import save_model
g = zarr.open_group(sys.argv[1], mode="r")
X, y = g["X"][:200_000], g["y"][:200_000]
save_model(StreamRidgeCV(cv=5, features=RandomHidden(int(sys.argv[3]), seed=0)).fit(X, y), sys.argv[2])
"""


def once(argv: list[str], root: Path) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system) and peak RSS (MiB) of one run in a fresh interpreter."""
    env = dict(os.environ, PYTHONPATH=str(root))
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(argv[:4])} ... in {root}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--store", required=True, help="zarr store (written if missing)")
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--features", type=int, default=200)
    p.add_argument("--chunk-rows", type=int, default=50_000)
    p.add_argument("--baseline", type=Path, default=None, help="another checkout, measured alternately")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument(
        "--classes", type=int, default=0, help="a classifier of this many classes; predict --scores"
    )
    p.add_argument(
        "--map-units", type=int, default=0, help="a regression on a random hidden layer of this many units"
    )
    a = p.parse_args(argv)
    sys.path.insert(0, str(REPO / "scripts"))
    if not os.path.exists(a.store):
        from _bench_data import write

        write(a.store, a.rows, a.features, chunk_rows=a.chunk_rows)
    work = tempfile.mkdtemp(prefix="bench-predict-")
    model, out = os.path.join(work, "m.npz"), os.path.join(work, "p.zarr")
    if a.classes:
        subprocess.run(
            [sys.executable, "-c", CLASSIFIER, a.store, model, str(a.classes)], cwd=REPO, check=True
        )
    elif a.map_units:
        subprocess.run([sys.executable, "-c", MAPPED, a.store, model, str(a.map_units)], cwd=REPO, check=True)
    else:
        subprocess.run(
            [sys.executable, "-m", "streamridge", "fit", "--data", a.store, "--out", model, "--quiet"],
            cwd=REPO,
            check=True,
        )
    roots = [REPO] + ([a.baseline.resolve()] if a.baseline else [])
    commands = {
        "read": [sys.executable, "-c", READ, a.store],
        "predict": [
            sys.executable,
            "-m",
            "streamridge",
            "predict",
            "--model",
            model,
            "--data",
            a.store,
            "--out",
            out,
            "--overwrite",
            "--quiet",
            *(["--scores"] if a.classes else []),
        ],
    }
    runs: dict[tuple[str, int], list[tuple[float, float, float]]] = {}
    print(f"store {a.store}, load average at start {os.getloadavg()[0]:.2f}; best of {a.repeats}")
    for _ in range(a.repeats):
        for name, cmd in commands.items():
            for i, root in enumerate(roots):
                if name == "read" and i > 0:
                    continue  # the floor: measured with this checkout only
                runs.setdefault((name, i), []).append(once(cmd, root))
    best = {k: (min(r[0] for r in v), min(r[1] for r in v), min(r[2] for r in v)) for k, v in runs.items()}
    for (name, i), (wall, cpu, rss) in best.items():
        label = f"{name} ({'this checkout' if i == 0 else a.baseline})"
        ratio = f"   / read {wall / best[('read', 0)][0]:.2f}" if name == "predict" else ""
        print(f"{label:60s} wall {wall:.3f} s   CPU {cpu:.3f} s   peak RSS {rss:.0f} MiB{ratio}")
    print(f"load average at end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
