"""Random-vector functional link (RVFL) network, multi-class (seed 004), on scikit-learn's digits.

RVFL = random hidden units plus direct links from the inputs (``RandomHidden(direct=True)``);
compared with the same hidden layer without direct links (ELM) and with a linear read-out of the
raw pixels, all with lambda by exact 5-fold CV.

Run: ``python examples/rvfl_multiclass.py`` (``--small`` for a quick check).
"""

from __future__ import annotations

import argparse

import numpy as np
from sklearn.datasets import load_digits

import streamridge as sr
from streamridge.features import RandomHidden


def main(small: bool = False) -> dict[str, float]:
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    rng = np.random.default_rng(0)
    order = rng.permutation(len(y))
    X, y = X[order], y[order]
    n_train = 600 if small else 1300
    units = 150 if small else 1000
    X_test, y_test, X, y = X[n_train:], y[n_train:], X[:n_train], y[:n_train]
    out = {}
    print(f"digits: {n_train} training, {len(y_test)} test images, 10 classes")
    for name, fmap in [
        ("linear", None),
        ("ELM", RandomHidden(units, input_scaling=0.3, seed=4)),
        ("RVFL", RandomHidden(units, input_scaling=0.3, direct=True, seed=4)),
    ]:
        clf = sr.StreamRidgeClassifierCV(cv=5, features=fmap).fit(X, y)
        acc = float(np.mean(clf.predict(X_test) == y_test))
        out[name] = acc
        print(f"{name:<7} test accuracy {acc:.3f}   lambda {clf.alpha_:.3g}")
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--small", action="store_true")
    main(ap.parse_args().small)
