"""G reservoirs of the same size on the same series: one batched GEMM per step over all of them, or one after the other.

Usage::

    python scripts/ab_stacked_steps.py                     # G = 27 reservoirs of 200 units, 16 series, 1,000 steps
    python scripts/ab_stacked_steps.py --units 50 --reservoirs 8

The step of a leaky tanh reservoir, ``x <- (1 - a) x + a tanh(u + x @ W')``, on ``(series, units)`` states:

  stacked     every step: one ``np.matmul`` of the ``(G, series, units)`` states with the ``(G, units, units)``
              stack of W' and each element-wise operation once over all G (G GEMMs, one call per operation);
  one by one  reservoir after reservoir, all steps of one before the next (what a pass with candidate maps
              does: :mod:`streamridge.datapass.lane_task`), its W' staying in cache across the steps.

Both on one thread (BLAS too); best of ``--repeats``.  The stacked loop makes fewer calls but reads every
reservoir's W' at every step: once G W' (G x units² x 8 bytes) outgrow the core's cache, one by one wins.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits


def stacked(U: np.ndarray, WT: np.ndarray, a: np.ndarray) -> np.ndarray:
    """All reservoirs per step: U (steps, series, units) input terms, WT (G, units, units), a (G,)."""
    G, (steps, k, n) = WT.shape[0], U.shape
    X, tmp, C = np.zeros((G, k, n)), np.empty((G, k, n)), np.empty((G, k, n))
    a3, keep = a[:, None, None], 1.0 - a[:, None, None]
    for t in range(steps):
        np.matmul(X, WT, out=tmp)
        np.add(U[t], tmp, C)
        np.tanh(C, C)
        np.multiply(C, a3, C)
        np.multiply(X, keep, tmp)
        np.add(C, tmp, X)
    return X


def one_by_one(U: np.ndarray, WT: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Each reservoir through all steps before the next."""
    G, (steps, k, n) = WT.shape[0], U.shape
    out = np.empty((G, k, n))
    for g in range(G):
        X, tmp, C = np.zeros((k, n)), np.empty((k, n)), np.empty((k, n))
        for t in range(steps):
            np.dot(X, WT[g], tmp)
            np.add(U[t], tmp, C)
            np.tanh(C, C)
            np.multiply(C, a[g], C)
            np.multiply(X, 1.0 - a[g], tmp)
            np.add(C, tmp, X)
        out[g] = X
    return out


def best(fn, repeats: int, *args) -> float:  # type: ignore[no-untyped-def]
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn(*args)
        ts.append(time.perf_counter() - t)
    return min(ts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reservoirs", type=int, default=27)
    ap.add_argument("--units", type=int, default=200)
    ap.add_argument("--series", type=int, default=16)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    G, n = args.reservoirs, args.units
    WT = rng.standard_normal((G, n, n)) * (0.9 / np.sqrt(n))
    U = rng.standard_normal((args.steps, args.series, n)) * 0.5
    a = np.resize([0.1, 0.3, 1.0], G).astype(np.float64)
    with threadpool_limits(1):
        np.testing.assert_allclose(stacked(U, WT, a), one_by_one(U, WT, a), rtol=1e-12, atol=1e-14)
        ts, to = best(stacked, args.repeats, U, WT, a), best(one_by_one, args.repeats, U, WT, a)
    print(
        f"{G} reservoirs of {n} units (W' {G * n * n * 8 / 2**20:.1f} MiB together), {args.series} series, "
        f"{args.steps} steps, 1 thread"
    )
    print(f"stacked     {ts:7.3f} s")
    print(f"one by one  {to:7.3f} s   (stacked / one by one = {ts / to:.2f})")


if __name__ == "__main__":
    main()
