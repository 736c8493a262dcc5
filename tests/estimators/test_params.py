"""Declarative parameter constraints: one per parameter of both estimators, checked when a fit starts.

Every refusal is one line naming the parameter and the value, and comes before any row is
accumulated (a mock pass that raises proves it).  Solver names are those of the registry.
"""

from __future__ import annotations

import numpy as np
import pytest

import streamridge as sr
import streamridge.estimators.base as base
from streamridge.errors import ParameterError
from streamridge.estimators.core import RidgeClassifierCVCore, RidgeCVCore
from streamridge.solvers import SOLVERS

CLASSES = [sr.StreamRidgeCV, sr.StreamRidgeClassifierCV, RidgeCVCore, RidgeClassifierCVCore]


class BadType:
    """A value of no type any parameter accepts."""


@pytest.fixture
def no_pass(monkeypatch):
    """The statistics pass raises if it runs: a refusal seen with it came before any row was accumulated."""

    def boom(*args, **kwargs):
        raise AssertionError("the data pass ran")

    monkeypatch.setattr(base, "accumulate", boom)


@pytest.fixture
def data(rng):
    X = rng.standard_normal((60, 4))
    return X, (X[:, 0] > 0).astype(int)


def refusal(est, X, y):
    with pytest.raises(ParameterError) as info:
        est.fit(X, y)
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_parameter_has_a_constraint(cls):
    assert set(cls._parameter_constraints) == set(cls().get_params())


@pytest.mark.parametrize(
    ("cls", "name"),
    [
        (cls, name)
        for cls in (sr.StreamRidgeCV, sr.StreamRidgeClassifierCV)
        for name in sorted(cls().get_params())
    ],
    ids=lambda p: p if isinstance(p, str) else p.__name__,
)
def test_a_value_of_no_accepted_type_is_refused_naming_parameter_and_value(cls, name, data, no_pass):
    value = BadType()
    message = refusal(cls(**{name: value}), *data)
    assert name in message and repr(value) in message, message


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"solver": "qr"}, "solver must be 'eigen' or 'covariance'; got solver='qr'"),
        ({"alpha_rule": "max"}, "alpha_rule must be 'min' or '1se'; got alpha_rule='max'"),
        (
            {"selection": "sideways"},
            "selection must be None, 'forward', 'backward' or 'op-rr'; got selection='sideways'",
        ),
        ({"fit_intercept": "yes"}, "fit_intercept must be True or False; got fit_intercept='yes'"),
        ({"standardize": 1}, "standardize must be True or False; got standardize=1"),
        ({"alpha_per_target": None}, "alpha_per_target must be True or False; got alpha_per_target=None"),
        ({"skip_nonfinite": "no"}, "skip_nonfinite must be True or False; got skip_nonfinite='no'"),
        ({"nested": "yes"}, "nested must be True or False; got nested='yes'"),
        (
            {"random_state": 1.5},
            "random_state must be an integer or None (the seed of the fold hash); got random_state=1.5",
        ),
        ({"n_blocks": 1}, "n_blocks must be an integer >= 2 (the folds of cv='blocks'); got n_blocks=1"),
        ({"max_features": 0}, "max_features must be an integer >= 1 or None; got max_features=0"),
        ({"min_features": 2.0}, "min_features must be an integer >= 1 or None; got min_features=2.0"),
        ({"patience": True}, "patience must be an integer >= 1 or None; got patience=True"),
        ({"chunk_rows": 0}, "chunk_rows must be an integer >= 1 or None; got chunk_rows=0"),
        (
            {"force_features": [1, 1]},
            "force_features must be None or a list of distinct feature indices (integers >= 0); "
            "got force_features=[1, 1]",
        ),
        (
            {"feature_prefixes": []},
            "feature_prefixes must be None or a non-empty list of integers >= 1; got feature_prefixes=[]",
        ),
        (
            {"scheduler": 4},
            "scheduler must be None, 'threads', 'processes', 'sync', 'local:N', a scheduler address or a "
            "distributed.Client; got scheduler=4",
        ),
        ({"checkpoint": 3}, "checkpoint must be None or a directory path; got checkpoint=3"),
        (
            {"progress": "yes"},
            "progress must be True, False or a callable taking the rows done; got progress='yes'",
        ),
        (
            {"rescore": 0, "selection": "forward", "scoring": "r2"},
            "rescore must be an integer >= 1 (steps of the path to re-score) or None; got rescore=0",
        ),
        ({"alphas": [-1.0]}, "alphas must be positive and finite; got alphas=[-1.0]"),
        ({"cv": 1}, "cv must be an int >= 2, 'groups', 'blocks', a scikit-learn splitter or an iterable"),
    ],
)
def test_out_of_range_values_are_refused_before_the_pass(rng, no_pass, params, message):
    X = rng.standard_normal((60, 4))
    assert refusal(sr.StreamRidgeCV(**params), X, X[:, 0]).startswith(message)


