"""scoring= with a stateless feature map: the metric pass maps the rows as the statistics pass does, so the
result equals transforming in memory and scoring the features."""

from __future__ import annotations

import numpy as np
import pytest

import streamridge as sr
from streamridge.features import Nystroem, RandomHidden

ALPHAS = np.logspace(-3, 3, 7)


@pytest.mark.parametrize(
    "fmap", [RandomHidden(15, seed=1, direct=True), Nystroem(12, seed=2)], ids=["rvfl", "nystroem"]
)
@pytest.mark.parametrize("scoring", ["neg_mean_absolute_error", "r2"])
def test_scoring_with_a_map_equals_transform_then_score(rng, fmap, scoring):
    X = rng.standard_normal((300, 3))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.standard_normal(300)
    mapped = sr.StreamRidgeCV(ALPHAS, cv=4, scoring=scoring, features=fmap, chunk_rows=37).fit(X, y)
    F = mapped.features_.transform(X)
    plain = sr.StreamRidgeCV(ALPHAS, cv=4, scoring=scoring, chunk_rows=37).fit(F, y)
    np.testing.assert_allclose(mapped.cv_scores_, plain.cv_scores_, rtol=1e-10, atol=1e-12)
    assert mapped.alpha_ == plain.alpha_
    assert np.ptp(np.mean(mapped.cv_scores_, axis=1)) > 1e-3  # the lambdas really score differently
    np.testing.assert_allclose(mapped.predict(X), plain.predict(F), rtol=1e-10, atol=1e-10)


def test_scoring_with_a_map_skips_nonfinite_rows_as_the_statistics_pass(rng):
    X = rng.standard_normal((200, 3))
    y = np.cos(X[:, 0]) + 0.1 * rng.standard_normal(200)
    X[[5, 77], 1] = np.nan
    kw = dict(cv=4, scoring="neg_mean_absolute_error", chunk_rows=50, skip_nonfinite=True)
    mapped = sr.StreamRidgeCV(ALPHAS, features=RandomHidden(10, seed=3), **kw).fit(X, y)
    F = mapped.features_.transform(np.nan_to_num(X))
    F[[5, 77]] = np.nan
    plain = sr.StreamRidgeCV(ALPHAS, **kw).fit(F, y)
    np.testing.assert_allclose(mapped.cv_scores_, plain.cv_scores_, rtol=1e-10, atol=1e-12)
    assert mapped.stats_.n_rows == 198
