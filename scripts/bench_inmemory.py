"""A whole fit of in-memory NumPy arrays against its parts, scikit-learn, the CLI and ``local:2``.

Usage::

    python scripts/bench_inmemory.py                     # M=100,000 x N=200, 23 group folds, 60 lambdas
    python scripts/bench_inmemory.py --rows 20000 --repeats 1

Measured in one run on the same float64 data (the best of --repeats each):

  fit        ``StreamRidgeCV(alphas, cv="groups").fit(X, y, groups=g)`` (threads, default settings)
  gram       ``X.T @ X`` of the same rows (NumPy/BLAS, all cores)
  solve      ``fit_stats`` of the fit's statistics (the solve stage alone)
  sklearn    ``sklearn.linear_model.RidgeCV(alphas)`` (efficient leave-one-out), timed once
  python     ``fit("data-dir")`` of the same rows written as .npy files
  cli        ``streamridge fit --data data-dir ...`` as a subprocess (interpreter start-up included)
  fresh      the Python call in a fresh interpreter (``python -c "from streamridge import ...; fit(...)"``):
             what the CLI costs at best, start-up and imports included
  imports    ``python -c "import numpy, scipy.linalg, dask.array, sklearn.base"``: the packages any fit imports
  local:2    the fit with ``scheduler="local:2"`` (cluster start-up included, as a user sees it), of the
             arrays and of the .npy files, and of the files on an already running 2-process cluster

and prints fit / (gram + solve) (goal <= 1.5), sklearn / fit (goal ~60), cli / python, cli / fresh and
local:2 / threads (a cluster's start-up against a 0.2 s fit; the 1.3x target for local:2 is for a pass
of seconds over the same store with both schedulers, ``bench_schedulers.py``).  ``--cli-only`` measures only python, cli, fresh and imports.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

from streamridge import StreamRidgeCV


def best(fn: Any, repeats: int) -> float:
    """Smallest wall time of ``repeats`` calls."""
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return min(ts)


def data(rows: int, N: int, n_groups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Correlated features with an offset, a noisy linear target, contiguous groups."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((rows, N)) @ (np.eye(N) + 0.1 * rng.standard_normal((N, N))) + 3.0
    y = X @ rng.standard_normal(N) + rng.standard_normal(rows)
    groups = np.repeat(np.arange(n_groups), -(-rows // n_groups))[:rows]
    return X, y, groups


def cli_rows(
    X: np.ndarray, y: np.ndarray, g: np.ndarray, alphas: np.ndarray, repeats: int
) -> dict[str, float]:
    """The CLI against the Python call on the same .npy files, warm and in a fresh interpreter."""
    r: dict[str, float] = {}
    root = tempfile.mkdtemp(prefix="bench-inmemory-")
    try:
        for name, arr in (("X", X), ("y", y), ("groups", g)):
            np.save(os.path.join(root, f"{name}.npy"), arr)
        est = StreamRidgeCV(alphas=alphas, cv="groups")
        est.fit(root, groups="groups")  # warm-up
        r["python"] = best(
            lambda: StreamRidgeCV(alphas=alphas, cv="groups").fit(root, groups="groups"), repeats
        )
        values = " ".join(map(str, alphas))
        cmds = {
            "cli": [
                sys.executable,
                "-m",
                "streamridge",
                "fit",
                "--data",
                root,
                "--groups",
                "groups",
                "--leave-group-out",
                "--alphas",
                *values.split(),
                "--out",
                os.path.join(root, "m.npz"),
                "--overwrite",
                "--quiet",
            ],
            "fresh": [
                sys.executable,
                "-c",
                "import numpy as np; from streamridge import StreamRidgeCV; "
                f"StreamRidgeCV(alphas=np.array({values.split()!r}, float), cv='groups')"
                f".fit({root!r}, groups='groups')",
            ],
            "imports": [sys.executable, "-c", "import numpy, scipy.linalg, dask.array, sklearn.base"],
            "interpreter": [sys.executable, "-c", "pass"],
        }
        for name, cmd in cmds.items():
            r[name] = best(lambda cmd=cmd: subprocess.run(cmd, check=True), repeats)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(
        f"python fit(.npy dir) {r['python']:.3f} s   cli {r['cli']:.3f} s   cli / python = "
        f"{r['cli'] / r['python']:.2f}   (goal <= 1.3)"
    )
    print(
        f"fresh interpreter: python call {r['fresh']:.3f} s   cli / fresh = {r['cli'] / r['fresh']:.2f}   "
        f"imports (numpy, scipy.linalg, dask.array, sklearn.base) {r['imports']:.3f} s   "
        f"interpreter {r['interpreter']:.3f} s"
    )
    print(f"cli - python = {r['cli'] - r['python']:.3f} s, of which the imports floor {r['imports']:.3f} s")
    print(f"load at end {os.getloadavg()[0]:.2f}")
    return r


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--features", type=int, default=200)
    p.add_argument("--groups", type=int, default=23)
    p.add_argument("--alphas", type=int, default=60)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--no-sklearn", action="store_true")
    p.add_argument("--cli-only", action="store_true", help="only the .npy files: python, cli, fresh, imports")
    a = p.parse_args(argv)
    X, y, g = data(a.rows, a.features, a.groups)
    alphas = np.logspace(-3, 3, a.alphas)
    print(
        f"M={a.rows} N={a.features} groups={a.groups} lambdas={a.alphas} float64, cores={os.cpu_count()}, "
        f"load at start {os.getloadavg()[0]:.2f}"
    )
    est = lambda **kw: StreamRidgeCV(alphas=alphas, cv="groups", **kw)  # noqa: E731
    model = est().fit(X, y, groups=g)  # warm-up (imports, thread pools)
    r: dict[str, float] = {}
    if a.cli_only:
        cli_rows(X, y, g, alphas, a.repeats)
        return 0
    r["fit"] = best(lambda: est().fit(X, y, groups=g), a.repeats)
    r["gram"] = best(lambda: X.T @ X, a.repeats)
    r["solve"] = best(lambda: est().fit_stats(model.stats_), a.repeats)
    r["fit_again"] = best(lambda: est().fit(X, y, groups=g), a.repeats)
    r["local2"] = best(lambda: est(scheduler="local:2").fit(X, y, groups=g), max(1, a.repeats - 1))
    root = tempfile.mkdtemp(prefix="bench-inmemory-")
    try:
        for name, arr in (("X", X), ("y", y), ("groups", g)):
            np.save(os.path.join(root, f"{name}.npy"), arr)
        r["python"] = best(lambda: est().fit(root, groups="groups"), a.repeats)
        cmd = [
            sys.executable,
            "-m",
            "streamridge",
            "fit",
            "--data",
            root,
            "--groups",
            "groups",
            "--leave-group-out",
            "--alphas",
            *map(str, alphas),
            "--out",
            os.path.join(root, "m.npz"),
            "--overwrite",
            "--quiet",
        ]
        r["cli"] = best(lambda: subprocess.run(cmd, check=True), a.repeats)
        r["local2_files"] = best(
            lambda: est(scheduler="local:2").fit(root, groups="groups"), max(1, a.repeats - 1)
        )
        from distributed import Client, LocalCluster

        with (
            LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster,
            Client(cluster) as c,
        ):
            est(scheduler=c).fit(root, groups="groups")  # warm-up
            r["cluster_files"] = best(lambda: est(scheduler=c).fit(root, groups="groups"), a.repeats)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if not a.no_sklearn:
        from sklearn.linear_model import RidgeCV

        r["sklearn"] = best(lambda: RidgeCV(alphas=alphas).fit(X, y), 1)
    fit = min(r["fit"], r["fit_again"])
    print(
        f"fit {r['fit']:.3f} s / {r['fit_again']:.3f} s (before / after the parts)   gram {r['gram']:.3f} s   "
        f"solve stage {r['solve']:.3f} s"
    )
    print(f"fit / (gram + solve) = {fit / (r['gram'] + r['solve']):.2f}   (goal <= 1.5)")
    if "sklearn" in r:
        print(
            f"sklearn RidgeCV (LOO) {r['sklearn']:.2f} s   sklearn / fit = {r['sklearn'] / fit:.1f}   (goal ~60)"
        )
    print(
        f"python fit(.npy dir) {r['python']:.3f} s   cli {r['cli']:.3f} s   cli / python = {r['cli'] / r['python']:.2f}"
    )
    print(
        f"local:2 {r['local2']:.3f} s   local:2 / threads = {r['local2'] / fit:.2f}   (arrays shipped, "
        f"cluster start-up included; the 1.3x goal is bench_schedulers.py's)"
    )
    print(
        f"files: local:2 {r['local2_files']:.3f} s (start-up included), a running 2-process cluster "
        f"{r['cluster_files']:.3f} s, threads {r['python']:.3f} s: ratios {r['local2_files'] / r['python']:.2f} and "
        f"{r['cluster_files'] / r['python']:.2f}"
    )
    print(f"load at end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