@pytest.mark.parametrize(
    ("class_weight", "message"),
    [
        ({0: -1.0}, "class_weight values must be non-negative; got class_weight={0: -1.0}"),
        ({1: float("nan")}, "class_weight values must be non-negative; got class_weight={1: nan}"),
        ({0: "a"}, "class_weight must map labels to numbers (weights); got class_weight={0: 'a'}"),
        ("auto", "class_weight must be None, 'balanced' or a dict {label: weight}; got class_weight='auto'"),
    ],
)
def test_class_weight_is_refused_before_the_pass(data, no_pass, class_weight, message):
    assert refusal(sr.StreamRidgeClassifierCV(class_weight=class_weight), *data) == message


def test_accepted_values_of_numpy_types_and_callables(rng):
    X = rng.standard_normal((60, 4))
    rows = []
    est = sr.StreamRidgeCV(
        alphas=[1.0], fit_intercept=np.True_, chunk_rows=np.int64(20), random_state=np.int32(-3),
        force_features=(np.int64(0),), selection="forward", max_features=np.int64(2), progress=rows.append,
    )  # fmt: skip
    est.fit(X, X[:, 0])
    assert sum(rows) == 60  # the progress callable saw every row
    assert est.support_[0] and est.support_.sum() <= 2


def test_solver_names_are_those_of_the_registry(rng, monkeypatch):
    X = rng.standard_normal((60, 4))
    y = X @ np.array([1.0, 0.5, 0.0, -1.0]) + 0.1 * rng.standard_normal(60)
    monkeypatch.setitem(SOLVERS, "eigen-copy", SOLVERS["eigen"])
    with pytest.raises(ParameterError) as info:
        sr.StreamRidgeCV(solver="qr").fit(X, y)
    assert str(info.value) == "solver must be 'eigen', 'covariance' or 'eigen-copy'; got solver='qr'"
    registered = sr.StreamRidgeCV(alphas=[0.1, 1.0, 10.0], solver="eigen-copy").fit(X, y)
    eigen = sr.StreamRidgeCV(alphas=[0.1, 1.0, 10.0]).fit(X, y)
    np.testing.assert_array_equal(registered.cv_errors_, eigen.cv_errors_)


def test_parameters_are_checked_by_fit_stats_and_partial_fit(rng):
    X = rng.standard_normal((60, 4))
    stats = sr.StreamRidgeCV().fit(X, X[:, 0]).stats_
    for call in (
        lambda: sr.StreamRidgeCV(standardize="yes").fit_stats(stats),
        lambda: sr.StreamRidgeCV(standardize="yes").partial_fit(X, X[:, 0]),
        lambda: sr.StreamRidgeCV(standardize="yes").compute_stats(X, X[:, 0]),
    ):
        with pytest.raises(
            ParameterError, match=r"^standardize must be True or False; got standardize='yes'$"
        ):
            call()


def test_set_params_is_not_checked_until_the_fit(rng):
    """As scikit-learn: parameters are stored as given and checked when a fit starts."""
    est = sr.StreamRidgeCV().set_params(solver="qr")
    assert est.solver == "qr"
    X = rng.standard_normal((30, 2))
    with pytest.raises(ParameterError, match="solver must be"):
        est.fit(X, X[:, 0])
