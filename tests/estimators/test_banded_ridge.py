"""StreamRidgeCV(bands=...): the choice equals brute force over plain fits of scaled features; split predictions and R²."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from sklearn.metrics import r2_score

import streamridge as sr
from streamridge.errors import ParameterError

K = 4
ALPHAS = np.logspace(-1, 3, 5)
BANDS = [slice(0, 3), slice(3, 7), slice(7, 9)]
WEIGHTS = np.array(
    [
        [1 / 3, 1 / 3, 1 / 3],
        [1.0, 0.0, 0.0],
        [0.0, 1.0, 0.0],
        [0.0, 0.0, 1.0],
        [0.6, 0.3, 0.1],
        [0.05, 0.15, 0.8],
    ]
)


def data(rng, M=200, T=5):
    X = rng.standard_normal((M, 9)) + rng.uniform(-1, 1, 9)
    beta = rng.standard_normal((9, T)) * rng.dirichlet([0.5, 0.5, 0.5], T).T.repeat([3, 4, 2], axis=0)
    Y = X @ beta + rng.standard_normal((M, T)) + 2.0
    folds = rng.permutation(np.arange(M) % K)
    return X, Y, folds


def gains(gamma):
    return np.sqrt(np.repeat(gamma, [3, 4, 2]))


def brute_force(X, Y, folds, scoring, per_target):
    """Plain StreamRidgeCV on the features scaled by every weight vector: each one's best lambda, then the best vector."""
    fits = []
    for gamma in WEIGHTS:
        m = sr.StreamRidgeCV(ALPHAS, cv="groups", scoring=scoring, alpha_per_target=per_target)
        fits.append(m.fit(X * gains(gamma), Y, groups=folds))
    T = Y.shape[1]
    if scoring is None:  # loss: the fold-summed error
        at = np.array(
            [
                [
                    m.cv_errors_[list(ALPHAS).index(a), t]
                    for t, a in enumerate(np.broadcast_to(m.alpha_, (T,)))
                ]
                for m in fits
            ]
        )
        best = at.argmin(axis=0) if per_target else at.sum(axis=1).argmin()
    else:
        mean = [m.cv_scores_.mean(axis=1) for m in fits]  # (R, T)
        at = np.array(
            [
                [mu[list(ALPHAS).index(a), t] for t, a in enumerate(np.broadcast_to(m.alpha_, (T,)))]
                for mu, m in zip(mean, fits)
            ]
        )
        best = at.argmax(axis=0) if per_target else at.sum(axis=1).argmax()
    return fits, np.atleast_1d(best)


@pytest.mark.parametrize("scoring", [None, "r2", "correlation"])
@pytest.mark.parametrize("per_target", [True, False])
def test_choice_and_coefficients_equal_brute_force(rng, scoring, per_target):
    X, Y, folds = data(rng)
    m = sr.StreamRidgeCV(
        ALPHAS, cv="groups", bands=BANDS, band_weights=WEIGHTS, scoring=scoring, alpha_per_target=per_target
    ).fit(X, Y, groups=folds)
    fits, best = brute_force(X, Y, folds, scoring, per_target)
    if per_target:
        assert len(set(best.tolist())) > 1  # the targets do not all choose alike
        np.testing.assert_array_equal(m.band_weights_, WEIGHTS[best])
        np.testing.assert_array_equal(
            m.alpha_, [np.atleast_1d(fits[s].alpha_)[t] for t, s in enumerate(best)]
        )
    else:
        np.testing.assert_array_equal(m.band_weights_, WEIGHTS[best[0]])
        assert m.alpha_ == fits[best[0]].alpha_
    for t in range(Y.shape[1]):
        s = best[t] if per_target else best[0]
        np.testing.assert_allclose(m.coef_[t], fits[s].coef_[t] * gains(WEIGHTS[s]), rtol=1e-8, atol=1e-12)
        assert m.intercept_[t] == pytest.approx(fits[s].intercept_[t], rel=1e-9)
        np.testing.assert_allclose(m.fold_errors_[:, :, t], fits[s].fold_errors_[:, :, t], rtol=1e-8)
        if scoring is not None:
            np.testing.assert_allclose(
                m.cv_scores_[:, :, t], fits[s].cv_scores_[:, :, t], rtol=1e-8, atol=1e-12
            )
    assert m.band_weight_candidates_.shape == (6, 3) and m.band_fold_scores_.shape == (6, 5, K, 5)
    assert [b.tolist() for b in m.bands_] == [[0, 1, 2], [3, 4, 5, 6], [7, 8]]
    assert m.band_names_ == ["band0", "band1", "band2"]


