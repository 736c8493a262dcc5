"""plot_data: the per-class validation error equals explicit per-fold refits scored on each class's rows."""

from __future__ import annotations

import numpy as np
import pytest

from streamridge import StreamRidgeClassifierCV, StreamRidgeCV
from streamridge.folds.schemes import FoldScheme
from streamridge.io.model_file import load_model, save_model
from streamridge.report.plot_data import class_validation_mse, lambda_curve
from tests.reference import fit_ridge, part_weights

K = 4


def _reference_class_mse(
    X, labels, n_classes, folds, alpha, *, sw, balanced, standardize, fit_intercept, support
):
    Y = np.where(labels[:, None] == np.arange(n_classes), 1.0, -1.0)
    if n_classes == 2:
        Y = Y[:, 1:]
    Xs = X[:, support]
    sse = np.zeros(n_classes)
    for k in range(K):
        tr, va = folds != k, folds == k
        wt = part_weights(sw, labels, n_classes, balanced, tr)
        predict, _, _ = fit_ridge(Xs[tr], Y[tr], wt, alpha, fit_intercept, standardize)
        resid = predict(Xs[va]).reshape(va.sum(), -1) - Y[va]
        w = np.ones(va.sum()) if sw is None else sw[va]
        for c in range(n_classes):
            rows = labels[va] == c
            sse[c] += (w[rows, None] * resid[rows] ** 2).sum()
    weight = np.bincount(labels, weights=sw, minlength=n_classes)
    return sse / (weight * Y.shape[1])


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize(
    ("balanced", "standardize", "fit_intercept", "weighted"),
    [(True, False, True, False), (True, True, True, True), (False, False, False, True)],
)
def test_class_mse_equals_refits(rng, n_classes, balanced, standardize, fit_intercept, weighted):
    M, N = 360, 6
    X = rng.standard_normal((M, N)) * np.array([1, 10, 0.1, 1, 1, 1]) + 1e3
    p = np.array([0.6, 0.3, 0.1])[:n_classes]
    labels = rng.choice(n_classes, size=M, p=p / p.sum())
    X[:, 0] += 2 * labels
    sw = rng.uniform(0.2, 2.0, M) if weighted else None
    est = StreamRidgeClassifierCV(
        cv=K,
        alphas=np.logspace(-2, 3, 6),
        class_weight="balanced" if balanced else None,
        standardize=standardize,
        fit_intercept=fit_intercept,
    ).fit(X, labels, sample_weight=sw)
    folds = FoldScheme("hash", K, seed=0).assign(0, M)
    ref = _reference_class_mse(
        X,
        labels,
        n_classes,
        folds,
        est.alpha_,
        sw=sw,
        balanced=balanced,
        standardize=standardize,
        fit_intercept=fit_intercept,
        support=np.arange(N),
    )
    np.testing.assert_allclose(class_validation_mse(est), ref, rtol=1e-7)


def test_class_mse_on_selected_features_and_from_a_file(rng, tmp_path):
    M = 300
    X = rng.standard_normal((M, 6))
    labels = (X[:, 1] - X[:, 4] + 0.5 * rng.standard_normal(M) > 0).astype(int)
    est = StreamRidgeClassifierCV(
        cv=K, alphas=np.logspace(-2, 3, 6), selection="forward", max_features=3
    ).fit(X, labels)
    support = np.flatnonzero(est.support_)
    assert 0 < support.size < 6  # a strict subset: the refits below use only these features
    folds = FoldScheme("hash", K, seed=0).assign(0, M)
    ref = _reference_class_mse(
        X,
        labels,
        2,
        folds,
        est.alpha_,
        sw=None,
        balanced=False,
        standardize=False,
        fit_intercept=True,
        support=support,
    )
    np.testing.assert_allclose(class_validation_mse(est), ref, rtol=1e-7)
    # unweighted classes: the class errors add up to the CV error at the chosen lambda
    j = int(np.argmin(np.abs(est.alphas_ - est.alpha_)))
    n_c = np.bincount(labels)
    assert (class_validation_mse(est) * n_c).sum() == pytest.approx(est.fold_errors_[j].sum(), rel=1e-9)
    save_model(est, tmp_path / "with.npz", include_stats=True)
    save_model(est, tmp_path / "without.npz")
    np.testing.assert_allclose(class_validation_mse(load_model(tmp_path / "with.npz")), ref, rtol=1e-7)
    assert class_validation_mse(load_model(tmp_path / "without.npz")) is None


def test_lambda_curve_edges_and_regressor(rng):
    X = rng.standard_normal((200, 4))
    y = X @ np.ones(4) + rng.standard_normal(200)
    est = StreamRidgeCV(cv=K, alphas=[1e4, 1e-3, 1e5]).fit(X, y)
    c = lambda_curve(est)
    np.testing.assert_array_equal(c.alphas, [1e-3, 1e4, 1e5])
    assert c.edge == "low" and c.best == 0 and c.chosen.tolist() == [0]
    assert class_validation_mse(est) is None
