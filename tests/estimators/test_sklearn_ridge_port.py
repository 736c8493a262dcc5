"""scikit-learn's ridge tests (sklearn/linear_model/tests/test_ridge.py) that apply to streamridge.

Ported: the closed-form dataset and its [X; X] / [X, X] metamorphic variants,
sample-weight equivalences, class weights, dtypes, intercept and shapes,
several targets with one lambda each, and RidgeCV / RidgeClassifierCV on the
same given splits (K-fold and leave-one-out against scikit-learn's GCV).
The regularization limits (alpha -> 0, alpha -> inf) live with the solver
numerics tests.  Each test names the scikit-learn test it ports.
"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy import linalg
from sklearn.datasets import load_iris, make_low_rank_matrix
from sklearn.linear_model import Ridge, RidgeClassifier, RidgeClassifierCV, RidgeCV
from sklearn.model_selection import GroupKFold, KFold, LeaveOneGroupOut, LeaveOneOut, StratifiedKFold

from streamridge import StreamRidgeClassifierCV, StreamRidgeCV

SEEDS = [0, 1, 42]


@pytest.fixture(params=["long", "wide"])
def ols_ridge_dataset(request):
    """scikit-learn's fixture: X (last column 1 = intercept), y and the ridge solution for alpha=1."""
    n_samples, n_features = (12, 4) if request.param == "long" else (4, 12)
    out = []
    for seed in SEEDS:
        rng = np.random.RandomState(seed)
        X = make_low_rank_matrix(
            n_samples=n_samples,
            n_features=n_features,
            effective_rank=min(n_samples, n_features),
            random_state=rng,
        )
        X[:, -1] = 1
        U, s, _ = linalg.svd(X)
        assert np.all(s > 1e-3)  # well conditioned, as scikit-learn checks
        k = min(n_samples, n_features)
        if request.param == "long":
            y = (
                X @ rng.uniform(low=-10, high=10, size=n_features)
                + U[:, k:] @ rng.normal(size=n_samples - n_features) ** 2
            )
        else:
            y = rng.uniform(low=-10, high=10, size=n_samples)
        d = np.identity(n_features)
        d[-1, -1] = 0  # intercept gets no penalty
        out.append((X, y, linalg.solve(X.T @ X + d, X.T @ y)))
    return out


def _one_alpha(alpha, fit_intercept=True, cv=2, **kw):
    return StreamRidgeCV(alphas=[alpha], cv=cv, fit_intercept=fit_intercept, **kw)


