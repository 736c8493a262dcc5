"""The results of the data pass, the metric pass and ``predict`` on many layouts, to compare two checkouts bit for bit.

Usage::

    PYTHONPATH=TREE_A python scripts/check_pass_bits.py run --data DIR --out a.npz
    PYTHONPATH=TREE_B python scripts/check_pass_bits.py run --data DIR --out b.npz
    python scripts/check_pass_bits.py compare a.npz b.npz

``run`` writes the data sets into DIR (if missing; the same bytes in every run), computes through the
public API only (the estimators' ``compute_stats`` and ``fit(scoring=...)``, ``streamridge predict``):

- statistics (every array of the :class:`~streamridge.stats.foldstats.FoldStats`) of zarr, HDF5 (gzip),
  ``.npy`` and in-memory data, float32 and float64, regression and three classes with weights, default
  and asked-for partitions, a stateless map, a stateful map (echo state network) over few long and
  many short series; on the sync, threads and processes schedulers (and a ``local:2`` cluster with
  ``--cluster``);
- the metric pass's scores (``cv_scores_``) of a regression, a two-class ROC AUC, a stateless and a
  stateful map;
- ``predict``'s predictions (and scores) of a regression, a classifier, a stateless and a stateful map;

and saves them by case name.  ``compare`` prints, per case, whether every array is bit for bit the same
(``np.array_equal``) or the largest relative difference, and exits 1 if a statistics or metric case differs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

STATS = ("weight", "count", "mean_x", "mean_y", "sxx", "sxy", "syy")
SCHEDULERS = ("sync", "threads", "processes")


def write_data(root: Path) -> dict[str, Any]:
    """The data sets (written once into ``root``) and the in-memory arrays."""
    from streamridge.sources import write_hdf5, write_zarr

    rng = np.random.default_rng(20240611)
    M, N = 4000, 8
    X = rng.standard_normal((M, N)) + 2.0
    y = X @ rng.standard_normal(N) + rng.standard_normal(M)
    labels = np.digitize(y, np.quantile(y, [0.33, 0.66]))
    w = rng.uniform(0.5, 2.0, M)
    g = rng.integers(0, 12, M)
    few = np.repeat(np.arange(3), M // 3 + 1)[:M]  # three long series
    many = np.repeat(np.arange(80), M // 80)  # eighty short ones
    u = rng.standard_normal((M, 2))
    target = np.sin(np.cumsum(u[:, 0]) * 0.1) + 0.1 * rng.standard_normal(M)
    paths = {
        "zarr32": root / "x32.zarr",
        "zarr64": root / "x64.zarr",
        "h5": root / "x.h5",
        "npy": root / "npy",
        "series": root / "series.zarr",
    }
    if not paths["zarr32"].exists():
        write_zarr(paths["zarr32"], X.astype(np.float32), y, g, chunk_rows=500)
        write_zarr(paths["zarr64"], X, labels, g, w, chunk_rows=400)
        write_hdf5(paths["h5"], X.astype(np.float32), y, g, chunk_rows=500, compression="gzip")
        paths["npy"].mkdir()
        np.save(paths["npy"] / "X.npy", X)
        np.save(paths["npy"] / "y.npy", y)
        write_zarr(paths["series"], u, target, many, chunk_rows=250)
    return {
        "paths": {k: str(v) for k, v in paths.items()},
        "X": X,
        "y": y,
        "labels": labels,
        "w": w,
        "g": g,
        "few": few,
        "many": many,
        "u": u,
        "target": target,
    }


def stats_cases(d: dict[str, Any], cluster: bool) -> dict[str, Callable[[], Any]]:
    """Statistics of every case, by name: callables returning a FoldStats."""
    import streamridge as sr
    from streamridge.features import EchoStateNetwork, RandomHidden
    from streamridge.sources import open_source

    p = d["paths"]
    cases: dict[str, Callable[[], Any]] = {}

    def add(name: str, make: Callable[[str], Any]) -> None:
        for sched in SCHEDULERS:
            cases[f"stats/{name}/{sched}"] = lambda make=make, sched=sched: make(sched)

    add(
        "zarr32-default",
        lambda s: sr.StreamRidgeCV(cv=5, scheduler=s).compute_stats(open_source(p["zarr32"])),
    )
    add(
        "zarr32-p700",
        lambda s: sr.StreamRidgeCV(cv=5, chunk_rows=700, scheduler=s).compute_stats(open_source(p["zarr32"])),
    )
    add(
        "zarr64-classes",
        lambda s: sr.StreamRidgeClassifierCV(cv=4, chunk_rows=800, scheduler=s).compute_stats(
            open_source(p["zarr64"], groups="groups", sample_weight="sample_weight")
        ),
    )
    add(
        "hdf5-gzip",
        lambda s: sr.StreamRidgeCV(cv=5, chunk_rows=1000, scheduler=s).compute_stats(open_source(p["h5"])),
    )
    add("npy-default", lambda s: sr.StreamRidgeCV(cv=3, scheduler=s).compute_stats(open_source(p["npy"])))
    add(
        "npy-p600",
        lambda s: sr.StreamRidgeCV(cv=3, chunk_rows=600, scheduler=s).compute_stats(open_source(p["npy"])),
    )
    add(
        "memory-p333",
        lambda s: sr.StreamRidgeCV(cv=5, chunk_rows=333, scheduler=s).compute_stats(d["X"], d["y"]),
    )
    add(
        "memory-classes",
        lambda s: sr.StreamRidgeClassifierCV(cv=3, chunk_rows=500, scheduler=s).compute_stats(
            d["X"], d["labels"], sample_weight=d["w"]
        ),
    )
    add(
        "stateless-map",
        lambda s: sr.StreamRidgeCV(
            cv=4, chunk_rows=500, features=RandomHidden(20, seed=1), scheduler=s
        ).compute_stats(open_source(p["zarr32"])),
    )
    esn = EchoStateNetwork(16, washout=5, seed=2)
    add(
        "esn-few-series",
        lambda s: sr.StreamRidgeCV(cv="groups", chunk_rows=250, features=esn, scheduler=s).compute_stats(
            d["u"], d["target"], groups=d["few"]
        ),
    )
    add(
        "esn-many-series",
        lambda s: sr.StreamRidgeCV(cv="groups", chunk_rows=200, features=esn, scheduler=s).compute_stats(
            open_source(p["series"], groups="groups")
        ),
    )
    add(
        "esn-hash-folds",
        lambda s: sr.StreamRidgeCV(cv=4, chunk_rows=300, features=esn, scheduler=s).compute_stats(
            d["u"], d["target"], groups=d["many"]
        ),
    )
    if cluster:
        cases["stats/zarr32-p250/local:2"] = lambda: sr.StreamRidgeCV(
            cv=5, chunk_rows=250, scheduler="local:2"
        ).compute_stats(open_source(p["zarr32"]))
    return cases


def metric_cases(d: dict[str, Any]) -> dict[str, Callable[[], Any]]:
    """``cv_scores_`` of fits with ``scoring``, by name."""
    import streamridge as sr
    from streamridge.features import EchoStateNetwork, RandomHidden
    from streamridge.sources import open_source

    p = d["paths"]
    binary = (d["y"] > np.median(d["y"])).astype(int)
    return {
        "metric/zarr32-r2": lambda: sr.StreamRidgeCV(cv=5, chunk_rows=500, scoring="r2").fit(
            open_source(p["zarr32"])
        ),
        "metric/memory-auc": lambda: sr.StreamRidgeClassifierCV(cv=4, chunk_rows=700, scoring="roc_auc").fit(
            d["X"], binary
        ),
        "metric/stateless-map": lambda: sr.StreamRidgeCV(
            cv=4, chunk_rows=500, scoring="r2", features=RandomHidden(20, seed=1)
        ).fit(open_source(p["zarr32"])),
        "metric/esn": lambda: sr.StreamRidgeCV(
            cv="groups", chunk_rows=200, scoring="r2", features=EchoStateNetwork(16, washout=5, seed=2)
        ).fit(open_source(p["series"], groups="groups")),
    }


def predict_cases(d: dict[str, Any], work: Path) -> dict[str, dict[str, np.ndarray]]:
    """``streamridge predict`` outputs, by name."""
    import zarr

    p = d["paths"]
    (work / "rh.toml").write_text('map = "random_hidden"\nn_units = 20\nseed = 1\n')
    (work / "esn.toml").write_text('map = "esn"\nn_units = 16\nseed = 2\nwashout = 5\n')
    runs = {
        "predict/regression": (["--data", p["zarr32"]], ["--data", p["zarr32"]]),
        "predict/classes-scores": (
            ["--data", p["zarr64"], "--classify"],
            ["--data", p["zarr64"], "--scores"],
        ),
        "predict/stateless-map": (
            ["--data", p["zarr32"], "--features", str(work / "rh.toml")],
            ["--data", p["zarr32"]],
        ),
        "predict/esn-lanes": (
            [
                "--data",
                p["series"],
                "--groups",
                "groups",
                "--leave-group-out",
                "--features",
                str(work / "esn.toml"),
            ],
            ["--data", p["series"], "--groups", "groups", "--chunk-rows", "300"],
        ),
    }
    out: dict[str, dict[str, np.ndarray]] = {}
    for name, (fit, predict) in runs.items():
        model, preds = work / "m.npz", work / "p.zarr"
        _cli(["fit", *fit, "--out", str(model), "--overwrite", "--quiet"])
        _cli(["predict", "--model", str(model), *predict, "--out", str(preds), "--overwrite", "--quiet"])
        group = zarr.open_group(str(preds), mode="r")
        out[name] = {key: np.asarray(group[key][:]) for key in group.array_keys()}
    return out


def _cli(argv: list[str]) -> None:
    subprocess.run([sys.executable, "-m", "streamridge", *argv], check=True, env=dict(os.environ))


def run(args: argparse.Namespace) -> int:
    root = Path(args.data)
    root.mkdir(parents=True, exist_ok=True)
    d = write_data(root)
    saved: dict[str, np.ndarray] = {}
    for name, make in stats_cases(d, args.cluster).items():
        stats = make()
        saved.update({f"{name}|{a}": np.asarray(getattr(stats, a)) for a in STATS})
        print(name, flush=True)
    for name, make in metric_cases(d).items():
        saved[f"{name}|cv_scores_"] = np.asarray(make().cv_scores_)
        print(name, flush=True)
    with tempfile.TemporaryDirectory() as work:
        for name, arrays in predict_cases(d, Path(work)).items():
            saved.update({f"{name}|{k}": v for k, v in arrays.items()})
            print(name, flush=True)
    np.savez(args.out, **saved)
    return 0


def compare(args: argparse.Namespace) -> int:
    a, b = np.load(args.a), np.load(args.b)
    if set(a.files) != set(b.files):
        print("cases differ:", sorted(set(a.files) ^ set(b.files)))
        return 1
    bad = 0
    cases = sorted({k.split("|")[0] for k in a.files})
    for case in cases:
        keys = [k for k in a.files if k.split("|")[0] == case]
        same = all(np.array_equal(a[k], b[k]) for k in keys)
        if same:
            print(f"{case:40s} bit for bit")
            continue
        worst = max(_rel(a[k], b[k]) for k in keys)
        print(f"{case:40s} DIFFERS: largest relative difference {worst:.3g}")
        bad += not case.startswith("predict/")
    return 1 if bad else 0


def _rel(x: np.ndarray, y: np.ndarray) -> float:
    if x.shape != y.shape:
        return float("inf")
    if x.dtype.kind not in "fc":
        return float(np.mean(x != y))
    scale = max(float(np.abs(y).max(initial=0.0)), 1e-300)
    return float(np.abs(x - y).max(initial=0.0)) / scale


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--data", required=True, help="directory of the data sets (written if missing)")
    r.add_argument("--out", required=True)
    r.add_argument("--cluster", action="store_true", help="also a local:2 dask cluster")
    c = sub.add_parser("compare")
    c.add_argument("a")
    c.add_argument("b")
    args = p.parse_args(argv)
    return run(args) if args.command == "run" else compare(args)


if __name__ == "__main__":
    raise SystemExit(main())
