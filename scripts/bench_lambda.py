"""Lambda search at the paper's Table 1 shape: naive refits vs covariance vs eigen method.

Usage::

    python scripts/bench_lambda.py                 # N=200, K=23, R=60 (Table 1)
    python scripts/bench_lambda.py --quick         # smaller naive baseline

Measures in one run, on the same statistics:
  * the solve stage (FoldStats -> chosen lambda and final model) with the eigen
    method and with the covariance method (median of --repeats);
  * naive refits: scikit-learn Ridge per fold and lambda on M1 and M2 rows, on
    a subset of folds, extrapolated linearly in M to the paper's M=345,000 and
    to all K folds;
and prints ratios (covariance / eigen, naive / eigen).

The limit of the solve stage: its K eigendecompositions (one per training
fold, N x N) spread over the cores.  Measured in the same run, on the same
training forms, as the wall time of those K decompositions alone on the fold
pool (``limit``, the routine the solver uses, one BLAS thread per fold), and
also as K x (one decomposition) / cores; the script prints solve / limit
(goal <= 1.5) and where the rest of the time goes (forms, fold errors).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np
from sklearn.linear_model import Ridge
from threadpoolctl import threadpool_info, threadpool_limits

from streamridge import StreamRidgeCV
from streamridge.folds.schemes import FoldScheme
from streamridge.forms.build import build_forms, build_full_form
from streamridge.parallel import map_folds, n_cpus, solve_stage_limits
from streamridge.solvers import fold_errors

try:
    from streamridge.solvers.eigen import psd_eigh
except ImportError:  # an older streamridge (to compare before/after with the same script): numpy's eigh
    psd_eigh = np.linalg.eigh
from streamridge.stats.kernel import from_chunk


def median_time(fn, repeats: int, clock=time.perf_counter) -> float:
    """Median of ``repeats`` timings after a warm-up (``clock=time.process_time``: CPU time of all threads)."""
    fn()  # warm-up
    ts = []
    for _ in range(repeats):
        t = clock()
        fn()
        ts.append(clock() - t)
    return statistics.median(ts)


def naive_time(X, y, folds, alphas, n_folds_timed: int) -> float:
    """Wall time of Ridge refits for every lambda on the first n_folds_timed folds."""
    t = time.perf_counter()
    for k in range(n_folds_timed):
        tr, va = folds != k, folds == k
        for a in alphas:
            m = Ridge(alpha=a, solver="cholesky").fit(X[tr], y[tr])
            float(((m.predict(X[va]) - y[va]) ** 2).sum())
    return time.perf_counter() - t


def paired(fn_a, fn_b, repeats: int, clock=time.perf_counter) -> tuple[float, float, float]:
    """Medians of a and b and of the ratio a / b, timed back to back in each repeat (robust to load changing)."""
    fn_a(), fn_b()  # warm-up
    ta, tb = [], []
    for _ in range(repeats):
        for fn, ts in ((fn_a, ta), (fn_b, tb)):
            t = clock()
            fn()
            ts.append(clock() - t)
    return statistics.median(ta), statistics.median(tb), statistics.median(a / b for a, b in zip(ta, tb))


def limit_times(stats, alphas, repeats: int) -> dict[str, float]:
    """The K eigendecompositions of the training forms spread over the cores, and the solve stage's parts."""
    K, N = stats.n_folds, stats.n_features
    with solve_stage_limits(N):
        forms = build_forms(stats)
        out = {
            "eigh_one_s": median_time(lambda: psd_eigh(forms.At[0]), 3 * repeats),
            "np_eigh_one_s": median_time(lambda: np.linalg.eigh(forms.At[0]), 3 * repeats),
            "limit_s": median_time(lambda: map_folds(lambda k: psd_eigh(forms.At[k]), K), repeats),
            "np_limit_s": median_time(lambda: map_folds(lambda k: np.linalg.eigh(forms.At[k]), K), repeats),
            "forms_s": median_time(lambda: build_forms(stats), repeats),
            "full_form_s": median_time(lambda: build_full_form(stats), repeats),
            "fold_errors_s": median_time(lambda: fold_errors(forms, alphas), repeats),
        }
        limit = lambda: map_folds(lambda k: psd_eigh(forms.At[k]), K)  # noqa: E731
    solve = lambda: StreamRidgeCV(alphas).fit_stats(stats)  # noqa: E731
    out["limit_computed_s"] = K * out["eigh_one_s"] / n_cpus()
    # solve and limit timed back to back, 3 x repeats pairs: the ratio of each pair, then the median
    out["paired_solve_s"], out["paired_limit_s"], out["solve_over_limit_paired"] = paired(
        solve, lambda: _limited(limit, N), 3 * repeats
    )
    out["solve_cpu_s"], out["limit_cpu_s"], out["solve_over_limit_cpu"] = paired(
        solve, lambda: _limited(limit, N), 3 * repeats, time.process_time
    )
    return out


