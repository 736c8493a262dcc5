"""An echo state network of given matrices: states, sizes, refusals, files and model files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from streamridge.errors import InputError, ParameterError
from streamridge.features import (
    EchoStateNetwork,
    decode,
    describe,
    encode,
    from_json,
    read_features_file,
    to_json,
)

F = {
    "tanh": np.tanh,
    "sigmoid": lambda z: 1.0 / (1.0 + np.exp(-z)),
    "relu": lambda z: np.maximum(z, 0.0),
    "identity": lambda z: z,
}


def matrices(rng, units=12, n_in=2, radius=0.8):
    W = rng.standard_normal((units, units))
    W *= radius / np.max(np.abs(np.linalg.eigvals(W)))
    return W, rng.uniform(-1, 1, (units, n_in)), rng.uniform(-0.5, 0.5, units)


def reference(W, W_in, b, a, f, X, g):
    """Each series from rest, one row at a time (obviously correct)."""
    out = np.zeros((X.shape[0], W.shape[0]))
    for s in np.unique(g):
        x = np.zeros(W.shape[0])
        for r in np.flatnonzero(g == s):
            x = (1 - a) * x + a * f(W @ x + W_in @ X[r] + b)
            out[r] = x
    return out


@pytest.mark.parametrize("activation", sorted(F))
@pytest.mark.parametrize("leak", [1.0, 0.3])
def test_given_matrices_are_the_reservoir(rng, activation, leak):
    W, W_in, b = matrices(rng, radius=0.5 if activation in ("relu", "identity") else 0.9)
    X = rng.uniform(-1, 1, (300, 2))
    g = np.repeat([3, 1, 8], [120, 1, 179])
    esn = EchoStateNetwork(W=W, W_in=W_in, bias=b, leak_rate=leak, activation=activation).fit(X)
    assert esn.n_features_out_ == 12 and esn.w_res_ is esn.W  # no copy of a float64 array
    ref = reference(W, W_in, b, leak, F[activation], X, g)
    np.testing.assert_allclose(esn.transform(X, groups=g), ref, rtol=0, atol=1e-12)
    assert np.abs(ref).max() > 0.1


def test_each_matrix_given_or_drawn(rng):
    """A given W with drawn W_in and bias: the drawn ones come from the seed, scaled as asked."""
    W, _, _ = matrices(rng, units=30)
    esn = EchoStateNetwork(W=W, input_scaling=0.2, bias_scaling=0.1, seed=4).fit(np.zeros((5, 3)))
    assert esn.w_in_.shape == (30, 3) and 0.15 < np.abs(esn.w_in_).max() <= 0.2
    assert esn.bias_.shape == (30,) and 0.05 < np.abs(esn.bias_).max() <= 0.1
    np.testing.assert_array_equal(esn.w_res_, W)
    again = EchoStateNetwork(W=W, input_scaling=0.2, bias_scaling=0.1, seed=4).fit(np.zeros((5, 3)))
    np.testing.assert_array_equal(again.w_in_, esn.w_in_)


def test_drawn_reservoir_unchanged_by_the_given_option(rng):
    """Without matrices the draw is the one before matrices could be given (same seed, same numbers)."""
    esn = EchoStateNetwork(20, sparsity=0.5, bias_scaling=0.3, seed=7).fit(np.zeros((4, 2)))
    r = np.random.default_rng(7)
    w_in, b = r.uniform(-1, 1, (20, 2)), r.uniform(-1, 1, 20) * 0.3
    Wd = r.standard_normal((20, 20))
    Wd[r.random((20, 20)) < 0.5] = 0.0
    Wd *= 0.9 / np.max(np.abs(np.linalg.eigvals(Wd)))
    np.testing.assert_array_equal(esn.w_in_, w_in)
    np.testing.assert_array_equal(esn.bias_, b)
    np.testing.assert_array_equal(esn.w_res_, Wd)
    assert EchoStateNetwork().fit(np.zeros((4, 2))).n_features_out_ == 100


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"n_units": 10},
            "the reservoir's sizes disagree: n_units=10, W has 12 rows; give matrices of one number "
            "of units (W: (n_units, n_units), W_in: (n_units, n_features_in), bias: (n_units,)), or leave n_units out",
        ),
        ({"bias": np.zeros(11)}, "the reservoir's sizes disagree: W has 12 rows, bias 11 entries;"),
        (
            {"spectral_radius": 1.2},
            "spectral_radius=1.2 draws W, but W is given (used as it is); leave "
            "spectral_radius out, or scale W before giving it",
        ),
        ({"sparsity": 0.5}, "sparsity=0.5 draws W, but W is given"),
        ({"W_in": np.ones((12, 2)), "input_scaling": 0.5}, "input_scaling=0.5 draws W_in, but W_in is given"),
        (
            {"W": np.ones((12, 11))},
            "W must be a square list of rows of finite numbers, as many rows as columns "
            "(an array of shape (n_units, n_units)) or null (None); got W=an array of shape (12, 11) and dtype float64",
        ),
        (
            {"bias": np.array([0.0, np.nan])},
            "bias must be a list of finite numbers (an array of shape (n_units,))",
        ),
    ],
)
def test_refused_parameters(rng, params, message):
    W, _, _ = matrices(rng)
    esn = EchoStateNetwork(**{"W": W, **params})
    with pytest.raises(ParameterError) as info:
        esn.fit(rng.standard_normal((20, 2)))
    assert str(info.value).startswith(f"EchoStateNetwork: {message}")


def test_inputs_of_another_width_than_w_in(rng):
    W, W_in, b = matrices(rng)
    with pytest.raises(InputError) as info:
        EchoStateNetwork(W=W, W_in=W_in, bias=b).fit(rng.standard_normal((20, 3)))
    assert str(info.value) == (
        "EchoStateNetwork: W_in has 2 columns for inputs of 3 columns; give W_in of shape (12, 3) or inputs of 2 columns"
    )


def test_matrices_in_a_features_file(rng, tmp_path):
    W, W_in, b = matrices(rng, units=3)
    path = tmp_path / "f.json"
    path.write_text(
        json.dumps(
            {"map": "esn", "W": W.tolist(), "W_in": W_in.tolist(), "bias": b.tolist(), "leak_rate": 0.4}
        )
    )
    esn = read_features_file(path).fit(np.zeros((2, 2)))
    X = rng.standard_normal((50, 2))
    np.testing.assert_allclose(
        esn.transform(X), reference(W, W_in, b, 0.4, np.tanh, X, np.zeros(50)), rtol=0, atol=1e-12
    )
    path.write_text(json.dumps({"map": "esn", "n_units": 4, "W": W.tolist()}))
    with pytest.raises(
        ParameterError, match=r"map 'esn': the reservoir's sizes disagree: n_units=4, W has 3 rows"
    ):
        read_features_file(path)


def test_descriptions_store_a_given_matrix_once(rng):
    W, W_in, b = matrices(rng)
    esn = EchoStateNetwork(W=W, W_in=W_in, bias=b, leak_rate=0.5).fit(np.zeros((3, 2)))
    obj, arrays = encode(esn)
    assert sorted(arrays) == ["fmap.params.W", "fmap.params.W_in", "fmap.params.bias"]
    assert obj["arrays"]["w_res_"] == {"__array__": "fmap.params.W"}
    assert "W=<array>" in describe(esn)
    X = rng.standard_normal((40, 2))
    for back in (decode(obj, arrays), from_json(to_json(esn))):
        np.testing.assert_array_equal(back.transform(X), esn.transform(X))
