"""Shared fixtures and reference implementations for the test suite."""

from __future__ import annotations

import types
from collections.abc import Iterator
from pathlib import Path

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


@pytest.fixture(scope="session")
def http_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A directory served over HTTP on 127.0.0.1 (``scripts/serve_http.py``: byte ranges, keep-alive) and its base URL.

    ``python -m http.server`` ignores ``Range`` headers, which object stores and web servers answer.
    """
    import importlib.util

    script = Path(__file__).resolve().parent.parent / "scripts" / "serve_http.py"
    spec = importlib.util.spec_from_file_location("serve_http", script)
    assert spec is not None and spec.loader is not None
    serve_http = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(serve_http)
    root = tmp_path_factory.mktemp("served")
    with serve_http.served(str(root), timeout=10) as url:
        yield root, url
