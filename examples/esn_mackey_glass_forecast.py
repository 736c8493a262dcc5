"""Echo state network: closed-loop forecasting of the Mackey-Glass series (tau = 17), reservoirpy's tutorial task.

As reservoirpy's tutorial sets it up ("General introduction to reservoir computing", generative mode):
the series of ``reservoirpy.datasets.mackey_glass`` (tau = 17, one sample per time unit, its
integration step reproduced here), rescaled to [-1, 1]; a reservoir of 500 units, leak rate 0.3,
10 % of the recurrent weights non-zero, input scaling 1; a read-out trained one step ahead
(u(t) -> u(t + 1)); 100 steps of the test series as warm-up, then the model runs on its own
predictions.  Unlike the tutorial (2,000 training steps, ridge fixed at 1e-4, one spectral radius,
input weights 20 % dense), the training series here is long (50,000 steps streamed from a zarr
store, cut into 20 segments of 2,500 that each start the reservoir from rest, washout 100), lambda
is chosen by leave-one-segment-out CV from the one pass of each candidate (by the smallest CV error,
and by the one-standard-error rule from the same statistics), and the spectral radius by a loop over
three candidates (the smallest one-step CV error).  Each candidate's closed-loop figures are printed
beside its one-step CV error: the two need not agree.

Reported: the NRMSE per horizon (RMSE over the forecasts / standard deviation of the test series) of
24 forecasts of 600 steps started every 100 steps of the test series (teacher-forced up to each
start), the valid prediction time (the first step at which |forecast - truth| exceeds 0.4 standard
deviations), and a figure of one forecast against the truth.

Run: ``python examples/esn_mackey_glass_forecast.py [--figure PATH]`` (``--small`` for a quick check).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from typing import Any

import numpy as np

import streamridge as sr
from streamridge import forecast, multistep_forecasts
from streamridge.features import EchoStateNetwork
from streamridge.sources import open_source, write_zarr

VALID_ERROR = 0.4
"""A forecast is valid while |forecast - truth| / std(series) stays at or below this."""


def mackey_glass(n: int, *, tau: int = 17, seed: int = 0) -> np.ndarray:
    """reservoirpy's ``mackey_glass(n, tau)``: a = 0.2, b = 0.1, n = 10, x0 = 1.2, h = 1 and its RK4 step;
    the history before the first step is x0 + U(-0.1, 0.1) drawn from ``seed``."""
    a, b, p, x0 = 0.2, 0.1, 10, 1.2
    x = np.empty(tau + n)
    x[:tau] = x0 + 0.2 * (np.random.default_rng(seed).random(tau) - 0.5)
    xt = x0
    for i in range(tau, tau + n):
        x[i] = xt
        xtau = x[i - tau]
        k1 = -b * xt + a * xtau / (1 + xtau**p)
        k2 = 2 * k1 - b * k1
        k3 = 2 * k1 - b * k2
        k4 = k1 - b * k3
        xt = xt + (k1 + k2 + k3 + k4) / 6
    return x[tau:]


def valid_steps(errors: np.ndarray, scale: float) -> int:
    """Steps before the first normalized error above VALID_ERROR (all of them when none is)."""
    bad = np.flatnonzero(np.abs(errors) / scale > VALID_ERROR)
    return int(bad[0]) if bad.size else int(errors.size)


ALPHAS = np.logspace(-12, -2, 21)


def fit_candidates(store: str, radii: list[float], units: int, washout: int) -> list[sr.StreamRidgeCV]:
    """One pass per candidate reservoir over the store (the segments are its groups; lambda by
    leave-one-segment-out CV)."""
    source = open_source(store, groups="groups")
    models = []
    for radius in radii:
        esn = EchoStateNetwork(units, spectral_radius=radius, leak_rate=0.3, input_scaling=1.0, sparsity=0.9,
                               washout=washout, seed=1234)  # fmt: skip
        models.append(sr.StreamRidgeCV(alphas=ALPHAS, cv="groups", features=esn).fit(source))
    return models


def evaluate(
    model: sr.StreamRidgeCV, test: np.ndarray, horizon: int, warm: int, every: int
) -> tuple[Any, list[int]]:
    """Teacher-forced multi-step forecasts over the test series and each one's valid prediction time."""
    ev = multistep_forecasts(model, test, horizon=horizon, warmup=warm, every=every)
    return ev, [valid_steps(p[:, 0] - t[:, 0], ev.scale[0]) for p, t in zip(ev.predictions, ev.truth)]


