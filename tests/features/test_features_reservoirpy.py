"""A reservoirpy reservoir brought in with EchoStateNetwork.from_reservoirpy: the same states, the same read-out."""

from __future__ import annotations

import numpy as np
import pytest

import streamridge as sr
from streamridge.errors import ParameterError
from streamridge.features import EchoStateNetwork

rpy_nodes = pytest.importorskip("reservoirpy.nodes")
rpy_mat_gen = pytest.importorskip("reservoirpy.mat_gen")


@pytest.fixture
def series(rng):
    """Three series of 2 inputs and 2 targets (lengths 400, 300, 500)."""
    inputs = [rng.uniform(-1, 1, (n, 2)) for n in (400, 300, 500)]
    targets = [np.c_[np.roll(u[:, 0], 1) * u[:, 1], np.sin(3 * np.roll(u[:, 1], 2))] for u in inputs]
    return inputs, targets


def reservoir(**kw):
    """reservoirpy's own reservoir (sparse W and Win), initialized for 2 inputs."""
    node = rpy_nodes.Reservoir(**{"units": 100, "lr": 0.3, "sr": 0.9, "seed": 1, **kw})
    node.initialize(np.zeros((1, 2)))
    return node


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"bias": rpy_mat_gen.bernoulli, "activation": "sigmoid", "lr": 1.0},
        {"bias": 0.2, "input_scaling": 0.5},
    ],
    ids=["tanh-leaky", "sigmoid-bernoulli-bias", "constant-bias"],
)
def test_states_equal_reservoirpy_run(series, kw):
    inputs, _ = series
    node = reservoir(**kw)
    esn = EchoStateNetwork.from_reservoirpy(node)
    assert esn.n_features_in_ == 2 and esn.n_features_out_ == 100
    for u in inputs:
        node.reset()  # reservoirpy carries the state from run to run; the map starts every series from rest
        np.testing.assert_allclose(esn.transform(u), node.run(u), rtol=0, atol=1e-12)
    X, g = np.vstack(inputs), np.repeat([5, 1, 9], [len(u) for u in inputs])
    node.reset()
    np.testing.assert_allclose(esn.transform(X, groups=g), np.vstack(node.run(inputs)), rtol=0, atol=1e-12)


@pytest.mark.parametrize(("ridge", "tol"), [(1e-6, 5e-8), (1e-2, 1e-10)])
def test_readout_equals_reservoirpy_ridge(series, ridge, tol):
    """reservoirpy's ``reservoir >> Ridge`` fitted with ``warmup=20`` on three series = StreamRidgeCV at that one
    lambda with ``washout=20`` (unpenalized intercept, lambda on the centered states, no scaling).  Relative to the
    largest coefficient: reservoirpy solves the normal equations, streamridge decomposes them (measured 5.5e-9 at
    lambda 1e-6, 6e-12 at 1e-2)."""
    inputs, targets = series
    node, readout = reservoir(bias=0.1), rpy_nodes.Ridge(ridge=ridge)
    esn = EchoStateNetwork.from_reservoirpy(node, washout=20)
    (node >> readout).fit(inputs, targets, warmup=20)
    X, Y = np.vstack(inputs), np.vstack(targets)
    g = np.repeat([0, 1, 2], [len(u) for u in inputs])
    model = sr.StreamRidgeCV(alphas=[ridge], cv="groups", features=esn).fit(X, Y, groups=g)
    scale = np.abs(readout.Wout).max()
    assert np.abs(model.coef_ - readout.Wout.T).max() <= tol * scale
    assert np.abs(model.intercept_ - readout.bias).max() <= tol * scale


def test_unconvertible_reservoirs_are_refused():
    with pytest.raises(
        ParameterError, match=r"^the reservoir is not initialized \(its W and Win are not drawn yet\); "
    ):
        EchoStateNetwork.from_reservoirpy(rpy_nodes.Reservoir(10))
    with pytest.raises(
        ParameterError, match=r"^the reservoir has one leak rate per unit; the map has one leak rate"
    ):
        EchoStateNetwork.from_reservoirpy(reservoir(lr=np.linspace(0.1, 1.0, 100)))
    with pytest.raises(
        ParameterError,
        match=r"^the reservoir's activation softplus is not one the map has; use one of "
        r"tanh, sigmoid, relu, identity",
    ):
        EchoStateNetwork.from_reservoirpy(reservoir(activation="softplus"))
    with pytest.raises(
        ParameterError, match=r"^from_reservoirpy takes a reservoirpy.nodes.Reservoir; got Ridge$"
    ):
        EchoStateNetwork.from_reservoirpy(rpy_nodes.Ridge())
    equal = EchoStateNetwork.from_reservoirpy(reservoir(lr=np.full(100, 0.4)))
    assert equal.leak_rate == 0.4
