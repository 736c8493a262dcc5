"""Extreme learning machine: forward vs backward selection of hidden units vs all units (seed 000's comparison).

Friedman #1 regression (scikit-learn's generator); an ELM hidden layer of random tanh units is
computed inside the pass; the read-out uses all units, a forward-selected subset or a
backward-selected subset, lambda re-chosen for every subset by exact 10-fold CV.

Run: ``python examples/elm_selection.py`` (``--small`` for a quick check).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.datasets import make_friedman1

import streamridge as sr
from streamridge.features import RandomHidden


def main(small: bool = False) -> dict[str, dict[str, float]]:
    M, units = (1500, 30) if small else (20000, 150)
    X, y = make_friedman1(M + 5000, noise=1.0, random_state=0)
    X_test, y_test, X, y = X[M:], y[M:], X[:M], y[:M]
    out = {}
    print(f"Friedman #1, {M} training rows, ELM {units} tanh units, 10-fold CV")
    print(f"{'read-out':<10} {'units':>6} {'CV MSE':>9} {'test MSE':>9} {'time s':>7}")
    for selection in (None, "forward", "backward"):
        t0 = time.perf_counter()
        m = sr.StreamRidgeCV(
            cv=10,
            standardize=True,
            selection=selection,
            features=RandomHidden(units, input_scaling=1.0, seed=1),
        ).fit(X, y)
        dt = time.perf_counter() - t0
        cv = float(np.min(m.cv_errors_)) / M
        test = float(np.mean((m.predict(X_test) - y_test) ** 2))
        name = selection or "all"
        out[name] = {"units": int(m.support_.sum()), "cv_mse": cv, "test_mse": test}
        print(f"{name:<10} {int(m.support_.sum()):>6} {cv:>9.4f} {test:>9.4f} {dt:>7.2f}")
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--small", action="store_true")
    main(ap.parse_args().small)
