"""R², correlation and squared error per (lambda, fold, target) from the forms against explicit per-fold refits."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import r2_score

from streamridge.errors import ParameterError
from streamridge.forms.build import build_forms
from streamridge.model_selection.scoring import choose_by_score
from streamridge.solvers.eigen import fold_errors_eigen
from streamridge.solvers.grid import choose
from streamridge.solvers.quadratics import fold_quadratics, validation_factor
from streamridge.solvers.target_scores import (
    choose_scores,
    fold_scores,
    validation_moments,
)
from streamridge.stats.kernel import from_chunk
from tests.conftest import ill_conditioned
from tests.reference import balanced_weights, fit_ridge, reference_fold_errors

K = 4
ALPHAS = np.array([0.03, 1.0, 30.0, 1000.0])


def make_data(rng, M=160, N=7, T=3, kind="well"):
    if kind == "well":
        X = rng.standard_normal((M, N)) * rng.uniform(0.5, 3, N) + rng.uniform(-2, 2, N)
    else:  # cond(X'X) = 1e12
        X = ill_conditioned(rng, M, N, cond_sv=1e6) + rng.uniform(-2, 2, N)
    Y = X @ rng.standard_normal((N, T)) + 2.0 * rng.standard_normal((M, T)) + rng.uniform(-3, 3, T)
    folds = rng.permutation(np.arange(M) % K)
    return X, Y, folds


def forms_of(X, Y, folds, w=None, **kw):
    stats = from_chunk(X, Y, folds, None, K, 1, w)
    return stats, build_forms(stats, **kw)


def weighted_corr(a, b, w):
    """Pearson correlation of two columns with weights w (numpy's weighted covariance)."""
    c = np.cov(np.vstack([a, b]), aweights=w)
    return c[0, 1] / np.sqrt(c[0, 0] * c[1, 1])


@np.errstate(invalid="ignore")
def reference_scores(X, Y, folds, alphas, w=None, *, fit_intercept=True, standardize=False):
    """R² (scikit-learn) and correlation (numpy) of shape (R, K, T) by explicit refits."""
    R, T = len(alphas), Y.shape[1]
    r2, corr = np.zeros((R, K, T)), np.zeros((R, K, T))
    for k in range(K):
        tr, va = folds != k, folds == k
        wt = None if w is None else w[tr]
        wv = None if w is None else w[va]
        for r, a in enumerate(alphas):
            predict, _, _ = fit_ridge(X[tr], Y[tr], wt, a, fit_intercept, standardize)
            P = predict(X[va])
            r2[r, k] = r2_score(Y[va], P, sample_weight=wv, multioutput="raw_values")
            for t in range(T):
                if w is None:  # a target constant on the fold: NaN, as numpy says
                    corr[r, k, t] = np.corrcoef(P[:, t], Y[va, t])[0, 1]
                else:
                    corr[r, k, t] = weighted_corr(P[:, t], Y[va, t], wv)
    return r2, corr


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("standardize", [False, True])
def test_r2_and_correlation_equal_refits(rng, fit_intercept, weighted, standardize):
    X, Y, folds = make_data(rng)
    w = rng.uniform(0.2, 2.0, len(X)) if weighted else None
    stats, forms = forms_of(X, Y, folds, w, fit_intercept=fit_intercept, standardize=standardize)
    moments = validation_moments(stats)
    r2, corr = reference_scores(X, Y, folds, ALPHAS, w, fit_intercept=fit_intercept, standardize=standardize)
    np.testing.assert_allclose(
        fold_scores(forms, ALPHAS, scoring="r2", moments=moments), r2, rtol=1e-8, atol=1e-12
    )
    got = fold_scores(forms, ALPHAS, scoring="correlation", moments=moments)
    np.testing.assert_allclose(got, corr, rtol=1e-8, atol=1e-12)
    sse = reference_fold_errors(
        X, Y, folds, ALPHAS, fit_intercept=fit_intercept, standardize=standardize, sample_weight=w
    )
    np.testing.assert_allclose(fold_scores(forms, ALPHAS, scoring="sse"), sse, rtol=1e-8)


def test_ill_conditioned_scores_within_1e6(rng):
    """cond(X'X) = 1e12 and lambda down to 1e-8: R² and correlation agree with refits to 1e-6 relative, 1e-7 absolute.

    Both lose digits to the conditioning: differences up to 1e-8 absolute at lambda = 1e-8, 1e-11 at 1e-5
    (a correlation near 0 differs by more than 1e-6 relative).
    """
    X, Y, folds = make_data(rng, kind="ill")
    stats, forms = forms_of(X, Y, folds)
    moments = validation_moments(stats)
    alphas = np.array([1e-8, 1e-5, 1e-2, 10.0])
    r2, corr = reference_scores(X, Y, folds, alphas)
    np.testing.assert_allclose(
        fold_scores(forms, alphas, scoring="r2", moments=moments), r2, rtol=1e-6, atol=1e-7
    )
    got = fold_scores(forms, alphas, scoring="correlation", moments=moments)
    np.testing.assert_allclose(got, corr, rtol=1e-6, atol=1e-7)


def test_fewer_validation_rows_than_features(rng):
    """Folds of 12 rows and 30 features: the validation form has rank 12, its factor 12 rows; scores still exact."""
    X, Y, folds = make_data(rng, M=48, N=30, T=4)
    stats, forms = forms_of(X, Y, folds)
    moments = validation_moments(stats)
    r2, corr = reference_scores(X, Y, folds, ALPHAS)
    np.testing.assert_allclose(fold_scores(forms, ALPHAS, scoring="r2", moments=moments), r2, rtol=1e-8)
    np.testing.assert_allclose(
        fold_scores(forms, ALPHAS, scoring="correlation", moments=moments), corr, rtol=1e-8
    )


def test_fewer_training_rows_than_features(rng):
    """Training parts of 45 rows and 70 features: only the range of the training form is kept; scores still exact."""
    X, Y, folds = make_data(rng, M=60, N=70, T=3)
    stats, forms = forms_of(X, Y, folds)
    moments = validation_moments(stats)
    r2, corr = reference_scores(X, Y, folds, ALPHAS)
    np.testing.assert_allclose(fold_scores(forms, ALPHAS, scoring="r2", moments=moments), r2, rtol=1e-8)
    np.testing.assert_allclose(
        fold_scores(forms, ALPHAS, scoring="correlation", moments=moments), corr, rtol=1e-8
    )
    sse = reference_fold_errors(X, Y, folds, ALPHAS)
    np.testing.assert_allclose(fold_scores(forms, ALPHAS, scoring="sse"), sse, rtol=1e-8)
    assert validation_factor(forms.At[0], forms.Av[0]).C.shape == (70, 44)  # rank 44: 45 rows less the mean


def test_squared_error_equals_eigen_solver_and_batches_agree(rng):
    X, Y, folds = make_data(rng, N=20, T=9)
    _, forms = forms_of(X, Y, folds)
    whole = fold_scores(forms, ALPHAS, scoring="sse")
    np.testing.assert_allclose(whole, fold_errors_eigen(forms, ALPHAS), rtol=1e-10)
    one_target = fold_scores(forms, ALPHAS, scoring="sse", max_bytes=1)  # batches of one target
    np.testing.assert_allclose(one_target, whole, rtol=1e-12)


def test_quadratics_equal_direct_products(rng):
    """q, c and m of one fold equal diag(W'AvW), diag(W'Bv) and W'dx of explicit solves."""
    N, T = 25, 6
    Xt, Xv = rng.standard_normal((80, N)), rng.standard_normal((10, N)) + 0.5
    Yt, Yv = rng.standard_normal((80, T)), rng.standard_normal((10, T))
    At, Bt, Av, Bv = Xt.T @ Xt, Xt.T @ Yt, Xv.T @ Xv, Xv.T @ Yv
    dx = rng.standard_normal(N)
    fq = fold_quadratics(At, Bt, Av, Bv, ALPHAS, dx=dx)
    for r, a in enumerate(ALPHAS):
        W = np.linalg.solve(At + a * np.eye(N), Bt)
        np.testing.assert_allclose(fq.q[r], np.einsum("nt,nt->t", W, Av @ W), rtol=1e-10)
        np.testing.assert_allclose(fq.c[r], np.einsum("nt,nt->t", W, Bv), rtol=1e-10)
        np.testing.assert_allclose(fq.m[r], dx @ W, rtol=1e-10)


def test_validation_moments_with_class_weights(rng):
    """Balanced class weights: each fold's weighted mean and centered sum of squares of y, and its weight sum."""
    M, T = 120, 2
    X, Y = rng.standard_normal((M, 3)), rng.standard_normal((M, T)) + 4.0
    folds = np.arange(M) % 3
    cls = (rng.uniform(size=M) < 0.3).astype(int)
    w = rng.uniform(0.5, 2.0, M)
    stats = from_chunk(X, Y, folds, cls, 3, 2, w)
    mo = validation_moments(stats, balanced=True, train_only=1)
    assert mo.n.shape == (2,)
    for i, k in enumerate([1, 2]):
        va = folds == k
        wv = w[va] * balanced_weights(cls[va], 2, w[va])
        mean = np.average(Y[va], axis=0, weights=wv)
        np.testing.assert_allclose(mo.mean_y[i], mean, rtol=1e-12)
        np.testing.assert_allclose(mo.syy[i], (wv[:, None] * (Y[va] - mean) ** 2).sum(axis=0), rtol=1e-10)
        np.testing.assert_allclose(
            mo.mean_x[i], np.average(X[va], axis=0, weights=wv), rtol=1e-10, atol=1e-14
        )
        assert mo.n[i] == pytest.approx(wv.sum(), rel=1e-12)


def test_constant_target_on_a_fold_scores_zero(rng):
    """A target constant on fold 0 has R² 0 and correlation 0 there (not NaN); the other folds are scored as usual."""
    X, Y, folds = make_data(rng)
    Y[folds == 0, 1] = 2.5
    stats, forms = forms_of(X, Y, folds)
    moments = validation_moments(stats)
    r2 = fold_scores(forms, ALPHAS, scoring="r2", moments=moments)
    corr = fold_scores(forms, ALPHAS, scoring="correlation", moments=moments)
    assert moments.syy[0, 1] == 0.0
    np.testing.assert_array_equal(r2[:, 0, 1], 0.0)
    np.testing.assert_array_equal(corr[:, 0, 1], 0.0)
    ref_r2, _ = reference_scores(X, Y, folds, ALPHAS)
    np.testing.assert_allclose(r2[:, 1:, 1], ref_r2[:, 1:, 1], rtol=1e-8)


def test_choose_scores_is_the_best_mean_score(rng):
    X, Y, folds = make_data(rng, T=5)
    Y[:, 4] = 5 * rng.standard_normal(len(Y))  # pure noise: a large lambda
    stats, forms = forms_of(X, Y, folds)
    alphas = np.logspace(-2, 4, 9)
    S = fold_scores(forms, alphas, scoring="r2", moments=validation_moments(stats))
    idx = choose_scores(S, alphas, scoring="r2", per_target=True)
    np.testing.assert_array_equal(idx, np.argmax(S.mean(axis=1), axis=0))
    assert idx[4] == 8
    shared = choose_scores(S, alphas, scoring="r2", per_target=False)
    assert shared == np.argmax(S.mean(axis=(1, 2)))
    for per_target in (
        True,
        False,
    ):  # the 1-SE rule as the metric pass's choice, an independent implementation
        one_se = choose_scores(S, alphas, scoring="r2", per_target=per_target, one_se=True)
        np.testing.assert_array_equal(one_se, choose_by_score(S, alphas, per_target=per_target, one_se=True))
    E = fold_scores(forms, alphas, scoring="sse")
    np.testing.assert_array_equal(
        choose_scores(E, alphas, scoring="sse", per_target=True), choose(E, alphas, per_target=True)
    )


@pytest.mark.parametrize("scoring", ["r2", "correlation"])
def test_choice_and_scores_equal_himalaya_ridge_cv(rng, scoring):
    """The same folds and lambdas, one lambda per target: himalaya's choice and CV score (less its tie-break slope)."""
    himalaya_ridge = pytest.importorskip("himalaya.ridge")
    himalaya_scoring = pytest.importorskip("himalaya.scoring")
    from sklearn.model_selection import PredefinedSplit

    X, Y, folds = make_data(rng, T=8)
    Y[:, :3] += 3 * rng.standard_normal((len(Y), 3))
    stats, forms = forms_of(X, Y, folds)
    alphas = np.logspace(-1, 4, 8)
    S = fold_scores(forms, alphas, scoring=scoring, moments=validation_moments(stats))
    idx = choose_scores(S, alphas, scoring=scoring, per_target=True)
    score_func = himalaya_scoring.r2_score if scoring == "r2" else himalaya_scoring.correlation_score
    model = himalaya_ridge.RidgeCV(
        alphas=alphas,
        fit_intercept=True,
        cv=PredefinedSplit(folds),
        solver_params=dict(score_func=score_func),
    ).fit(X, Y)
    assert len(np.unique(idx)) > 1
    np.testing.assert_allclose(alphas[idx], np.asarray(model.best_alphas_), rtol=1e-12)
    best = S.mean(axis=1)[idx, np.arange(8)]
    np.testing.assert_allclose(best, np.asarray(model.cv_scores_) - 1e-10 * np.log(alphas[idx]), rtol=1e-8)


def test_scoring_and_moments_are_checked(rng):
    X, Y, folds = make_data(rng)
    _, forms = forms_of(X, Y, folds)
    with pytest.raises(
        ParameterError, match=r"scoring must be one of \['correlation', 'r2', 'sse'\]; got scoring='R2'"
    ):
        fold_scores(forms, ALPHAS, scoring="R2")
    with pytest.raises(ParameterError, match=r"scoring='r2' needs the validation folds' moments"):
        fold_scores(forms, ALPHAS, scoring="r2")


@pytest.mark.parametrize("scoring", ["r2", "correlation"])
def test_targets_cut_among_the_cores_give_the_scores_of_one_part(rng, monkeypatch, scoring):
    """5 folds on 2 cores: each fold's 1,100 targets in 2 parts (tasks balance); the scores equal those
    computed in one part on 1 core, and those of 5 folds on 1 core equal the explicit refits."""
    from streamridge import parallel
    from streamridge.solvers import target_scores

    M, N, T = 150, 9, 1100
    X = rng.standard_normal((M, N)) + 1.0
    Y = X @ rng.standard_normal((N, T)) + rng.standard_normal((M, T))
    folds = rng.permutation(np.arange(M) % 5)
    stats = from_chunk(X, Y, folds, None, 5, 1)
    forms = build_forms(stats, with_moments=True)
    cuts = []
    original = parallel.column_parts

    def recording(n, workers, *, when=True):
        out = original(n, workers, when=when)
        cuts.append(len(out))
        return out

    monkeypatch.setattr(target_scores, "column_parts", recording)
    monkeypatch.setattr(target_scores, "n_cpus", lambda: 2)
    two = fold_scores(forms, ALPHAS, scoring=scoring)
    monkeypatch.setattr(target_scores, "n_cpus", lambda: 1)
    one = fold_scores(forms, ALPHAS, scoring=scoring)
    assert cuts == [2, 1]
    np.testing.assert_allclose(two, one, rtol=1e-12, atol=1e-14)
    if scoring == "r2":  # lambda 1.0, fold 2: an explicit refit
        predict, _, _ = fit_ridge(X[folds != 2], Y[folds != 2], None, 1.0, True, False)
        ref = r2_score(Y[folds == 2], predict(X[folds == 2]), multioutput="raw_values")
        np.testing.assert_allclose(one[1, 2], ref, rtol=1e-9, atol=1e-12)
