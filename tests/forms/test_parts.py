"""Training and validation parts from cells (within + between) against moments computed from the rows."""

from __future__ import annotations

import numpy as np
import pytest

from streamridge.forms.build import part_factors
from streamridge.forms.parts import cell_group, exclusive_sums, training_parts
from streamridge.stats.foldstats import merge_all
from streamridge.stats.kernel import from_chunk


def row_moments(X, Y, w):
    """Weighted centered moments of rows (two-pass, float64): sxx, sxy, syy, mean_x, mean_y, n."""
    n = w.sum()
    mx, my = w @ X / n, w @ Y / n
    Xc, Yc = X - mx, Y - my
    return (Xc * w[:, None]).T @ Xc, (Xc * w[:, None]).T @ Yc, w @ Yc**2, mx, my, n


def data(rng, M=400, N=5, T=2, K=4, C=3, offset=1e6):
    X = rng.standard_normal((M, N)) * rng.uniform(0.5, 2, N) + offset
    Y = X @ rng.standard_normal((N, T)) + rng.standard_normal((M, T))
    folds = rng.integers(0, K, M)
    cls = rng.integers(0, C, M)
    w = rng.uniform(0.1, 2.0, M)
    return X, Y, folds, cls, w, from_chunk(X, Y, folds, cls, K, C, weights=w)


@pytest.mark.parametrize("balanced", [False, True, np.array([0.5, 2.0, 1.0])])
def test_training_parts_equal_row_moments_with_offset(rng, balanced):
    """Offset 1e6: the within + between construction keeps full accuracy (no cancellation)."""
    X, Y, folds, cls, w, stats = data(rng)
    ft, _ = part_factors(stats, balanced)
    parts = training_parts(stats, ft)
    for k in range(stats.n_folds):
        tr = folds != k
        ref = row_moments(X[tr], Y[tr], w[tr] * ft[k][cls[tr]])
        for got, want in zip(
            (parts.sxx[k], parts.sxy[k], parts.syy[k], parts.mean_x[k], parts.mean_y[k], parts.n[k]), ref
        ):
            np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10 * np.abs(want).max())


def test_cell_group_equals_pairwise_merges(rng):
    stats = data(rng, offset=3.0)[-1]
    cells = np.zeros(stats.weight.shape, dtype=bool)
    cells[[0, 0, 2, 3], [0, 2, 1, 2]] = True
    got = cell_group(stats, cells, np.ones(stats.n_classes))
    want = merge_all([stats.cell(int(k), int(c)) for k, c in np.argwhere(cells)])
    np.testing.assert_allclose(got.sxx[0], want.sxx[0, 0], rtol=1e-12)
    np.testing.assert_allclose(got.sxy[0], want.sxy[0, 0], rtol=1e-12)
    np.testing.assert_allclose(got.syy[0], want.syy[0, 0], rtol=1e-12)
    np.testing.assert_allclose(got.mean_x[0], want.mean_x[0, 0], rtol=1e-14)
    assert got.n[0] == pytest.approx(want.weight[0, 0], rel=1e-15)


def test_exclusive_sums(rng):
    S = rng.standard_normal((6, 3, 2))
    out = exclusive_sums(S, np.empty_like(S))
    for k in range(6):
        np.testing.assert_allclose(out[k], S.sum(axis=0) - S[k], rtol=1e-13, atol=1e-13)
    one = exclusive_sums(S[:1], np.empty_like(S[:1]))
    np.testing.assert_array_equal(one, 0.0)


def test_full_form_of_one_cell_leaves_the_statistics_alone(rng):
    """A single (fold, class) cell is returned as views; building the form must not modify the statistics."""
    from streamridge.forms.build import build_full_form

    X = rng.standard_normal((50, 3)) + 2.0
    stats = from_chunk(X, X[:, :1], np.zeros(50, dtype=int), None, 1, 1)
    before = stats.copy()
    build_full_form(stats, fit_intercept=False, standardize=True)
    for name in ("sxx", "sxy", "syy", "mean_x", "mean_y", "weight"):
        np.testing.assert_array_equal(getattr(stats, name), getattr(before, name))


@pytest.mark.parametrize("standardize", [False, True])
def test_forms_are_the_same_on_threads_and_serially(rng, monkeypatch, standardize):
    """Small N builds the folds' forms on one thread (forms.PARALLEL_FORMS_N); the threaded build of
    larger N gives bit-identical forms (every fold is built by the same operations either way)."""
    import streamridge.forms.build as forms

    *_, stats = data(rng, K=6)
    calls = []
    real = forms.map_folds
    monkeypatch.setattr(
        forms, "map_folds", lambda fn, n, workers=None: calls.append(workers) or real(fn, n, workers=workers)
    )
    serial = forms.build_forms(stats, standardize=standardize, balanced=True)
    monkeypatch.setattr(forms, "PARALLEL_FORMS_N", 1)
    threaded = forms.build_forms(stats, standardize=standardize, balanced=True)
    assert calls == [1, None]  # N = 5: one thread; then the default, one per core
    for name in ("At", "Bt", "Av", "Bv", "cv", "x_offset", "y_offset", "scale", "n_train", "n_val"):
        np.testing.assert_array_equal(getattr(serial, name), getattr(threaded, name), err_msg=name)


def test_training_sums_of_many_targets_cut_among_the_cores_are_the_same_bits(rng, monkeypatch):
    """The exclusive sums of X'Y over 1,100 targets, in 2 parts of columns on 2 threads: bit for bit those
    of one part (each column's sums are the same additions in the same order)."""
    from streamridge import parallel
    from streamridge.forms.parts import training_within
    from streamridge.stats.kernel import from_chunk

    X, Y = rng.standard_normal((60, 4)), rng.standard_normal((60, 1100))
    stats = from_chunk(X, Y, np.arange(60) % 5, None, 5, 1)
    factors = np.ones((5, 1))
    parts = []
    original = parallel.map_folds

    def recording(fn, n, **kw):
        parts.append(n)
        return original(fn, n, **kw)

    monkeypatch.setattr(parallel, "map_folds", recording)
    monkeypatch.setattr(parallel, "n_cpus", lambda: 2)
    two = training_within(stats, factors)
    monkeypatch.setattr(parallel, "n_cpus", lambda: 1)
    one = training_within(stats, factors)
    assert parts == [2, 1]
    for a, b in zip(two, one):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(one[1][2], stats.sxy[[0, 1, 3, 4], 0].sum(axis=0), rtol=1e-13, atol=1e-13)
