"""Conformance of the lambda-search solvers: one set of tests that every registered solver passes.

A solver (:data:`streamridge.solvers.SOLVERS`) maps the per-fold quadratic forms and the
lambdas to the validation squared error of every lambda, fold and target, an array of shape
(R, K, T).  Every entry must equal that of an explicit refit on the rows: fold k's training
rows fitted by NumPy's ``lstsq`` on the ridge problem written as least squares,

.. code-block:: text

    min_W || [sqrt(w) (X_t - xbar_t) / s ; sqrt(lambda) I] W - [sqrt(w) (Y_t - ybar_t) ; 0] ||^2

(backward stable, so a fair reference on ill-conditioned data too), and scored on fold k's
rows.  :class:`SolverTests` holds the tests; each registered solver gets a subclass, and a
test checks that none is left without one.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest

from streamridge.forms.build import build_forms
from streamridge.solvers import SOLVERS, fold_errors
from streamridge.stats.kernel import from_chunk
from tests.conftest import ill_conditioned
from tests.reference import reference_fold_errors

M, N, T, K = 240, 6, 3, 4
ALPHAS = np.array([1e-7, 1e-5, 1e-3, 0.1, 10.0, 300.0])  # the smallest far below the smallest eigenvalue
TOL = {"well": 1e-12, "ill": 1e-8}  # relative to the largest error of a fold and target


def make_data(rng: np.random.Generator, kind: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """X (an offset of 2; ``ill``: cond(X) = 1e4, so cond(X'X) = 1e8), three targets, balanced folds."""
    X = rng.standard_normal((M, N)) + 2.0 if kind == "well" else ill_conditioned(rng, M, N, 1e4, offset=2.0)
    Y = X @ rng.standard_normal((N, T)) + 0.3 * rng.standard_normal((M, T)) + np.array([1.0, -4.0, 0.0])
    folds = rng.permutation(np.arange(M) % K)
    return X, Y, folds


def weights_of(rng: np.random.Generator, weighted: bool) -> np.ndarray | None:
    return rng.uniform(0.1, 3.0, M) if weighted else None


def explicit_fold_errors(
    X: np.ndarray,
    Y: np.ndarray,
    folds: np.ndarray,
    alphas: np.ndarray,
    *,
    w: np.ndarray | None,
    fit_intercept: bool,
    standardize: bool = False,
    pinv: bool = False,
) -> np.ndarray:
    """Validation SSE of shape (R, K, T) by a refit on every fold's training rows for every lambda.

    ``pinv``: the minimum-norm least-squares fit (lambda -> 0) instead of ``alphas``.
    """
    w = np.ones(len(X)) if w is None else w
    out = np.zeros((len(alphas), K, Y.shape[1]))
    for k in range(K):
        tr, va = folds != k, folds == k
        wt = w[tr]
        xbar = wt @ X[tr] / wt.sum()
        ybar = wt @ Y[tr] / wt.sum()
        sd = np.sqrt(wt @ (X[tr] - xbar) ** 2 / wt.sum())
        scale = np.where(sd > 0, sd, 1.0) if standardize else np.ones(X.shape[1])
        if not fit_intercept:
            xbar, ybar = np.zeros_like(xbar), np.zeros_like(ybar)
        Z = (X[tr] - xbar) / scale * np.sqrt(wt)[:, None]
        V = (Y[tr] - ybar) * np.sqrt(wt)[:, None]
        for r, a in enumerate(alphas):
            if pinv:
                W = np.linalg.pinv(Z, rcond=1e-10) @ V
            else:
                A = np.vstack([Z, np.sqrt(a) * np.eye(X.shape[1])])
                W = np.linalg.lstsq(A, np.vstack([V, np.zeros((X.shape[1], Y.shape[1]))]), rcond=None)[0]
            coef = W / scale[:, None]
            resid = Y[va] - (ybar - xbar @ coef) - X[va] @ coef
            out[r, k] = w[va] @ resid**2
    return out


def assert_errors_close(got: np.ndarray, want: np.ndarray, rtol: float) -> None:
    """Equal to ``rtol`` relative to the largest error of the same fold and target."""
    assert got.shape == want.shape
    scale = np.abs(want).max(axis=0, keepdims=True)
    err = float((np.abs(got - want) / scale).max())
    assert err <= rtol, f"relative difference {err:.3g} > {rtol:g}"


class SolverTests:
    """The tests every registered solver passes; a subclass names it."""

    solver: ClassVar[str]

    def errors(
        self, X: np.ndarray, Y: np.ndarray, folds: np.ndarray, alphas: np.ndarray, **kw: Any
    ) -> np.ndarray:
        """The solver's errors from the statistics of the rows (forms built as a fit builds them)."""
        w = kw.pop("w", None)
        stats = from_chunk(X, Y, folds, None, K, 1, w)
        return SOLVERS[self.solver](build_forms(stats, **kw), alphas)

    @pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
    @pytest.mark.parametrize("fit_intercept", [True, False], ids=["intercept", "no-intercept"])
    @pytest.mark.parametrize("kind", ["well", "ill"])
    def test_equals_explicit_refits(
        self, rng: np.random.Generator, kind: str, fit_intercept: bool, weighted: bool
    ) -> None:
        X, Y, folds = make_data(rng, kind)
        w = weights_of(rng, weighted)
        got = self.errors(X, Y, folds, ALPHAS, w=w, fit_intercept=fit_intercept)
        want = explicit_fold_errors(X, Y, folds, ALPHAS, w=w, fit_intercept=fit_intercept)
        assert got.shape == (len(ALPHAS), K, T) and got.dtype == np.float64
        assert_errors_close(got, want, TOL[kind])

    @pytest.mark.parametrize("fit_intercept", [True, False], ids=["intercept", "no-intercept"])
    def test_standardized_equals_scikit_learn_refits(
        self, rng: np.random.Generator, fit_intercept: bool
    ) -> None:
        """Standardized features, weights: scikit-learn's StandardScaler and Ridge on every fold."""
        X, Y, folds = make_data(rng, "well")
        X[:, 1] *= 1e3  # scales far apart: standardizing changes the fit
        w = weights_of(rng, True)
        got = self.errors(X, Y, folds, ALPHAS, w=w, fit_intercept=fit_intercept, standardize=True)
        want = reference_fold_errors(
            X, Y, folds, ALPHAS, fit_intercept=fit_intercept, standardize=True, sample_weight=w
        )
        assert_errors_close(got, want, 1e-12)
        mine = explicit_fold_errors(X, Y, folds, ALPHAS, w=w, fit_intercept=fit_intercept, standardize=True)
        assert_errors_close(mine, want, 1e-12)  # the two references agree

    @pytest.mark.parametrize("fit_intercept", [True, False], ids=["intercept", "no-intercept"])
    def test_tiny_lambda_on_collinear_features_is_minimum_norm_least_squares(
        self, rng: np.random.Generator, fit_intercept: bool
    ) -> None:
        """A feature repeated: lambda -> 0 gives the minimum-norm least-squares fit (pinv), not noise."""
        X, Y, folds = make_data(rng, "well")
        X[:, -1] = X[:, 0]
        got = self.errors(X, Y, folds, np.array([1e-10]), fit_intercept=fit_intercept)
        want = explicit_fold_errors(
            X, Y, folds, np.array([0.0]), w=None, fit_intercept=fit_intercept, pinv=True
        )
        assert_errors_close(got, want, 1e-9)

    def test_huge_lambda_is_the_intercept_only_model(self, rng: np.random.Generator) -> None:
        """lambda -> inf: every coefficient 0, the validation error of the training mean."""
        X, Y, folds = make_data(rng, "well")
        w = weights_of(rng, True)
        got = self.errors(X, Y, folds, np.array([1e14]), w=w, fit_intercept=True)
        want = np.zeros((1, K, T))
        for k in range(K):
            tr, va = folds != k, folds == k
            ybar = w[tr] @ Y[tr] / w[tr].sum()
            want[0, k] = w[va] @ (Y[va] - ybar) ** 2
        assert_errors_close(got, want, 1e-9)

    def test_each_lambda_independent_of_the_others(self, rng: np.random.Generator) -> None:
        """Errors of the lambdas in another order, or one at a time, are the same entries."""
        X, Y, folds = make_data(rng, "well")
        whole = self.errors(X, Y, folds, ALPHAS, fit_intercept=True)
        assert_errors_close(self.errors(X, Y, folds, ALPHAS[::-1], fit_intercept=True)[::-1], whole, 1e-12)
        for r, a in enumerate(ALPHAS):
            assert_errors_close(
                self.errors(X, Y, folds, np.array([a]), fit_intercept=True), whole[r : r + 1], 1e-12
            )

    def test_dispatch_by_name_is_the_registered_function(self, rng: np.random.Generator) -> None:
        X, Y, folds = make_data(rng, "well")
        forms = build_forms(from_chunk(X, Y, folds, None, K, 1))
        np.testing.assert_array_equal(
            fold_errors(forms, ALPHAS, solver=self.solver), SOLVERS[self.solver](forms, ALPHAS)
        )


class TestEigen(SolverTests):
    solver = "eigen"


class TestCovariance(SolverTests):
    solver = "covariance"


def test_every_registered_solver_has_a_conformance_class() -> None:
    tested = {cls.solver for cls in SolverTests.__subclasses__()}
    assert tested == set(SOLVERS), f"solvers without a conformance class: {sorted(set(SOLVERS) - tested)}"
