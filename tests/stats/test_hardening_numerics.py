"""Numerics and parameters: overflow and underflow, rank deficiency and the limits of lambda, alpha_ and alphas types.

The regularization-limit tests are ports of scikit-learn's tests of ``alpha -> 0``
and ``alpha -> inf``.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from sklearn.datasets import make_regression

from streamridge import StreamRidgeClassifierCV, StreamRidgeCV
from streamridge.errors import ParameterError, ScaleError
from streamridge.folds.schemes import FoldScheme

K = 5


def folds_of(est, M):
    return FoldScheme("hash", K, seed=est.random_state).assign(0, M)


def lstsq_ref(X, Y, w, fit_intercept):
    """Minimum-norm (weighted) least squares by pinv: coef (N, T), intercept (T,)."""
    w = np.ones(len(X)) if w is None else w
    if fit_intercept:
        xbar, ybar = w @ X / w.sum(), w @ Y / w.sum()
    else:
        xbar, ybar = np.zeros(X.shape[1]), np.zeros(Y.shape[1])
    s = np.sqrt(w)[:, None]
    coef = np.linalg.pinv((X - xbar) * s) @ ((Y - ybar) * s)
    return coef, ybar - xbar @ coef


def limit_fold_errors(X, Y, w, folds, fit_intercept, limit):
    """Validation SSE per fold (K, T) of the alpha -> 0 (pinv) or alpha -> inf (intercept only) model."""
    w = np.ones(len(X)) if w is None else w
    out = np.zeros((K, Y.shape[1]))
    for k in range(K):
        tr, va = folds != k, folds == k
        if limit == "zero":
            coef, b = lstsq_ref(X[tr], Y[tr], w[tr], fit_intercept)
        else:
            coef = np.zeros((X.shape[1], Y.shape[1]))
            b = w[tr] @ Y[tr] / w[tr].sum() if fit_intercept else np.zeros(Y.shape[1])
        out[k] = w[va] @ (Y[va] - b - X[va] @ coef) ** 2
    return out


# ---------------------------------------------------------------- rank deficiency, lambda -> 0


def test_rank_deficient_tiny_alpha_is_min_norm_least_squares():
    """Rank-deficient X (100 features, 50 rows) with lambda 1e-16: the minimum-norm least-squares coef_, as scikit-learn's RidgeCV gives."""
    X, y = make_regression(50, 100, noise=0, random_state=0)
    est = StreamRidgeCV(alphas=[1e-16]).fit(X, y)
    coef, b = lstsq_ref(X, y[:, None], None, True)
    assert np.linalg.norm(est.coef_ - coef[:, 0]) <= 1e-10 * np.linalg.norm(coef)
    assert abs(est.intercept_ - b[0]) <= 1e-10 * max(1.0, abs(b[0]))
    np.testing.assert_allclose(est.predict(X), y, rtol=0, atol=1e-9 * np.abs(y).max())


DATA = [("tall", 120, 6), ("wide", 40, 60), ("collinear", 120, 6)]


def limit_data(rng, shape, T, weighted):
    _, M, N = shape
    X = rng.standard_normal((M, N)) + rng.uniform(-3, 3, N)
    if shape[0] == "collinear":  # rank N - 2: two exact linear combinations
        X[:, -1] = X[:, 0] - 2 * X[:, 1]
        X[:, -2] = 0.5 * X[:, 2]
    Y = X @ rng.standard_normal((N, T)) + 0.3 * rng.standard_normal((M, T)) + 4.0
    w = rng.uniform(0.2, 3.0, M) if weighted else None
    return X, Y, w


@pytest.mark.parametrize("solver", ["eigen", "covariance"])
@pytest.mark.parametrize("shape", DATA, ids=[d[0] for d in DATA])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("T", [1, 3])
def test_alpha_to_zero_is_least_squares(rng, solver, shape, fit_intercept, weighted, T):
    """scikit-learn's "alpha -> 0 equals least squares / pinv": final model and every fold's error."""
    X, Y, w = limit_data(rng, shape, T, weighted)
    y = Y[:, 0] if T == 1 else Y
    est = StreamRidgeCV(alphas=[1e-13], fit_intercept=fit_intercept, solver=solver).fit(X, y, sample_weight=w)
    coef, b = lstsq_ref(X, Y, w, fit_intercept)
    got = np.atleast_2d(est.coef_).reshape(T, -1)
    assert np.linalg.norm(got - coef.T) <= 1e-9 * np.linalg.norm(coef)
    np.testing.assert_allclose(np.atleast_1d(est.intercept_), b, rtol=1e-9, atol=1e-9 * np.abs(Y).max())
    ref = limit_fold_errors(X, Y, w, folds_of(est, len(X)), fit_intercept, "zero")
    np.testing.assert_allclose(est.fold_errors_[0], ref, rtol=1e-8)


