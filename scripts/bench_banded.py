"""Per-target lambda (R²) and banded ridge from the statistics against himalaya, in one run; many targets from zarr.

Usage::

    python scripts/bench_banded.py                  # small: runs in well under a minute on 2 cores
    python scripts/bench_banded.py --rows 3600 --features 1024 --targets 20000 --band-targets 5000 \\
        --bands 4 --band-features 128 --weights 20    # the encoding-model sizes
    python scripts/bench_banded.py --many STORE.zarr --rows 20000 --features 1024 --targets 25000
    python scripts/bench_banded.py --write-stats S.npz --rows 20000 --features 1024 --targets 100000
    python scripts/bench_banded.py --fit-stats S.npz       # the solve alone, in a fresh process

Same rows, folds (``PredefinedSplit``), lambdas and weight vectors (passed
explicitly, without zeros: himalaya's BandedRidgeCV turns the features of a
band of weight 0 into NaN) for both, himalaya on its numpy backend:

* plain ridge, one lambda per target chosen by the mean R² over folds:
  ``StreamRidgeCV(cv=PredefinedSplit(folds), scoring="r2", alpha_per_target=True).fit(X, Y)``
  (the pass, the scores from the statistics, the final solve) against himalaya's ``RidgeCV``;
* banded ridge: ``StreamRidgeCV(bands=..., band_weights=...)`` (the same, plus the
  per-band CV R²) against ``BandedRidgeCV``;
* the fold-scoring kernel alone on the same forms: the eigen solver's
  ``P @ Wc`` per lambda (:func:`streamridge.solvers.eigen.fold_errors_eigen`)
  against the factored validation form (:func:`~streamridge.solvers.target_scores.fold_scores`),
  and where the latter's time goes (the K decompositions and factors, the rest).

It prints each time (median of ``--repeats``), the ratios, the share of
targets with the same choice and the largest difference of test R².

``--many STORE``: one lambda per target by R² for many targets streamed from a
zarr store (written there first if missing, chunk by chunk): the wall time,
the pass and solve times, the process's peak RSS, and the solve stage against
its flop count at the GEMM rate measured in the same run (:func:`solve_flops`).
``--write-stats`` / ``--fit-stats``: the statistics of that many targets written
without a pass (targets drawn in column batches), then the solve alone from them
in a fresh process: its time against the flop count, and the process's peak memory.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings

import numpy as np
from sklearn.metrics import r2_score
from sklearn.model_selection import PredefinedSplit

import streamridge as sr
from streamridge.forms.build import build_forms
from streamridge.parallel import map_folds, n_cpus
from streamridge.solvers.banded import sample_band_weights
from streamridge.solvers.eigen import fold_errors_eigen
from streamridge.solvers.quadratics import MAX_PANELS, PANEL_ROWS, validation_factor
from streamridge.solvers.target_scores import fold_scores
from streamridge.stats.kernel import from_chunk


def make_data(rows: int, bands: int, per_band: int, targets: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """X of ``bands`` feature spaces and Y of targets driven unequally by them (rows + a test half)."""
    rng = np.random.default_rng(seed)
    N = bands * per_band
    X = rng.standard_normal((rows, N))
    strength = rng.dirichlet(np.full(bands, 0.5), targets)  # (T, bands): each target's mix of bands
    beta = rng.standard_normal((N, targets)) * np.sqrt(np.repeat(strength.T, per_band, axis=0) / per_band)
    Y = X @ beta + 1.5 * rng.standard_normal((rows, targets))
    return X, Y


def timed(fn, repeats: int, warm=None):  # type: ignore[no-untyped-def]
    """(median seconds, last result) of ``repeats`` calls, after one call of ``warm`` (imports, thread pools)."""
    if warm is not None:
        warm()
    ts, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts), out


def ours_plain(X, Y, folds, K, alphas):  # type: ignore[no-untyped-def]
    m = sr.StreamRidgeCV(alphas, cv=PredefinedSplit(folds), scoring="r2", alpha_per_target=True)
    m.fit(X, Y)
    return m.alpha_, m.coef_, m.intercept_


def ours_banded(X, Y, folds, K, alphas, bands, weights):  # type: ignore[no-untyped-def]
    m = sr.StreamRidgeCV(
        alphas,
        cv=PredefinedSplit(folds),
        scoring="r2",
        alpha_per_target=True,
        bands=bands,
        band_weights=weights,
    )
    return m.fit(X, Y)


def himalaya_plain(X, Y, folds, alphas):  # type: ignore[no-untyped-def]
    from himalaya.ridge import RidgeCV
    from himalaya.scoring import r2_score as h_r2

    m = RidgeCV(
        alphas=alphas, fit_intercept=True, cv=PredefinedSplit(folds), solver_params=dict(score_func=h_r2)
    )
    return m.fit(X, Y)


def himalaya_banded(X, Y, folds, alphas, groups, weights):  # type: ignore[no-untyped-def]
    from himalaya.ridge import BandedRidgeCV
    from himalaya.scoring import r2_score as h_r2

    params = dict(n_iter=weights, alphas=alphas, score_func=h_r2, progress_bar=False)
    m = BandedRidgeCV(groups=groups, fit_intercept=True, cv=PredefinedSplit(folds), solver_params=params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "slower than multiple-kernel ridge when n_samples < n_features"
        return m.fit(X, Y)


def test_r2(X, Y, coef, intercept) -> np.ndarray:  # type: ignore[no-untyped-def]
    return r2_score(Y, X @ np.asarray(coef).T + np.asarray(intercept), multioutput="raw_values")


def kernel_breakdown(forms, alphas, repeats: int) -> None:  # type: ignore[no-untyped-def]
    """The scoring kernel alone: the eigen solver's per-lambda P @ Wc against the factored form, same forms.

    The factored form's time is split into the K decompositions and factors, the rotations of the
    targets (a run with one lambda less the former) and the per-lambda products (the rest).
    """
    K, R = forms.n_folds, len(alphas)
    t_old, E_old = timed(
        lambda: fold_errors_eigen(forms, alphas), repeats, lambda: fold_errors_eigen(forms, alphas[:1])
    )
    t_new, E_new = timed(lambda: fold_scores(forms, alphas, scoring="sse"), repeats)
    t_one, _ = timed(lambda: fold_scores(forms, alphas[:1], scoring="sse"), repeats)
    t_fac, facs = timed(lambda: map_folds(lambda k: validation_factor(forms.At[k], forms.Av[k]), K), repeats)
    rel = float(np.max(np.abs(E_new - E_old) / np.abs(E_old)))
    ranks = sorted({f.rank for f in facs})
    print(
        f"  scoring kernel, squared error of every (lambda, fold, target); validation rank {ranks} of N={forms.At.shape[1]}"
    )
    print(f"    eigen solver (P @ Wc per lambda)     {t_old:8.3f} s")
    print(
        f"    factored validation form            {t_new:8.3f} s   ratio {t_old / t_new:5.2f}x   max rel diff {rel:.1e}"
    )
    per = (t_new - t_one) / max(R - 1, 1)
    print(
        f"      decompositions + factors {t_fac:.3f} s, rotations {max(t_one - t_fac - per, 0.0):.3f} s, "
        f"per lambda {per:.4f} s x {R}"
    )


def write_many(path: str, rows: int, features: int, targets: int, seed: int, chunk_rows: int = 500) -> None:
    """A zarr store of X (rows x features) and y (rows x targets), float32, written chunk by chunk of rows."""
    import zarr

    rng = np.random.default_rng(seed)
    B = (rng.standard_normal((features, targets), dtype=np.float32) / np.float32(np.sqrt(features))).astype(
        np.float32
    )
    root = zarr.open_group(path, mode="w", zarr_format=3)
    Xa = root.create_array("X", shape=(rows, features), dtype="float32", chunks=(chunk_rows, features))
    Ya = root.create_array("y", shape=(rows, targets), dtype="float32", chunks=(chunk_rows, targets))
    for i, start in enumerate(range(0, rows, chunk_rows)):
        m = min(chunk_rows, rows - start)
        r = np.random.default_rng((seed, i))
        x = r.standard_normal((m, features), dtype=np.float32)
        Xa[start : start + m] = x
        Ya[start : start + m] = x @ B + np.float32(2.0) * r.standard_normal((m, targets), dtype=np.float32)


def gemm_rate(n: int = 2048, repeats: int = 5) -> float:
    """Flops per second of a float64 n x n matrix product on this machine now (best of ``repeats``)."""
    a = np.random.default_rng(0).standard_normal((n, n))
    best = min(timed(lambda: a @ a, 1)[0] for _ in range(repeats))
    return 2.0 * n**3 / best


def solve_flops(K: int, N: int, T: int, R: int) -> float:
    """Flops of the solve stage of one lambda per target by R², validation forms of full rank.

    Per fold: the rotations ``C'Bt``, ``C'Bv`` (4 N² T) and per lambda the squared norms through the
    trapezoidal factor (``N² (1 + 1/P) T``, P row panels); the final solve rotates the full form twice
    (4 N² T).  The decompositions (O(K N³)) and the O(K N T) form building are left out.
    """
    P = int(np.clip(N // PANEL_ROWS, 1, MAX_PANELS))
    return float(K * (4 + R * (1 + 1 / P)) * N**2 * T + 4 * N**2 * T)


def reset_peak_rss() -> None:
    """Start this process's peak resident memory (VmHWM) again from its resident memory now (Linux)."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


