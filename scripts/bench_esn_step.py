"""The echo state network's step loop against its own matrix products, at several reservoir sizes.

Usage::

    python scripts/bench_esn_step.py                          # 200, 500 and 1,000 units
    python scripts/bench_esn_step.py --units 200 --repeats 5

For each size, on one thread (BLAS limited to 1 thread; CPU time of the thread, best of ``--repeats``),
in one run on the same data, alternated: the map as the pass runs it (64 series of 2 float32 inputs in
groups of ``plan.group_size`` stepped in lockstep; ``bench_features.py`` (c)) into one output buffer written before (no page faults timed),
with the compiled step loop (``streamridge.features._compiled_steps``, numba) and with the NumPy loop
(``STREAMRIDGE_STEP_LOOP=numpy``), against their matrix products alone: per step the GEMM of the states
of the series still running by W', issued from Python by NumPy (the NumPy loop's products) and from a
loop compiled by numba that makes the same BLAS calls as the compiled step loop (its own products,
defined here).  The series get ``--steps`` x (200 / units)^2 steps, so every size does about the same
products.  The ratio map / products is the step loop's cost beside its GEMMs.  The two loops' states
are checked against each other first (the first 4 series).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_features import _map_alone, _matmul_cost, _series_groups, best, make_raw

from streamridge.features import EchoStateNetwork

LOOPS = {"compiled": "", "numpy": "numpy"}  # STREAMRIDGE_STEP_LOOP for each loop


def compiled_products() -> Any:
    """The compiled step loop's GEMMs alone: per step ``np.dot`` in a loop compiled by numba (SciPy's BLAS)."""
    import numba

    @numba.njit(error_model="numpy", cache=False)
    def products(lengths, WT, X):  # type: ignore[no-untyped-def]
        tmp = np.empty_like(X)
        k = lengths.size
        for t in range(lengths[0] if k else 0):
            while k > 0 and lengths[k - 1] <= t:
                k -= 1
            if k == 1:
                np.dot(X[0], WT, tmp[0])
            else:
                np.dot(X[:k], WT, tmp[:k])
            X, tmp = tmp, X
        return X

    return products


def run_products(kernel: Any, fmap: EchoStateNetwork, g: np.ndarray) -> None:
    """The steps of :func:`_matmul_cost` by the compiled products loop."""
    WT = np.ascontiguousarray(fmap.w_res_.T)
    for group in _series_groups(g):
        lengths = np.sort(np.array([b - a for a, b in group], dtype=np.int64))[::-1].copy()
        kernel(lengths, WT, np.zeros((len(lengths), WT.shape[0])))


def use(loop: str) -> None:
    """Run reservoirs with ``loop`` from now on."""
    os.environ["STREAMRIDGE_STEP_LOOP"] = LOOPS[loop]


def one_size(units: int, args: argparse.Namespace, kernel: Any) -> None:
    steps = max(1, round(args.steps * (200 / units) ** 2))
    u, _, g = make_raw(args.series, steps)
    fmap = EchoStateNetwork(units, leak_rate=args.leak_rate, seed=1).fit(u[:10])
    rows = np.flatnonzero(g < 4)
    states = {}
    for loop in LOOPS:
        use(loop)
        states[loop] = fmap.transform(u[rows], groups=g[rows])
    diff = float(np.abs(states["compiled"] - states["numpy"]).max())
    print(f"      states of the two loops: max |difference| {diff:.1e}")
    assert diff <= 1e-12, diff
    run_products(kernel, fmap, g[: len(g) // 8])  # compile
    buf = np.zeros(
        (max(sum(b - a for a, b in group) for group in _series_groups(g)), units)
    )  # page faults excluded
    runs = {
        "compiled": lambda: _map_alone(fmap, u, g, len(u), buf=buf),
        "numpy": lambda: _map_alone(fmap, u, g, len(u), buf=buf),
        "gemm": lambda: _matmul_cost(fmap, u, g, len(u)),
        "gemm_compiled": lambda: run_products(kernel, fmap, g),
    }
    times: dict[str, list[float]] = {name: [] for name in runs}
    with threadpool_limits(1):
        for loop in LOOPS:  # warm caches and the compiled loop
            use(loop)
            _map_alone(fmap, u[: len(u) // 8], g[: len(u) // 8], len(u))
        for _ in range(args.repeats):
            for name, run in runs.items():
                use("numpy" if name == "numpy" else "compiled")
                times[name].append(best(run, 1, time.thread_time))
    use("compiled")
    t = {k: min(v) for k, v in times.items()}
    print(
        f"{units:5d} units, {args.series} series x {steps:,} steps: "
        f"compiled loop {t['compiled']:.3f} s, its own products {t['gemm_compiled']:.3f} s, "
        f"ratio {t['compiled'] / t['gemm_compiled']:.3f} (to NumPy's products {t['compiled'] / t['gemm']:.3f}); "
        f"NumPy loop {t['numpy']:.3f} s, its products {t['gemm']:.3f} s, ratio {t['numpy'] / t['gemm']:.3f}",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--units", type=int, nargs="+", default=[200, 500, 1000])
    ap.add_argument("--series", type=int, default=64)
    ap.add_argument("--steps", type=int, default=12_500, help="steps per series at 200 units")
    ap.add_argument("--leak-rate", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    kernel = compiled_products()
    print(f"load {os.getloadavg()[0]:.1f}; CPU time of one thread, best of {args.repeats}, alternated")
    for units in args.units:
        one_size(units, args, kernel)
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