@pytest.mark.parametrize("solver", ["eigen", "covariance"])
@pytest.mark.parametrize("shape", DATA, ids=[d[0] for d in DATA])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("T", [1, 3])
def test_alpha_to_infinity_is_intercept_only(rng, solver, shape, fit_intercept, weighted, T):
    """scikit-learn's "alpha -> inf equals intercept only": coef_ -> 0, intercept_ -> weighted mean of y."""
    X, Y, w = limit_data(rng, shape, T, weighted)
    y = Y[:, 0] if T == 1 else Y
    big = 1e14 * float(np.sum(X**2))
    est = StreamRidgeCV(alphas=[big], fit_intercept=fit_intercept, solver=solver).fit(X, y, sample_weight=w)
    wt = np.ones(len(X)) if w is None else w
    assert np.abs(est.coef_).max() <= 1e-12 * np.abs(Y).max()
    ybar = wt @ Y / wt.sum() if fit_intercept else np.zeros(T)
    np.testing.assert_allclose(np.atleast_1d(est.intercept_), ybar, rtol=1e-10, atol=1e-12)
    ref = limit_fold_errors(X, Y, w, folds_of(est, len(X)), fit_intercept, "inf")
    np.testing.assert_allclose(est.fold_errors_[0], ref, rtol=1e-9)


@pytest.mark.parametrize("solver", ["eigen", "covariance"])
def test_rank_deficient_grid_matches_explicit_refits(rng, solver):
    """Over a whole grid from 1e-14 to 1e2 (x mean eigenvalue), wide data: fold errors equal refits
    (scikit-learn Ridge for the lambdas where its solve is accurate, pinv at the bottom)."""
    from tests.reference import reference_fold_errors

    X, Y, _ = limit_data(rng, ("wide", 40, 60), 2, False)
    scale = np.trace(np.cov(X.T, bias=True)) * len(X) / X.shape[1]
    alphas = scale * np.logspace(-14, 2, 9)
    est = StreamRidgeCV(alphas=alphas, solver=solver).fit(X, Y)
    folds = folds_of(est, len(X))
    ref = reference_fold_errors(X, Y, folds, alphas[4:])  # lambda >= 1e-6 x scale: Cholesky refits are exact
    np.testing.assert_allclose(est.fold_errors_[4:], ref, rtol=1e-8)
    np.testing.assert_allclose(
        est.fold_errors_[0], limit_fold_errors(X, Y, None, folds, True, "zero"), rtol=1e-8
    )


def test_eigen_and_covariance_agree_on_singular_forms(rng):
    X, Y, _ = limit_data(rng, ("collinear", 120, 6), 2, True)
    alphas = np.logspace(-16, 3, 20)
    a = StreamRidgeCV(alphas=alphas, solver="eigen").fit(X, Y)
    b = StreamRidgeCV(alphas=alphas, solver="covariance").fit(X, Y)
    np.testing.assert_allclose(a.fold_errors_, b.fold_errors_, rtol=1e-9)


# ---------------------------------------------------------------- alpha_ shape, alphas types


def test_alpha_is_scalar_for_1d_y_with_alpha_per_target(rng):
    X = rng.standard_normal((60, 4))
    y = X @ np.ones(4) + rng.standard_normal(60)
    est = StreamRidgeCV(alphas=[0.1, 1.0, 10.0], alpha_per_target=True).fit(X, y)
    assert isinstance(est.alpha_, float)
    assert est.alpha_ == StreamRidgeCV(alphas=[0.1, 1.0, 10.0]).fit(X, y).alpha_
    two = StreamRidgeCV(alphas=[0.1, 1.0, 10.0], alpha_per_target=True).fit(X, np.c_[y, y])
    assert np.shape(two.alpha_) == (2,)


