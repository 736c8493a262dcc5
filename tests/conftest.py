"""Shared fixtures and reference implementations for the test suite."""

from __future__ import annotations

import types

import dask.array as da
import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    """A seeded generator (global seed of the suite)."""
    return np.random.default_rng(20261121)


def dask_source(X, y=None, groups=None, sample_weight=None, chunk_rows=None):
    """A minimal Source-like object of dask arrays (bypasses streamridge.sources)."""
    n = X.shape[0]
    cr = chunk_rows or n
    Xd = da.from_array(np.asarray(X), chunks=(cr, -1))
    rows = Xd.chunks[0]

    def wrap(a):
        if a is None:
            return None
        a = np.asarray(a)
        return da.from_array(a, chunks=(rows,) + ((a.shape[1],) if a.ndim == 2 else ()))

    return types.SimpleNamespace(
        X=Xd, y=wrap(y), groups=wrap(groups), sample_weight=wrap(sample_weight), feature_names=None
    )


def ill_conditioned(rng, M, N, cond_sv=1e6, offset=0.0):
    """X with singular values log-spaced from 1 to 1/cond_sv (cond(X'X) = cond_sv**2)."""
    U, _ = np.linalg.qr(rng.standard_normal((M, N)))
    V, _ = np.linalg.qr(rng.standard_normal((N, N)))
    s = np.logspace(0, -np.log10(cond_sv), N) * np.sqrt(M)
    return (U * s) @ V.T + offset