def test_target_batches_give_the_same_model(rng):
    """A solve_memory of a few targets: scored and solved in batches, each fold decomposed once; the same model."""
    X, Y, folds = data(rng, T=7)
    kw = {"cv": "groups", "bands": BANDS, "band_weights": WEIGHTS, "alpha_per_target": True, "scoring": "r2"}
    whole = sr.StreamRidgeCV(ALPHAS, **kw).fit(X, Y, groups=folds)
    batched = sr.StreamRidgeCV(ALPHAS, solve_memory=8 * 2 * 200, **kw).fit(X, Y, groups=folds)
    np.testing.assert_array_equal(batched.band_weights_, whole.band_weights_)
    np.testing.assert_array_equal(batched.alpha_, whole.alpha_)
    np.testing.assert_allclose(batched.coef_, whole.coef_, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(batched.cv_scores_, whole.cv_scores_, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(batched.band_cv_r2_, whole.band_cv_r2_, rtol=1e-10, atol=1e-13)
    plain = {"cv": "groups", "alpha_per_target": True}
    for scoring in (None, "correlation"):
        a = sr.StreamRidgeCV(ALPHAS, scoring=scoring, **plain).fit(X, Y, groups=folds)
        b = sr.StreamRidgeCV(ALPHAS, scoring=scoring, solve_memory="1KB", **plain).fit(X, Y, groups=folds)
        np.testing.assert_array_equal(b.alpha_, a.alpha_)
        np.testing.assert_allclose(b.coef_, a.coef_, rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(b.fold_errors_, a.fold_errors_, rtol=1e-10)


def test_nested_cv_scores_each_targets_weight_vector(rng):
    """Nested CV of banded ridge: on every outer fold, the banded model chosen and fitted on the other folds."""
    X, Y, folds = data(rng, T=3)
    kw = {"cv": "groups", "bands": BANDS, "band_weights": WEIGHTS, "alpha_per_target": True, "scoring": "r2"}
    m = sr.StreamRidgeCV(ALPHAS, nested=True, **kw).fit(X, Y, groups=folds)
    for o in range(K):
        rest = folds != o
        inner = sr.StreamRidgeCV(ALPHAS, **kw).fit(X[rest], Y[rest], groups=folds[rest])
        sse = ((inner.predict(X[~rest]) - Y[~rest]) ** 2).sum(axis=0)
        np.testing.assert_allclose(m.nested_cv_errors_[o], sse, rtol=1e-8)
        np.testing.assert_array_equal(m.nested_summary_["alphas"][o], inner.alpha_)


def test_split_predictions_sum_to_the_prediction(rng):
    X, Y, folds = data(rng)
    m = sr.StreamRidgeCV(
        ALPHAS, cv="groups", bands={"a": [0, 1, 2], "b": range(3, 7), "c": [7, 8]}, band_weights=8
    )
    m.fit(X, Y, groups=folds)
    P = m.predict(X, split=True)
    assert P.shape == (3, 200, 5) and m.band_names_ == ["a", "b", "c"]
    np.testing.assert_allclose(P.sum(axis=0) + m.intercept_, m.predict(X), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(P[1], X[:, 3:7] @ m.coef_[:, 3:7].T, rtol=1e-12)
    lazy = m.predict(da.from_array(X, chunks=(64, -1)), split=True)
    np.testing.assert_allclose(lazy.compute(), P, rtol=1e-12)
    one = sr.StreamRidgeCV(ALPHAS, cv=K, bands=BANDS, band_weights=WEIGHTS).fit(X, Y[:, 0])
    assert one.predict(X, split=True).shape == (3, 200) and one.band_weights_.shape == (3,)


def test_split_r2_sums_to_r2_and_equals_himalaya_on_centered_rows(rng):
    """On the fitted rows (the intercept fits the mean) the bands' R² sum to r2_score; with X and y of zero mean
    over the scored rows the split is himalaya's r2_score_split; dask X gives the same numbers chunk by chunk."""
    scoring = pytest.importorskip("himalaya.scoring")
    X, Y, folds = data(rng)
    m = sr.StreamRidgeCV(ALPHAS, cv="groups", bands=BANDS, band_weights=WEIGHTS, alpha_per_target=True)
    m.fit(X, Y, groups=folds)
    split = m.score(X, Y, split=True)
    assert split.shape == (3, 5)
    np.testing.assert_allclose(
        split.sum(axis=0), r2_score(Y, m.predict(X), multioutput="raw_values"), rtol=1e-10
    )
    Xt = rng.standard_normal((150, 9))
    Xt -= Xt.mean(axis=0)
    Yt = Xt @ m.coef_.T + rng.standard_normal((150, 5))
    Yt -= Yt.mean(axis=0)
    ref = np.asarray(scoring.r2_score_split(Yt, m.predict(Xt, split=True)))
    np.testing.assert_allclose(m.score(Xt, Yt, split=True), ref, rtol=1e-10, atol=1e-12)
    lazy = m.score(da.from_array(Xt, chunks=(40, -1)), Yt, split=True)
    np.testing.assert_allclose(lazy, ref, rtol=1e-10, atol=1e-12)


def test_split_needs_a_banded_model(rng):
    X, Y, _ = data(rng)
    m = sr.StreamRidgeCV(ALPHAS, cv=K).fit(X, Y)
    with pytest.raises(
        ParameterError, match=r"^split=True splits the prediction by the bands of a banded model; "
    ):
        m.predict(X, split=True)
    with pytest.raises(ParameterError, match="fit it with bands="):
        m.score(X, Y, split=True)


def test_bands_are_refused_before_the_pass(rng):
    X, Y, _ = data(rng)
    rows = []
    with pytest.raises(
        ParameterError, match=r"^feature 2 is in bands 0 and 1; put every feature in exactly one band$"
    ):
        sr.StreamRidgeCV(ALPHAS, bands=[[0, 1, 2], range(2, 9)], progress=rows.append).fit(
            da.from_array(X, chunks=50), Y
        )
    assert rows == []
    with pytest.raises(
        ParameterError,
        match=r"^solve_memory must be a positive size in bytes \(or like '2GB'\); got solve_memory='lots'$",
    ):
        sr.StreamRidgeCV(ALPHAS, solve_memory="lots").fit(X, Y)


def test_concat_parts_are_the_bands(rng):
    """bands="concat": one band per part of a Concat feature map; predict(split=True) takes raw inputs."""
    from streamridge.features import Concat, Delays, RandomHidden

    X, Y, _ = data(rng)
    fmap = Concat([Delays(1), RandomHidden(6, seed=2)])
    m = sr.StreamRidgeCV(ALPHAS, cv=K, features=fmap, bands="concat", band_weights=5, alpha_per_target=True)
    m.fit(X, Y)
    assert [len(b) for b in m.bands_] == [18, 6] and m.band_names_ == ["0:delays", "1:random_hidden"]
    np.testing.assert_allclose(
        m.predict(X, split=True).sum(axis=0) + m.intercept_, m.predict(X), rtol=1e-10, atol=1e-12
    )


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_cross_validated_band_r2_equals_refits(rng, fit_intercept):
    """band_cv_r2_: per fold the chosen banded model refitted on the other folds, split by band and scored on
    the fold (centered product measure), pooled over folds; summed over bands, 1 - SSE / SST per fold mean."""
    from sklearn.linear_model import Ridge

    X, Y, folds = data(rng)
    m = sr.StreamRidgeCV(
        ALPHAS,
        cv="groups",
        bands=BANDS,
        band_weights=WEIGHTS,
        alpha_per_target=True,
        fit_intercept=fit_intercept,
    ).fit(X, Y, groups=folds)
    T = Y.shape[1]
    num, den = np.zeros((3, T)), np.zeros(T)
    for k in range(K):
        tr, va = folds != k, folds == k
        for t in range(T):
            g = gains(m.band_weights_[t])
            r = Ridge(alpha=m.alpha_[t], fit_intercept=fit_intercept, solver="cholesky").fit(
                X[tr] * g, Y[tr, t]
            )
            parts = np.stack([X[va][:, b] @ (r.coef_ * g)[b] for b in BANDS])
            parts -= parts.mean(axis=1, keepdims=True)
            y = Y[va, t] - Y[va, t].mean()
            num[:, t] += 2 * parts @ y - parts @ parts.sum(axis=0)
            den[t] += y @ y
    np.testing.assert_allclose(m.band_cv_r2_, num / den, rtol=1e-8, atol=1e-12)


def test_classifier_with_bands_equals_brute_force(rng):
    """A ridge classifier with bands: one weight vector and lambda for all classes, by the summed squared error."""
    X, _, folds = data(rng)
    y = np.digitize(X[:, 0] + X[:, 4] + 0.5 * rng.standard_normal(len(X)), [-1.0, 1.0])
    m = sr.StreamRidgeClassifierCV(ALPHAS, cv="groups", bands=BANDS, band_weights=WEIGHTS).fit(
        X, y, groups=folds
    )
    fits = [
        sr.StreamRidgeClassifierCV(ALPHAS, cv="groups").fit(X * gains(g), y, groups=folds) for g in WEIGHTS
    ]
    best = int(np.argmin([f.cv_errors_[list(ALPHAS).index(f.alpha_)].sum() for f in fits]))
    np.testing.assert_array_equal(m.band_weights_, WEIGHTS[best])
    assert m.alpha_ == fits[best].alpha_
    np.testing.assert_allclose(
        m.decision_function(X), fits[best].decision_function(X * gains(WEIGHTS[best])), rtol=1e-8
    )