@pytest.mark.parametrize(
    "alphas", [["a", "b"], [1.0, "x"], "1.0", [None], [1 + 2j], [[1.0], [2.0, 3.0]], object()]
)
@pytest.mark.parametrize("cls", [StreamRidgeCV, StreamRidgeClassifierCV])
def test_non_numeric_alphas_are_parameter_errors(rng, alphas, cls):
    X = rng.standard_normal((30, 3))
    y = (X[:, 0] > 0).astype(int)
    with pytest.raises(ParameterError, match="alphas must be") as info:
        cls(alphas=alphas).fit(X, y)
    assert isinstance(info.value, TypeError) and isinstance(
        info.value, ValueError
    )  # as scikit-learn's InvalidParameterError
    assert "\n" not in str(info.value)


# ---------------------------------------------------------------- overflow and underflow


def scale_data(rng, M=200, N=4):
    X = rng.standard_normal((M, N))
    return X, X @ np.arange(1.0, N + 1) + rng.standard_normal(M)


CASES = [  # (name, X factor, y factor, estimator options, message)
    ("y_huge", 1.0, 1e200, {}, "y is too large for float64 statistics.*divide y by a constant"),
    ("X_huge", 1e200, 1.0, {}, "X is too large for float64 statistics.*divide X by a constant"),
    (
        "X_tiny_standardize",
        1e-200,
        1.0,
        {"standardize": True},
        "X is too small for float64 statistics.*multiply X by a constant",
    ),
    ("X_tiny", 1e-200, 1.0, {}, "X is too small.*multiply X"),
    ("y_tiny", 1.0, 1e-200, {}, "y is too small.*multiply y"),
]


@pytest.mark.parametrize("name,fx,fy,opts,message", CASES, ids=[c[0] for c in CASES])
def test_overflow_and_underflow_are_one_line_errors(rng, name, fx, fy, opts, message):
    """Was: y 1e200 chose a lambda from all-NaN errors; X 1e200 'Eigenvalues did not converge' plus warnings;
    X 1e-200 an intercept-only model."""
    X, y = scale_data(rng)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning on the way
        with pytest.raises(ScaleError, match=message) as info:
            StreamRidgeCV(**opts).fit(X * fx, y * fy)
    assert "\n" not in str(info.value) and isinstance(info.value, ValueError)


@pytest.mark.parametrize("name,fx,fy,opts,message", CASES[:3], ids=[c[0] for c in CASES[:3]])
def test_cli_overflow_and_underflow_exit_2_with_one_line(rng, tmp_path, capsys, name, fx, fy, opts, message):
    from streamridge import cli
    from streamridge.sources import write_zarr

    X, y = scale_data(rng)
    store = write_zarr(tmp_path / "d.zarr", X * fx, y * fy, None, chunk_rows=64)
    model = tmp_path / "m.npz"
    argv = ["fit", "--data", str(store), "--out", str(model), "--quiet"] + (["--standardize"] if opts else [])
    code = cli.main(argv)
    _, err = capsys.readouterr()
    assert code == 2 and not model.exists()
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("streamridge: error:") and re.search(message, lines[0]), lines[0]


def test_large_and_small_but_representable_data_fit_exactly(rng):
    """1e100 and 1e-100 are fine: the fit equals the unscaled one with lambda scaled by the same factor squared."""
    X, y = scale_data(rng)
    alphas = np.array([0.1, 1.0, 10.0])
    base = StreamRidgeCV(alphas=alphas).fit(X, y)
    for f in (1e100, 1e-100):
        est = StreamRidgeCV(alphas=alphas * f**2).fit(X * f, y)
        assert est.alpha_ == pytest.approx(base.alpha_ * f**2, rel=1e-15)
        np.testing.assert_allclose(est.coef_ * f, base.coef_, rtol=1e-10)
        np.testing.assert_allclose(est.fold_errors_, base.fold_errors_, rtol=1e-10)


def test_offset_overflowing_the_uncentered_forms_is_refused(rng):
    """Centered statistics are finite, but without intercept n * xbar xbar' overflows: refused, not solved."""
    X, y = scale_data(rng)
    X = X * 1e140 + 1e153
    StreamRidgeCV().fit(X, y)  # with intercept: centered forms, fine
    with pytest.raises(ScaleError, match="overflowed float64"):
        StreamRidgeCV(fit_intercept=False).fit(X, y)


