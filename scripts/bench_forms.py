"""The folds' training/validation forms built on one thread against the fold pool (``forms.PARALLEL_FORMS_N``).

Usage::

    python scripts/bench_forms.py                         # K = 23, N = 200 and K = 10, N = 1000
    python scripts/bench_forms.py --shapes 23x200 --rounds 5

For each K x N shape, statistics of random rows are built once; then ``build_forms`` runs
alternately on one thread and on the fold pool (one thread per core), ``--repeats``
times per round, and prints per round the median and best wall time and the process's
user and system CPU per build (system time: page faults of the K x N x N outputs).
The forms are the same either way (``tests/forms/test_parts.py``).
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

import streamridge.forms.build as forms
from streamridge.parallel import solve_stage_limits
from streamridge.stats.kernel import from_chunk


def _measure(stats, workers: int, repeats: int) -> tuple[float, float, float, float]:
    real = forms.map_folds
    forms.map_folds = lambda fn, n, workers_=None, **kw: real(fn, n, workers=workers)  # type: ignore[assignment]
    try:
        forms.build_forms(stats)
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        ts = []
        for _ in range(repeats):
            t = time.perf_counter()
            forms.build_forms(stats)
            ts.append(time.perf_counter() - t)
        r1 = resource.getrusage(resource.RUSAGE_SELF)
    finally:
        forms.map_folds = real  # type: ignore[assignment]
    user = (r1.ru_utime - r0.ru_utime) / repeats
    sys_ = (r1.ru_stime - r0.ru_stime) / repeats
    return float(np.median(ts)), min(ts), user, sys_


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", nargs="+", default=["23x200", "10x1000"], help="K x N")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args(argv)
    rng = np.random.default_rng(0)
    for shape in a.shapes:
        K, N = map(int, shape.split("x"))
        M = 30 * N
        X = rng.standard_normal((M, N))
        y = X @ rng.standard_normal(N) + rng.standard_normal(M)
        stats = from_chunk(X, y[:, None], rng.integers(0, K, M), None, K, 1)
        with solve_stage_limits(N):
            for r in range(a.rounds):
                for workers, name in ((0, "fold pool"), (1, "one thread")):
                    med, best, user, sys_ = _measure(stats, workers or None, a.repeats)  # type: ignore[arg-type]
                    print(
                        f"K={K} N={N} round {r + 1} {name:10s}: median {med * 1e3:6.2f} ms  best {best * 1e3:6.2f} ms  "
                        f"user {user * 1e3:6.2f} ms  sys {sys_ * 1e3:6.2f} ms per build"
                    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
