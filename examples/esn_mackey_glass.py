"""Echo state network: one-step prediction of the Mackey-Glass chaotic series (tau = 17).

Several segments of the series (each a group) are read out by leave-one-segment-out CV, with the
number of reservoir units chosen by prefixes; the input is x(t), the target x(t + 1).

Run: ``python examples/esn_mackey_glass.py`` (``--small`` for a quick check).
"""

from __future__ import annotations

import argparse

import numpy as np

import streamridge as sr
from streamridge.cli.demo import nrmse
from streamridge.features import EchoStateNetwork


def mackey_glass(n: int, *, tau: int = 17, dt: float = 0.1, sample: int = 10, seed: int = 0) -> np.ndarray:
    """x(t) of dx/dt = 0.2 x(t - tau) / (1 + x(t - tau)^10) - 0.1 x(t), Euler steps of dt, every ``sample``-th kept."""
    rng = np.random.default_rng(seed)
    lag = int(tau / dt)
    x = np.full(lag + 1 + n * sample, 1.2) + 0.01 * rng.standard_normal(lag + 1 + n * sample)
    for t in range(lag, len(x) - 1):
        x[t + 1] = x[t] + dt * (0.2 * x[t - lag] / (1 + x[t - lag] ** 10) - 0.1 * x[t])
    return x[lag + 1 :: sample][:n]


def main(small: bool = False) -> dict[str, float]:
    n_seg, seg, units, washout = (4, 500, 60, 50) if small else (10, 2000, 300, 100)
    x = mackey_glass(n_seg * seg + seg + 1, seed=3)
    x = (x - x.mean()) / x.std()
    u, y = x[:-1, None], x[1:]
    train = slice(0, n_seg * seg)
    g = np.repeat(np.arange(n_seg), seg)
    model = sr.StreamRidgeCV(
        cv="groups",
        alphas=np.logspace(-10, 1, 23),
        chunk_rows=seg // 2,
        features=EchoStateNetwork(
            units, spectral_radius=0.9, input_scaling=0.5, bias_scaling=0.2, washout=washout, seed=0
        ),
        feature_prefixes=[units // 4, units // 2, units],
    ).fit(u[train], y[train], groups=g)
    pred = model.predict(u[n_seg * seg :])
    err = nrmse(y[n_seg * seg :][washout:], pred[washout:])
    print(f"Mackey-Glass, {n_seg} segments x {seg} steps, ESN {units} units")
    print(
        "prefix CV error: "
        + ", ".join(f"{n}: {e:.4g}" for n, e in zip(model.prefix_sizes_, model.prefix_errors_))
    )
    print(
        f"chosen {model.n_features_selected_} units, lambda {model.alpha_:.3g}; one-step test NRMSE {err:.4f}"
    )
    return {"nrmse": err, "units": model.n_features_selected_}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--small", action="store_true")
    main(ap.parse_args().small)
