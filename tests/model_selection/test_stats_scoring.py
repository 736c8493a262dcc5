"""scoring="r2" / "correlation" of a regressor: from the statistics, no pass over the rows, equal to explicit refits."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import r2_score

import streamridge as sr
from streamridge.sources import _zarr, write_zarr
from tests.reference import fit_ridge

K = 4
ALPHAS = np.array([0.03, 1.0, 30.0, 1000.0])


def data(rng, M=160, N=6, T=3):
    X = rng.standard_normal((M, N)) * rng.uniform(0.5, 2, N) + rng.uniform(-2, 2, N)
    Y = X @ rng.standard_normal((N, T)) + 2.0 * rng.standard_normal((M, T)) + rng.uniform(-3, 3, T)
    folds = rng.permutation(np.arange(M) % K)  # fold k = group k (cv="groups")
    return X, Y, folds


def refit_scores(X, Y, folds, *, fit_intercept=True, standardize=False):
    """R² (scikit-learn) and Pearson's r (numpy) of shape (R, K, T) of ridge refitted on the other folds."""
    R, T = len(ALPHAS), Y.shape[1]
    r2, corr = np.zeros((R, K, T)), np.zeros((R, K, T))
    for k in range(K):
        tr, va = folds != k, folds == k
        for r, a in enumerate(ALPHAS):
            predict, _, _ = fit_ridge(X[tr], Y[tr], None, a, fit_intercept, standardize)
            P = predict(X[va]).reshape(va.sum(), -1)
            r2[r, k] = r2_score(Y[va], P, multioutput="raw_values")
            corr[r, k] = [np.corrcoef(P[:, t], Y[va, t])[0, 1] for t in range(T)]
    return r2, corr


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("standardize", [False, True])
def test_cv_scores_equal_scikit_learn_and_numpy_on_refits(rng, fit_intercept, standardize):
    X, Y, folds = data(rng)
    r2, corr = refit_scores(X, Y, folds, fit_intercept=fit_intercept, standardize=standardize)
    kw = {
        "cv": "groups",
        "fit_intercept": fit_intercept,
        "standardize": standardize,
        "alpha_per_target": True,
    }
    for scoring, ref in (("r2", r2), ("correlation", corr)):
        m = sr.StreamRidgeCV(ALPHAS, scoring=scoring, **kw).fit(X, Y, groups=folds)
        np.testing.assert_allclose(m.cv_scores_, ref, rtol=1e-8, atol=1e-12)
        best = ref.mean(axis=1).argmax(axis=0)  # per target; the grid has no ties here
        np.testing.assert_array_equal(m.alpha_, ALPHAS[best])
        assert "metric_pass_s" not in m.timings_


def test_one_lambda_for_all_and_one_se_follow_the_mean_score(rng):
    X, Y, folds = data(rng, T=4)
    r2, _ = refit_scores(X, Y, folds)
    m = sr.StreamRidgeCV(ALPHAS, cv="groups", scoring="r2").fit(X, Y, groups=folds)
    assert m.alpha_ == ALPHAS[r2.sum(axis=2).mean(axis=1).argmax()]
    m = sr.StreamRidgeCV(ALPHAS, cv="groups", scoring="r2", alpha_rule="1se", alpha_per_target=True).fit(
        X, Y, groups=folds
    )
    mean = r2.mean(axis=1)  # (R, T)
    best = mean.argmax(axis=0)
    se = np.array([r2[best[t], :, t].std(ddof=1) / np.sqrt(K) for t in range(4)])
    ok = mean >= (mean[best, np.arange(4)] - se)[None, :]
    expected = [ALPHAS[np.flatnonzero(ok[:, t])].max() for t in range(4)]
    np.testing.assert_array_equal(m.alpha_, expected)


def test_scores_need_no_rows_fit_stats_partial_fit_and_splits(rng):
    """Computed from the statistics: fit_stats and partial_fit take them, and so do explicit splits."""
    from sklearn.model_selection import PredefinedSplit

    X, Y, folds = data(rng)
    m = sr.StreamRidgeCV(ALPHAS, cv="groups", scoring="correlation", alpha_per_target=True).fit(
        X, Y, groups=folds
    )
    again = sr.StreamRidgeCV(ALPHAS, cv="groups", scoring="correlation", alpha_per_target=True).fit_stats(
        m.stats_
    )
    np.testing.assert_array_equal(again.cv_scores_, m.cv_scores_)
    np.testing.assert_array_equal(again.alpha_, m.alpha_)
    part = sr.StreamRidgeCV(ALPHAS, cv="groups", scoring="correlation", alpha_per_target=True)
    part.partial_fit(X[:80], Y[:80], groups=folds[:80]).partial_fit(X[80:], Y[80:], groups=folds[80:])
    np.testing.assert_allclose(part.cv_scores_, m.cv_scores_, rtol=1e-10)
    split = sr.StreamRidgeCV(ALPHAS, cv=PredefinedSplit(folds), scoring="correlation", alpha_per_target=True)
    np.testing.assert_allclose(split.fit(X, Y).cv_scores_, m.cv_scores_, rtol=1e-10)


@pytest.mark.parametrize(
    ("scoring", "passes"), [("r2", 1), ("correlation", 1), (None, 1), ("explained_variance", 2)]
)
def test_no_row_is_read_after_the_statistics_pass(rng, tmp_path, monkeypatch, scoring, passes):
    """Every row of X read once for R² and correlation (as for squared error); twice for a metric of the rows."""
    X, Y, _ = data(rng, M=400)
    store = write_zarr(tmp_path / "d.zarr", X, Y, chunk_rows=100)
    reads = []
    original = _zarr.ZarrReader.read

    def counting(self, start, stop):  # type: ignore[no-untyped-def]
        if self.shape[1:] == (X.shape[1],):  # X
            reads.append((start, stop))
        return original(self, start, stop)

    monkeypatch.setattr(_zarr.ZarrReader, "read", counting)
    sr.StreamRidgeCV(ALPHAS, scoring=scoring, alpha_per_target=True).fit(store)
    rows = sorted(r for a, b in reads for r in range(a, b))
    assert rows == sorted(list(range(400)) * passes)


def test_selection_with_scoring_and_rescore_from_the_statistics(rng):
    """scoring="r2" with a selection path re-chooses lambda (and with rescore the step) as the metric pass would."""
    X, Y, folds = data(rng, N=8, T=1)
    y = Y[:, 0]
    kw = {"cv": "groups", "selection": "forward", "rescore": 3}
    m = sr.StreamRidgeCV(ALPHAS, scoring="r2", **kw).fit(X, y, groups=folds)
    assert "metric_pass_s" not in m.timings_
    rows = sr.StreamRidgeCV(ALPHAS, scoring="explained_variance", **kw).fit(X, y, groups=folds)
    np.testing.assert_array_equal(m.rescore_steps_, rows.rescore_steps_)
    best = [None] * 3
    for i, step in enumerate(m.rescore_steps_):
        S = np.sort(m.selection_path_["feature"][1 : step + 1])
        r2, _ = refit_scores(X[:, S], Y, folds)
        best[i] = r2[:, :, 0].mean(axis=1).max()
    np.testing.assert_allclose(m.rescore_scores_, best, rtol=1e-8)
    assert m.selection_best_step_ == m.rescore_steps_[int(np.argmax(best))]
    assert m.cv_scores_.shape == (len(ALPHAS), K)
