"""Golden master of the pass: statistics and metric scores bit for bit those recorded, on many layouts.

Each case runs the public API (``compute_stats``, ``fit(scoring=...)``) over zarr, HDF5 (gzip),
``.npy`` and in-memory data, float32 and float64, regression and three classes with weights, a
stateless map and a stateful map over few long and many short series, on the sync, threads and
processes schedulers, and compares a digest of every array of the result with the one recorded
in :data:`GOLDEN` (``python -m tests.datapass.test_pass_golden`` prints this checkout's).
The digests hold for the arithmetic of the machine that recorded them: where a one-partition
reference (the kernel alone, no driver) gives other bits, this machine's BLAS rounds otherwise
and the cases are skipped.  ``scripts/check_pass_bits.py`` compares two checkouts the same way.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

STATS = ("weight", "count", "mean_x", "mean_y", "sxx", "sxy", "syy")

#: digests of the cases (and of the one-partition reference, "canary") on the machine that recorded them
GOLDEN = {
    "canary": "905c0fa116397e7f",
    "stats/zarr32-default/sync": "393caf96edf4ecda",
    "stats/zarr32-default/threads": "393caf96edf4ecda",
    "stats/zarr32-default/processes": "393caf96edf4ecda",
    "stats/zarr32-p700/sync": "3fbeac45c106fa22",
    "stats/zarr32-p700/threads": "3fbeac45c106fa22",
    "stats/zarr32-p700/processes": "3fbeac45c106fa22",
    "stats/zarr64-classes/sync": "dd53842c77a0c235",
    "stats/zarr64-classes/threads": "dd53842c77a0c235",
    "stats/zarr64-classes/processes": "dd53842c77a0c235",
    "stats/hdf5-gzip/sync": "3fbeac45c106fa22",
    "stats/hdf5-gzip/threads": "3fbeac45c106fa22",
    "stats/hdf5-gzip/processes": "3fbeac45c106fa22",
    "stats/npy/sync": "761a672e1a4c2cf9",
    "stats/npy/threads": "761a672e1a4c2cf9",
    "stats/npy/processes": "761a672e1a4c2cf9",
    "stats/memory-classes/sync": "027bcfedeab3f3a2",
    "stats/memory-classes/threads": "027bcfedeab3f3a2",
    "stats/memory-classes/processes": "027bcfedeab3f3a2",
    "stats/stateless-map/sync": "649c165db058c4ca",
    "stats/stateless-map/threads": "649c165db058c4ca",
    "stats/stateless-map/processes": "649c165db058c4ca",
    # the reservoir's states from its compiled step loop (STREAMRIDGE_STEP_LOOP=numpy gives other bits)
    "stats/esn-few-series/sync": "43e0b319f1945b9e",
    "stats/esn-few-series/threads": "43e0b319f1945b9e",
    "stats/esn-few-series/processes": "43e0b319f1945b9e",
    "stats/esn-many-series/sync": "212e17b4f4c93be4",
    "stats/esn-many-series/threads": "212e17b4f4c93be4",
    "stats/esn-many-series/processes": "212e17b4f4c93be4",
    "metric/zarr32-ev": "0840a2d0410ec5c1",
    "metric/esn": "8d91ad9c450714a4",
}


def digest(arrays: list[np.ndarray]) -> str:
    """SHA-256 (16 hex digits) of the arrays' shapes, dtypes and bytes."""
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.shape}{a.dtype}".encode() + a.tobytes())
    return h.hexdigest()[:16]


def stats_digest(stats: Any) -> str:
    """Digest of every array of a FoldStats."""
    return digest([getattr(stats, name) for name in STATS])