def peak_rss_gb() -> float:
    """This process's peak resident memory (VmHWM), in GB."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / 1e9
    return float("nan")


def many_targets(a: argparse.Namespace) -> None:
    """One lambda per target by R² for ``a.targets`` targets streamed from a zarr store."""
    if not os.path.exists(a.many):
        t = time.perf_counter()
        write_many(a.many, a.rows, a.features, a.targets, a.seed)
        print(
            f"wrote {a.many}: {a.rows} x {a.features} X, {a.rows} x {a.targets} y (float32) in {time.perf_counter() - t:.0f} s"
        )
    alphas = np.logspace(-1, 5, a.alphas)
    rate = gemm_rate()
    m = sr.StreamRidgeCV(alphas, cv=a.folds, scoring="r2", alpha_per_target=True, solve_memory=a.solve_memory)
    t = time.perf_counter()
    m.fit(a.many)
    wall = time.perf_counter() - t
    flops = solve_flops(a.folds, a.features, a.targets, a.alphas)
    rate_after = gemm_rate()
    solve = m.timings_["solve_s"]
    print(
        f"many targets: {a.rows} x {a.features} x {a.targets} from {a.many}, {a.folds} folds, {a.alphas} alphas"
    )
    print(
        f"  fit {wall:.1f} s: pass {m.timings_['pass_s']:.1f} s, solve {solve:.1f} s; peak RSS {peak_rss_gb():.2f} GB"
    )
    print(
        f"  solve flops {flops:.3g}; GEMM {rate / 1e9:.1f} GFLOP/s before, {rate_after / 1e9:.1f} after: "
        f"{flops / max(rate, rate_after):.1f} s at the better rate, solve / that {solve * max(rate, rate_after) / flops:.2f}x"
    )


def write_many_stats(
    path: str, rows: int, features: int, targets: int, folds: int, seed: int, batch: int = 5000
) -> None:
    """The statistics of ``rows`` rows of X and ``targets`` targets, without holding the targets' rows.

    X is drawn once; the targets are drawn ``batch`` columns at a time, each batch's statistics taken
    on the rows in memory (:func:`~streamridge.stats.kernel.from_chunk`) and put into the full arrays:
    the statistics of one pass over all of them, at the memory of the statistics.
    """
    from streamridge.stats.foldstats import FoldStats, save_stats

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((rows, features))
    fold = rng.permutation(np.arange(rows) % folds)
    full = None
    for start in range(0, targets, batch):
        stop = min(targets, start + batch)
        r = np.random.default_rng((seed, start))
        B = r.standard_normal((features, stop - start)) / np.sqrt(features)
        part = from_chunk(X, X @ B + 2.0 * r.standard_normal((rows, stop - start)), fold, None, folds, 1)
        if full is None:
            full = FoldStats(
                part.weight, part.count, part.mean_x, np.empty((folds, 1, targets)), part.sxx,
                np.empty((folds, 1, features, targets)), np.empty((folds, 1, targets)),
                {"n_features": features, "n_targets": targets, "task": "regression",
                 "scheme": {"kind": "hash", "n_folds": folds, "seed": seed}},
            )  # fmt: skip
        full.mean_y[..., start:stop] = part.mean_y
        full.sxy[..., start:stop] = part.sxy
        full.syy[..., start:stop] = part.syy
    assert full is not None
    save_stats(full, path)


def solve_only(a: argparse.Namespace) -> None:
    """``fit_stats`` of saved statistics in this process: the solve stage's time and peak memory alone."""
    from streamridge.stats.foldstats import load_stats

    rate = gemm_rate()
    stats = load_stats(a.fit_stats)
    held = peak_rss_gb()
    reset_peak_rss()  # the solve's own peak from here (reading the .npz held a second copy)
    K, N, T = stats.n_folds, stats.n_features, stats.n_targets
    m = sr.StreamRidgeCV(np.logspace(-1, 5, a.alphas), cv=K, scoring="r2", alpha_per_target=True,
                         solve_memory=a.solve_memory)  # fmt: skip
    t = time.perf_counter()
    m.fit_stats(stats)
    wall = time.perf_counter() - t
    flops = solve_flops(K, N, T, a.alphas)
    best = max(rate, gemm_rate())
    xy = 8 * K * N * T / 1e9
    print(
        f"solve from statistics: {K} folds x {N} features x {T} targets ({stats.n_rows} rows), {a.alphas} alphas"
    )
    print(
        f"  X'Y {xy:.2f} GB; peak RSS reading the statistics {held:.2f} GB; peak RSS of the solve {peak_rss_gb():.2f} GB"
    )
    print(
        f"  solve {wall:.1f} s; flops {flops:.3g}, GEMM {best / 1e9:.1f} GFLOP/s: {flops / best:.1f} s; "
        f"solve / that {wall * best / flops:.2f}x; load {os.getloadavg()[0]:.1f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--rows", type=int, default=1000, help="training rows (as many again are held out for test R²)"
    )
    ap.add_argument("--features", type=int, default=256, help="features of the plain-ridge case")
    ap.add_argument("--targets", type=int, default=1000, help="targets of the plain-ridge case")
    ap.add_argument("--bands", type=int, default=4)
    ap.add_argument("--band-features", type=int, default=32, help="features per band")
    ap.add_argument("--band-targets", type=int, default=500)
    ap.add_argument("--weights", type=int, default=6, help="weight vectors (Dirichlet samples, no zeros)")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--alphas", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--kernel-only", action="store_true", help="only the scoring kernel of the plain-ridge case"
    )
    ap.add_argument("--many", metavar="STORE", help="many targets from this zarr store (written if missing)")
    ap.add_argument("--solve-memory", default=None, help="solve_memory of the --many fit (default 1 GiB)")
    ap.add_argument("--skip-plain", action="store_true", help="only the banded case")
    ap.add_argument("--skip-himalaya-banded", action="store_true", help="the banded case of streamridge only")
    ap.add_argument("--skip-kernel", action="store_true", help="no scoring-kernel breakdown")
    ap.add_argument("--skip-banded", action="store_true", help="only the plain-ridge case")
    ap.add_argument(
        "--write-stats", metavar="FILE", help="write the statistics of --rows x --features x --targets"
    )
    ap.add_argument(
        "--fit-stats", metavar="FILE", help="time and peak memory of the solve from these statistics"
    )
    a = ap.parse_args()
    if a.many:
        many_targets(a)
        return
    if a.write_stats:
        t = time.perf_counter()
        write_many_stats(a.write_stats, a.rows, a.features, a.targets, a.folds, a.seed)
        print(f"wrote {a.write_stats} in {time.perf_counter() - t:.0f} s")
        return
    if a.fit_stats:
        solve_only(a)
        return
    K, alphas = a.folds, np.logspace(-1, 5, a.alphas)
    print(
        f"cores {n_cpus()}, load {os.getloadavg()[0]:.1f}; {K} folds, {a.alphas} alphas, median of {a.repeats}"
    )

    X, Y = make_data(2 * a.rows, 1, a.features, a.targets, a.seed)
    Xtr, Ytr, Xte, Yte = X[: a.rows], Y[: a.rows], X[a.rows :], Y[a.rows :]
    folds = np.random.default_rng(a.seed).permutation(np.arange(a.rows) % K)
    if a.kernel_only:
        print(f"plain ridge: {a.rows} x {a.features} x {a.targets}")
        kernel_breakdown(build_forms(from_chunk(Xtr, Ytr, folds, None, K, 1)), alphas, a.repeats)
        return
    if not a.skip_plain:
        print(f"plain ridge, one lambda per target by R²: {a.rows} x {a.features} x {a.targets}")
        t_ours, (alpha, coef, b) = timed(
            lambda: ours_plain(Xtr, Ytr, folds, K, alphas),
            a.repeats,
            lambda: ours_plain(Xtr, Ytr[:, :8], folds, K, alphas),
        )
        t_him, model = timed(
            lambda: himalaya_plain(Xtr, Ytr, folds, alphas),
            a.repeats,
            lambda: himalaya_plain(Xtr, Ytr[:, :8], folds, alphas),
        )
        same = np.mean(np.isclose(alpha, np.asarray(model.best_alphas_), rtol=1e-9))
        r_ours, r_him = test_r2(Xte, Yte, coef, b), test_r2(Xte, Yte, model.coef_.T, model.intercept_)
        print(
            f"  streamridge {t_ours:8.3f} s   himalaya RidgeCV {t_him:8.3f} s   ratio {t_him / t_ours:5.2f}x"
        )
        print(
            f"  same lambda {100 * same:.1f} % of targets; mean test R² {r_ours.mean():.4f} vs {r_him.mean():.4f}, "
            f"per target max |diff| {np.abs(r_ours - r_him).max():.1e}"
        )
        if not a.skip_kernel:
            kernel_breakdown(build_forms(from_chunk(Xtr, Ytr, folds, None, K, 1)), alphas, a.repeats)
        if a.skip_banded:
            return

    B, nb = a.bands, a.band_features
    X, Y = make_data(2 * a.rows, B, nb, a.band_targets, a.seed + 1)
    Xtr, Ytr, Xte, Yte = X[: a.rows], Y[: a.rows], X[a.rows :], Y[a.rows :]
    bands = [np.arange(i * nb, (i + 1) * nb) for i in range(B)]
    weights = sample_band_weights(B, B + 1 + a.weights, seed=a.seed)[B + 1 :]
    weights = np.clip(weights, 1e-6, None) / np.clip(weights, 1e-6, None).sum(axis=1, keepdims=True)
    weights[0] = 1.0 / B
    print(
        f"banded ridge by R²: {a.rows} x {B} bands x {nb} features x {a.band_targets} targets, {len(weights)} weight vectors"
    )
    groups = np.repeat(np.arange(B), nb)
    t_ours, found = timed(
        lambda: ours_banded(Xtr, Ytr, folds, K, alphas, bands, weights),
        a.repeats,
        lambda: ours_banded(Xtr, Ytr[:, :8], folds, K, alphas, bands, weights[:2]),
    )
    if a.skip_himalaya_banded:  # himalaya's BandedRidgeCV takes hours at the encoding sizes on 2 cores
        print(f"  streamridge {t_ours:8.3f} s (himalaya not run)")
        return
    t_him, model = timed(
        lambda: himalaya_banded(Xtr, Ytr, folds, alphas, groups, weights),
        a.repeats,
        lambda: himalaya_banded(Xtr, Ytr[:, :8], folds, alphas, groups, weights[:2]),
    )
    chosen = np.exp(np.asarray(model.deltas_)) * np.asarray(model.best_alphas_)
    same_w = np.mean(np.all(np.isclose(found.band_weights_, chosen.T, rtol=1e-8), axis=1))
    same_a = np.mean(np.isclose(found.alpha_, np.asarray(model.best_alphas_), rtol=1e-9))
    r_ours = test_r2(Xte, Yte, found.coef_, found.intercept_)
    r_him = test_r2(Xte, Yte, model.coef_.T, model.intercept_)
    print(
        f"  streamridge {t_ours:8.3f} s   himalaya BandedRidgeCV {t_him:8.3f} s   ratio {t_him / t_ours:5.2f}x"
    )
    print(
        f"  same weights {100 * same_w:.1f} %, same lambda {100 * same_a:.1f} % of targets; mean test R² "
        f"{r_ours.mean():.4f} vs {r_him.mean():.4f}, per target max |diff| {np.abs(r_ours - r_him).max():.1e}"
    )


if __name__ == "__main__":
    main()
