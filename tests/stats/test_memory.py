"""The memory check before the pass names the size of X'Y when there are many targets."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

import streamridge as sr
from streamridge.errors import InputError
from streamridge.stats import memory


def test_many_targets_name_the_size_of_xy(monkeypatch):
    """100,000 targets x 1,024 features x 5 folds: X'Y alone is 4.1 GB; refused with that figure and the fix."""
    monkeypatch.setattr(memory, "available_memory", lambda: 6 * 10**9)
    with pytest.raises(InputError) as info:
        memory.check_stats_memory(5, 1, 1024, 100_000, 1)
    assert str(info.value) == (
        "the statistics of 5 folds x 1024 features x 100000 targets take 4.1 GB per copy (X'Y alone: 5 x 1024 x "
        "100000 = 4.1 GB) and a pass over 1 chunk(s) holds at least 3 copies (12.4 GB), more than the 6.0 GB of "
        "memory available; use fewer features or folds, or fit the targets in groups of columns (each is fitted "
        "alone with alpha_per_target)"
    )
    monkeypatch.setattr(memory, "available_memory", lambda: 13 * 10**9)
    memory.check_stats_memory(5, 1, 1024, 100_000, 1)


def test_a_fit_with_too_many_targets_is_refused_before_the_pass(rng, monkeypatch):
    monkeypatch.setattr(memory, "available_memory", lambda: 10**6)
    X, Y = rng.standard_normal((100, 20)), rng.standard_normal((100, 500))
    rows = []
    with pytest.raises(InputError, match=r"\(X'Y alone: 5 x 20 x 500 = 0\.4 MB\)"):
        sr.StreamRidgeCV(progress=rows.append).fit(da.from_array(X, chunks=50), da.from_array(Y, chunks=50))
    assert rows == []
    assert np.isfinite(sr.StreamRidgeCV(alphas=[1.0]).fit(X[:, :2], Y[:, :2]).coef_).all()
