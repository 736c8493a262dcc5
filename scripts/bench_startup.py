"""Start-up time of the command line and of ``import streamridge`` (wall time, best of N runs).

Usage::

    python scripts/bench_startup.py [--repeat 7] [--baseline PATH_OF_ANOTHER_CHECKOUT]

Each command runs in a fresh interpreter with this checkout first on ``PYTHONPATH``; the
interpreter alone (``python -c pass``) and ``import numpy`` are measured in the same run as the
floor: ``streamridge info`` must read a ``.npz`` file, so it cannot start faster than numpy.
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


def best(argv: list[str], root: Path, repeat: int) -> float:
    env = dict(os.environ, PYTHONPATH=str(root))
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(argv, env=env, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - t0)
    return min(times)


def make_model(directory: str) -> str:
    code = (
        "import numpy as np; from streamridge import StreamRidgeCV; from streamridge.model_io import save_model; "
        "r = np.random.default_rng(0); "
        f"save_model(StreamRidgeCV(cv=3).fit(r.standard_normal((200, 20)), r.standard_normal(200)), {directory!r} + '/m.npz')"
    )
    subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(REPO)), cwd=REPO, check=True)
    return os.path.join(directory, "m.npz")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--baseline", type=Path, help="another checkout to measure in the same run")
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
        roots = [("this checkout", REPO)] + ([("baseline", args.baseline)] if args.baseline else [])
        print(f"{'command':38s}" + "".join(f"{name:>16s}" for name, _ in roots))
        for label, argv in cases.items():
            row = [best(argv, root, args.repeat) for _, root in roots]
            print(f"{label:38s}" + "".join(f"{t:15.3f}s" for t in row))


if __name__ == "__main__":
    main()
