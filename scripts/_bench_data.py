"""Synthetic data sets for the scale benchmarks, written chunk by chunk (never held in memory).

Rows are ``x ~ N(0, 1)`` (float32) and ``y = x @ w + 0.5 * noise``; chunk ``i`` is
drawn from ``default_rng((seed, i))`` so any format holds the same rows.

Usage::

    python scripts/_bench_data.py STORE.zarr --rows 20000000 --features 200
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from collections.abc import Iterator

import numpy as np


def chunks(
    rows: int, features: int, chunk_rows: int, seed: int
) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """Yield ``(start, X, y)`` of every stored chunk."""
    w = np.random.default_rng(seed).standard_normal(features) / np.sqrt(features)
    for i, start in enumerate(range(0, rows, chunk_rows)):
        m = min(chunk_rows, rows - start)
        rng = np.random.default_rng((seed, i))
        X = rng.standard_normal((m, features), dtype=np.float32)
        y = (X @ w.astype(np.float32) + 0.5 * rng.standard_normal(m, dtype=np.float32)).astype(np.float32)
        yield start, X, y


def default_chunk_rows(features: int) -> int:
    """About 4 MiB of float32 X per stored chunk (the write_zarr default)."""
    return max(1, (4 * 2**20) // (4 * features))


def write(
    path: str, rows: int, features: int, *, fmt: str = "zarr", chunk_rows: int | None = None, seed: int = 0
) -> str:
    """Write a data set of ``fmt`` ("zarr", "hdf5" or "npy") at ``path``; return the path."""
    cr = chunk_rows or default_chunk_rows(features)
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.unlink(path)
    if fmt == "zarr":
        import zarr

        root = zarr.open_group(path, mode="w", zarr_format=3)
        X = root.create_array("X", shape=(rows, features), dtype="float32", chunks=(cr, features))
        Y = root.create_array("y", shape=(rows,), dtype="float32", chunks=(cr,))
        for start, x, y in chunks(rows, features, cr, seed):
            X[start : start + len(x)] = x
            Y[start : start + len(x)] = y
    elif fmt == "hdf5":
        import h5py

        with h5py.File(path, "w") as f:
            X = f.create_dataset("X", shape=(rows, features), dtype="float32", chunks=(cr, features))
            Y = f.create_dataset("y", shape=(rows,), dtype="float32", chunks=(cr,))
            for start, x, y in chunks(rows, features, cr, seed):
                X[start : start + len(x)] = x
                Y[start : start + len(x)] = y
    elif fmt == "npy":
        os.makedirs(path)
        X = np.lib.format.open_memmap(
            os.path.join(path, "X.npy"), mode="w+", dtype=np.float32, shape=(rows, features)
        )
        Y = np.lib.format.open_memmap(os.path.join(path, "y.npy"), mode="w+", dtype=np.float32, shape=(rows,))
        for start, x, y in chunks(rows, features, cr, seed):
            X[start : start + len(x)] = x
            Y[start : start + len(x)] = y
        X.flush()
        Y.flush()
        del X, Y
    else:
        raise ValueError(f"unknown format {fmt!r}")
    os.sync()  # the data's dirty pages written now, not ~30 s later while a pass is timed (bench_layouts.quiesce)
    return path


def du(path: str) -> int:
    """Bytes on disk under ``path``."""
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("path")
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--features", type=int, default=200)
    p.add_argument("--format", default="zarr", choices=["zarr", "hdf5", "npy"])
    p.add_argument("--chunk-rows", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    t = time.perf_counter()
    write(a.path, a.rows, a.features, fmt=a.format, chunk_rows=a.chunk_rows, seed=a.seed)
    print(
        f"wrote {a.path}: {a.rows} x {a.features} float32 ({a.format}), {du(a.path) / 1e9:.2f} GB in {time.perf_counter() - t:.0f} s"
    )


if __name__ == "__main__":
    main()
