"""Predictions and R² split by band against himalaya's ``predict(split=True)`` and ``r2_score_split``."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import Ridge
from sklearn.metrics import r2_score

from streamridge.model_selection.band_split import (
    r2_score_split,
    r2_score_split_from_moments,
    split_predictions,
)

BANDS = [np.array([0, 4, 5]), np.array([1, 2]), np.array([3, 6, 7, 8])]  # not consecutive


def data(rng, M=90, T=4):
    X = rng.standard_normal((M, 9)) + 0.5
    Y = X @ rng.standard_normal((9, T)) + rng.standard_normal((M, T))
    return X, Y


def test_split_sums_to_the_prediction(rng):
    """With an intercept the parts sum to the prediction less the intercept, whichever bands."""
    X, Y = data(rng)
    m = Ridge(alpha=3.0).fit(X, Y)
    parts = split_predictions(X, m.coef_, BANDS)
    assert parts.shape == (3, 90, 4)
    np.testing.assert_allclose(parts.sum(axis=0) + m.intercept_, m.predict(X), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(parts[1], X[:, [1, 2]] @ m.coef_[:, [1, 2]].T, rtol=1e-14)
    one = split_predictions(X, m.coef_[0], BANDS)
    assert one.shape == (3, 90)
    np.testing.assert_allclose(one, parts[:, :, 0], rtol=1e-12)


def test_split_equals_himalaya_predict_split(rng):
    himalaya_ridge = pytest.importorskip("himalaya.ridge")
    X, Y = data(rng)
    groups = np.empty(9, dtype=int)
    for b, cols in enumerate(BANDS):
        groups[cols] = b
    weights = np.array([[1 / 3, 1 / 3, 1 / 3], [0.7, 0.2, 0.1]])
    model = himalaya_ridge.BandedRidgeCV(
        groups=groups,
        fit_intercept=False,
        solver_params=dict(n_iter=weights, alphas=np.array([0.1, 10.0]), progress_bar=False),
    ).fit(X, Y)
    coef = np.empty((4, 9))
    coef[:, np.concatenate(BANDS)] = np.asarray(
        model.coef_
    ).T  # himalaya's rows follow the bands' concatenation
    ours = split_predictions(X, coef, BANDS)
    np.testing.assert_allclose(ours, np.asarray(model.predict(X, split=True)), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("include_correlation", [True, False])
def test_r2_split_equals_himalaya(rng, include_correlation):
    scoring = pytest.importorskip("himalaya.scoring")
    X, Y = data(rng)
    Y = Y - Y.mean(axis=0)
    parts = split_predictions(X, Ridge(alpha=1.0, fit_intercept=False).fit(X, Y).coef_, BANDS)
    ours = r2_score_split(Y, parts, include_correlation=include_correlation)
    ref = np.asarray(scoring.r2_score_split(Y, parts, include_correlation=include_correlation))
    np.testing.assert_allclose(ours, ref, rtol=1e-12)
    np.testing.assert_allclose(
        r2_score_split(Y, parts[1]), np.asarray(scoring.r2_score_split(Y, parts[1])), rtol=1e-12
    )


def test_r2_split_sums_to_r2_of_zero_mean_targets(rng):
    """y of zero mean: the parts sum to scikit-learn's R² of the summed prediction; otherwise they do not."""
    X, Y = data(rng)
    Yc = Y - Y.mean(axis=0)
    coef = Ridge(alpha=1.0, fit_intercept=False).fit(X, Yc).coef_
    parts = split_predictions(X, coef, BANDS)
    np.testing.assert_allclose(
        r2_score_split(Yc, parts).sum(axis=0),
        r2_score(Yc, parts.sum(axis=0), multioutput="raw_values"),
        rtol=1e-12,
    )
    shifted = r2_score_split(Yc + 5.0, parts).sum(axis=0)
    assert np.all(np.abs(shifted - r2_score(Yc + 5.0, parts.sum(axis=0), multioutput="raw_values")) > 1e-2)


@pytest.mark.parametrize("include_correlation", [True, False])
def test_r2_split_from_moments_equals_rows(rng, include_correlation):
    X, Y = data(rng)
    coef = Ridge(alpha=1.0).fit(X, Y).coef_
    rows = r2_score_split(Y, split_predictions(X, coef, BANDS), include_correlation=include_correlation)
    moments = r2_score_split_from_moments(
        X.T @ X, X.T @ Y, np.einsum("it,it->t", Y, Y), coef, BANDS, include_correlation=include_correlation
    )
    np.testing.assert_allclose(moments, rows, rtol=1e-10)
