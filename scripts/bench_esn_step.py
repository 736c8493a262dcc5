"""The echo state network's step loop against its own matrix products, at several reservoir sizes.

Usage::

    python scripts/bench_esn_step.py                          # 200, 500 and 1,000 units
    python scripts/bench_esn_step.py --units 200 --repeats 5
    python scripts/bench_esn_step.py --numba                  # also a compiled step loop (needs numba)

For each size, on one thread (BLAS limited to 1 thread; CPU time of the thread, best of ``--repeats``),
in one run on the same data: the map as the pass runs it (64 series of 2 float32 inputs in groups of
``plan.group_size`` stepped in lockstep, one output buffer reused; ``bench_features.py`` (c)) and its
matrix products alone (per step the GEMM of the states of the series still running by W').  The
series get ``--steps`` x (200 / units)^2 steps, so every size does about the same products.  The ratio
map / products is the step loop's cost beside its GEMMs.

With ``--numba``, the same map with the step loop of :func:`numba_run_series` (compiled by numba, defined
here, not part of streamridge) swapped in, timed alternately with the NumPy loop; its states are checked
against the NumPy loop's.  It fuses, per step and series, the input term, the bias, the activation
and the write to the output, after one BLAS GEMM of the states (numba's ``np.dot``, which calls
SciPy's BLAS: its GEMMs alone are timed too, the compiled loop's own products).  The tanh is its own,
vectorized (exp(-2|x|) as (Taylor polynomial of -2|x|/64)^64; within 4e-15 of NumPy's), or numba's
``math.tanh`` (the C library's, one value at a time).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_features import _map_alone, _matmul_cost, best, make_raw

from streamridge.features import EchoStateNetwork, _reservoir

_TAYLOR = tuple(1.0 / math.factorial(i) for i in range(17))


def numba_kernels(own_tanh: bool = True) -> Any:
    """The compiled step loop (numba imported here only): with the tanh below, or numba's ``math.tanh``
    (the C library's, one value at a time), and the loop of its GEMMs alone."""
    import numba

    c = _TAYLOR

    @numba.njit(fastmath={"contract"}, error_model="numpy", cache=False)
    def run(inputs, starts, lengths, w_in_t, b, WT, a, X, out):  # type: ignore[no-untyped-def]
        n, n_in, K = WT.shape[0], inputs.shape[1], starts.size
        tmp = np.empty((K, n))
        pre = np.empty(n)
        k = K
        for t in range(lengths[0] if K else 0):
            while k > 0 and lengths[k - 1] <= t:
                k -= 1
            np.dot(X[:k], WT, tmp[:k])
            for i in range(k):
                r = starts[i] + t
                for j in range(n):
                    pre[j] = tmp[i, j] + b[j]
                for q in range(n_in):
                    uq = inputs[r, q]
                    for j in range(n):
                        pre[j] += uq * w_in_t[q, j]
                for j in range(n):
                    x = pre[j]
                    if not own_tanh:
                        v = math.tanh(x)
                        if a != 1.0:
                            v = a * v + (1.0 - a) * X[i, j]
                        X[i, j] = v
                        out[r, j] = v
                        continue
                    ax = abs(x)
                    ax = 20.0 if ax > 20.0 else ax  # tanh(20) = 1 in float64; NaN stays NaN
                    y = ax * (-2.0 / 64.0)
                    p = 1.0 + y * (c[1] + y * (c[2] + y * (c[3] + y * (c[4] + y * (c[5] + y * (c[6] + y * (c[7] + y * (
                        c[8] + y * (c[9] + y * (c[10] + y * (c[11] + y * (c[12] + y * (c[13] + y * (c[14] + y * (
                            c[15] + y * c[16])))))))))))))))  # fmt: skip
                    p = p * p
                    p = p * p
                    p = p * p
                    p = p * p
                    p = p * p
                    p = p * p  # exp(-2 |x|)
                    v = math.copysign((1.0 - p) / (1.0 + p), x)
                    if a != 1.0:
                        v = a * v + (1.0 - a) * X[i, j]
                    X[i, j] = v
                    out[r, j] = v
        return X

    @numba.njit(error_model="numpy", cache=False)
    def products(lengths, WT, X):  # type: ignore[no-untyped-def]
        tmp = np.empty_like(X)
        k = lengths.size
        for t in range(lengths[0] if k else 0):
            while k > 0 and lengths[k - 1] <= t:
                k -= 1
            np.dot(X[:k], WT, tmp[:k])
            X, tmp = tmp, X
        return X

    return run, products


def numba_products(kernel: Any, fmap: EchoStateNetwork, g: np.ndarray) -> None:
    """The compiled loop's GEMMs alone (numba's np.dot: scipy's BLAS), the steps of :func:`_matmul_cost`."""
    from bench_features import _series_groups

    WT = np.ascontiguousarray(fmap.w_res_.T)
    for group in _series_groups(g):
        lengths = np.sort(np.array([b - a for a, b in group], dtype=np.int64))[::-1].copy()
        kernel(lengths, WT, np.zeros((len(lengths), WT.shape[0])))


def numba_run_series(kernel: Any) -> Any:
    """A drop-in ``run_series`` (tanh only) calling the compiled loop."""

    def run_series(inputs, pos, ends, weights, a, X0, out, activation="tanh"):  # type: ignore[no-untyped-def]
        if activation != "tanh":
            raise NotImplementedError(activation)
        pos, ends = np.asarray(pos, dtype=np.int64), np.asarray(ends, dtype=np.int64)
        order = np.argsort(pos - ends, kind="stable")
        X = np.array(np.asarray(X0, dtype=np.float64)[order])
        w_in_t = np.ascontiguousarray(weights[0].T)
        kernel(np.asarray(inputs, dtype=np.float64), pos[order], (ends - pos)[order], w_in_t, weights[1], weights[2],
               float(a), X, out)  # fmt: skip
        finals = np.empty_like(X)
        finals[order] = X
        return finals

    return run_series


def one_size(units: int, args: argparse.Namespace, run_numba: tuple[Any, Any, Any] | None) -> None:
    steps = max(1, round(args.steps * (200 / units) ** 2))
    u, _, g = make_raw(args.series, steps)
    fmap = EchoStateNetwork(units, leak_rate=args.leak_rate, seed=1).fit(u[:10])
    loops = {"numpy": _reservoir.run_series}
    if run_numba is not None:
        loops["numba"] = run_numba[0]
        loops["numba_libm"] = run_numba[2]
        _check_states(fmap, u, g, loops)
        numba_products(run_numba[1], fmap, g[: len(g) // 8])  # compile
    times: dict[str, list[float]] = {
        name: [] for name in [*loops, "gemm"] + (["gemm_numba"] if run_numba else [])
    }
    with threadpool_limits(1):
        _map_alone(fmap, u[: len(u) // 8], g[: len(u) // 8], len(u))  # warm caches and the compiled loop
        for _ in range(args.repeats):
            for name in times:
                _reservoir.run_series = loops.get(name, loops["numpy"])
                run = {
                    "gemm": lambda: _matmul_cost(fmap, u, g, len(u)),
                    "gemm_numba": lambda: numba_products(run_numba[1], fmap, g),
                }.get(name, lambda: _map_alone(fmap, u, g, len(u)))
                times[name].append(best(run, 1, time.thread_time))
        _reservoir.run_series = loops["numpy"]
    t = {k: min(v) for k, v in times.items()}
    line = f"{units:5d} units, {args.series} series x {steps:,} steps: products {t['gemm']:.3f} s; map (NumPy loop) {t['numpy']:.3f} s, ratio {t['numpy'] / t['gemm']:.3f}"
    if "numba" in t:
        line += (f"; map (numba loop) {t['numba']:.3f} s, ratio {t['numba'] / t['gemm']:.3f} "
                 f"(to its own products, numba's np.dot: {t['gemm_numba']:.3f} s, {t['numba'] / t['gemm_numba']:.3f}); "
                 f"with numba's math.tanh {t['numba_libm']:.3f} s, {t['numba_libm'] / t['gemm_numba']:.3f}")  # fmt: skip
    print(line, flush=True)


def _check_states(fmap: EchoStateNetwork, u: np.ndarray, g: np.ndarray, loops: dict[str, Any]) -> None:
    """The compiled loop's states against the NumPy loop's (the first 4 series)."""
    rows = np.flatnonzero(g < 4)
    states = {}
    for name, loop in loops.items():
        _reservoir.run_series = loop
        states[name] = fmap.transform(u[rows], groups=g[rows])
    _reservoir.run_series = loops["numpy"]
    for name in ("numba", "numba_libm"):
        diff = float(np.abs(states[name] - states["numpy"]).max())
        print(f"      {name} loop's states: max |difference| from the NumPy loop's {diff:.1e}")
        assert diff <= 1e-12, diff


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--units", type=int, nargs="+", default=[200, 500, 1000])
    ap.add_argument("--series", type=int, default=64)
    ap.add_argument("--steps", type=int, default=12_500, help="steps per series at 200 units")
    ap.add_argument("--leak-rate", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--numba", action="store_true", help="also the compiled step loop (alternated)")
    args = ap.parse_args()
    kernels = numba_kernels() if args.numba else None
    run_numba = (
        (numba_run_series(kernels[0]), kernels[1], numba_run_series(numba_kernels(False)[0]))
        if kernels
        else None
    )
    print(f"load {os.getloadavg()[0]:.1f}; CPU time of one thread, best of {args.repeats}, alternated")
    for units in args.units:
        one_size(units, args, run_numba)
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