def _prepare(X, y, coef, fit_intercept):
    X = X[:, :-1]
    if fit_intercept:
        return X, y, coef[:-1], coef[-1]
    return X - X.mean(axis=0), y - y.mean(), coef[:-1], 0.0


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_ridge_regression(ols_ridge_dataset, fit_intercept):
    """test_ridge_regression: the closed-form solution, with and without unit sample weights."""
    for X, y, coef in ols_ridge_dataset:
        X, y, c, b = _prepare(X, y, coef, fit_intercept)
        for sw in (None, np.ones(len(X))):
            m = _one_alpha(1.0, fit_intercept).fit(X, y, sample_weight=sw)
            assert m.intercept_ == pytest.approx(b)
            assert_allclose(m.coef_, c, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_ridge_regression_vstacked_X(ols_ridge_dataset, fit_intercept):
    """test_ridge_regression_vstacked_X: [X; X], [y; y] with 2 alpha equals X, y with alpha."""
    for X, y, coef in ols_ridge_dataset:
        X, y, c, b = _prepare(X, y, coef, fit_intercept)
        m = _one_alpha(2.0, fit_intercept).fit(np.concatenate([X, X]), np.r_[y, y])
        assert m.intercept_ == pytest.approx(b)
        assert_allclose(m.coef_, c, atol=1e-8)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_ridge_regression_hstacked_X(ols_ridge_dataset, fit_intercept):
    """test_ridge_regression_hstacked_X: [X, X] / 2 with alpha / 2 gives [coef, coef] (singular X'X when long)."""
    for X, y, coef in ols_ridge_dataset:
        X, y, c, b = _prepare(X, y, coef, fit_intercept)
        m = _one_alpha(0.5, fit_intercept).fit(0.5 * np.concatenate([X, X], axis=1), y)
        assert m.intercept_ == pytest.approx(b)
        assert_allclose(m.coef_, np.r_[c, c], atol=1e-8)


@pytest.mark.parametrize("alpha", [1.0, 1e-2])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_ridge_regression_sample_weights(ols_ridge_dataset, alpha, fit_intercept):
    """test_ridge_regression_sample_weights: [X; X] with weights sw, 1 - sw (times alpha) equals X with alpha=1."""
    rng = np.random.RandomState(0)
    for X, y, coef in ols_ridge_dataset:
        X, y, c, b = _prepare(X, y, coef, fit_intercept)
        sw = rng.uniform(low=0, high=1, size=len(X))
        m = _one_alpha(alpha, fit_intercept).fit(
            np.concatenate([X, X]), np.r_[y, y], sample_weight=np.r_[sw, 1 - sw] * alpha
        )
        assert m.intercept_ == pytest.approx(b)
        assert_allclose(m.coef_, c, rtol=1e-7, atol=1e-9)


ALPHAS = np.logspace(-3, 3, 13)


@pytest.mark.parametrize("data", ["tall", "wide"])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_ridge_sample_weight_consistency(data, fit_intercept):
    """test_ridge_sample_weight_consistency, extended to the CV: with folds given per row
    (leave-one-group-out), the whole lambda search is weight-consistent, not only the final fit."""
    rng = np.random.RandomState(42)
    n = 12
    X = rng.rand(n, n // 2 if data == "tall" else 2 * n)
    y = rng.rand(n)
    g = np.arange(n) % 3
    logo = LeaveOneGroupOut()

    def fit(X, y, g, sw=None, alphas=ALPHAS):
        return StreamRidgeCV(alphas, cv=list(logo.split(X, groups=g)), fit_intercept=fit_intercept).fit(
            X, y, sample_weight=sw
        )

    # 1) ones == None
    ref = fit(X, y, g)
    one = fit(X, y, g, np.ones(n))
    assert_allclose(one.fold_errors_, ref.fold_errors_, rtol=1e-10)
    assert_allclose(one.coef_, ref.coef_, rtol=1e-10)
    # 2) zero weights == removed rows (rows 7..11 made important by scaling y)
    sw = rng.uniform(low=0.01, high=2, size=n)
    sw[-5:] = 0
    y[-5:] *= 1000
    a, b = fit(X, y, g, sw), fit(X[:-5], y[:-5], g[:-5], sw[:-5])
    assert_allclose(a.fold_errors_, b.fold_errors_, rtol=1e-9)
    assert a.alpha_ == b.alpha_
    assert_allclose(a.coef_, b.coef_, rtol=1e-8)
    assert a.intercept_ == pytest.approx(b.intercept_)
    # 3) scaling the weights by pi with alpha scaled by pi changes nothing
    c = fit(X, y, g, np.pi * sw, alphas=np.pi * ALPHAS)
    assert_allclose(c.fold_errors_, np.pi * a.fold_errors_, rtol=1e-9)
    assert_allclose(c.coef_, a.coef_, rtol=1e-8)
    # 4) weight 2 == the row repeated
    h = n // 2
    sw1 = sw.copy()
    sw1[:h] *= 2
    d = fit(X, y, g, sw1)
    e = fit(np.concatenate([X, X[:h]]), np.r_[y, y[:h]], np.r_[g, g[:h]], np.r_[sw, sw[:h]])
    assert_allclose(d.fold_errors_, e.fold_errors_, rtol=1e-9)
    assert d.alpha_ == e.alpha_
    assert_allclose(d.coef_, e.coef_, rtol=1e-8)


# ------------------------------------------------------------------ class weights

XC = np.array([[-1.0, -1.0], [-1.0, 0], [-0.8, -1.0], [1.0, 1.0], [1.0, 0.0]])
YC = np.array([1, 1, 1, -1, -1])


def test_class_weights():
    """test_class_weights: a small weight on class 1 rotates the hyperplane; 'balanced' handles negative labels."""
    clf = StreamRidgeClassifierCV(alphas=[1.0], cv=2).fit(XC, YC)
    assert_array_equal(clf.predict([[0.2, -1.0]]), [1])
    clf = StreamRidgeClassifierCV(alphas=[1.0], cv=2, class_weight={1: 0.001}).fit(XC, YC)
    assert_array_equal(clf.predict([[0.2, -1.0]]), [-1])
    clf = StreamRidgeClassifierCV(alphas=[1.0], cv=2, class_weight="balanced").fit(XC, YC)
    assert_array_equal(clf.predict([[0.2, -1.0]]), [1])
    # equal class counts: 'balanced' == None
    X, y = XC[:4], np.array([1, 1, -1, -1])
    a = StreamRidgeClassifierCV(alphas=[1.0], cv=2).fit(X, y)
    b = StreamRidgeClassifierCV(alphas=[1.0], cv=2, class_weight="balanced").fit(X, y)
    assert len(b.classes_) == 2
    assert_allclose(a.coef_, b.coef_, rtol=1e-12)
    assert_allclose(a.intercept_, b.intercept_, rtol=1e-12)


@pytest.mark.parametrize("class_weight", [None, {1: 0.001}, {-1: 3.0, 1: 0.5}, "balanced"])
def test_class_weights_equal_sklearn_ridge_classifier(class_weight):
    """The final model equals RidgeClassifier's for the same alpha and class weights."""
    rng = np.random.RandomState(0)
    X = rng.randn(40, 3)
    y = np.where(X[:, 0] + 0.5 * rng.randn(40) > 0.6, 1, -1)
    ours = StreamRidgeClassifierCV(alphas=[0.7], cv=3, class_weight=class_weight).fit(X, y)
    ref = RidgeClassifier(alpha=0.7, class_weight=class_weight).fit(X, y)
    assert_allclose(ours.coef_, ref.coef_.reshape(1, -1), rtol=1e-10)
    assert_allclose(ours.intercept_, np.reshape(ref.intercept_, 1), rtol=1e-10)
    assert_array_equal(ours.predict(X), ref.predict(X))


def test_class_weight_vs_sample_weight():
    """test_class_weight_vs_sample_weight (RidgeClassifierCV): iris is balanced; class weights act as sample weights."""
    iris = load_iris()
    X, y = iris.data, iris.target
    a = StreamRidgeClassifierCV(alphas=[1.0]).fit(X, y)
    b = StreamRidgeClassifierCV(alphas=[1.0], class_weight="balanced").fit(X, y)
    assert_allclose(a.coef_, b.coef_, rtol=1e-10)
    sw = np.ones(y.shape)
    sw[y == 1] *= 100
    cw = {0: 1.0, 1: 100.0, 2: 1.0}
    # the whole lambda search agrees, not only the final fit
    a = StreamRidgeClassifierCV().fit(X, y, sample_weight=sw)
    b = StreamRidgeClassifierCV(class_weight=cw).fit(X, y)
    assert_allclose(a.fold_errors_, b.fold_errors_, rtol=1e-10)
    assert a.alpha_ == b.alpha_
    assert_allclose(a.coef_, b.coef_, rtol=1e-10)
    # sample_weight and class_weight multiply
    a = StreamRidgeClassifierCV().fit(X, y, sample_weight=sw**2)
    b = StreamRidgeClassifierCV(class_weight=cw).fit(X, y, sample_weight=sw)
    assert_allclose(a.fold_errors_, b.fold_errors_, rtol=1e-10)
    assert_allclose(a.coef_, b.coef_, rtol=1e-10)


def test_class_weights_cv():
    """test_class_weights_cv: the CV classifier honours class_weight."""
    clf = StreamRidgeClassifierCV(alphas=[0.01, 0.1, 1, 10], cv=2, class_weight={1: 0.001}).fit(XC, YC)
    assert_array_equal(clf.predict([[-0.2, 2]]), [-1])


def test_balanced_counts_sample_weights():
    """'balanced' with sample weights uses weighted class totals (compute_class_weight(sample_weight=)):
    integer weights are repeated rows and zero weights removed rows, for the final fit and the CV."""
    rng = np.random.RandomState(3)
    X = rng.randn(30, 3)
    y = np.where(X[:, 0] > 0.3, "b", "a")
    g = np.arange(30) % 3
    sw = rng.randint(0, 4, 30)
    rep = np.repeat(np.arange(30), sw)
    est = StreamRidgeClassifierCV(ALPHAS, class_weight="balanced")
    a = est.set_params(cv=list(LeaveOneGroupOut().split(X, groups=g))).fit(X, y, sample_weight=sw)
    b = StreamRidgeClassifierCV(
        ALPHAS, class_weight="balanced", cv=list(LeaveOneGroupOut().split(X[rep], groups=g[rep]))
    ).fit(X[rep], y[rep])
    assert_allclose(a.fold_errors_, b.fold_errors_, rtol=1e-9)
    assert_allclose(a.coef_, b.coef_, rtol=1e-9)


# ------------------------------------------------------------------ dtypes, intercept, shapes


def test_dtype_float32_input_gives_float64_statistics_and_coef():
    """test_dtype_match, as streamridge defines it: float32 input is accumulated in float64, so the
    model equals the float64 fit of the same (float32-representable) numbers; coef_ is float64."""
    rng = np.random.RandomState(0)
    X32 = rng.randn(60, 5).astype(np.float32) + np.float32(1e3)
    y32 = rng.randn(60).astype(np.float32)
    m32 = StreamRidgeCV(alphas=[1.0, 10.0]).fit(X32, y32)
    m64 = StreamRidgeCV(alphas=[1.0, 10.0]).fit(X32.astype(np.float64), y32.astype(np.float64))
    assert m32.stats_.sxx.dtype == np.float64 and m32.stats_.mean_x.dtype == np.float64
    assert m32.coef_.dtype == np.float64 and m32.predict(X32).dtype == np.float64
    assert_allclose(m32.coef_, m64.coef_, rtol=1e-12)
    assert_allclose(m32.fold_errors_, m64.fold_errors_, rtol=1e-12)


def test_ridge_gcv_integer_arrays():
    """test_ridge_gcv_integer_arrays: integer X and y equal their float versions."""
    rng = np.random.RandomState(0)
    X = rng.randint(0, 5, size=(20, 4))
    y = rng.randint(0, 5, size=20)
    a = StreamRidgeCV(alphas=[0.1, 1.0, 10.0]).fit(X, y)
    b = StreamRidgeCV(alphas=[0.1, 1.0, 10.0]).fit(X.astype(float), y.astype(float))
    assert_allclose(a.coef_, b.coef_, rtol=1e-12)
    assert_allclose(a.cv_errors_, b.cv_errors_, rtol=1e-12)
    assert a.cv_errors_.dtype == np.float64


def test_ridge_intercept_and_shapes():
    """test_ridge_intercept and test_ridge_shapes_type: Y = [y, 1 + y] shifts only the second intercept."""
    rng = np.random.RandomState(0)
    X, y = rng.randn(10, 4), rng.randn(10)
    one = _one_alpha(1.0).fit(X, y)
    assert one.coef_.shape == (4,) and isinstance(one.intercept_, float)
    two = _one_alpha(1.0).fit(X, np.c_[y, 1.0 + y])
    assert two.coef_.shape == (2, 4) and two.intercept_.shape == (2,)
    assert_allclose(two.intercept_, [one.intercept_, one.intercept_ + 1.0], rtol=1e-12)
    assert_allclose(two.coef_, [one.coef_, one.coef_], rtol=1e-12)
    ref = Ridge(alpha=1.0).fit(X, y)
    assert_allclose(one.coef_, ref.coef_, rtol=1e-10)
    assert one.intercept_ == pytest.approx(ref.intercept_)


def test_ridge_cv_individual_penalties():
    """test_ridge_cv_individual_penalties: one lambda per target = each target fitted alone on the same folds."""
    rng = np.random.RandomState(42)
    n, N = 20, 5
    y = rng.randn(n, 3)
    X = (
        y[:, [0]] @ np.ones((1, N))
        + y[:, [1]] @ (0.05 * np.ones((1, N)))
        + y[:, [2]] @ (0.001 * np.ones((1, N)))
        + rng.randn(n, N)
    )
    alphas = (1, 100, 1000)
    optimal = [StreamRidgeCV(alphas=alphas).fit(X, t).alpha_ for t in y.T]
    cv = StreamRidgeCV(alphas=alphas, alpha_per_target=True).fit(X, y)
    assert_array_equal(cv.alpha_, optimal)
    assert len(set(optimal)) > 1  # the targets really differ
    assert_allclose(Ridge(alpha=cv.alpha_).fit(X, y).coef_, cv.coef_, rtol=1e-10)
    assert cv.alpha_.shape == (3,)


# ------------------------------------------------------------------ RidgeCV on given splits


@pytest.mark.parametrize("cv", [KFold(5), KFold(5, shuffle=True, random_state=0), GroupKFold(5)])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_ridgecv_equals_sklearn_on_given_splits(cv, fit_intercept):
    """RidgeCV(cv=splitter, scoring='neg_mean_squared_error') and streamridge choose the same alpha and model
    (equal fold sizes: the mean of fold MSEs and the summed SSE have the same minimum)."""
    rng = np.random.RandomState(1)
    X = rng.randn(50, 6) + 5.0
    y = X @ rng.randn(6) + rng.randn(50)
    groups = np.arange(50) % 10 if isinstance(cv, GroupKFold) else None
    splits = list(cv.split(X, y, groups))  # RidgeCV takes groups only with metadata routing on
    ref = RidgeCV(
        alphas=ALPHAS, cv=splits, scoring="neg_mean_squared_error", fit_intercept=fit_intercept
    ).fit(X, y)
    ours = StreamRidgeCV(ALPHAS, cv=cv, fit_intercept=fit_intercept).fit(X, y, groups=groups)
    assert ours.alpha_ == ref.alpha_
    assert_allclose(ours.coef_, ref.coef_, rtol=1e-9)
    assert ours.intercept_ == pytest.approx(ref.intercept_, rel=1e-9, abs=1e-12)


def test_ridge_classifier_cv_equals_sklearn_on_given_splits():
    """RidgeClassifierCV on StratifiedKFold splits, one alpha: the same model."""
    iris = load_iris()
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    ref = RidgeClassifierCV(alphas=[0.3], cv=cv).fit(iris.data, iris.target)
    ours = StreamRidgeClassifierCV(alphas=[0.3], cv=cv).fit(iris.data, iris.target)
    assert_allclose(ours.coef_, ref.coef_, rtol=1e-10)
    assert_array_equal(ours.predict(iris.data), ref.predict(iris.data))


@pytest.mark.parametrize("shape", [(11, 8), (11, 20)], ids=["tall", "wide"])
@pytest.mark.parametrize("n_targets", [1, 3])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_ridge_gcv_vs_ridge_loo_cv(shape, n_targets, fit_intercept):
    """test_ridge_gcv_vs_ridge_loo_cv: leave-one-out from per-row folds equals scikit-learn's GCV."""
    rng = np.random.RandomState(0)
    n, N = shape
    X = rng.randn(n, N) * rng.uniform(0.5, 2, N) + rng.uniform(-3, 3, N)
    w = np.zeros((N, n_targets))
    w[:5] = rng.randn(5, n_targets)
    y = X @ w + 30.0 * rng.randn(n, n_targets) + 7.0
    y = y[:, 0] if n_targets == 1 else y
    alphas = [1e-3, 0.1, 1.0, 10.0, 1e3]
    gcv = RidgeCV(alphas=alphas, fit_intercept=fit_intercept).fit(X, y)
    ours = StreamRidgeCV(alphas, cv=LeaveOneOut(), fit_intercept=fit_intercept).fit(X, y)
    assert ours.n_folds_ == n
    assert ours.alpha_ == pytest.approx(gcv.alpha_)
    assert_allclose(ours.coef_, gcv.coef_, atol=1e-10)
    assert_allclose(ours.intercept_, gcv.intercept_, atol=1e-10)


def test_ridgecv_alphas_conversion_and_int_alphas():
    """test_ridgecv_alphas_conversion, test_ridgecv_int_alphas: alphas is not mutated; integers work."""
    rng = np.random.RandomState(0)
    alphas = (1, 10, 100)
    X, y = rng.randn(10, 3), rng.randn(10)
    est = StreamRidgeCV(alphas=alphas)
    assert est.alphas is alphas
    est.fit(X, y)
    assert est.alphas is alphas
    assert_array_equal(est.alphas_, np.asarray(alphas, dtype=float))
