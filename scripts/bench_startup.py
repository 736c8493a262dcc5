"""Start-up time of the command line and of ``import streamridge`` (wall time, best of N runs).

Usage::

    python scripts/bench_startup.py [--repeat 7] [--baseline PATH_OF_ANOTHER_CHECKOUT] [--fit]

Each command runs in a fresh interpreter with this checkout first on ``PYTHONPATH``; the
interpreter alone (``python -c pass``) and ``import numpy`` are measured in the same run as the
floor: ``streamridge info`` must read a ``.npz`` file, so it cannot start faster than numpy.
Checkouts are measured alternately, so a change of machine load hits both columns alike.
``--fit`` adds ``streamridge fit`` of M=100,000 x N=200 .npy files (23 groups, 60 lambdas; the
shape of ``bench_inmemory.py``), ``streamridge predict`` of the same files with that fit's model,
and the imports any fit needs; the CPU time (user + system of the
child, best of N) is printed too, steadier than wall time on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def once(argv: list[str], root: Path) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one run in a fresh interpreter."""
    env = dict(os.environ, PYTHONPATH=str(root))
    r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run(argv, env=env, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime


def best(argv: list[str], roots: list[Path], repeat: int) -> list[tuple[float, float]]:
    """Best wall and best CPU time per checkout, the checkouts run alternately."""
    runs: list[list[tuple[float, float]]] = [[] for _ in roots]
    for _ in range(repeat):
        for i, root in enumerate(roots):
            runs[i].append(once(argv, root))
    return [(min(w for w, _ in r), min(c for _, c in r)) for r in runs]


def write_fit_data(directory: str) -> list[str]:
    """.npy files of bench_inmemory.py's shape; the arguments of the CLI fit."""
    import numpy as np

    rng = np.random.default_rng(0)
    rows, n = 100_000, 200
    X = rng.standard_normal((rows, n)) @ (np.eye(n) + 0.1 * rng.standard_normal((n, n))) + 3.0
    data = os.path.join(directory, "data")
    os.mkdir(data)
    for name, a in (
        ("X", X),
        ("y", X @ rng.standard_normal(n)),
        ("groups", np.repeat(np.arange(23), 4348)[:rows]),
    ):
        np.save(os.path.join(data, f"{name}.npy"), a)
    alphas = [str(a) for a in np.logspace(-3, 3, 60)]
    out = os.path.join(directory, "fit.npz")
    return [
        "fit",
        "--data",
        data,
        "--groups",
        "groups",
        "--leave-group-out",
        "--alphas",
        *alphas,
        "--out",
        out,
        "--overwrite",
        "--quiet",
    ]


def make_model(directory: str) -> str:
    code = (
        "import numpy as np; from streamridge import StreamRidgeCV; from streamridge.io.model_file import save_model; "
        "r = np.random.default_rng(0); "
        f"save_model(StreamRidgeCV(cv=3).fit(r.standard_normal((200, 20)), r.standard_normal(200)), {directory!r} + '/m.npz')"
    )
    subprocess.run(
        [sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(REPO)), cwd=REPO, check=True
    )
    return os.path.join(directory, "m.npz")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--baseline", type=Path, help="another checkout to measure in the same run")
    parser.add_argument(
        "--fit", action="store_true", help="also a CLI fit and predict of 100,000 x 200 .npy files"
    )
    args = parser.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        model = make_model(tmp)
        cases = {
            "python -c pass": [py, "-c", "pass"],
            "python -c 'import numpy'": [py, "-c", "import numpy"],
            "import streamridge": [py, "-c", "import streamridge"],
            "streamridge --help": [py, "-m", "streamridge", "--help"],
            "streamridge info MODEL": [py, "-m", "streamridge", "info", model],
            "import streamridge; StreamRidgeCV": [py, "-c", "import streamridge; streamridge.StreamRidgeCV"],
        }
        if args.fit:
            cases["import numpy, scipy.linalg, dask.array, sklearn.base"] = [
                py,
                "-c",
                "import numpy, scipy.linalg, dask.array, sklearn.base",
            ]
            fit = write_fit_data(tmp)
            cases["streamridge fit (100,000 x 200 .npy)"] = [py, "-m", "streamridge", *fit]
            model_of_fit, data = fit[fit.index("--out") + 1], fit[fit.index("--data") + 1]
            cases["streamridge predict (same files)"] = [
                py,
                "-m",
                "streamridge",
                "predict",
                "--model",
                model_of_fit,
                "--data",
                data,
                "--out",
                os.path.join(tmp, "predictions.zarr"),
                "--overwrite",
                "--quiet",
            ]
        roots = [("this checkout", REPO)] + ([("baseline", args.baseline)] if args.baseline else [])
        print(f"load average at start {os.getloadavg()[0]:.2f}; wall (CPU) in seconds, best of {args.repeat}")
        print(f"{'command':54s}" + "".join(f"{name:>22s}" for name, _ in roots))
        for label, argv in cases.items():
            row = best(argv, [root for _, root in roots], args.repeat)
            print(f"{label:54s}" + "".join(f"{w:13.3f} ({c:.3f})" for w, c in row))
        print(f"load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
