"""Template: data that arrives over time, read out by an echo state network with ``partial_fit``.

Each batch may cut a series anywhere: the reservoir state is carried from one call to the next, so
the statistics equal those of one fit on all rows.  The reservoir is drawn on the first call
(``features_``) and kept.  Folds are hashed series ids; the model is usable once every fold has rows.

Run: ``python examples/partial_fit_stream.py`` (``--small`` for a quick check).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import numpy as np
from esn_narma10 import narma_series

import streamridge as sr
from streamridge.cli.demo import nrmse
from streamridge.errors import FoldError
from streamridge.features import EchoStateNetwork


def batches(
    u: np.ndarray, y: np.ndarray, g: np.ndarray, size: int
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Consecutive row batches (a stand-in for a message queue, a sensor or a file tail)."""
    for a in range(0, len(y), size):
        yield u[a : a + size], y[a : a + size], g[a : a + size]


def main(small: bool = False) -> dict[str, float]:
    S, T, units = (4, 600, 40) if small else (10, 4000, 200)
    u, y, g = narma_series(S, T, seed=5)
    u_test, y_test, _ = narma_series(1, T, seed=6)
    model = sr.StreamRidgeCV(
        cv=3,
        alphas=np.logspace(-10, 1, 23),
        features=EchoStateNetwork(
            units, spectral_radius=0.95, input_scaling=0.5, bias_scaling=0.2, washout=50
        ),
    )
    for i, (ub, yb, gb) in enumerate(batches(u, y, g, size=T // 3 + 7)):
        try:
            model.partial_fit(ub, yb, groups=gb)
        except FoldError:  # a fold (hashed series ids) has no rows yet: keep feeding
            if i % 3 == 2:
                print(f"after {model.stats_.n_rows:>6} rows: not every fold has rows yet")
            continue
        if i % 3 == 2:
            err = nrmse(y_test[50:], model.predict(u_test)[50:])
            print(f"after {model.stats_.n_rows:>6} rows: lambda {model.alpha_:.3g}, test NRMSE {err:.4f}")
    whole = sr.StreamRidgeCV(cv=3, alphas=np.logspace(-10, 1, 23), features=model.features_).fit(
        u, y, groups=g
    )
    gap = float(np.abs(whole.coef_ - model.coef_).max() / np.abs(whole.coef_).max())
    print(f"one fit on all rows gives the same read-out: max relative coefficient difference {gap:.1e}")
    return {"nrmse": nrmse(y_test[50:], model.predict(u_test)[50:]), "gap": gap}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--small", action="store_true")
    main(ap.parse_args().small)
