"""An encoding model: three feature spaces with delays, many voxels, banded ridge, leave-one-run-out CV.

The shape of a voxelwise fMRI encoding model (himalaya's BandedRidgeCV tutorials):
stimulus features of three feature spaces ("motion", "semantic", "spectral") are
delayed by 0-3 samples within each run (``Delays`` inside the pass: the delayed
features are never written); every voxel is driven by its own mix of the spaces.
Banded ridge gives each feature space its own weight, chosen per voxel with
lambda by leave-one-run-out CV from the statistics of one pass (scoring by R²).
The held-out runs are predicted and their R² split by feature space
(``predict(split=True)``, ``score(split=True)``); the figure shows the per-band R²
of every voxel.

Run: ``python examples/encoding_banded.py`` (``--small`` for a quick check;
``--figure FILE`` to write the figure, which needs matplotlib).
"""

from __future__ import annotations

import argparse

import numpy as np

import streamridge as sr
from streamridge.features import Delays

SPACES = {"motion": 12, "semantic": 30, "spectral": 8}
N_DELAYS = 3


def make_runs(n_runs: int, run_length: int, n_voxels: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    """Stimulus features, voxel responses and run ids; each voxel's true share of every space."""
    rng = np.random.default_rng(seed)
    n_in = sum(SPACES.values())
    X = rng.standard_normal((n_runs * run_length, n_in))
    runs = np.repeat(np.arange(n_runs), run_length)
    share = rng.dirichlet(np.full(len(SPACES), 0.3), n_voxels)  # (voxels, spaces)
    sizes = list(SPACES.values())
    lagged = np.zeros((X.shape[0], n_in * (N_DELAYS + 1)))
    for r in range(n_runs):  # the delays restart in every run
        rows = np.flatnonzero(runs == r)
        for k in range(N_DELAYS + 1):
            lagged[rows[k:], k * n_in : (k + 1) * n_in] = X[rows[: len(rows) - k]]
    hrf = np.array([0.2, 1.0, 0.6, 0.2])  # the same response shape in every voxel
    beta = rng.standard_normal((n_in, n_voxels)) * np.sqrt(
        np.repeat(share.T, sizes, axis=0) / np.repeat(sizes, sizes)[:, None]
    )
    B = np.concatenate([h * beta for h in hrf])
    signal = lagged @ B
    Y = signal / signal.std(axis=0) + 1.2 * rng.standard_normal(signal.shape)
    return X, Y, runs, share


def band_columns(n_in: int) -> dict[str, np.ndarray]:
    """The delayed columns of every space: ``Delays`` puts lag k of input j at column k * n_in + j."""
    out, start = {}, 0
    for name, size in SPACES.items():
        cols = np.arange(start, start + size)
        out[name] = np.concatenate([k * n_in + cols for k in range(N_DELAYS + 1)])
        start += size
    return out


def plot(r2: np.ndarray, names: list[str], path: str) -> None:
    """Per-band R² of every voxel, stacked: voxels grouped by the band of the largest R², sorted by the total."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    order = np.lexsort((r2.sum(axis=0), r2.argmax(axis=0)))
    fig, ax = plt.subplots(figsize=(8, 4))
    bottom = np.zeros(order.size)
    for b, name in enumerate(names):
        part = np.clip(r2[b, order], 0, None)
        ax.bar(np.arange(order.size), part, bottom=bottom, width=1.0, label=name)
        bottom += part
    ax.set_xlabel("voxel (grouped by the band of the largest R², sorted by the model's R² on held-out runs)")
    ax.set_ylabel("R² split by feature space")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"figure: {path}")


def main(small: bool = False, figure: str | None = None) -> dict[str, float]:
    n_runs, run_length, n_voxels = (6, 150, 200) if small else (12, 400, 5000)
    X, Y, runs, share = make_runs(n_runs, run_length, n_voxels)
    test = runs >= n_runs - 2  # two runs held out
    n_in = X.shape[1]
    bands = band_columns(n_in)
    print(
        f"{n_runs - 2} training runs x {run_length} samples, {n_voxels} voxels; "
        + ", ".join(f"{k} {v}" for k, v in SPACES.items())
        + f" features, delays 0-{N_DELAYS}; leave-one-run-out CV"
    )
    model = sr.StreamRidgeCV(
        np.logspace(-1, 5, 20), cv="groups", features=Delays(N_DELAYS), bands=bands, band_weights=20,
        scoring="r2", alpha_per_target=True,
    )  # fmt: skip
    model.fit(X[~test], Y[~test], groups=runs[~test])
    t = model.timings_
    print(f"one pass {t['pass_s']:.2f} s, band weights and lambda per voxel {t['solve_s']:.2f} s")
    split = model.score(X[test], Y[test], groups=runs[test], split=True)  # (bands, voxels)
    pred = model.predict(X[test], groups=runs[test])
    sst = ((Y[test] - Y[test].mean(axis=0)) ** 2).sum(axis=0)
    total_r2 = 1 - ((Y[test] - pred) ** 2).sum(axis=0) / sst
    offset = (
        test.sum() * (pred.mean(axis=0) - Y[test].mean(axis=0)) ** 2 / sst
    )  # the mean the bands do not explain
    gap = float(np.abs(split.sum(axis=0) - offset - total_r2).max())
    names = model.band_names_
    chosen = np.atleast_2d(model.band_weights_)
    good = total_r2 > 0.1
    lead_true, lead_r2 = share.argmax(axis=1), split.argmax(axis=0)
    agree = float(np.mean(lead_true[good] == lead_r2[good]))
    for b, name in enumerate(names):
        print(
            f"{name:<9} mean weight {chosen[:, b].mean():.2f}   held-out R² mean {split[b].mean():.3f}   "
            f"CV R² mean {model.band_cv_r2_[b].mean():.3f}   leads {int(np.sum(lead_r2[good] == b))} voxels"
        )
    print(
        f"held-out R² of the model: mean {total_r2.mean():.3f}; the bands' R² sum to it plus the offset of the "
        f"prediction's mean (mean {offset.mean():.4f}) to {gap:.1e}; the band of the largest R² is the true "
        f"leading space for {agree:.0%} of the {int(good.sum())} voxels with R² > 0.1"
    )
    if figure:
        plot(split, names, figure)
    return {
        "r2": float(total_r2.mean()),
        "agree": agree,
        "sum_gap": gap,
    }


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--figure", metavar="FILE", help="write the per-band R² figure here (PNG)")
    args = ap.parse_args()
    main(args.small, args.figure)
