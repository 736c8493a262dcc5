"""Banded ridge from the forms against explicit refits of the per-band-scaled features."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import Ridge
from sklearn.metrics import r2_score
from sklearn.preprocessing import StandardScaler

from streamridge.forms.build import build_forms, build_full_form
from streamridge.solvers.banded import banded_search, banded_solve_full, sample_band_weights
from streamridge.solvers.target_scores import fold_scores, validation_moments
from streamridge.stats.kernel import from_chunk
from tests.conftest import ill_conditioned

K = 4
ALPHAS = np.array([0.1, 3.0, 100.0])
BANDS = [np.arange(0, 3), np.arange(3, 7), np.arange(7, 9)]
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


def make_data(rng, M=150, T=3, kind="well"):
    N = 9
    if kind == "well":
        X = rng.standard_normal((M, N)) * rng.uniform(0.5, 3, N) + rng.uniform(-2, 2, N)
    else:  # cond(X'X) = 1e12
        X = ill_conditioned(rng, M, N, cond_sv=1e6) + rng.uniform(-2, 2, N)
    beta = rng.standard_normal((N, T)) * np.repeat([1.0, 0.2, 0.6], [3, 4, 2])[:, None]
    Y = X @ beta + 1.5 * rng.standard_normal((M, T)) + 1.0
    folds = rng.permutation(np.arange(M) % K)
    return X, Y, folds


def forms_of(X, Y, folds, w=None, **kw):
    stats = from_chunk(X, Y, folds, None, K, 1, w)
    return stats, build_forms(stats, **kw)


def reference_banded(X, Y, folds, alphas, gains, w=None, *, fit_intercept=True, standardize=False):
    """SSE and R² of shape (R, K, T) of ridge on the features ``g * x`` (after the training part's scaler), refit per fold."""
    R, T = len(alphas), Y.shape[1]
    sse, r2 = np.zeros((R, K, T)), np.zeros((R, K, T))
    for k in range(K):
        tr, va = folds != k, folds == k
        wt = None if w is None else w[tr]
        wv = np.ones(va.sum()) if w is None else w[va]
        Xt, Xv = X[tr], X[va]
        if standardize:
            sc = StandardScaler(with_mean=fit_intercept).fit(Xt, sample_weight=wt)
            Xt, Xv = sc.transform(Xt), sc.transform(Xv)
        for r, a in enumerate(alphas):
            m = Ridge(alpha=a, fit_intercept=fit_intercept, solver="cholesky").fit(
                Xt * gains, Y[tr], sample_weight=wt
            )
            P = m.predict(Xv * gains)
            sse[r, k] = (wv[:, None] * (P - Y[va]) ** 2).sum(axis=0)
            r2[r, k] = r2_score(Y[va], P, sample_weight=wv, multioutput="raw_values")
    return sse, r2


def gains_of(gamma):
    """sqrt(gamma_b) repeated over band b's columns (the bands are consecutive)."""
    return np.repeat(np.sqrt(gamma), [len(b) for b in BANDS])


def reference_all(X, Y, folds, weights, w=None, *, alphas=ALPHAS, **kw):
    """(S, R, K, T) SSE and R² of every weight vector."""
    out = [reference_banded(X, Y, folds, alphas, gains_of(g), w, **kw) for g in weights]
    return np.stack([o[0] for o in out]), np.stack([o[1] for o in out])


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("standardize", [False, True])
def test_banded_errors_equal_refits(rng, fit_intercept, weighted, standardize):
    """Every (weight vector, lambda, fold, target), bands of weight 0 included, to 1e-8 relative."""
    X, Y, folds = make_data(rng)
    w = rng.uniform(0.2, 2.0, len(X)) if weighted else None
    stats, forms = forms_of(X, Y, folds, w, fit_intercept=fit_intercept, standardize=standardize)
    sse, r2 = reference_all(X, Y, folds, WEIGHTS, w, fit_intercept=fit_intercept, standardize=standardize)
    found = banded_search(forms, BANDS, WEIGHTS, ALPHAS)
    assert found.fold_scores.shape == (6, 3, K, 3)
    np.testing.assert_allclose(found.fold_scores, sse, rtol=1e-8)
    by_r2 = banded_search(forms, BANDS, WEIGHTS, ALPHAS, scoring="r2", moments=validation_moments(stats))
    np.testing.assert_allclose(by_r2.fold_scores, r2, rtol=1e-8, atol=1e-12)


def test_ill_conditioned_banded_errors_within_1e6(rng):
    """cond(X'X) = 1e12 and lambda down to 1e-8: the errors agree with refits to 1e-6 relative.

    Both lose digits to the conditioning; the largest differences seen are 1e-8 at lambda = 1e-8, 1e-11 at 1e-5.
    """
    X, Y, folds = make_data(rng, kind="ill")
    _, forms = forms_of(X, Y, folds)
    alphas = np.array([1e-8, 1e-5, 1e-2, 10.0])
    sse, _ = reference_all(X, Y, folds, WEIGHTS, alphas=alphas)
    np.testing.assert_allclose(banded_search(forms, BANDS, WEIGHTS, alphas).fold_scores, sse, rtol=1e-6)


@pytest.mark.parametrize("scoring", ["sse", "r2"])
def test_choice_per_target_equals_brute_force(rng, scoring):
    """Per target the best (weight vector, lambda) of all pairs, by refits; shared: the best summed over targets."""
    X, Y, folds = make_data(rng, T=6)
    Y[:, 5] = 3 * rng.standard_normal(len(Y))  # noise only
    stats, forms = forms_of(X, Y, folds)
    sse, r2 = reference_all(X, Y, folds, WEIGHTS)
    loss = sse.sum(axis=2) if scoring == "sse" else -r2.mean(axis=2)  # (S, R, T)
    found = banded_search(forms, BANDS, WEIGHTS, ALPHAS, scoring=scoring, moments=validation_moments(stats))
    flat = loss.reshape(-1, loss.shape[2]).argmin(axis=0)
    s, r = np.unravel_index(flat, loss.shape[:2])
    np.testing.assert_array_equal(found.weight_index, s)
    np.testing.assert_array_equal(found.alpha_index, r)
    np.testing.assert_array_equal(found.band_weights, WEIGHTS[s])
    assert len(set(s.tolist())) > 1  # the targets do not all choose alike
    shared = banded_search(
        forms, BANDS, WEIGHTS, ALPHAS, scoring=scoring, moments=validation_moments(stats), per_target=False
    )
    s0, r0 = np.unravel_index(loss.sum(axis=2).argmin(), loss.shape[:2])
    assert (shared.weight_index, shared.alpha_index) == (s0, r0)
    assert shared.band_weights.shape == (3,) and shared.cv_scores.shape == (6,)


def test_summary_without_fold_scores_gives_the_same_choice(rng):
    """Past keep_bytes only the (S, T) best scores are kept; the choice and the scores are the same."""
    X, Y, folds = make_data(rng, T=4)
    _, forms = forms_of(X, Y, folds)
    full = banded_search(forms, BANDS, WEIGHTS, ALPHAS, one_se=True)
    small = banded_search(
        forms, BANDS, WEIGHTS, ALPHAS, one_se=True, keep_bytes=8 * 6 * 3 * K * 4 - 1, max_bytes=1
    )
    assert small.fold_scores is None and full.fold_scores is not None
    np.testing.assert_array_equal(small.weight_index, full.weight_index)
    np.testing.assert_array_equal(small.alpha_index, full.alpha_index)
    np.testing.assert_allclose(small.cv_scores, full.cv_scores, rtol=1e-12)
    np.testing.assert_allclose(
        full.cv_scores,
        full.fold_scores.mean(axis=2)[np.arange(6)[:, None], full.alpha_index_of_weights, np.arange(4)],
    )


def test_unit_weights_equal_plain_ridge(rng):
    """All weights 1 is plain ridge; all weights 1/3 is plain ridge with lambda 3x."""
    X, Y, folds = make_data(rng)
    _, forms = forms_of(X, Y, folds)
    plain = fold_scores(forms, ALPHAS, scoring="sse")
    found = banded_search(forms, BANDS, np.array([[1.0, 1.0, 1.0], [1 / 3, 1 / 3, 1 / 3]]), ALPHAS / 3)
    np.testing.assert_allclose(
        found.fold_scores[0], fold_scores(forms, ALPHAS / 3, scoring="sse"), rtol=1e-10
    )
    np.testing.assert_allclose(found.fold_scores[1], plain, rtol=1e-10)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_final_coefficients_equal_ridge_on_scaled_features(rng, fit_intercept):
    """Per target its own weight vector and lambda; zero-weight bands get coefficients exactly 0."""
    X, Y, folds = make_data(rng, T=4)
    stats = from_chunk(X, Y, folds, None, K, 1)
    full = build_full_form(stats, fit_intercept=fit_intercept)
    w_idx, alpha = np.array([0, 1, 4, 1]), np.array([0.5, 2.0, 7.0, 30.0])
    coef, intercept = banded_solve_full(full, BANDS, WEIGHTS, w_idx, alpha)
    for t in range(4):
        g = gains_of(WEIGHTS[w_idx[t]])
        m = Ridge(alpha=alpha[t], fit_intercept=fit_intercept, solver="cholesky").fit(X * g, Y[:, t])
        np.testing.assert_allclose(coef[t], m.coef_ * g, rtol=1e-9, atol=1e-13)
        assert intercept[t] == pytest.approx(m.intercept_, rel=1e-9, abs=1e-12)
    assert np.all(coef[1, 3:] == 0.0) and np.all(coef[3, 3:] == 0.0)


def test_sampled_weights_fixed_rows_then_himalaya_dirichlet():
    himalaya_kr = pytest.importorskip("himalaya.kernel_ridge")
    W = sample_band_weights(3, 10, seed=7)
    np.testing.assert_allclose(W[0], [1 / 3, 1 / 3, 1 / 3])
    np.testing.assert_array_equal(W[1:4], np.eye(3))
    ref = himalaya_kr.generate_dirichlet_samples(6, 3, concentration=[0.1, 1.0], random_state=7)
    np.testing.assert_allclose(W[4:], np.asarray(ref), rtol=1e-14)
    np.testing.assert_allclose(W.sum(axis=1), 1.0, rtol=1e-12)
    assert not np.array_equal(sample_band_weights(3, 10, seed=8)[4:], W[4:])
    np.testing.assert_array_equal(sample_band_weights(1, 5), [[1.0]])


def test_equals_himalaya_banded_ridge_cv(rng):
    """The same folds, lambdas and weight vectors, scored by R²: the same choices, CV scores and coefficients.

    Weight vectors with a zero are left out: himalaya's BandedRidgeCV divides the features by sqrt(gamma) after
    each weight vector and turns them into NaN.
    """
    himalaya_ridge = pytest.importorskip("himalaya.ridge")
    himalaya_scoring = pytest.importorskip("himalaya.scoring")
    from sklearn.model_selection import PredefinedSplit

    X, Y, folds = make_data(rng, M=160, T=8)
    stats, forms = forms_of(X, Y, folds)
    weights, alphas = sample_band_weights(3, 14, seed=1)[4:], np.logspace(-1, 3, 6)
    weights[0] = 1 / 3
    found = banded_search(forms, BANDS, weights, alphas, scoring="r2", moments=validation_moments(stats))
    coef, intercept = banded_solve_full(
        build_full_form(stats), BANDS, weights, found.weight_index, found.alpha
    )
    model = himalaya_ridge.BandedRidgeCV(
        groups=np.repeat([0, 1, 2], [3, 4, 2]),
        fit_intercept=True,
        cv=PredefinedSplit(folds),
        solver_params=dict(
            n_iter=weights, alphas=alphas, score_func=himalaya_scoring.r2_score, progress_bar=False
        ),
    ).fit(X, Y)
    assert len(np.unique(found.weight_index)) > 1 and len(np.unique(found.alpha_index)) > 1
    slope = 1e-10 * np.log(alphas[found.alpha_index_of_weights])  # himalaya's tie-break, added to its scores
    np.testing.assert_allclose(found.cv_scores, np.asarray(model.cv_scores_) - slope, rtol=1e-8)
    np.testing.assert_allclose(found.alpha, np.asarray(model.best_alphas_), rtol=1e-12)
    chosen = np.exp(np.asarray(model.deltas_)) * np.asarray(model.best_alphas_)
    np.testing.assert_allclose(found.band_weights, chosen.T, rtol=1e-10)
    np.testing.assert_allclose(coef, np.asarray(model.coef_).T, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(intercept, np.asarray(model.intercept_), rtol=1e-8)
