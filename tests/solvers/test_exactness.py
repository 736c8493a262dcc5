"""Fast paths against explicit per-fold, per-lambda refits with scikit-learn Ridge."""

from __future__ import annotations

import numpy as np
import pytest

from streamridge import StreamRidgeClassifierCV, StreamRidgeCV
from streamridge.folds.schemes import FoldScheme
from tests.conftest import ill_conditioned
from tests.reference import balanced_weights, fit_ridge, reference_fold_errors

K = 5


def make_data(rng, kind, M=240, N=8, T=1):
    if kind == "well":
        X = rng.standard_normal((M, N)) * rng.uniform(0.5, 3, N) + rng.uniform(-2, 2, N)
    else:  # cond(X'X) = 1e12 after centering
        X = ill_conditioned(rng, M, N, cond_sv=1e6, offset=0.0) + rng.uniform(-2, 2, N)
    beta = rng.standard_normal((N, T))
    Y = X @ beta + 0.5 * rng.standard_normal((M, T))
    return X, (Y[:, 0] if T == 1 else Y)


def folds_of(est, M):
    return FoldScheme("hash", K, seed=est.random_state).assign(0, M)


@pytest.mark.parametrize("solver", ["eigen", "covariance"])
@pytest.mark.parametrize("kind", ["well", "ill"])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("standardize", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("T", [1, 3])
def test_cv_errors_equal_refits(rng, solver, kind, fit_intercept, standardize, weighted, T):
    X, y = make_data(rng, kind, T=T)
    M = len(X)
    w = rng.uniform(0.2, 2.0, M) if weighted else None
    est = StreamRidgeCV(
        cv=K, fit_intercept=fit_intercept, standardize=standardize, solver=solver, chunk_rows=61
    )
    est.fit(X, y, sample_weight=w)
    alphas = est.alphas_
    ref = reference_fold_errors(
        X, y, folds_of(est, M), alphas, fit_intercept=fit_intercept, standardize=standardize, sample_weight=w
    )
    rtol = 1e-8 if kind == "well" else 1e-6
    np.testing.assert_allclose(est.fold_errors_, ref, rtol=rtol)
    total = ref.sum(axis=(1, 2))
    assert est.alpha_ == alphas[np.argmin(total)]
    predict, _, _ = fit_ridge(X, y.reshape(M, -1), w, est.alpha_, fit_intercept, standardize)
    np.testing.assert_allclose(
        est.predict(X), predict(X).reshape(np.shape(y)), rtol=rtol, atol=rtol * np.abs(y).max()
    )


def test_explicit_grid_and_coef_equal_sklearn(rng):
    X, y = make_data(rng, "well")
    alphas = [0.01, 0.3, 3.0, 30.0, 300.0]
    est = StreamRidgeCV(alphas, cv=K).fit(X, y)
    np.testing.assert_array_equal(est.alphas_, alphas)
    assert est.cv_errors_.shape == (5,)
    _, m, _ = fit_ridge(X, y, None, est.alpha_, True, False)
    np.testing.assert_allclose(est.coef_, m.coef_, rtol=1e-10)
    assert abs(est.intercept_ - m.intercept_) < 1e-10


def test_alpha_per_target_shares_folds(rng):
    X, Y = make_data(rng, "well", T=3)
    Y[:, 2] = 5 * rng.standard_normal(len(Y))  # pure noise target wants a large lambda
    est = StreamRidgeCV(cv=K, alpha_per_target=True).fit(X, Y)
    ref = reference_fold_errors(X, Y, folds_of(est, len(X)), est.alphas_)
    per_target = ref.sum(axis=1)
    np.testing.assert_array_equal(est.alpha_, est.alphas_[np.argmin(per_target, axis=0)])
    assert est.coef_.shape == (3, X.shape[1]) and est.cv_errors_.shape == (len(est.alphas_), 3)
    for t in range(3):
        _, m, _ = fit_ridge(X, Y[:, t], None, est.alpha_[t], True, False)
        np.testing.assert_allclose(est.coef_[t], m.coef_, rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("standardize", [False, True])
def test_crrr_equals_weighted_refits(rng, n_classes, standardize):
    M, N = 300, 6
    X = rng.standard_normal((M, N))
    # unbalanced classes
    p = np.array([0.7, 0.2, 0.1])[:n_classes]
    labels = rng.choice(n_classes, size=M, p=p / p.sum())
    X[:, 0] += labels
    est = StreamRidgeClassifierCV(cv=K, class_weight="balanced", standardize=standardize).fit(X, labels)
    Y = np.where(labels[:, None] == np.arange(n_classes), 1.0, -1.0)
    if n_classes == 2:
        Y = Y[:, 1:]
    ref = reference_fold_errors(
        X,
        Y,
        folds_of(est, M),
        est.alphas_,
        standardize=standardize,
        cls=labels,
        n_classes=n_classes,
        balanced=True,
    )
    np.testing.assert_allclose(est.fold_errors_, ref, rtol=1e-8)
    assert est.alpha_ == est.alphas_[np.argmin(ref.sum(axis=(1, 2)))]
    predict, _, _ = fit_ridge(X, Y, balanced_weights(labels, n_classes), est.alpha_, True, standardize)
    np.testing.assert_allclose(
        np.atleast_2d(est.decision_function(X).T).T, predict(X).reshape(M, -1), rtol=1e-8, atol=1e-10
    )


def test_ties_go_to_larger_alpha_and_one_se(rng):
    X = rng.standard_normal((100, 3))
    est = StreamRidgeCV([0.1, 10.0, 1.0], cv=K).fit(X, np.zeros(100))
    assert est.alpha_ == 10.0  # all errors are 0
    X, y = make_data(rng, "well")
    a = StreamRidgeCV(cv=K, alpha_rule="1se").fit(X, y)
    E = a.fold_errors_[:, :, 0]
    best = np.argmin(E.sum(1))
    bound = E.sum(1)[best] + np.sqrt(K) * E[best].std(ddof=1)
    expected = max(a.alphas_[E.sum(1) <= bound * (1 + 1e-12)])
    assert a.alpha_ == expected and a.alpha_ >= a.alphas_[best]


def test_limits_least_squares_and_intercept_only(rng):
    X, y = make_data(rng, "well")
    tiny = StreamRidgeCV([1e-10], cv=K).fit(X, y)
    A = np.c_[X, np.ones(len(X))]
    sol = np.linalg.lstsq(A, y, rcond=None)[0]
    np.testing.assert_allclose(tiny.coef_, sol[:-1], rtol=1e-7)
    huge = StreamRidgeCV([1e14], cv=K).fit(X, y)
    assert np.abs(huge.coef_).max() < 1e-9
    np.testing.assert_allclose(huge.intercept_, y.mean(), rtol=1e-9)


def test_chunking_does_not_change_the_model(rng):
    X, y = make_data(rng, "well", M=500)
    fits = [StreamRidgeCV(cv=K, chunk_rows=c).fit(X, y) for c in (1, 7, 1000)]
    for f in fits[1:]:
        np.testing.assert_allclose(f.cv_errors_, fits[0].cv_errors_, rtol=1e-12)
        np.testing.assert_allclose(f.coef_, fits[0].coef_, rtol=1e-11)


def test_partial_fit_equals_fit_on_concatenation(rng):
    X, y = make_data(rng, "well", M=400)
    whole = StreamRidgeCV(cv=K).fit(X, y)
    inc = StreamRidgeCV(cv=K)
    for s in range(0, 400, 90):
        inc.partial_fit(X[s : s + 90], y[s : s + 90])
        assert hasattr(inc, "coef_")  # usable after every call
    np.testing.assert_allclose(inc.cv_errors_, whole.cv_errors_, rtol=1e-12)
    np.testing.assert_allclose(inc.coef_, whole.coef_, rtol=1e-12)
    labels = (y > np.median(y)).astype(int)
    c1 = StreamRidgeClassifierCV(cv=K).fit(X, labels)
    c2 = StreamRidgeClassifierCV(cv=K)
    c2.partial_fit(X[:200], labels[:200], classes=[0, 1])
    c2.partial_fit(X[200:], labels[200:])
    np.testing.assert_allclose(c2.coef_, c1.coef_, rtol=1e-12)


def test_groups_and_blocks_schemes(rng):
    X, y = make_data(rng, "well", M=240)
    g = np.repeat(np.arange(8), 30)
    logo = StreamRidgeCV(cv="groups").fit(X, y, groups=g)
    assert logo.n_folds_ == 8
    ref = reference_fold_errors(X, y, g, logo.alphas_)
    np.testing.assert_allclose(logo.fold_errors_, ref, rtol=1e-8)
    blocks = StreamRidgeCV(cv="blocks", n_blocks=4).fit(X, y)
    ref = reference_fold_errors(X, y, np.arange(240) * 4 // 240, blocks.alphas_)
    np.testing.assert_allclose(blocks.fold_errors_, ref, rtol=1e-8)
    hashed = StreamRidgeCV(cv=3).fit(X, y, groups=g)
    f = FoldScheme("group", 3, seed=0).assign(0, 240, g)
    np.testing.assert_allclose(hashed.fold_errors_, reference_fold_errors(X, y, f, hashed.alphas_), rtol=1e-8)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.int32, np.float64])
@pytest.mark.parametrize("outputs", [1, 3])
def test_predictions_in_tiles_equal_the_whole_product(rng, monkeypatch, dtype, outputs):
    """``affine`` converts rows a tile at a time (predict of float32 blocks); tiles of 5 rows here."""
    import streamridge.estimators.predicting as base

    N = 7
    monkeypatch.setattr(base, "AFFINE_TILE_BYTES", 8 * N * 5)
    coef, b = rng.standard_normal((outputs, N)), rng.standard_normal(outputs)
    for m in (0, 1, 4, 5, 6, 13, 200):
        X = (rng.standard_normal((m, N)) * 50).astype(dtype)
        got = base.affine(X, coef, b)
        want = np.asarray(X, dtype=np.float64) @ coef.T + b
        assert got.shape == (m, outputs) and got.dtype == np.float64
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-12)
    X = rng.standard_normal((40, N)).astype(np.float32)
    est = StreamRidgeCV(cv=3).fit(X, X @ coef[0])  # the estimator's predict: rows in any order and layout
    np.testing.assert_allclose(est.predict(X[::-1]), est.predict(np.asarray(X[::-1], np.float64)), rtol=1e-13)
