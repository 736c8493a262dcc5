"""partial_fit with hashed groups on batches that hold a single series."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import streamridge as sr
from streamridge.errors import FoldError


def test_one_series_per_batch(rng):
    """Batches of one series each: every batch is accepted (the folds fill as the series arrive)."""
    X = rng.standard_normal((600, 3))
    y = X @ [1.0, -2.0, 0.5] + 0.1 * rng.standard_normal(600)
    g = np.repeat(np.arange(6), 100)
    whole = sr.StreamRidgeCV(cv=3).fit(X, y, groups=g)
    inc = sr.StreamRidgeCV(cv=3)
    ready = []
    for s in range(6):
        rows = slice(100 * s, 100 * (s + 1))
        try:
            inc.partial_fit(X[rows], y[rows], groups=g[rows])
            ready.append(s)
        except FoldError as e:  # not every fold has rows yet: the model is selected once they do
            assert "folds are still empty" in str(e)
    assert ready and ready[-1] == 5 and ready[0] >= 1
    for name in ("count", "mean_x", "sxx", "sxy"):
        np.testing.assert_allclose(
            getattr(inc.stats_, name), getattr(whole.stats_, name), rtol=1e-12, atol=1e-12
        )
    np.testing.assert_allclose(inc.coef_, whole.coef_, rtol=1e-10)
    with pytest.raises(FoldError, match="distinct groups but cv=3"):  # fit still checks up front
        sr.StreamRidgeCV(cv=3).fit(X[:100], y[:100], groups=g[:100])


def _series(rng, lengths, n_features=4, n_targets=1, offset=0.0):
    """Rows of several series (ids in arrival order), targets linear plus noise."""
    X = rng.standard_normal((sum(lengths), n_features)) + offset
    W = rng.standard_normal((n_features, n_targets))
    Y = X @ W + 0.3 * rng.standard_normal((X.shape[0], n_targets))
    return X, Y


ARRIVAL = [3, 7, 1, 5, 0]  # new ids land before, between and after the folds seen so far
LENGTHS = [40, 25, 60, 33, 50]


def _incremental(est, X, y, w, classes=None):
    """partial_fit one series per call; the first call (one group) refuses to select a model."""
    start = 0
    for i, (gid, m) in enumerate(zip(ARRIVAL, LENGTHS)):
        rows = slice(start, start + m)
        kw = {} if classes is None else {"classes": classes}
        args = (X[rows], y[rows])
        if i == 0:
            with pytest.raises(FoldError, match="at least 2 distinct groups; got 1 so far"):
                est.partial_fit(*args, groups=np.full(m, gid), sample_weight=w[rows], **kw)
            assert est.stats_.n_folds == 1  # kept: the next series adds a fold
        else:
            est.partial_fit(*args, groups=np.full(m, gid), sample_weight=w[rows], **kw)
            assert est.stats_.n_folds == i + 1
        start += m
    return est


def _assert_same_model(inc, whole, rtol=1e-12):
    assert inc.stats_.meta["scheme"] == whole.stats_.meta["scheme"]
    for name in ("weight", "count", "mean_x", "mean_y", "sxx", "sxy", "syy"):
        np.testing.assert_allclose(
            getattr(inc.stats_, name), getattr(whole.stats_, name), rtol=1e-12, atol=1e-12
        )
    np.testing.assert_allclose(inc.cv_errors_, whole.cv_errors_, rtol=rtol)
    np.testing.assert_allclose(inc.fold_errors_, whole.fold_errors_, rtol=rtol)
    np.testing.assert_array_equal(inc.alpha_, whole.alpha_)
    np.testing.assert_allclose(inc.coef_, whole.coef_, rtol=rtol, atol=rtol / 10)
    np.testing.assert_allclose(inc.intercept_, whole.intercept_, rtol=rtol, atol=rtol / 10)


@pytest.mark.parametrize(
    ("fit_intercept", "offset", "rtol"),
    # a 1e6 offset: both sides' means round at 1e6 * eps in different orders, which the fold-mean
    # differences of the CV errors magnify (measured 5e-11); without it the two agree to 1e-12
    [(True, 0.0, 1e-12), (False, 0.0, 1e-12), (True, 1e6, 1e-9)],
)
@pytest.mark.parametrize("n_targets", [1, 3])
def test_leave_one_series_out_incrementally(rng, fit_intercept, offset, rtol, n_targets):
    """One series per partial_fit call equals one fit with cv='groups' over all series."""
    X, Y = _series(rng, LENGTHS, n_targets=n_targets, offset=offset)
    y = Y[:, 0] if n_targets == 1 else Y
    w = rng.uniform(0.5, 2.0, X.shape[0])
    g = np.repeat(ARRIVAL, LENGTHS)
    kw = {"cv": "groups", "fit_intercept": fit_intercept, "alphas": np.logspace(-3, 3, 13)}
    whole = sr.StreamRidgeCV(**kw).fit(X, y, groups=g, sample_weight=w)
    inc = _incremental(sr.StreamRidgeCV(**kw), X, y, w)
    assert inc.n_folds_ == 5 and inc.stats_.meta["scheme"]["group_values"] == [0, 1, 3, 5, 7]
    _assert_same_model(inc, whole, rtol)


def test_leave_one_series_out_incrementally_classifier(rng):
    X, _ = _series(rng, LENGTHS)
    labels = np.array(["a", "b", "c"])[
        np.argmax(X[:, :3] + 0.5 * rng.standard_normal((X.shape[0], 3)), axis=1)
    ]
    w = np.ones(X.shape[0])
    g = np.repeat(ARRIVAL, LENGTHS)
    kw = {"cv": "groups", "class_weight": "balanced"}
    whole = sr.StreamRidgeClassifierCV(**kw).fit(X, labels, groups=g)
    inc = _incremental(sr.StreamRidgeClassifierCV(**kw), X, labels, w, classes=["a", "b", "c"])
    _assert_same_model(inc, whole)
    np.testing.assert_array_equal(inc.predict(X), whole.predict(X))


def test_single_series_shards_merge_by_group_id(rng):
    """compute_stats(cv='groups') on one series works; shards of different group sets merge as one pass."""
    X, Y = _series(rng, LENGTHS)
    g = np.repeat(ARRIVAL, LENGTHS)
    whole = sr.StreamRidgeCV(cv="groups").fit(X, Y[:, 0], groups=g)
    bounds = np.concatenate([[0], np.cumsum(LENGTHS)])
    shards = [
        sr.StreamRidgeCV(cv="groups").compute_stats(X, Y[:, 0], groups=g, rows=(int(a), int(b)))
        for a, b in itertools.pairwise(bounds)
    ]
    assert [s.n_folds for s in shards] == [1] * 5  # a shard's folds are its own series
    alone = sr.StreamRidgeCV(cv="groups").compute_stats(X[:40], Y[:40, 0], groups=g[:40])  # one series alone
    np.testing.assert_array_equal(alone.sxx, shards[0].sxx)
    with pytest.raises(FoldError, match="at least 2 distinct groups; got 1 so far"):
        sr.StreamRidgeCV(cv="groups").fit_stats(shards[0])
    two = sr.merge(sr.merge(shards[4], shards[1]), sr.merge(shards[0], sr.merge(shards[2], shards[3])))
    assert two.meta["row_ranges"] == [[0, int(bounds[-1])]]
    fitted = sr.StreamRidgeCV(cv="groups").fit_stats(two)
    _assert_same_model(fitted, whole)
    with pytest.raises(Exception, match="overlap"):  # the same series twice is still refused
        sr.merge(shards[0], shards[0])


def test_leave_one_series_out_incrementally_with_a_reservoir(rng):
    """An ESN read-out fed one series per partial_fit call equals one fit over all series."""
    from streamridge.features import EchoStateNetwork

    lengths = [80, 120, 60, 100]
    X = rng.standard_normal((sum(lengths), 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(X.shape[0])
    g = np.repeat([5, 2, 9, 1], lengths)
    kw = {"cv": "groups", "alphas": np.logspace(-3, 2, 6)}
    whole = sr.StreamRidgeCV(features=EchoStateNetwork(15, seed=1, washout=4), **kw).fit(X, y, groups=g)
    inc = sr.StreamRidgeCV(features=EchoStateNetwork(15, seed=1, washout=4), **kw)
    start = 0
    for i, m in enumerate(lengths):
        rows = slice(start, start + m)
        if i == 0:
            with pytest.raises(FoldError, match="got 1 so far"):
                inc.partial_fit(X[rows], y[rows], groups=g[rows])
        else:
            inc.partial_fit(X[rows], y[rows], groups=g[rows])
        start += m
    _assert_same_model(inc, whole)
