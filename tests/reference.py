"""Slow, obviously-correct references: explicit scikit-learn refits per fold and lambda."""

from __future__ import annotations

import numpy as np
from sklearn.linear_model import Ridge
from sklearn.preprocessing import StandardScaler


def balanced_weights(cls: np.ndarray, n_classes: int, sample_weight: np.ndarray | None = None) -> np.ndarray:
    """Row factors n / (C n_c) of one part, n_c the class's weight sum (scikit-learn's 'balanced'
    convention, ``compute_class_weight(..., sample_weight=)``; row counts when unweighted)."""
    counts = np.bincount(cls, weights=sample_weight, minlength=n_classes)
    return counts.sum() / (n_classes * counts[cls])


def part_weights(sw, cls, n_classes, balanced, mask):
    w = np.ones(mask.sum()) if sw is None else sw[mask].astype(float)
    if balanced:
        w = w * balanced_weights(cls[mask], n_classes, w)
    return w


def fit_ridge(X, Y, w, alpha, fit_intercept, standardize):
    """Ridge on the rows (StandardScaler with the same weights when standardizing); returns predict fn."""
    scaler = None
    if standardize:
        scaler = StandardScaler(with_mean=fit_intercept).fit(X, sample_weight=w)
        X = scaler.transform(X)
    m = Ridge(alpha=alpha, fit_intercept=fit_intercept, solver="cholesky").fit(X, Y, sample_weight=w)

    def predict(Z):
        return m.predict(scaler.transform(Z) if scaler is not None else Z)

    return predict, m, scaler


def reference_fold_errors(
    X,
    Y,
    folds,
    alphas,
    *,
    fit_intercept=True,
    standardize=False,
    sample_weight=None,
    cls=None,
    n_classes=1,
    balanced=False,
):
    """Validation SSE of shape (R, K, T) by explicit refits."""
    Y = Y.reshape(len(Y), -1)
    K = int(folds.max()) + 1
    cls = np.zeros(len(X), int) if cls is None else cls
    out = np.zeros((len(alphas), K, Y.shape[1]))
    for k in range(K):
        tr, va = folds != k, folds == k
        wt = part_weights(sample_weight, cls, n_classes, balanced, tr)
        wv = part_weights(sample_weight, cls, n_classes, balanced, va)
        for r, a in enumerate(alphas):
            predict, _, _ = fit_ridge(X[tr], Y[tr], wt, a, fit_intercept, standardize)
            resid = predict(X[va]).reshape(va.sum(), -1) - Y[va]
            out[r, k] = (wv[:, None] * resid**2).sum(axis=0)
    return out