def write_data(root: Path) -> dict[str, Any]:
    """The data sets of the cases (the same bytes on every run)."""
    from streamridge.sources import write_hdf5, write_zarr

    rng = np.random.default_rng(20240612)
    M, N = 2000, 6
    X = rng.standard_normal((M, N)) + 2.0
    y = X @ rng.standard_normal(N) + rng.standard_normal(M)
    labels = np.digitize(y, np.quantile(y, [0.33, 0.66]))
    w = rng.uniform(0.5, 2.0, M)
    g = rng.integers(0, 9, M)
    u = rng.standard_normal((M, 2))
    target = np.sin(np.cumsum(u[:, 0]) * 0.1) + 0.1 * rng.standard_normal(M)
    paths = {
        k: str(root / v)
        for k, v in (("zarr", "x.zarr"), ("zarr64", "x64.zarr"), ("h5", "x.h5"), ("series", "s.zarr"))
    }
    write_zarr(paths["zarr"], X.astype(np.float32), y, g, chunk_rows=250)
    write_zarr(paths["zarr64"], X, labels, g, w, chunk_rows=200)
    write_hdf5(paths["h5"], X.astype(np.float32), y, g, chunk_rows=250, compression="gzip")
    write_zarr(paths["series"], u, target, np.repeat(np.arange(40), M // 40), chunk_rows=125)
    (root / "npy").mkdir()
    np.save(root / "npy" / "X.npy", X)
    np.save(root / "npy" / "y.npy", y)
    paths["npy"] = str(root / "npy")
    return {
        "paths": paths,
        "X": X,
        "y": y,
        "labels": labels,
        "w": w,
        "u": u,
        "target": target,
        "few": np.repeat(np.arange(3), M // 3 + 1)[:M],
    }


def cases(d: dict[str, Any]) -> dict[str, Callable[[], str]]:
    """Every case by name: a callable returning the digest of its result."""
    import streamridge as sr
    from streamridge.features import EchoStateNetwork, RandomHidden
    from streamridge.sources import open_source

    p = d["paths"]
    esn = EchoStateNetwork(12, washout=5, seed=2)
    stats: dict[str, Callable[[str], Any]] = {
        "zarr32-default": lambda s: sr.StreamRidgeCV(cv=5, scheduler=s).compute_stats(open_source(p["zarr"])),
        "zarr32-p700": lambda s: sr.StreamRidgeCV(cv=5, chunk_rows=700, scheduler=s).compute_stats(
            open_source(p["zarr"])
        ),
        "zarr64-classes": lambda s: sr.StreamRidgeClassifierCV(
            cv=4, chunk_rows=400, scheduler=s
        ).compute_stats(open_source(p["zarr64"], groups="groups", sample_weight="sample_weight")),
        "hdf5-gzip": lambda s: sr.StreamRidgeCV(cv=5, chunk_rows=500, scheduler=s).compute_stats(
            open_source(p["h5"])
        ),
        "npy": lambda s: sr.StreamRidgeCV(cv=3, chunk_rows=300, scheduler=s).compute_stats(
            open_source(p["npy"])
        ),
        "memory-classes": lambda s: sr.StreamRidgeClassifierCV(
            cv=3, chunk_rows=333, scheduler=s
        ).compute_stats(d["X"], d["labels"], sample_weight=d["w"]),
        "stateless-map": lambda s: sr.StreamRidgeCV(
            cv=4, chunk_rows=500, features=RandomHidden(12, seed=1), scheduler=s
        ).compute_stats(open_source(p["zarr"])),
        "esn-few-series": lambda s: sr.StreamRidgeCV(
            cv="groups", chunk_rows=250, features=esn, scheduler=s
        ).compute_stats(d["u"], d["target"], groups=d["few"]),
        "esn-many-series": lambda s: sr.StreamRidgeCV(
            cv="groups", chunk_rows=100, features=esn, scheduler=s
        ).compute_stats(open_source(p["series"], groups="groups")),
    }
    out: dict[str, Callable[[], str]] = {}
    for name, make in stats.items():
        for sched in ("sync", "threads", "processes"):
            out[f"stats/{name}/{sched}"] = lambda make=make, sched=sched: stats_digest(make(sched))
    out["metric/zarr32-ev"] = lambda: digest(
        [
            sr.StreamRidgeCV(cv=5, chunk_rows=500, scoring="explained_variance")
            .fit(open_source(p["zarr"]))
            .cv_scores_
        ]
    )
    out["metric/esn"] = lambda: digest(
        [
            sr.StreamRidgeCV(cv="groups", chunk_rows=100, scoring="explained_variance", features=esn)
            .fit(open_source(p["series"], groups="groups"))
            .cv_scores_
        ]
    )
    return out


def canary(d: dict[str, Any]) -> str:
    """The statistics of one partition (the kernel alone): this machine's arithmetic."""
    import streamridge as sr

    return stats_digest(sr.StreamRidgeCV(cv=5).compute_stats(d["X"], d["y"]))


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = write_data(tmp_path_factory.mktemp("golden"))
    if canary(d) != GOLDEN["canary"]:
        pytest.skip("this machine's BLAS rounds otherwise than the one that recorded the digests")
    return d


CASES = sorted(k for k in GOLDEN if k != "canary")


@pytest.mark.parametrize(
    "case", [pytest.param(c, marks=pytest.mark.slow) if c.endswith("processes") else c for c in CASES]
)
def test_pass_is_bit_for_bit_the_recorded_one(data: dict[str, Any], case: str) -> None:
    assert cases(data)[case]() == GOLDEN[case]


def test_every_case_is_recorded() -> None:
    assert set(CASES) == set(cases(write_data_stub()))


def write_data_stub() -> dict[str, Any]:
    """Data of no rows: the cases' names only."""
    return {
        "paths": dict.fromkeys(("zarr", "zarr64", "h5", "series", "npy"), ""),
        **dict.fromkeys(("X", "y", "labels", "w", "u", "target", "few"), None),
    }


if __name__ == "__main__":  # print the digests of this checkout
    with tempfile.TemporaryDirectory() as root:
        d = write_data(Path(root))
        print(f'    "canary": "{canary(d)}",')
        for name, run in cases(d).items():
            print(f'    "{name}": "{run()}",', flush=True)
