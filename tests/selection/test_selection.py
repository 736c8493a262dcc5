"""Feature selection (streamridge.selection): fast paths equal brute-force refits."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import Ridge, lars_path

from streamridge.errors import ParameterError
from streamridge.folds.schemes import FoldScheme
from streamridge.forms.build import build_forms, build_full_form
from streamridge.selection import brute_force_path, lars_ranking, op_rr, select_features
from streamridge.selection._reference import subset_errors
from streamridge.selection._result import best_step, make_step
from streamridge.stats.kernel import from_chunk

RTOL = 1e-6
K = 4


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


def make_rows(rng, M=160, N=8, T=1, ill=False, classify=False, offset=0.0):
    X = rng.standard_normal((M, N)) + offset
    if ill:  # near-collinear pair and wildly different scales: cond(At) >= 1e10
        X[:, -1] = X[:, 0] + 1e-6 * rng.standard_normal(M)
        X[:, -2] = 1e3 * X[:, 1]
    beta = rng.standard_normal((N, T))
    beta[N // 2 :] = 0.0
    Y = X @ beta + 0.5 * rng.standard_normal((M, T))
    cls = None
    if classify:
        cls = (Y[:, 0] > np.quantile(Y[:, 0], 0.7)).astype(np.int64)  # unbalanced classes
        Y = np.where(cls == 1, 1.0, -1.0)[:, None]
    return X, Y, cls


def forms_of(X, Y, cls=None, **kw):
    folds = FoldScheme("hash", K, seed=0).assign(0, X.shape[0])
    stats = from_chunk(X, Y, folds, cls, K, 1 if cls is None else 2)
    return build_forms(stats, **kw), stats


def assert_same_path(fast, ref, rtol=RTOL):
    np.testing.assert_array_equal(fast.features, ref.features)
    np.testing.assert_allclose(fast.cv_errors, ref.cv_errors, rtol=rtol, atol=0)
    assert fast.best_step == ref.best_step
    np.testing.assert_array_equal(fast.support, ref.support)
    np.testing.assert_array_equal(fast.selected, ref.selected)
    for a, b in zip(fast.steps, ref.steps, strict=True):
        np.testing.assert_array_equal(a.alpha, b.alpha)
        np.testing.assert_allclose(a.fold_errors, b.fold_errors, rtol=rtol, atol=0)


ALPHAS = np.logspace(-4, 3, 9)
SETUPS = {
    "intercept": {"fit_intercept": True},
    "no-intercept": {"fit_intercept": False},
    "standardize": {"fit_intercept": True, "standardize": True},
    "balanced": {"fit_intercept": True, "balanced": True},
}


CASES = [(setup, T) for setup in SETUPS for T in (1, 3) if not (setup == "balanced" and T > 1)]


@pytest.mark.parametrize("direction", ["forward", "backward"])
@pytest.mark.parametrize("ill", [False, True], ids=["well", "ill"])
@pytest.mark.parametrize(("setup", "T"), CASES, ids=[f"{s}-T{t}" for s, t in CASES])
def test_equals_brute_force(rng, direction, ill, setup, T):
    """Same features in the same order, errors to 1e-6, lambdas and final set as the brute force."""
    classify = setup == "balanced"  # class weights: one +1/-1 coded target
    X, Y, cls = make_rows(rng, T=T, ill=ill, classify=classify, offset=3.0)
    forms, _ = forms_of(X, Y, cls, **SETUPS[setup])
    if ill:
        assert np.linalg.cond(forms.At[0]) >= 1e10
    scale = np.trace(forms.At[0]) / X.shape[1]
    alphas = scale * ALPHAS
    fast = select_features(forms, alphas, direction=direction)
    ref = brute_force_path(forms, alphas, direction=direction)
    assert len(fast.steps) == X.shape[1] + (1 if direction == "forward" else 0)
    assert_same_path(fast, ref)


OPTIONS = [
    {"alpha_per_target": True},
    {"force": (2, 5)},
    {"max_features": 5, "min_features": 2},
    {"patience": 2},
    {"patience": 1, "tol": 0.05},
    {"one_se": True},
]


@pytest.mark.parametrize("direction", ["forward", "backward"])
@pytest.mark.parametrize("opts", OPTIONS, ids=lambda o: "-".join(o))
def test_options_equal_brute_force(rng, direction, opts):
    X, Y, _ = make_rows(rng, N=9, T=2)
    forms, _ = forms_of(X, Y)
    alphas = np.trace(forms.At[0]) / 9 * ALPHAS
    fast = select_features(forms, alphas, direction=direction, **opts)
    ref = brute_force_path(forms, alphas, direction=direction, **opts)
    assert_same_path(fast, ref)
    best = fast.best_step
    if direction == "forward":
        expect = list(opts.get("force", ())) + fast.features[1 : best + 1].tolist()
        assert fast.selected.tolist() == expect
    else:
        removed = fast.features[1:].tolist()
        assert set(fast.selected.tolist()) == set(range(9)) - set(removed[:best])
        later = removed[best:][::-1]  # removed after the final set: least important last
        assert fast.selected.tolist()[len(fast.selected) - len(later) :] == later
    if "force" in opts:
        assert fast.support[list(opts["force"])].all()
        assert not set(opts["force"]) & set(fast.features[1:].tolist())
    if "max_features" in opts:
        lo, hi = opts["min_features"], opts["max_features"]
        assert lo <= fast.support.sum() <= hi


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_lambda_batches_equal_one_batch(rng, direction):
    """A memory budget too small for the state of all lambdas gives the same path."""
    X, Y, _ = make_rows(rng, N=10, T=2, ill=True)
    forms, _ = forms_of(X, Y, standardize=True)
    alphas = ALPHAS.copy()
    full = select_features(forms, alphas, direction=direction)
    small = select_features(forms, alphas, direction=direction, memory_budget=12_000)
    assert_same_path(small, full, rtol=1e-9)


@pytest.mark.parametrize("smallest", [1e-7, 1e-12])
def test_longer_ill_conditioned_path(rng, smallest):
    """30-feature paths at cond(At) >= 1e10; with lambda down to 1e-12 of the mean eigenvalue the
    backward engine must rebuild its state after downdates that cancel (REFRESH)."""
    X, Y, _ = make_rows(rng, M=300, N=30, ill=True)
    X[:, 10] = X[:, 3] - X[:, 4] + 1e-7 * rng.standard_normal(300)
    forms, _ = forms_of(X, Y)
    assert np.linalg.cond(forms.At[0]) >= 1e10
    alphas = np.trace(forms.At[0]) / 30 * np.geomspace(smallest, 1e2, 6)
    for direction in ("forward", "backward"):
        assert_same_path(
            select_features(forms, alphas, direction=direction),
            brute_force_path(forms, alphas, direction=direction),
        )


def sklearn_cv_error(X, Y, folds, features, alpha):
    """Validation SSE summed over folds of sklearn Ridge refitted on each training part."""
    total = 0.0
    for k in range(K):
        tr, va = folds != k, folds == k
        model = Ridge(alpha=alpha, fit_intercept=True, solver="cholesky", tol=1e-12)
        model.fit(X[np.ix_(tr, features)], Y[tr])
        pred = model.predict(X[np.ix_(va, features)]).reshape(Y[va].shape)
        total += float(((pred - Y[va]) ** 2).sum())
    return total


def test_first_steps_match_sklearn_ridge(rng):
    X, Y, _ = make_rows(rng, M=90, N=5)
    forms, _ = forms_of(X, Y)
    folds = FoldScheme("hash", K, seed=0).assign(0, X.shape[0])
    alphas = np.array([0.1, 1.0, 10.0, 100.0])
    res = select_features(forms, alphas, direction="forward", max_features=2)
    chosen: list[int] = []
    for step in res.steps[1:]:
        errs = {
            j: min(sklearn_cv_error(X, Y, folds, [*chosen, j], a) for a in alphas)
            for j in range(5)
            if j not in chosen
        }
        assert step.feature == min(errs, key=lambda j: (errs[j], j))
        chosen.append(step.feature)
        np.testing.assert_allclose(step.cv_error, errs[step.feature], rtol=RTOL)


@pytest.mark.parametrize("seed", range(4))
def test_duplicate_feature_not_kept_twice(seed):
    """Two exact copies of an informative feature: one suffices (within one standard error).

    (Keeping both halves the penalty along that direction, which can lower the
    CV error by a hair; the one-SE rule is what makes "one suffices" precise.)
    """
    X, Y, _ = make_rows(np.random.default_rng(seed), M=400, N=6)
    X = np.column_stack([X, X[:, 0]])  # feature 6 duplicates feature 0 (informative)
    forms, _ = forms_of(X, Y)
    alphas = np.logspace(-3, 3, 13)
    for direction in ("backward", "forward"):
        res = select_features(forms, alphas, direction=direction, one_se=True)
        assert res.support[0] or res.support[6]
        assert not (res.support[0] and res.support[6])


def test_noise_feature_removed_first(rng):
    M = 400
    X = rng.standard_normal((M, 5))
    Y = X @ np.array([[3.0], [-2.0], [1.5], [2.5], [-1.0]]) + 0.1 * rng.standard_normal((M, 1))
    X = np.column_stack([X, rng.standard_normal(M)])  # pure noise, index 5
    forms, _ = forms_of(X, Y)
    res = select_features(forms, np.logspace(-3, 2, 11), direction="backward")
    assert res.steps[1].feature == 5


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"direction": "sideways"}, "direction must be 'forward' or 'backward'; got direction='sideways'"),
        ({"direction": "op-rr"}, "direction must be 'forward' or 'backward'; got direction='op-rr'"),
        (
            {"direction": "forward", "max_features": 40},
            "max_features must be an integer in [1, 8]; got max_features=40",
        ),
        (
            {"direction": "forward", "max_features": 0},
            "max_features must be an integer in [1, 8]; got max_features=0",
        ),
        (
            {"direction": "backward", "min_features": 9},
            "min_features must be an integer in [1, 8]; got min_features=9",
        ),
        (
            {"direction": "backward", "min_features": 5, "max_features": 3},
            "min_features must be <= max_features",
        ),
        (
            {"direction": "forward", "force": [3, 8]},
            "force must hold feature indices in [0, 7]; got force=[3, 8]",
        ),
        ({"direction": "forward", "force": [1, 1]}, "force must not repeat a feature"),
        (
            {"direction": "forward", "force": [0, 1, 2], "max_features": 2},
            "max_features must be >= the 3 forced features",
        ),
        ({"direction": "forward", "patience": 0}, "patience must be an integer"),
        ({"direction": "forward", "tol": -1.0}, "tol must be a finite number >= 0"),
    ],
)
def test_bad_input(rng, kwargs, message):
    X, Y, _ = make_rows(rng)
    forms, _ = forms_of(X, Y)
    for fn in (select_features, brute_force_path):
        with pytest.raises(ParameterError) as info:
            fn(forms, ALPHAS, **kwargs)
        assert message in str(info.value)
        assert "\n" not in str(info.value)


def test_single_feature_is_refused(rng):
    X, Y, _ = make_rows(rng, N=1)
    forms, _ = forms_of(X, Y)
    with pytest.raises(ParameterError, match="at least 2 features; got 1 feature"):
        select_features(forms, ALPHAS, direction="backward")


def test_bad_alphas(rng):
    X, Y, _ = make_rows(rng)
    forms, _ = forms_of(X, Y)
    with pytest.raises(ParameterError, match="alphas must be positive"):
        select_features(forms, [1.0, -1.0], direction="forward")


def test_lars_ranking_equals_sklearn_on_rows(rng):
    X, Y, _ = make_rows(rng, M=120, N=7, offset=2.0)
    _, stats = forms_of(X, Y)
    full = build_full_form(stats, fit_intercept=True, standardize=False)
    Xc, yc = X - X.mean(axis=0), Y[:, 0] - Y[:, 0].mean()
    _, active, _ = lars_path(Xc, yc, method="lar")
    np.testing.assert_array_equal(lars_ranking(full.A, full.B, full.n)[: len(active)], active)


@pytest.mark.parametrize("per_target", [False, True])
def test_op_rr_equals_brute_force_over_prefixes(rng, per_target):
    X, Y, _ = make_rows(rng, M=150, N=8, T=2)
    forms, stats = forms_of(X, Y, standardize=True)
    full = build_full_form(stats, fit_intercept=True, standardize=True)
    alphas = np.logspace(-3, 3, 7)
    res = op_rr(forms, full, alphas, alpha_per_target=per_target, min_features=1)
    order = lars_ranking(full.A, full.B, full.n)
    steps = [make_step(-1, 0, subset_errors(forms, alphas, order[:0]), alphas, per_target)]
    for n in range(1, 9):
        steps.append(
            make_step(int(order[n - 1]), n, subset_errors(forms, alphas, order[:n]), alphas, per_target)
        )
    np.testing.assert_array_equal(res.features, [s.feature for s in steps])
    np.testing.assert_allclose(res.cv_errors, [s.cv_error for s in steps], rtol=RTOL)
    best = best_step(steps, 1, 8, False)
    assert res.best_step == best
    np.testing.assert_array_equal(res.alpha, steps[best].alpha)
    np.testing.assert_array_equal(res.selected, order[:best])
