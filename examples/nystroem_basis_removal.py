"""Sparse-basis kernel ridge regression (seed 001): Nystroem kernel columns, basis vectors removed by backward selection.

Raw kernel columns k(x, b_j) of a sampled basis (``Nystroem(whiten=False)``) are computed inside the
pass; backward selection removes basis vectors one at a time, lambda re-chosen by exact 10-fold CV
at every step.  Compared with exact kernel ridge (scikit-learn ``KernelRidge``, all training rows as
basis) on a training set that fits in memory.

Run: ``python examples/nystroem_basis_removal.py`` (``--small`` for a quick check).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.datasets import make_friedman1
from sklearn.kernel_ridge import KernelRidge
from sklearn.model_selection import GridSearchCV
from threadpoolctl import threadpool_limits

import streamridge as sr
from streamridge.features import Nystroem


def main(small: bool = False) -> dict[str, float]:
    M, n_basis = (500, 30) if small else (4000, 200)
    X, y = make_friedman1(M + 3000, n_features=5, noise=0.5, random_state=1)
    X_test, y_test, X, y = X[M:], y[M:], X[:M], y[:M]
    gamma = 0.5
    t0 = time.perf_counter()
    m = sr.StreamRidgeCV(
        cv=10,
        selection="backward",
        min_features=n_basis // 10,
        features=Nystroem(n_basis, kernel="rbf", gamma=gamma, whiten=False, seed=0),
    ).fit(X, y)
    t_sr = time.perf_counter() - t0
    mse = float(np.mean((m.predict(X_test) - y_test) ** 2))
    t0 = time.perf_counter()
    with threadpool_limits(1):  # small dense solves: threaded BLAS only adds overhead
        kr = GridSearchCV(KernelRidge(kernel="rbf", gamma=gamma), {"alpha": np.logspace(-6, 1, 8)}, cv=5).fit(
            X, y
        )
    t_kr = time.perf_counter() - t0
    mse_kr = float(np.mean((kr.predict(X_test) - y_test) ** 2))
    print(f"Friedman #1 (5 inputs), {M} training rows; rbf kernel, gamma {gamma}")
    print(
        f"streamridge: {n_basis} sampled basis vectors -> {int(m.support_.sum())} kept by backward selection; "
        f"test MSE {mse:.4f}; {t_sr:.1f} s"
    )
    print(
        f"exact kernel ridge, all {M} rows as basis, 5-fold grid search over 8 lambdas: test MSE {mse_kr:.4f}; {t_kr:.1f} s"
    )
    return {"mse": mse, "mse_exact": mse_kr, "kept": int(m.support_.sum())}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--small", action="store_true")
    main(ap.parse_args().small)
