"""partial_fit with hashed groups on batches that hold a single series (issue 9, item 4, first part)."""

from __future__ import annotations

import numpy as np
import pytest

import streamridge as sr
from streamridge.errors import FoldError


def test_one_series_per_batch(rng):
    """Used to fail on every batch ("got 1 distinct groups but cv=3 needs at least 3")."""
    X = rng.standard_normal((600, 3))
    y = X @ [1.0, -2.0, 0.5] + 0.1 * rng.standard_normal(600)
    g = np.repeat(np.arange(6), 100)
    whole = sr.StreamRidgeCV(cv=3).fit(X, y, groups=g)
    inc = sr.StreamRidgeCV(cv=3)
    ready = []
    for s in range(6):
        rows = slice(100 * s, 100 * (s + 1))
        try:
            inc.partial_fit(X[rows], y[rows], groups=g[rows])
            ready.append(s)
        except FoldError as e:  # not every fold has rows yet: the model is selected once they do
            assert "folds are still empty" in str(e)
    assert ready and ready[-1] == 5 and ready[0] >= 1
    for name in ("count", "mean_x", "sxx", "sxy"):
        np.testing.assert_allclose(getattr(inc.stats_, name), getattr(whole.stats_, name), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(inc.coef_, whole.coef_, rtol=1e-10)
    with pytest.raises(FoldError, match="distinct groups but cv=3"):  # fit still checks up front
        sr.StreamRidgeCV(cv=3).fit(X[:100], y[:100], groups=g[:100])