def save_figure(path: str, warm: np.ndarray, pred: np.ndarray, truth: np.ndarray, steps: int) -> str:
    """Forecast against truth after the warm-up, and the absolute error, as a PNG; where, or why not."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "no figure: matplotlib is not installed"
    t_warm, t = np.arange(-len(warm), 0), np.arange(len(pred))
    fig, ax = plt.subplots(figsize=(11, 4))
    ax.plot(t_warm, warm, color="0.6", label="warm-up (true inputs)")
    ax.plot(t, truth, "--", color="k", lw=1.2, label="truth")
    ax.plot(t, pred, color="C1", label="closed-loop forecast")
    ax.plot(t, np.abs(pred - truth), color="C3", lw=0.8, label="|error|")
    ax.axvline(steps, color="C2", lw=0.8, label=f"valid for {steps} steps")
    ax.set_xlabel("steps after the warm-up")
    ax.set_title("Mackey-Glass (tau = 17): echo state network run on its own predictions")
    ax.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"figure: {path}"


def main(small: bool = False, figure: str | None = None) -> dict[str, float]:
    n_seg, seg, n_test, units, washout = (6, 800, 800, 100, 50) if small else (20, 2500, 3000, 500, 100)
    horizon, every, warm = (200, 100, 100) if small else (600, 100, 100)
    radii = [0.9, 1.25] if small else [0.9, 0.99, 1.25]
    x = mackey_glass(n_seg * seg + n_test + 1)
    lo, hi = x[: n_seg * seg + 1].min(), x[: n_seg * seg + 1].max()
    x = 2 * (x - lo) / (hi - lo) - 1  # the training part spans [-1, 1]
    work = tempfile.mkdtemp(prefix="esn-mackey-glass-")
    store = write_zarr(os.path.join(work, "mg.zarr"), x[: n_seg * seg, None], x[1 : n_seg * seg + 1],
                       np.repeat(np.arange(n_seg), seg), chunk_rows=seg)  # fmt: skip
    test = x[n_seg * seg :][:n_test]
    t0 = time.perf_counter()
    models = fit_candidates(store, radii, units, washout)
    print(f"Mackey-Glass tau=17, {n_seg} segments x {seg} steps streamed from a zarr store ({n_seg * seg:,} rows), "
          f"ESN {units} units; {len(radii)} candidate reservoirs, one pass each: {time.perf_counter() - t0:.1f} s")  # fmt: skip
    print(f"spectral radius  lambda    one-step CV MSE  NRMSE@100  NRMSE@{horizon}  median valid steps")
    for radius, m in zip(radii, models):
        ev, steps = evaluate(m, test, horizon, warm, every)
        mse = float(m.cv_errors_.min()) / m.stats_.n_rows
        print(f"{radius:15.2f}  {m.alpha_:8.2g}  {mse:15.3g}  {ev.nrmse()[99, 0]:9.4f}  {ev.nrmse()[-1, 0]:9.4f}"
              f"  {np.median(steps):18.0f}")  # fmt: skip
    best = int(np.argmin([m.cv_errors_.min() for m in models]))
    results: dict[str, float] = {"horizon": float(horizon)}
    for rule in ("min", "1se"):  # the same statistics: no second pass
        model = sr.StreamRidgeCV(alphas=ALPHAS, cv="groups", alpha_rule=rule).fit_stats(models[best].stats_)
        ev, steps = evaluate(model, test, horizon, warm, every)
        report(rule, radii[best], model, ev, steps, horizon)
        results.update(
            {f"nrmse_1_{rule}": float(ev.nrmse()[0, 0]), f"median_valid_{rule}": float(np.median(steps))}
        )
    pred = forecast(model, horizon, warmup=test[:warm])
    one = valid_steps(pred - test[warm : warm + horizon], float(test.std()))
    drawn = save_figure(
        figure or os.path.join(work, "forecast.png"), test[:warm], pred, test[warm : warm + horizon], one
    )
    shutil.rmtree(work)
    print(f"1-SE model, the forecast from step {warm} of the test series: valid for {one} steps; "
          + (drawn if figure else "figure drawn, not kept (give --figure PATH)"))  # fmt: skip
    return {**results, "valid_steps": float(one)}


def report(
    rule: str, radius: float, model: sr.StreamRidgeCV, ev: Any, steps: list[int], horizon: int
) -> None:
    """NRMSE per horizon and the valid prediction times of one read-out."""
    nrmse = ev.nrmse()[:, 0]
    marks = [h for h in (1, 10, 50, 100, 200, 300, 400, 500, 600) if h <= horizon]
    name = "smallest CV error" if rule == "min" else "one-standard-error rule"
    print(f"chosen: spectral radius {radius} (smallest CV error); lambda {model.alpha_:.3g} by the {name}")
    print(f"  NRMSE per horizon over {len(ev.origins)} forecasts of {horizon} steps: "
          + ", ".join(f"{h}: {nrmse[h - 1]:.4f}" for h in marks))  # fmt: skip
    print(f"  valid prediction time (|error| <= {VALID_ERROR} std): median {np.median(steps):.0f} steps, "
          f"min {min(steps)}, max {max(steps)} of {horizon}")  # fmt: skip


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", action="store_true")
    ap.add_argument(
        "--figure", default="esn_mackey_glass_forecast.png", help="where to save the figure (PNG)"
    )
    args = ap.parse_args()
    main(args.small, args.figure)
