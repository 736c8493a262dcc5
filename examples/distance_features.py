"""Regression on distances to sampled reference points (seed 003, minimal-learning-machine style).

``Distances`` picks reference points by a seeded reservoir sample of the rows (a light first pass)
and computes the distance of every row to each of them inside the pass; the number of references is
chosen by ``feature_prefixes`` in the same pass.

Run: ``python examples/distance_features.py`` (``--small`` for a quick check).
"""

from __future__ import annotations

import argparse

import numpy as np
from sklearn.datasets import make_friedman1

import streamridge as sr
from streamridge.features import Distances


def main(small: bool = False) -> dict[str, float]:
    M, n_ref = (1500, 40) if small else (30000, 400)
    X, y = make_friedman1(M + 5000, n_features=5, noise=0.5, random_state=2)
    X_test, y_test, X, y = X[M:], y[M:], X[:M], y[:M]
    prefixes = [n_ref // 8, n_ref // 4, n_ref // 2, n_ref]
    m = sr.StreamRidgeCV(
        cv=10, features=Distances(n_ref, seed=0), feature_prefixes=prefixes, standardize=True
    ).fit(X, y)
    mse = float(np.mean((m.predict(X_test) - y_test) ** 2))
    lin = sr.StreamRidgeCV(cv=10).fit(X, y)
    mse_lin = float(np.mean((lin.predict(X_test) - y_test) ** 2))
    print(f"Friedman #1 (5 inputs), {M} training rows")
    print(
        "prefix CV MSE: " + ", ".join(f"{n}: {e / M:.4f}" for n, e in zip(m.prefix_sizes_, m.prefix_errors_))
    )
    print(
        f"distances to {m.n_features_selected_} sampled references: test MSE {mse:.4f}; linear on raw inputs: {mse_lin:.4f}"
    )
    return {"mse": mse, "mse_linear": mse_lin, "references": m.n_features_selected_}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--small", action="store_true")
    main(ap.parse_args().small)