def test_lambda_is_never_chosen_from_non_finite_errors():
    from streamridge.solvers.grid import choose

    E = np.ones((3, 4, 2))
    assert choose(E, np.array([1.0, 2.0, 3.0]), per_target=False) == 2
    for bad in (np.nan, np.inf):
        E[1, 2, 1] = bad
        with pytest.raises(ScaleError, match="not finite"):
            choose(E, np.array([1.0, 2.0, 3.0]), per_target=False)
        with pytest.raises(ScaleError, match="not finite"):
            choose(E, np.array([1.0, 2.0, 3.0]), per_target=True)


@pytest.mark.parametrize("rel_alpha", [1e-15, 1e-9, 1e-4, 1e-1, 1e2])
def test_ridge_solve_on_singular_form_equals_svd_ridge(rng, rel_alpha):
    """Both routes of the per-lambda solve (Cholesky where well conditioned, spectral otherwise) equal
    ridge computed from the SVD of the rows, V diag(s / (s^2 + alpha)) U'y, on a rank-3 form of size 6."""
    from streamridge.solvers.covariance import ridge_solve

    X = rng.standard_normal((40, 3)) @ rng.standard_normal((3, 6)) * 10.0
    Y = rng.standard_normal((40, 2))
    A, B = X.T @ X, X.T @ Y
    alpha = rel_alpha * np.linalg.eigvalsh(A).max()
    U, s, Vt = np.linalg.svd(X, full_matrices=False)
    s, U, Vt = s[:3], U[:, :3], Vt[:3]
    want = Vt.T @ ((s / (s**2 + alpha))[:, None] * (U.T @ Y))
    np.testing.assert_allclose(ridge_solve(A, B, alpha), want, rtol=1e-9, atol=1e-9 * np.abs(want).max())


# ---------------------------------------------------------------- the solve stage's work


def test_solve_stage_does_k_decompositions_and_no_statistics_merges(rng, monkeypatch):
    """The solve stage costs K eigendecompositions plus O(K N^2) work: the training parts come from
    within + between sums (main merged FoldStats 3K times), the final model is a Cholesky solve
    (main made a (K+1)-th eigendecomposition), and the numbers equal explicit refits."""
    import scipy.linalg

    import streamridge.forms.build as forms_mod
    import streamridge.stats.foldstats as stats_mod
    from tests.reference import fit_ridge, reference_fold_errors

    X = rng.standard_normal((300, 8)) + 5.0
    y = X @ rng.standard_normal(8) + rng.standard_normal(300)
    est = StreamRidgeCV(alphas=[0.1, 1.0, 10.0], cv=7)
    stats = est.compute_stats(X, y)
    calls = {"merge": 0, "eigh": 0}

    def counting(name, fn):
        def wrapped(*a, **k):
            calls[name] += 1
            return fn(*a, **k)

        return wrapped

    for module, attr, name in (
        (stats_mod, "merge", "merge"),
        (forms_mod, "merge", "merge"),
        (np.linalg, "eigh", "eigh"),
        (scipy.linalg, "eigh", "eigh"),
    ):
        if hasattr(module, attr):
            monkeypatch.setattr(module, attr, counting(name, getattr(module, attr)))
    est.fit_stats(stats)
    assert calls == {"merge": 0, "eigh": 7}
    folds = FoldScheme("hash", 7, seed=0).assign(0, 300)
    np.testing.assert_allclose(
        est.fold_errors_, reference_fold_errors(X, y, folds, [0.1, 1.0, 10.0]), rtol=1e-9
    )
    _, ref, _ = fit_ridge(X, y, None, est.alpha_, True, False)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-10)


def test_cli_overflow_on_process_workers_prints_one_line(rng, tmp_path):
    """Worker processes do not inherit the driver's warning filter: the kernel itself must not warn."""
    import subprocess
    import sys

    from streamridge.sources import write_zarr

    X, y = scale_data(rng)
    store = write_zarr(tmp_path / "d.zarr", X, y * 1e200, None, chunk_rows=64)
    model = tmp_path / "m.npz"
    argv = ["fit", "--data", str(store), "--out", str(model), "--quiet", "--scheduler", "processes"]
    run = subprocess.run(
        [sys.executable, "-m", "streamridge", *argv], capture_output=True, text=True, timeout=120
    )
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and not model.exists()
    assert len(lines) == 1 and re.search("y is too large for float64 statistics", lines[0]), run.stderr
