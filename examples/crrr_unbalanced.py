"""Unbalanced classification: class-reweighted ridge regression (CRRR) vs unweighted ridge.

A two-class problem with 5 % positives (scikit-learn's make_classification), ELM features
inside the pass.  CRRR weighs every class equally in every training and validation fold.

Run: ``python examples/crrr_unbalanced.py`` (``--small`` for a quick check).
"""

from __future__ import annotations

import argparse

import numpy as np
from sklearn.datasets import make_classification
from sklearn.metrics import balanced_accuracy_score

import streamridge as sr
from streamridge.features import RandomHidden


def main(small: bool = False) -> dict[str, dict[str, float]]:
    M = 3000 if small else 60000
    X, y = make_classification(
        M + 20000, n_features=10, n_informative=5, weights=[0.95, 0.05], flip_y=0.01, random_state=0
    )
    X_test, y_test, X, y = X[M:], y[M:], X[:M], y[:M]
    out = {}
    print(f"{M} training rows, {y.mean():.1%} positives; ELM 100 units; 5-fold CV")
    for cw in (None, "balanced"):
        clf = sr.StreamRidgeClassifierCV(
            cv=5, class_weight=cw, features=RandomHidden(100, input_scaling=0.5, seed=2)
        ).fit(X, y)
        p = clf.predict(X_test)
        err = [float(np.mean(p[y_test == c] != c)) for c in (0, 1)]
        bacc = balanced_accuracy_score(y_test, p)
        name = "CRRR" if cw else "unweighted"
        out[name] = {"balanced_accuracy": bacc, "error_class0": err[0], "error_class1": err[1]}
        print(
            f"{name:<11} balanced accuracy {bacc:.3f}   error: majority class {err[0]:.3f}, minority class {err[1]:.3f}"
        )
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--small", action="store_true")
    main(ap.parse_args().small)
