"""Nested CV (streamridge.model_selection.nested) equals the same selection run on the rows of the other folds."""

from __future__ import annotations

import numpy as np
import pytest

import streamridge as sr
from streamridge.errors import ParameterError
from streamridge.folds.schemes import FoldScheme
from streamridge.forms.build import build_forms, build_full_form
from streamridge.model_selection.nested import SelectionConfig, choose_model, drop_fold, nested_cv
from streamridge.selection import brute_force_path
from streamridge.stats.kernel import from_chunk
from tests.reference import fit_ridge, part_weights, reference_fold_errors

K = 4
ALPHAS = np.logspace(-3, 3, 7)
RTOL = 1e-7


def folds_of(model, M):
    return FoldScheme.from_dict(model.stats_.meta["scheme"]).assign(0, M)


def pick(E, alphas, per_target):
    """Smallest fold-summed error, ties (1e-12 relative) to the larger lambda; per target or summed."""
    total = E.sum(axis=1)  # (R, T)
    if not per_target:
        total = total.sum(axis=1, keepdims=True)
    out = []
    for t in range(total.shape[1]):
        ok = total[:, t] <= total[:, t].min() * (1 + 1e-12)
        out.append(alphas[np.flatnonzero(ok)].max())
    return out if per_target else out[0]


def coded(cls, n_classes):
    if n_classes == 2:
        return np.where(cls == 1, 1.0, -1.0)[:, None]
    Y = -np.ones((len(cls), n_classes))
    Y[np.arange(len(cls)), cls] = 1.0
    return Y


def explicit_outer_error(
    X,
    Y,
    folds,
    o,
    alpha,
    features,
    *,
    sw=None,
    cls=None,
    n_classes=1,
    balanced=False,
    fit_intercept=True,
    standardize=False,
):
    """Refit on the rows of the other folds (explicit Ridge), weighted SSE on fold o's rows."""
    cls = np.zeros(len(X), int) if cls is None else cls
    tr, va = folds != o, folds == o
    wt = part_weights(sw, cls, n_classes, balanced, tr)
    wv = part_weights(sw, cls, n_classes, balanced, va)
    T = Y.shape[1]
    if len(features) == 0:
        pred = np.tile(np.average(Y[tr], axis=0, weights=wt) if fit_intercept else np.zeros(T), (va.sum(), 1))
    else:
        a = np.broadcast_to(np.asarray(alpha, float), (T,))
        pred = np.empty((va.sum(), T))
        for t in range(T):  # one refit per target (its own lambda with alpha_per_target)
            predict, _, _ = fit_ridge(X[tr][:, features], Y[tr, t], wt, a[t], fit_intercept, standardize)
            pred[:, t] = predict(X[va][:, features])
    return (wv[:, None] * (pred - Y[va]) ** 2).sum(axis=0)


def reference_nested(X, Y, folds, alphas, *, per_target=False, **kw):
    """Lambda search by explicit refits on the inner folds, then refit and score on the outer fold."""
    out = []
    for o in range(K):
        tr = folds != o
        inner = folds[tr] - (folds[tr] > o)
        sw = kw.get("sw")
        cls = kw.get("cls")
        E = reference_fold_errors(
            X[tr],
            Y[tr],
            inner,
            alphas,
            fit_intercept=kw.get("fit_intercept", True),
            standardize=kw.get("standardize", False),
            sample_weight=None if sw is None else sw[tr],
            cls=None if cls is None else cls[tr],
            n_classes=kw.get("n_classes", 1),
            balanced=kw.get("balanced", False),
        )
        alpha = pick(E, alphas, per_target)
        out.append(explicit_outer_error(X, Y, folds, o, alpha, np.arange(X.shape[1]), **kw))
    return np.stack(out)