def _limited(fn, n_features):
    with solve_stage_limits(n_features):  # as inside fit_stats
        return fn()


def print_solve(res: dict[str, float], N: int, K: int, R: int) -> None:
    """The solve stage against its limit."""
    print(f"lambda search, N={N} features, K={K} folds, R={R} lambdas ({os.cpu_count()} cpus)")
    print(
        f"  solve stage, eigen method (folds on all cores) : {res['eigen_s'] * 1e3:9.1f} ms   (paper: 1.0 s)"
    )
    print(f"  same, measured again after the limit          : {res['eigen_again_s'] * 1e3:9.1f} ms")
    print(
        f"  limit: K eigh on the fold pool (solver's eigh): {res['limit_s'] * 1e3:9.1f} ms   (K x {res['eigh_one_s'] * 1e3:.2f} ms / {n_cpus()} cores = {res['limit_computed_s'] * 1e3:.1f} ms)"
    )
    print(
        f"  same with numpy.linalg.eigh                   : {res['np_limit_s'] * 1e3:9.1f} ms   (one: {res['np_eigh_one_s'] * 1e3:.2f} ms)"
    )
    print(f"  ratio solve stage / limit (medians above)     : {res['solve_over_limit']:9.2f} x")
    print(
        f"  ratio, paired (solve, limit back to back)     : {res['solve_over_limit_paired']:9.2f} x   (goal <= 1.5; solve {res['paired_solve_s'] * 1e3:.1f} ms, limit {res['paired_limit_s'] * 1e3:.1f} ms)"
    )
    print(
        f"  ratio of CPU time (all threads), paired       : {res['solve_over_limit_cpu']:9.2f} x   (solve {res['solve_cpu_s'] * 1e3:.1f} ms, limit {res['limit_cpu_s'] * 1e3:.1f} ms)"
    )
    print(
        f"    parts: forms {res['forms_s'] * 1e3:.1f} ms, full form {res['full_form_s'] * 1e3:.1f} ms, fold errors (K eigh + scoring) {res['fold_errors_s'] * 1e3:.1f} ms"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--features", type=int, default=200)
    p.add_argument("--folds", type=int, default=23)
    p.add_argument("--alphas", type=int, default=60)
    p.add_argument(
        "--rows",
        type=int,
        default=46_000,
        help="rows of the statistics (cost of the solve is independent of it)",
    )
    p.add_argument("--naive-rows", type=int, nargs=2, default=(2300, 4600), metavar=("M1", "M2"))
    p.add_argument(
        "--naive-folds", type=int, default=3, help="folds timed for the naive baseline (scaled to all)"
    )
    p.add_argument("--paper-rows", type=int, default=345_000)
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--quick", action="store_true")
    p.add_argument(
        "--solve-only",
        action="store_true",
        help="only the solve stage against its limit (no naive, covariance)",
    )
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    if a.quick:
        a.naive_rows, a.naive_folds, a.repeats = (1150, 2300), 1, 5
    N, K, R = a.features, a.folds, a.alphas
    rng = np.random.default_rng(0)
    X = rng.standard_normal((a.rows, N))
    X[:, 1:] += 0.5 * X[:, :-1]  # correlated features, like reservoir states
    y = X[:, : N // 10].sum(axis=1) + rng.standard_normal(a.rows)
    folds = FoldScheme("hash", K).assign(0, a.rows)
    stats = from_chunk(X, y[:, None], folds, None, K, 1)
    stats.meta.update(task="regression", y_1d=True)
    alphas = np.logspace(-4, 2, R) * a.rows

    res: dict[str, float] = {}
    res["eigen_s"] = median_time(lambda: StreamRidgeCV(alphas, solver="eigen").fit_stats(stats), a.repeats)
    res.update(limit_times(stats, alphas, a.repeats))
    res["eigen_again_s"] = median_time(
        lambda: StreamRidgeCV(alphas, solver="eigen").fit_stats(stats), a.repeats
    )
    res["solve_over_limit"] = min(res["eigen_s"], res["eigen_again_s"]) / res["limit_s"]
    if a.solve_only:
        print_solve(res, N, K, R)
        return 0
    res["covariance_s"] = median_time(
        lambda: StreamRidgeCV(alphas, solver="covariance").fit_stats(stats), max(3, a.repeats // 3)
    )
    for threads in (1, 2):
        with threadpool_limits(threads):
            os.environ["STREAMRIDGE_FOLD_WORKERS"] = "1"
            res[f"eigen_serial_blas{threads}_s"] = median_time(
                lambda: StreamRidgeCV(alphas).fit_stats(stats), a.repeats
            )
            os.environ.pop("STREAMRIDGE_FOLD_WORKERS")
    e1 = StreamRidgeCV(alphas, solver="eigen").fit_stats(stats)
    e2 = StreamRidgeCV(alphas, solver="covariance").fit_stats(stats)
    res["eigen_vs_cov_max_rel_diff"] = float(np.max(np.abs(e1.cv_errors_ - e2.cv_errors_) / e2.cv_errors_))

    (m1, m2) = a.naive_rows
    t1 = naive_time(X[:m1], y[:m1], folds[:m1], alphas, a.naive_folds) * K / a.naive_folds
    t2 = naive_time(X[:m2], y[:m2], folds[:m2], alphas, a.naive_folds) * K / a.naive_folds
    slope = max((t2 - t1) / (m2 - m1), t2 / m2 * 0.0)
    res["naive_M1_s"], res["naive_M2_s"] = t1, t2
    res["naive_paper_M_s"] = t1 + slope * (a.paper_rows - m1)
    res["cov_over_eigen"] = res["covariance_s"] / res["eigen_s"]
    res["naive_paperM_over_eigen"] = res["naive_paper_M_s"] / res["eigen_s"]
    res["naive_M2_over_eigen"] = t2 / res["eigen_s"]
    info = {
        "shape": {
            "N": N,
            "K": K,
            "R": R,
            "stats_rows": a.rows,
            "naive_rows": [m1, m2],
            "paper_rows": a.paper_rows,
        },
        "machine": {
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "blas": [(i["internal_api"], i["num_threads"]) for i in threadpool_info()],
        },
    }
    if a.json:
        print(json.dumps({**info, **res}, indent=1))
        return 0
    print_solve(res, N, K, R)
    for t in (1, 2):
        print(
            f"  solve stage, eigen, folds serial, {t} BLAS thr. : {res[f'eigen_serial_blas{t}_s'] * 1e3:9.1f} ms"
        )
    print(
        f"  solve stage, covariance method               : {res['covariance_s'] * 1e3:9.1f} ms   (paper: 13 s)"
    )
    print(f"  naive refits, M={m1:,}                        : {t1:9.2f} s")
    print(f"  naive refits, M={m2:,}                        : {t2:9.2f} s")
    print(
        f"  naive refits, extrapolated to M={a.paper_rows:,}   : {res['naive_paper_M_s']:9.0f} s   (paper: 10 h)"
    )
    print(f"  ratio covariance / eigen                     : {res['cov_over_eigen']:9.1f} x")
    print(f"  ratio naive(M={a.paper_rows:,}) / eigen          : {res['naive_paperM_over_eigen']:9.0f} x")
    print(f"  ratio naive(M={m2:,}) / eigen                  : {res['naive_M2_over_eigen']:9.0f} x")
    print(f"  max relative difference eigen vs covariance  : {res['eigen_vs_cov_max_rel_diff']:.1e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
