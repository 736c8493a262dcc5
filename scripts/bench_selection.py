"""Benchmark of feature selection on synthetic per-fold statistics.

Times full forward and backward paths of :func:`streamridge.selection.select_features`
at the shapes of the paper's Table 1 (N=200, K=23, R=60) and Table 3 (N=400,
K=10, R=50), the growth ratio time(N=400) / time(N=200) at equal K and R, the
speed-up over the brute-force reference, and scikit-learn's
SequentialFeatureSelector(Ridge) on the rows of a small case (time and agreement
of the selected features).

The selection functions run BLAS single-threaded (threadpoolctl) whatever
the environment says; see the docstring of ``streamridge.selection._path``.

Usage::

    python scripts/bench_selection.py                       # full sizes, memory_budget 1 GiB
    python scripts/bench_selection.py --quick               # small sizes (seconds)
    python scripts/bench_selection.py --only-table1 --budget 268435456   # default budget
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable
from functools import partial

import numpy as np

from streamridge.folds.schemes import FoldScheme
from streamridge.forms.build import Forms, build_forms
from streamridge.selection import brute_force_path, select_features
from streamridge.stats.kernel import from_chunk


def synthetic_forms(N: int, K: int, T: int = 1, seed: int = 0) -> Forms:
    """Per-fold forms of K blocks of correlated rows (m = 2N/K + 5 rows each, no intercept)."""
    rng = np.random.default_rng(seed)
    m = max(2 * N // K + 5, 20)
    mix = np.eye(N) + 0.3 * rng.standard_normal((N, N)) / np.sqrt(N)
    beta = rng.standard_normal((N, T)) * (rng.random((N, 1)) < 0.3)
    Xs = [rng.standard_normal((m, N)) @ mix for _ in range(K)]
    Ys = [X @ beta + rng.standard_normal((m, T)) for X in Xs]
    Av = np.stack([X.T @ X for X in Xs])
    Bv = np.stack([X.T @ Y for X, Y in zip(Xs, Ys, strict=True)])
    cv = np.stack([(Y * Y).sum(axis=0) for Y in Ys])
    At, Bt = Av.sum(axis=0)[None] - Av, Bv.sum(axis=0)[None] - Bv
    z = np.zeros
    n = np.full(K, float(m))
    return Forms(At, Bt, Av, Bv, cv, z((K, N)), z((K, T)), np.ones((K, N)), (K - 1) * n, n)


def grid(forms: Forms, R: int) -> np.ndarray:
    return np.trace(forms.At[0]) / forms.At.shape[1] * np.logspace(-4, 3, R)


def timed(fn: Callable[[], object], repeat: int = 1) -> tuple[float, object]:
    best, out = np.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def path_time(N: int, K: int, R: int, direction: str, budget: int) -> float:
    forms = synthetic_forms(N, K)
    alphas = grid(forms, R)
    t, _ = timed(lambda: select_features(forms, alphas, direction=direction, memory_budget=budget))
    print(f"  N={N} K={K} R={R} {direction}: {t:.2f} s", flush=True)
    return t


def sklearn_comparison(n_select: int, quick: bool) -> list[tuple[str, str]]:
    """Forward selection on rows: streamridge (one lambda) vs SequentialFeatureSelector(Ridge)."""
    from sklearn.feature_selection import SequentialFeatureSelector
    from sklearn.linear_model import Ridge
    from sklearn.metrics import make_scorer
    from sklearn.model_selection import PredefinedSplit

    rng = np.random.default_rng(1)
    M, N, K = (400, 12, 5) if quick else (2000, 30, 5)
    X = rng.standard_normal((M, N))
    y = X[:, : N // 3] @ rng.standard_normal(N // 3) + rng.standard_normal(M)
    folds = FoldScheme("hash", K, seed=0).assign(0, M)
    alpha = 1.0

    def ours() -> np.ndarray:
        stats = from_chunk(X, y[:, None], folds, None, K, 1)
        forms = build_forms(stats, fit_intercept=True)
        res = select_features(forms, np.array([alpha]), direction="forward", max_features=n_select)
        return res.features[1:]

    sse = make_scorer(lambda yt, yp: -float(((yt - yp) ** 2).sum()))
    sfs = SequentialFeatureSelector(
        Ridge(alpha=alpha),
        n_features_to_select=n_select,
        direction="forward",
        scoring=sse,
        cv=PredefinedSplit(folds),
    )
    t_ours, f_ours = timed(ours, repeat=3)
    t_sk, _ = timed(lambda: sfs.fit(X, y), repeat=1)
    same = set(np.flatnonzero(sfs.get_support())) == set(np.asarray(f_ours).tolist())
    return [
        (f"sklearn SFS(Ridge) forward, M={M} N={N} K={K}, {n_select} features, 1 lambda", f"{t_sk:.3f} s"),
        ("streamridge forward from stats (incl. stats pass), same case", f"{t_ours:.3f} s"),
        ("speed-up vs sklearn SFS", f"{t_sk / t_ours:.0f}x"),
        ("same selected features", str(same)),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a few seconds)")
    ap.add_argument("--budget", type=float, default=2**30, help="memory_budget in bytes (default 1 GiB)")
    ap.add_argument("--only-table1", action="store_true", help="time the Table 1 shape only")
    ap.add_argument("--skip-brute", action="store_true")
    ap.add_argument("--skip-sklearn", action="store_true")
    args = ap.parse_args()
    budget = int(args.budget)
    s = 4 if args.quick else 1
    t1, t3 = (200 // s, 23, 60 // s), (400 // s, 10, 50 // s)
    rows: list[tuple[str, str]] = []
    print(f"# streamridge selection benchmark ({platform.machine()}, memory_budget={budget})", flush=True)
    big = {}
    shapes = (("Table 1", t1),) if args.only_table1 else (("Table 1", t1), ("Table 3", t3))
    for name, (N, K, R) in shapes:
        for d in ("backward", "forward"):
            big[d] = t = path_time(N, K, R, d, budget)
            rows.append((f"{name} N={N} K={K} R={R} full {d} path", f"{t:.2f} s"))
    if not args.only_table1:
        N3, K3, R3 = t3
        for d in ("backward", "forward"):
            small = path_time(N3 // 2, K3, R3, d, budget)
            label = f"growth {d} time(N={N3})/time(N={N3 // 2}) at K={K3} R={R3}"
            rows.append((label, f"{big[d] / small:.1f} ({big[d]:.2f} s / {small:.2f} s)"))
    if not args.skip_brute and not args.only_table1:
        N, K, R = (20, 5, 10) if args.quick else (40, 5, 20)
        forms = synthetic_forms(N, K)
        alphas = grid(forms, R)
        for d in ("backward", "forward"):
            tb, ref = timed(partial(brute_force_path, forms, alphas, direction=d))
            tf, fast = timed(partial(select_features, forms, alphas, direction=d), repeat=3)
            same = bool(np.array_equal(ref.features, fast.features))  # type: ignore[attr-defined]
            rows.append((f"brute force N={N} K={K} R={R} full {d} path", f"{tb:.2f} s"))
            rows.append(
                (f"select_features same case (same path: {same})", f"{tf:.3f} s = {tb / tf:.0f}x faster")
            )
    if not args.skip_sklearn and not args.only_table1:
        rows += sklearn_comparison(4 if args.quick else 8, args.quick)
    width = max(len(r[0]) for r in rows)
    print(
        f"# streamridge selection benchmark ({platform.processor() or platform.machine()}, memory_budget={budget})"
    )
    for label, value in rows:
        print(f"{label:<{width}}  {value}")


if __name__ == "__main__":
    main()
