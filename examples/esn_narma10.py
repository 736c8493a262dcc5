"""Echo state network on NARMA-10: leave-one-series-out CV, the number of units chosen in the same pass.

The reservoir (seed 000's application) runs inside the pass on the raw input u(t) (one column);
``feature_prefixes`` chooses the number of reservoir units and lambda jointly by the exact
leave-one-series-out CV.  The same read-out is then fitted in memory with scikit-learn on the
materialized states, for comparison.

Run: ``python examples/esn_narma10.py`` (``--small`` for a quick check).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.linear_model import Ridge

import streamridge as sr
from streamridge.cli.demo import narma10, nrmse
from streamridge.features import EchoStateNetwork


def narma_series(n_series: int, steps: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inputs (rows, 1), NARMA-10 targets (rows,) and series ids; diverging series are redrawn."""
    rng = np.random.default_rng(seed)
    us, ys = [], []
    while len(us) < n_series:
        u = rng.uniform(0, 0.5, (1, steps))
        y = narma10(u)[0, 1:]
        if np.all(np.isfinite(y)) and np.abs(y).max() < 1:
            us.append(u[0])
            ys.append(y)
    return np.concatenate(us)[:, None], np.concatenate(ys), np.repeat(np.arange(n_series), steps)


def main(small: bool = False) -> dict[str, float]:
    S, T, units, washout = (5, 800, 80, 50) if small else (20, 5000, 400, 200)
    prefixes = [units // 8, units // 4, units // 2, units]
    u, y, g = narma_series(S, T, seed=1)
    u_test, y_test, g_test = narma_series(2, T, seed=2)
    esn = EchoStateNetwork(
        units,
        spectral_radius=0.95,
        input_scaling=0.5,
        bias_scaling=0.2,
        sparsity=0.9,
        washout=washout,
        seed=0,
    )
    t0 = time.perf_counter()
    model = sr.StreamRidgeCV(
        cv="groups",
        features=esn,
        feature_prefixes=prefixes,
        alphas=np.logspace(-10, 1, 23),
        chunk_rows=T // 2,
    ).fit(u, y, groups=g)
    t_fit = time.perf_counter() - t0
    keep = np.tile(np.arange(T) >= washout, 2)
    pred = model.predict(u_test, groups=g_test)
    err = nrmse(y_test[keep], pred[keep])
    print(f"{S} series x {T} steps, ESN {units} units, leave-one-series-out ({model.n_folds_} folds)")
    print(
        "prefix CV error: "
        + ", ".join(f"{n}: {e:.4g}" for n, e in zip(model.prefix_sizes_, model.prefix_errors_))
    )
    print(
        f"chosen {model.n_features_selected_} units, lambda {model.alpha_:.3g}; one pass + selection {t_fit:.2f} s"
    )
    print(f"test NRMSE on 2 new series: {err:.4f}")

    t0 = time.perf_counter()  # the same read-out in memory with scikit-learn
    F = model.features_.transform(u, groups=g)[:, : model.n_features_selected_]
    train = np.concatenate([np.arange(T) >= washout] * S)
    ridge = Ridge(alpha=model.alpha_).fit(F[train], y[train])
    F_test = model.features_.transform(u_test, groups=g_test)[:, : model.n_features_selected_]
    err_sk = nrmse(y_test[keep], ridge.predict(F_test)[keep])
    t_sk = time.perf_counter() - t0
    gap = float(np.abs(ridge.predict(F_test) - pred).max())
    print(
        f"scikit-learn Ridge on the in-memory states (same units and lambda, one fit, no CV): test NRMSE {err_sk:.4f}, "
        f"{t_sk:.2f} s, max |prediction difference| {gap:.2e}"
    )
    return {"nrmse": err, "nrmse_sklearn": err_sk, "units": model.n_features_selected_, "gap": gap}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--small", action="store_true")
    main(ap.parse_args().small)
