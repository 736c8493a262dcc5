"""Benchmark of nested CV (streamridge.model_selection.nested) and of the metric pass (streamridge.model_selection.metric_pass).

1. Nested CV at the paper's Table 1 shape (N=200, K=23, R=60) with lambda search
   only, and with backward selection at N=100: time of the K inner selections vs
   one selection on all folds (expected about K times), from statistics in memory.
2. The metric pass (fold k's R models applied to fold k's rows, R*N multiply-adds
   per row) vs the statistics pass (N^2 per row) on the same in-memory data,
   chunking and scheduler: ratio of times.
3. (``--esn``) The same two passes with an echo state network inside (a stateful map:
   both passes run the series as lanes, each maps the rows again), leave one series
   out: wall-clock and CPU-time ratios.

Usage::

    python scripts/bench_nested.py            # full sizes
    python scripts/bench_nested.py --quick    # small sizes (seconds)
    python scripts/bench_nested.py --esn      # only part 3 (--quick: small sizes)
    python scripts/bench_nested.py --passes   # only part 2
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

from streamridge.datapass.driver import accumulate
from streamridge.datapass.spec import PassSpec
from streamridge.folds.schemes import FoldScheme
from streamridge.forms.build import build_forms, build_full_form
from streamridge.model_selection.choose import SelectionConfig, choose_model
from streamridge.model_selection.metric_pass import make_plan, metric_pass
from streamridge.model_selection.metrics import fold_scores
from streamridge.model_selection.nested import nested_cv
from streamridge.parallel import solve_stage_limits
from streamridge.solvers.grid import default_alphas
from streamridge.stats.foldstats import FoldStats
from streamridge.stats.kernel import from_chunk


def synthetic_stats(
    M: int, N: int, K: int, seed: int = 0, classes: bool = False
) -> tuple[FoldStats, np.ndarray, np.ndarray]:
    """Statistics of M correlated rows hashed to K folds; returns (stats, X, y)."""
    rng = np.random.default_rng(seed)
    mix = np.eye(N) + 0.3 * rng.standard_normal((N, N)) / np.sqrt(N)
    X = rng.standard_normal((M, N)) @ mix
    beta = rng.standard_normal(N) * (rng.random(N) < 0.3)
    y = X @ beta + rng.standard_normal(M) * np.sqrt(N) * 0.3
    folds = FoldScheme("hash", K, seed=0).assign(0, M)
    if classes:
        cls = (y > np.quantile(y, 0.8)).astype(np.int64)
        Y = np.where(cls == 1, 1.0, -1.0)[:, None]
        return from_chunk(X, Y, folds, cls, K, 2), X, cls
    return from_chunk(X, y[:, None], folds, None, K, 1), X, y


def time_nested(N: int, K: int, R: int, M: int, selection: str | None) -> tuple[float, float]:
    stats, _, _ = synthetic_stats(M, N, K)
    full = build_full_form(stats)
    alphas = default_alphas(full.A, n_alphas=R)
    cfg = SelectionConfig(alphas=alphas, selection=selection)
    with solve_stage_limits(N):
        t0 = time.perf_counter()
        forms = build_forms(stats)
        choose_model(forms, full, cfg)
        one = time.perf_counter() - t0
        t0 = time.perf_counter()
        nested_cv(stats, cfg, outer=build_forms(stats))
        nested = time.perf_counter() - t0
        os.environ["STREAMRIDGE_FOLD_WORKERS"] = "1"  # outer (and inner) folds one after another
        t0 = time.perf_counter()
        nested_cv(stats, cfg, outer=build_forms(stats))
        serial = time.perf_counter() - t0
        del os.environ["STREAMRIDGE_FOLD_WORKERS"]
    what = "lambda search" if selection is None else f"{selection} selection"
    print(
        f"  N={N} K={K} R={R} {what}: one selection {one:.2f} s, nested CV {nested:.2f} s "
        f"(ratio {nested / one:.1f}; K={K}), nested CV with folds serial {serial:.2f} s (ratio {serial / one:.1f})",
        flush=True,
    )
    return one, nested


def time_passes(
    M: int, N: int, K: int, R: int, chunk_rows: int, classes: bool, scoring: str
) -> tuple[float, float]:
    import dask.array as da

    from streamridge.sources import open_source

    stats, X, y = synthetic_stats(M, N, K, classes=classes)
    X32 = X.astype(np.float32)
    src = open_source(da.from_array(X32, chunks=(chunk_rows, -1)), y=da.from_array(y, chunks=chunk_rows))
    spec = PassSpec(FoldScheme("hash", K, seed=0), (0, 1) if classes else None, 1)
    bal = bool(classes)
    forms = build_forms(stats, balanced=bal)
    alphas = default_alphas(build_full_form(stats, balanced=bal).A, n_alphas=R)
    plan = make_plan(
        stats, forms, alphas, [np.ones(N, bool)], n_classes=2 if classes else 0, auc=scoring == "roc_auc"
    )
    t_stats = t_metric = np.inf
    for _ in range(2):  # alternate, best of two each (the machine is shared)
        t0 = time.perf_counter()
        accumulate(src, spec, scheduler="threads")
        t_stats = min(t_stats, time.perf_counter() - t0)
        t0 = time.perf_counter()
        tally = metric_pass(src, spec, plan, scheduler="threads")
        t_metric = min(t_metric, time.perf_counter() - t0)
    best = float(np.nanmean(fold_scores(tally, scoring), axis=(1, 2)).max())
    print(
        f"  M={M:,} N={N} K={K} R={R} {scoring}: statistics pass {t_stats:.2f} s ({M / t_stats:,.0f} rows/s), "
        f"metric pass {t_metric:.2f} s ({M / t_metric:,.0f} rows/s), ratio {t_metric / t_stats:.2f}; best mean score {best:.4f}",
        flush=True,
    )
    return t_stats, t_metric


def time_esn_passes(
    n_units: int, n_series: int, steps: int, chunk_rows: int, R: int, scoring: str, repeats: int = 2
) -> dict[str, float]:
    """Statistics pass vs metric pass with an ESN inside (leave one series out, threads): best wall and CPU seconds."""
    import dask.array as da

    from streamridge.features import EchoStateNetwork
    from streamridge.folds.schemes import make_scheme
    from streamridge.sources import open_source

    rng = np.random.default_rng(0)
    M = n_series * steps
    u = rng.standard_normal((M, 2))
    g = np.repeat(np.arange(n_series), steps)
    y = np.r_[0.0, u[:-1, 0]] - 0.5 * np.r_[np.zeros(3), u[:-3, 1]] + 0.1 * rng.standard_normal(M)  # memory
    classes = None
    if scoring not in ("r2", "explained_variance", "neg_mean_absolute_error"):
        y = (y > np.quantile(y, 0.75)).astype(np.int64)
        classes = (0, 1)
    esn = EchoStateNetwork(n_units, spectral_radius=0.9, washout=50, seed=0).fit_width(2)
    src = open_source(
        da.from_array(u, chunks=(chunk_rows, -1)),
        y=da.from_array(y, chunks=chunk_rows),
        groups=da.from_array(g, chunks=chunk_rows),
        chunk_rows=chunk_rows,
    )
    spec = PassSpec(make_scheme("groups", group_values=np.arange(n_series)), classes, 1, features=esn)
    best = {"stats_wall": np.inf, "stats_cpu": np.inf, "metric_wall": np.inf, "metric_cpu": np.inf}
    plan = None
    for _ in range(repeats):  # alternate, best of each (the machine is shared)
        w0, c0 = time.perf_counter(), time.process_time()
        stats = accumulate(src, spec, scheduler="threads")
        best["stats_wall"] = min(best["stats_wall"], time.perf_counter() - w0)
        best["stats_cpu"] = min(best["stats_cpu"], time.process_time() - c0)
        if plan is None:
            bal = classes is not None
            forms = build_forms(stats, balanced=bal)
            alphas = default_alphas(build_full_form(stats, balanced=bal).A, n_alphas=R)
            plan = make_plan(
                stats,
                forms,
                alphas,
                [np.ones(n_units, bool)],
                n_classes=2 if bal else 0,
                auc=scoring == "roc_auc",
            )
        w0, c0 = time.perf_counter(), time.process_time()
        tally = metric_pass(src, spec, plan, scheduler="threads")
        best["metric_wall"] = min(best["metric_wall"], time.perf_counter() - w0)
        best["metric_cpu"] = min(best["metric_cpu"], time.process_time() - c0)
    score = float(np.nanmean(fold_scores(tally, scoring), axis=(1, 2)).max())
    print(
        f"  ESN {n_units} units, {n_series} series x {steps} steps (M={M:,}), chunks {chunk_rows}, K={n_series}, "
        f"R={R}, {scoring}: statistics pass {best['stats_wall']:.2f} s wall / {best['stats_cpu']:.2f} s CPU, "
        f"metric pass {best['metric_wall']:.2f} s / {best['metric_cpu']:.2f} s; ratio metric / statistics "
        f"{best['metric_wall'] / best['stats_wall']:.2f} wall, {best['metric_cpu'] / best['stats_cpu']:.2f} CPU; "
        f"best mean score {score:.4f}; load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    return best


def time_esn_fit(n_units: int, n_series: int, steps: int, chunk_rows: int, scoring: str) -> dict[str, float]:
    """A whole fit with ``scoring=`` (leave one series out, threads): ``timings_`` of the pass, the metric
    stage (fold models of every lambda + the metric pass) and the solve."""
    import streamridge as sr
    from streamridge.features import EchoStateNetwork

    rng = np.random.default_rng(0)
    M = n_series * steps
    u = rng.standard_normal((M, 2))
    y = np.r_[0.0, u[:-1, 0]] - 0.5 * np.r_[np.zeros(3), u[:-3, 1]] + 0.1 * rng.standard_normal(M)
    esn = EchoStateNetwork(n_units, spectral_radius=0.9, washout=50, seed=0)
    est = sr.StreamRidgeCV(
        cv="groups", features=esn, scoring=scoring, chunk_rows=chunk_rows, scheduler="threads"
    )
    c0 = time.process_time()
    est.fit(u, y, groups=np.repeat(np.arange(n_series), steps))
    t = est.timings_
    print(
        f"  fit, ESN {n_units} units, {n_series} series x {steps} steps, scoring={scoring!r}: pass {t['pass_s']:.2f} s, "
        f"metric stage {t['metric_pass_s']:.2f} s, solve {t['solve_s']:.2f} s (wall); whole fit {time.process_time() - c0:.2f} s CPU; "
        f"load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    return dict(t)


def esn_main(quick: bool) -> None:
    print("ESN inside: metric pass vs statistics pass (same data, chunks, threads, leave one series out):")
    if quick:
        time_esn_passes(50, 8, 500, 250, 20, "r2", repeats=1)
        time_esn_fit(50, 8, 500, 250, "explained_variance")
        return
    for n_series in (16, 32, 64):
        time_esn_passes(200, n_series, 4000, 1000, 50, "r2", repeats=3)
        time_esn_passes(200, n_series, 4000, 1000, 50, "balanced_accuracy", repeats=3)
    time_esn_fit(200, 64, 4000, 1000, "explained_variance")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes")
    p.add_argument("--esn", action="store_true", help="only the passes with an echo state network inside")
    p.add_argument("--passes", action="store_true", help="only the metric pass vs the statistics pass")
    args = p.parse_args()
    print(
        f"python {platform.python_version()}, {os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    if args.esn:
        esn_main(args.quick)
        print(f"load at end {os.getloadavg()[0]:.1f}")
        return
    print("nested CV from statistics (time vs one selection):")
    if args.passes:
        print("  (skipped: --passes)")
    elif args.quick:
        time_nested(40, 8, 20, 2000, None)
        time_nested(20, 8, 20, 2000, "backward")
    else:
        time_nested(200, 23, 60, 23 * 400, None)
        time_nested(100, 23, 60, 23 * 200, "backward")
    print("metric pass vs statistics pass (same data, chunks, threads):")
    M = 40_000 if args.quick else 400_000
    time_passes(M, 200, 23, 60, 20_000, False, "r2")
    time_passes(M, 200, 23, 60, 20_000, True, "roc_auc")
    print(f"load at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
