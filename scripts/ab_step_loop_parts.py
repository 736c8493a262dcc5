"""Where the compiled step loop's time goes beside its GEMMs: the fused loop built up part by part.

Usage::

    python scripts/ab_step_loop_parts.py                 # 16 series x 12,500 steps, 200 units
    python scripts/ab_step_loop_parts.py --units 500 --steps 2000

One lockstep group (``--series`` series of 2 inputs stepped together, as in the pass), on one thread,
CPU time, best of ``--repeats``.  Every variant is compiled by numba and makes the same BLAS call per
step (``np.dot`` of the states by W'); what follows the GEMM grows:

  products      nothing (the GEMMs alone: the denominator of every ratio)
  states        the new state written back to the states only (``0.5 x`` the product)
  out, cached   also to an output row, in a buffer of 1,024 rows that stays in cache
  out           also to its own output row (the whole output, out of cache, as the map writes it)
  input term    plus the input term ``b + W_in u``
  tanh          plus streamridge's tanh: the compiled loop of the pass
                (``streamridge.features._compiled_steps.steps``, called directly)

Then the tanh alone, per value, on the states of one step (``--series`` x ``--units`` values, in cache):
streamridge's (in a compiled loop) against NumPy's ``np.tanh``.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numba
import numpy as np
from threadpoolctl import threadpool_limits

from streamridge.features import _compiled_steps as compiled

_OPTS: dict[str, Any] = {"fastmath": {"contract"}, "error_model": "numpy"}


def variant(mode: int) -> Any:
    """The step loop with the parts up to ``mode`` (1 states, 2 out cached, 3 out, 4 input term)."""

    @numba.njit(**_OPTS)
    def steps(inputs, starts, length, w_in_t, b, WT, X, out):  # type: ignore[no-untyped-def]
        k, n = X.shape
        tmp = np.empty((k, n))
        for t in range(length):
            np.dot(X, WT, tmp)
            for i in range(k):
                row = starts[i] + t
                u0, u1 = inputs[row, 0], inputs[row, 1]
                for j in range(n):
                    if mode == 4:
                        v = tmp[i, j] * 0.5 + b[j] + u0 * w_in_t[0, j] + u1 * w_in_t[1, j]
                    else:
                        v = tmp[i, j] * 0.5
                    X[i, j] = v
                    if mode == 2:
                        out[row & 1023, j] = v
                    elif mode >= 3:
                        out[row, j] = v
        return X

    return steps


@numba.njit(**_OPTS)
def tanh_all(x, out):  # type: ignore[no-untyped-def]
    for i in range(x.size):
        out[i] = compiled.tanh(x[i])


def per_value(fn: Any, x: np.ndarray, repeats: int) -> float:
    """Seconds per value of ``fn(x, out)``, best of ``repeats`` runs of 2,000 calls."""
    out = np.empty_like(x)
    fn(x, out)
    best = np.inf
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(2000):
            fn(x, out)
        best = min(best, (time.perf_counter() - t) / 2000)
    return best / x.size


@numba.njit(**_OPTS)
def products(length, WT, X):  # type: ignore[no-untyped-def]
    tmp = np.empty_like(X)
    for _ in range(length):
        np.dot(X, WT, tmp)
        X, tmp = tmp, X
    return X


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--units", type=int, default=200)
    ap.add_argument("--series", type=int, default=16)
    ap.add_argument("--steps", type=int, default=12_500)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    n, k, steps = args.units, args.series, args.steps
    rng = np.random.default_rng(0)
    inputs = rng.standard_normal((k * steps, 2))
    starts = np.arange(k, dtype=np.int64) * steps
    w_in_t, b = rng.uniform(-1, 1, (2, n)), rng.uniform(-0.3, 0.3, n)
    W = rng.standard_normal((n, n))
    WT = np.ascontiguousarray((W * (0.9 / np.abs(np.linalg.eigvals(W)).max())).T)
    out = np.zeros((k * steps, n))  # written before: no page faults timed
    lengths = np.full(k, steps, dtype=np.int64)
    runs = {"products": lambda X: products(steps, WT, X)}
    for mode, name in enumerate(["states", "out, cached", "out", "input term"], start=1):
        fn = variant(mode)
        runs[name] = lambda X, f=fn: f(inputs, starts, steps, w_in_t, b, WT, X, out)
    runs["tanh"] = lambda X: compiled.steps(inputs, starts, lengths, w_in_t, b, WT, 1.0, "tanh", X, out)
    for run in runs.values():
        run(np.zeros((k, n)))  # compile
    times: dict[str, float] = dict.fromkeys(runs, np.inf)
    with threadpool_limits(1):
        for _ in range(args.repeats):
            for name, run in runs.items():
                X = np.zeros((k, n))
                t = time.thread_time()
                run(X)
                times[name] = min(times[name], time.thread_time() - t)
    print(f"load {os.getloadavg()[0]:.1f}; {k} series x {steps:,} steps, {n} units; best of {args.repeats}")
    for name, t in times.items():
        print(f"  {name:12s} {t:.3f} s  ratio to the products {t / times['products']:.3f}")
    x = rng.standard_normal(k * n) * 1.5
    ours, theirs = per_value(tanh_all, x, args.repeats), per_value(np.tanh, x, args.repeats)
    print(
        f"  tanh of {x.size:,} values: streamridge's {ours * 1e9:.2f} ns a value, np.tanh {theirs * 1e9:.2f} ns"
    )


if __name__ == "__main__":
    main()
