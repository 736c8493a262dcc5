"""Helpers shared by the scale, distributed and resume tests."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from streamridge.datapass.spec import PassSpec
from streamridge.folds.schemes import FoldScheme
from streamridge.sources import write_zarr
from streamridge.stats.foldstats import FoldStats

ARRAYS = ("weight", "mean_x", "mean_y", "sxx", "sxy", "syy")


def assert_stats_close(a: FoldStats, b: FoldStats, rtol: float = 1e-12) -> None:
    """Counts equal exactly; every float array equal to ``rtol`` relative to its largest entry."""
    np.testing.assert_array_equal(a.count, b.count)
    for name in ARRAYS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.shape == y.shape, name
        scale = max(float(np.abs(y).max()), 1e-300)
        err = float(np.abs(x - y).max()) / scale
        assert err <= rtol, f"{name}: relative difference {err:.3g} > {rtol:g}"


def regression_meta(scheme: FoldScheme, n_features: int, n_targets: int = 1) -> dict[str, Any]:
    """The metadata a regression fit attaches to its statistics (what fit_stats reads)."""
    return {
        "scheme": scheme.to_dict(),
        "classes": None,
        "n_features": n_features,
        "n_targets": n_targets,
        "task": "regression",
        "feature_names": None,
        "y_1d": n_targets == 1,
    }


def regression_spec(kind: str = "hash", n_folds: int = 5, seed: int = 0) -> PassSpec:
    """Pass options of a single-target regression."""
    return PassSpec(FoldScheme(kind, n_folds, seed=seed), None, 1)


def make_data(
    rng: np.random.Generator, M: int, N: int, *, offset: float = 3.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """X (float32, offset), y, group ids of a linear problem."""
    X = (rng.standard_normal((M, N)) + offset).astype(np.float32)
    y = X.astype(np.float64) @ rng.standard_normal(N) + rng.standard_normal(M)
    groups = rng.integers(0, 40, M)
    return X, y, groups


def make_store(
    path: Any, rng: np.random.Generator, M: int, N: int, *, chunk_rows: int
) -> tuple[str, np.ndarray, np.ndarray, np.ndarray]:
    """A zarr store on disk with X, y and groups; returns the path and the arrays."""
    X, y, groups = make_data(rng, M, N)
    return write_zarr(path, X, y, groups, chunk_rows=chunk_rows), X, y, groups


def damage_chunk(store: str, how: str = "garbage") -> Path:
    """Overwrite stored chunk 3 of X (rows 1500-1999 at 500 rows per chunk) with random bytes or half of itself."""
    chunk = Path(store) / "X" / "c" / "3" / "0"
    data = chunk.read_bytes()
    chunk.write_bytes(os.urandom(len(data)) if how == "garbage" else data[: len(data) // 2])
    return chunk


def slow_copy(block: np.ndarray, delay: float = 0.05) -> np.ndarray:
    """Identity that sleeps (a slow storage read, for tests that interrupt a pass)."""
    time.sleep(delay)
    return block.copy()


def gil_gap(fn: Any) -> tuple[float, float]:
    """The longest stall of a Python thread stamping the clock while ``fn()`` runs, and ``fn``'s duration.

    A call that holds the GIL stalls the stamping thread for about as long as
    the call; one that releases it leaves gaps of a switch interval or so.
    """
    import threading
    import time

    stop, gap = threading.Event(), [0.0]

    def stamps() -> None:
        last = time.perf_counter()
        while not stop.is_set():
            now = time.perf_counter()
            gap[0] = max(gap[0], now - last)
            last = now

    th = threading.Thread(target=stamps)
    th.start()
    time.sleep(0.01)
    t = time.perf_counter()
    fn()
    call = time.perf_counter() - t
    stop.set()
    th.join()
    return gap[0], call
