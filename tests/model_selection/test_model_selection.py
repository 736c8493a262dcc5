"""One model selection: a fit and nested CV call the same ``choose_model``; a fit's attributes are its Choice's."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import streamridge as sr
from streamridge.forms.build import build_forms, build_full_form
from streamridge.model_selection import choose
from streamridge.model_selection.attributes import choice_attributes
from streamridge.model_selection.choose import config_of
from streamridge.model_selection.nested import drop_fold

K = 4
ALPHAS = np.logspace(-3, 3, 7)


def data(rng, M=120, N=6, T=2):
    X = rng.standard_normal((M, N))
    beta = rng.standard_normal((N, T))
    beta[N // 2 :] = 0.0
    Y = X @ beta + 0.7 * rng.standard_normal((M, T))
    cls = np.digitize(X[:, 0] + 0.8 * rng.standard_normal(M), [-0.4, 0.6])  # three classes
    return X, Y, cls


def forms_of(stats, cfg):
    return build_forms(
        stats, fit_intercept=cfg.fit_intercept, standardize=cfg.standardize, balanced=cfg.balanced
    )


def assert_same_forms(a, b):
    for name in ("At", "Bt", "Av", "Bv", "cv", "x_offset", "y_offset", "scale", "n_train", "n_val"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


FITS = {
    "forward": (sr.StreamRidgeCV, {"selection": "forward", "force_features": [4], "max_features": 4}, "Y"),
    "prefixes": (sr.StreamRidgeCV, {"feature_prefixes": [2, 4, 6], "alpha_per_target": True}, "Y"),
    "balanced": (sr.StreamRidgeClassifierCV, {"class_weight": "balanced", "selection": "backward"}, "cls"),
}


@pytest.mark.parametrize("name", list(FITS))
def test_fit_and_nested_cv_call_the_one_model_selection(rng, monkeypatch, name):
    """A fit with nested=True on K folds calls choose_model 1 + K times: on all K folds, then on each K - 1."""
    cls_, params, target = FITS[name]
    X, Y, cls = data(rng)
    calls, lock = [], threading.Lock()
    real = choose.choose_model

    def counting(forms, full, cfg):
        with lock:  # the outer folds run on threads
            calls.append((forms, full, cfg))
        return real(forms, full, cfg)

    monkeypatch.setattr(choose, "choose_model", counting)
    m = cls_(ALPHAS, cv=K, nested=True, **params).fit(X, Y if target == "Y" else cls)
    assert len(calls) == 1 + K
    cfg = calls[0][2]
    assert all(c[2] is cfg for c in calls)  # the fit's config, unchanged, for every inner selection
    assert_same_forms(calls[0][0], forms_of(m.stats_, cfg))
    inner = [c[0] for c in calls[1:]]
    assert [f.At.shape[0] for f in inner] == [K - 1] * K
    for o in range(K):  # each outer fold's inner statistics are selected on exactly once
        expected = forms_of(drop_fold(m.stats_, o), cfg)
        matches = [
            f for f in inner if np.array_equal(f.At, expected.At) and np.array_equal(f.Bt, expected.Bt)
        ]
        assert len(matches) == 1, f"outer fold {o}"
        assert_same_forms(matches[0], expected)


CONFIGS = [
    (sr.StreamRidgeCV, {}, "y"),
    (sr.StreamRidgeCV, {"alpha_per_target": True, "alpha_rule": "1se"}, "Y"),
    (sr.StreamRidgeCV, {"alphas": None, "standardize": True}, "Y"),
    (
        sr.StreamRidgeCV,
        {"selection": "forward", "force_features": [5], "patience": 1, "min_features": 2},
        "Y",
    ),
    (sr.StreamRidgeCV, {"selection": "backward", "max_features": 4, "alpha_per_target": True}, "Y"),
    (sr.StreamRidgeCV, {"selection": "op-rr", "alpha_rule": "1se"}, "y"),
    (sr.StreamRidgeCV, {"feature_prefixes": [1, 3, 6]}, "y"),
    (sr.StreamRidgeClassifierCV, {"class_weight": "balanced", "selection": "forward"}, "cls"),
    (sr.StreamRidgeClassifierCV, {"class_weight": {0: 3.0}, "alpha_per_target": True}, "cls"),
]


@pytest.mark.parametrize(("cls_", "params", "target"), CONFIGS)
def test_fitted_attributes_are_those_of_the_choice_on_all_folds(rng, cls_, params, target):
    """A fit's selection attributes equal, bit for bit, those of choose_model called as nested CV calls it."""
    X, Y, cls = data(rng)
    y = {"y": Y[:, 0], "Y": Y, "cls": cls}[target]
    m = cls_(**{"alphas": ALPHAS, "cv": K, **params}).fit(X, y)
    cfg = config_of(m, m.alphas, m._balanced())
    full = build_full_form(
        m.stats_, fit_intercept=cfg.fit_intercept, standardize=cfg.standardize, balanced=cfg.balanced
    )
    choice = choose.choose_model(forms_of(m.stats_, cfg), full, cfg)
    attrs = choice_attributes(choice, one_output=target == "y")
    assert set(attrs) >= {"alphas_", "fold_errors_", "cv_errors_", "n_folds_", "support_", "alpha_"}
    for key, value in attrs.items():
        got = getattr(m, key)
        if isinstance(value, np.ndarray):
            assert got.dtype == value.dtype and got.shape == value.shape, key
            assert got.tobytes() == value.tobytes(), key
        else:
            assert type(got) is type(value) and got == value, key


@pytest.mark.parametrize(
    ("params", "attrs"),
    [
        ({"selection": "forward"}, ("selection_path_", "selection_best_step_", "selected_features_")),
        (
            {"feature_prefixes": [2, 4]},
            ("prefix_sizes_", "prefix_errors_", "prefix_alphas_", "n_features_selected_"),
        ),
    ],
)
def test_refit_without_selection_drops_the_selection_attributes(rng, params, attrs):
    """fit_stats / partial_fit with the selection turned off leave no path or prefix curve of the earlier fit."""
    X, Y, _ = data(rng)
    m = sr.StreamRidgeCV(ALPHAS, cv=K, **params).fit(X, Y[:, 0])
    assert all(hasattr(m, a) for a in attrs)
    m.set_params(selection=None, feature_prefixes=None).fit_stats(m.stats_)
    assert [a for a in attrs if hasattr(m, a)] == []
    assert m.support_.all()
    p = sr.StreamRidgeCV(ALPHAS, cv=K, **params).partial_fit(X[:60], Y[:60, 0])
    assert all(hasattr(p, a) for a in attrs)
    p.set_params(selection=None, feature_prefixes=None).partial_fit(X[60:], Y[60:, 0])
    assert [a for a in attrs if hasattr(p, a)] == []