def rows(rng, M=84, N=5, T=1, offset=0.0):
    X = rng.standard_normal((M, N)) + offset
    beta = rng.standard_normal((N, T))
    beta[N // 2 :] = 0.0
    return X, X @ beta + 0.7 * rng.standard_normal((M, T))


REGRESSION = [
    {},
    {"fit_intercept": False},
    {"standardize": True},
    {"weights": True},
    {"T": 3},
    {"T": 3, "alpha_per_target": True},
    {"offset": 1e6},
]


@pytest.mark.parametrize("case", REGRESSION, ids=lambda c: "-".join(c) or "plain")
def test_lambda_search_equals_explicit_refits(rng, case):
    X, Y = rows(rng, T=case.get("T", 1), offset=case.get("offset", 0.0))
    sw = rng.uniform(0.2, 3.0, X.shape[0]) if case.get("weights") else None
    fi, std, apt = (
        case.get("fit_intercept", True),
        case.get("standardize", False),
        case.get("alpha_per_target", False),
    )
    y = Y[:, 0] if Y.shape[1] == 1 else Y
    m = sr.StreamRidgeCV(
        ALPHAS, cv=K, nested=True, fit_intercept=fi, standardize=std, alpha_per_target=apt
    ).fit(X, y, sample_weight=sw)
    ref = reference_nested(
        X, Y, folds_of(m, len(X)), ALPHAS, per_target=apt, sw=sw, fit_intercept=fi, standardize=std
    )
    got = m.nested_cv_errors_.reshape(K, -1)
    rtol = 1e-6 if case.get("offset") else RTOL
    np.testing.assert_allclose(got, ref, rtol=rtol)
    assert m.nested_summary_["nested_cv_error"] == pytest.approx(ref.sum(), rel=rtol)


def test_default_grid_is_recomputed_on_the_inner_folds(rng):
    """alphas=None: each inner selection uses the grid a fit on the other folds' rows would use."""
    X, Y = rows(rng)
    X[:, 0] *= 30.0
    m = sr.StreamRidgeCV(cv=K, nested=True).fit(X, Y[:, 0])
    folds = folds_of(m, len(X))
    for o in range(K):
        tr = folds != o
        Xc = X[tr] - X[tr].mean(axis=0)
        scale = float(f"{np.trace(Xc.T @ Xc) / X.shape[1]:.3g}")
        grid = scale * np.logspace(-6, 3, 50)
        inner = folds[tr] - (folds[tr] > o)
        E = reference_fold_errors(X[tr], Y[tr], inner, grid)
        ref = explicit_outer_error(X, Y, folds, o, pick(E, grid, False), np.arange(5))
        np.testing.assert_allclose(m.nested_cv_errors_[o], ref[0], rtol=RTOL)
        assert m.nested_summary_["alphas"][o] == pick(E, grid, False)


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("class_weight", [None, "balanced"])
def test_classifier_with_class_weights_equals_explicit_refits(rng, n_classes, class_weight):
    X, Y = rows(rng, M=96)
    cuts = np.quantile(Y[:, 0], [0.7] if n_classes == 2 else [0.5, 0.8])
    cls = np.searchsorted(cuts, Y[:, 0])  # unbalanced classes
    labels = np.array(["a", "b", "c"])[cls]
    m = sr.StreamRidgeClassifierCV(ALPHAS, cv=K, nested=True, class_weight=class_weight).fit(X, labels)
    bal = class_weight == "balanced"
    ref = reference_nested(
        X, coded(cls, n_classes), folds_of(m, len(X)), ALPHAS, cls=cls, n_classes=n_classes, balanced=bal
    )
    np.testing.assert_allclose(m.nested_cv_errors_, ref, rtol=RTOL)


def inner_stats(X, Y, folds, o, cls=None, n_classes=1):
    """Statistics computed afresh from the rows of the other folds (inner folds renumbered)."""
    tr = folds != o
    inner = folds[tr] - (folds[tr] > o)
    return from_chunk(X[tr], Y[tr], inner, None if cls is None else cls[tr], K - 1, n_classes)


SELECTIONS = [
    ("forward", {}),
    ("backward", {}),
    ("backward", {"T": 3}),
    ("forward", {"T": 3, "alpha_per_target": True}),
    ("backward", {"balanced": True}),
    ("forward", {"balanced": True, "max_features": 3}),
]


@pytest.mark.parametrize(
    ("direction", "case"), SELECTIONS, ids=lambda x: x if isinstance(x, str) else "-".join(x) or "plain"
)
def test_selection_equals_brute_force_on_the_other_folds_rows(rng, direction, case):
    """Per outer fold: brute-force path on the other folds' rows, explicit refit, SSE on the fold."""
    N = 6
    X, Y = rows(rng, M=72, N=N, T=case.get("T", 1))
    X[:, -1] = X[:, 0] + 0.05 * rng.standard_normal(len(X))
    bal = case.get("balanced", False)
    apt = case.get("alpha_per_target", False)
    cls = None
    n_classes = 1
    if bal:
        cls = (Y[:, 0] > np.quantile(Y[:, 0], 0.7)).astype(int)
        Y, n_classes = coded(cls, 2), 2
        est = sr.StreamRidgeClassifierCV(
            ALPHAS,
            cv=K,
            nested=True,
            class_weight="balanced",
            selection=direction,
            max_features=case.get("max_features"),
        )
        m = est.fit(X, cls)
    else:
        est = sr.StreamRidgeCV(ALPHAS, cv=K, nested=True, selection=direction, alpha_per_target=apt)
        m = est.fit(X, Y[:, 0] if Y.shape[1] == 1 else Y)
    folds = folds_of(m, len(X))
    for o in range(K):
        forms = build_forms(inner_stats(X, Y, folds, o, cls, n_classes), balanced=bal)
        path = brute_force_path(
            forms, ALPHAS, direction=direction, alpha_per_target=apt, max_features=case.get("max_features")
        )
        S = np.flatnonzero(path.support)
        tr = folds != o
        inner = folds[tr] - (folds[tr] > o)
        E = reference_fold_errors(
            X[tr][:, S],
            Y[tr],
            inner,
            ALPHAS,
            cls=None if cls is None else cls[tr],
            n_classes=n_classes,
            balanced=bal,
        )
        alpha = pick(E, ALPHAS, apt)
        ref = explicit_outer_error(X, Y, folds, o, alpha, S, cls=cls, n_classes=n_classes, balanced=bal)
        np.testing.assert_allclose(m.nested_cv_errors_.reshape(K, -1)[o], ref, rtol=1e-6)
        assert m.nested_summary_["n_features"][o] == len(S)


def test_op_rr_and_1se_equal_the_estimator_fitted_on_the_other_folds(rng):
    """End to end: nested errors equal fitting the estimator itself on the rows of the other folds."""
    X, Y = rows(rng, M=90, N=6)
    kw = {"selection": "op-rr", "alpha_rule": "1se"}
    m = sr.StreamRidgeCV(ALPHAS, cv=K, nested=True, **kw).fit(X, Y[:, 0])
    folds = folds_of(m, len(X))
    for o in range(K):
        tr = folds != o
        inner = sr.StreamRidgeCV(ALPHAS, cv="groups", **kw).fit(X[tr], Y[tr, 0], groups=folds[tr])
        resid = inner.predict(X[folds == o]) - Y[folds == o, 0]
        np.testing.assert_allclose(m.nested_cv_errors_[o], (resid**2).sum(), rtol=1e-8)


def test_choose_model_on_all_folds_is_the_estimators_choice(rng):
    X, Y = rows(rng, N=6)
    m = sr.StreamRidgeCV(ALPHAS, cv=K, selection="backward").fit(X, Y[:, 0])
    forms, full = build_forms(m.stats_), build_full_form(m.stats_)
    c = choose_model(forms, full, SelectionConfig(alphas=ALPHAS, selection="backward"))
    np.testing.assert_array_equal(c.support, m.support_)
    assert c.alpha == m.alpha_


def test_drop_fold_keeps_the_other_folds(rng):
    X, Y = rows(rng)
    m = sr.StreamRidgeCV(ALPHAS, cv=K).fit(X, Y[:, 0])
    d = drop_fold(m.stats_, 1)
    assert d.n_folds == K - 1
    np.testing.assert_array_equal(d.sxx, m.stats_.sxx[[0, 2, 3]])


def test_selection_makes_plain_cv_optimistic(rng):
    """Few rows per feature and pure noise: the plain CV error of the selected set is below the nested one."""
    X = rng.standard_normal((60, 20))
    y = rng.standard_normal(60)
    m = sr.StreamRidgeCV(ALPHAS, cv=5, nested=True, selection="forward").fit(X, y)
    s = m.nested_summary_
    assert s["optimism"] > 0.05
    assert s["cv_error"] < s["nested_cv_error"]
    assert s["nested_cv_error"] == pytest.approx(m.nested_cv_errors_.sum(), rel=1e-12)
    assert s["fold_std"] == pytest.approx(np.std(m.nested_cv_errors_, ddof=1), rel=1e-12)
    np.testing.assert_array_equal(s["fold_errors"], m.nested_cv_errors_)


def test_nested_off_leaves_no_attributes(rng):
    X, Y = rows(rng)
    m = sr.StreamRidgeCV(ALPHAS, cv=K, nested=True).fit(X, Y[:, 0])
    assert hasattr(m, "nested_cv_errors_")
    m.set_params(nested=False).fit(X, Y[:, 0])
    assert not hasattr(m, "nested_cv_errors_") and not hasattr(m, "nested_summary_")


@pytest.mark.parametrize(
    ("kwargs", "groups", "message"),
    [
        ({"cv": 2}, None, "nested=True needs at least 3 folds"),
        ({"cv": "groups"}, [0, 1] * 42, "nested=True needs at least 3 folds"),
        ({"cv": "blocks", "n_blocks": 2}, None, "got 2; use cv >= 3"),
        ({"cv": 5, "nested": "yes"}, None, "nested must be True or False"),
    ],
)
def test_bad_input(rng, kwargs, groups, message):
    X, Y = rows(rng)
    kwargs = {"nested": True, **kwargs}
    with pytest.raises(ParameterError, match=message):
        sr.StreamRidgeCV(ALPHAS, **kwargs).fit(
            X, Y[:, 0], groups=None if groups is None else np.asarray(groups)
        )


def test_nested_cv_function_refuses_two_folds(rng):
    X, Y = rows(rng)
    m = sr.StreamRidgeCV(ALPHAS, cv=2).fit(X, Y[:, 0])
    with pytest.raises(ParameterError, match="at least 3 folds"):
        nested_cv(m.stats_, SelectionConfig(alphas=ALPHAS))


def test_model_file_round_trip(rng, tmp_path):
    from streamridge.io.model_file import load_model, read_model, save_model

    X, Y = rows(rng, T=2)
    m = sr.StreamRidgeCV(ALPHAS, cv=K, nested=True, selection="backward").fit(X, Y)
    save_model(m, tmp_path / "m.npz")
    back = load_model(tmp_path / "m.npz")
    np.testing.assert_array_equal(back.nested_cv_errors_, m.nested_cv_errors_)
    assert back.nested_summary_ == m.nested_summary_
    with np.load(tmp_path / "m.npz", allow_pickle=False) as z:
        assert z["nested_cv_errors"].shape == (K, 2)
    assert read_model(tmp_path / "m.npz")[0]["nested_summary"]["optimism"] == m.nested_summary_["optimism"]
    plain = sr.StreamRidgeCV(ALPHAS, cv=K).fit(X, Y)
    save_model(plain, tmp_path / "p.npz")
    assert not hasattr(load_model(tmp_path / "p.npz"), "nested_cv_errors_")


def test_cli_fit_and_info_print_the_nested_summary(rng, tmp_path, capsys):
    import json

    from streamridge import cli

    X, Y = rows(rng)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", Y[:, 0])
    data = ["--data", str(tmp_path / "X.npy"), "--y", str(tmp_path / "y.npy")]
    model = str(tmp_path / "m.npz")
    assert cli.main(["fit", *data, "--folds", "4", "--nested", "--select", "forward", "--out", model]) == 0
    out = capsys.readouterr().out
    assert "nested CV   SSE" in out and "below it" in out
    assert cli.main(["fit", *data, "--folds", "4", "--nested", "--out", model, "--json", "--overwrite"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert len(facts["nested"]["alphas"]) == 4 and facts["nested"]["nested_cv_error"] > 0
    assert cli.main(["info", model]) == 0
    assert "nested CV   SSE" in capsys.readouterr().out
    assert cli.main(["fit", *data, "--folds", "2", "--nested", "--out", str(tmp_path / "bad.npz")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nested=True needs at least 3 folds" in err
    assert not (tmp_path / "bad.npz").exists()


@pytest.mark.parametrize(
    "kw", [{"feature_prefixes": [1, 2, 4, 6]}, {"feature_prefixes": [2, 5], "alpha_rule": "1se"}]
)
def test_feature_prefixes_equal_the_estimator_fitted_on_the_other_folds(rng, kw):
    """Prefix size and lambda re-chosen per outer fold, as a fit on the other folds' rows would."""
    X, Y = rows(rng, M=90, N=6)
    m = sr.StreamRidgeCV(ALPHAS, cv=K, nested=True, **kw).fit(X, Y[:, 0])
    folds = folds_of(m, len(X))
    for o in range(K):
        tr = folds != o
        inner = sr.StreamRidgeCV(ALPHAS, cv="groups", **kw).fit(X[tr], Y[tr, 0], groups=folds[tr])
        resid = inner.predict(X[folds == o]) - Y[folds == o, 0]
        np.testing.assert_allclose(m.nested_cv_errors_[o], (resid**2).sum(), rtol=1e-8)
        assert m.nested_summary_["n_features"][o] == inner.n_features_selected_
