"""bands= and band_weights=: the one check of both (columns, names, weight vectors, the options they refuse)."""

from __future__ import annotations

import numpy as np
import pytest

from streamridge.errors import ParameterError
from streamridge.features import Concat, Delays, RandomHidden
from streamridge.model_selection.bands import DEFAULT_BAND_WEIGHTS, check_bands
from streamridge.solvers.banded import sample_band_weights


def columns(bands, n, weights=None):
    return [b.tolist() for b in check_bands(bands, weights, n).columns]


def test_bands_are_checked():
    assert columns([slice(2, 4), [1, 0]], 4) == [[2, 3], [0, 1]]
    assert columns({"a": [0], "b": np.array([2, 1])}, 3) == [[0], [1, 2]]
    assert check_bands({"a": [0], "b": [1, 2]}, None, 3).names == ("a", "b")
    assert check_bands([[0], [1, 2]], None, 3).names == ("band0", "band1")
    cases = [
        ([[0, 1], [1, 2]], 3, r"^feature 1 is in bands 0 and 1; put every feature in exactly one band$"),
        (
            [[0], [2]],
            4,
            r"^features \[1, 3\] \(2 of 4\) are in no band; put every feature in exactly one band$",
        ),
        ([[0, 5]], 3, r"^band 0 holds feature 5, out of range for 3 features \(0..2\)$"),
        ([[0, 1, 2], []], 3, r"^band 1 is empty; every band needs at least one feature$"),
        ([[0, 0, 1]], 2, r"^band 0 holds feature 0 twice; list every feature once$"),
        (
            [[0.5, 1]],
            2,
            r"^band 0 must be a slice or a 1-D array of integer feature indices; got \[0.5, 1.0\]$",
        ),
        ([], 2, r"^bands must be a non-empty list of feature index arrays or slices; got bands=\[\]$"),
        (
            "columns",
            2,
            r"^bands must be a list of feature index arrays or slices, a dict name -> columns, or 'concat'; got bands='columns'$",
        ),
        (3, 2, r"^bands must be a list of .*; got bands=3$"),
    ]
    for bands, n, msg in cases:
        with pytest.raises(ParameterError, match=msg):
            check_bands(bands, None, n)


def test_band_weights_are_checked():
    two = [[0], [1]]
    np.testing.assert_array_equal(check_bands(two, [0.0, 2.0], 2).weights, [[0.0, 2.0]])
    cases = [
        (
            np.ones((2, 3)),
            r"^band_weights must be an int or an array of shape \(n_samples, 2\); got shape \(2, 3\)$",
        ),
        (
            [[1.0, -0.5]],
            r"^band_weights rows must be finite, non-negative and not all zero; row 0 is \[1.0, -0.5\]$",
        ),
        (
            [[1.0, 1.0], [0.0, 0.0]],
            r"^band_weights rows must be finite, non-negative and not all zero; row 1 is \[0.0, 0.0\]$",
        ),
        ([[np.nan, 1.0]], r"row 0 is \[nan, 1.0\]$"),
        (
            "many",
            r"^band_weights must be an int or an array of shape \(n_samples, 2\); got band_weights='many'$",
        ),
    ]
    for weights, msg in cases:
        with pytest.raises(ParameterError, match=msg):
            check_bands(two, weights, 2)
    with pytest.raises(
        ParameterError,
        match=r"^band_weights must be at least 4 for 3 bands \(the equal weights and each band alone\); got band_weights=3$",
    ):
        check_bands([[0], [1], [2]], 3, 3)
    with pytest.raises(
        ParameterError, match=r"^band_weights needs bands .*; set bands= or drop band_weights$"
    ):
        check_bands(None, 5, 3)
    assert check_bands(None, None, 3) is None


def test_sampled_weights_are_seeded():
    """An int samples that many (seeded); None samples DEFAULT_BAND_WEIGHTS, more than the bands."""
    three = [[0], [1], [2]]
    np.testing.assert_array_equal(
        check_bands(three, 10, 3, seed=7).weights, sample_band_weights(3, 10, seed=7)
    )
    default = check_bands(three, None, 3, seed=2).weights
    np.testing.assert_array_equal(default, sample_band_weights(3, DEFAULT_BAND_WEIGHTS, seed=2))
    many = [[i] for i in range(25)]
    assert check_bands(many, None, 25).weights.shape == (26, 25)


def test_concat_bands_are_the_parts():
    fmap = Concat([Delays(1), RandomHidden(5)]).fit_width(3)
    bands = check_bands("concat", None, 11, feature_map=fmap)
    assert [b.tolist() for b in bands.columns] == [list(range(6)), list(range(6, 11))]
    assert bands.names == ("0:delays", "1:random_hidden")
    with pytest.raises(
        ParameterError,
        match=r"^bands='concat' takes one band per part of a Concat feature map; got no feature map; ",
    ):
        check_bands("concat", None, 4)


@pytest.mark.parametrize(
    ("options", "msg"),
    [
        (
            {"selection": "forward"},
            r"^bands= chooses band weights, selection='forward' chooses features; they cannot be combined: drop one$",
        ),
        ({"prefixes": [1, 2]}, r"^bands= and feature_prefixes cannot be combined; drop one$"),
        (
            {"scoring": "neg_mean_absolute_error"},
            r"^bands= scores from the statistics: scoring must be None \(squared error\), 'r2' or 'correlation'; got scoring='neg_mean_absolute_error'$",
        ),
    ],
)
def test_options_banded_ridge_refuses(options, msg):
    with pytest.raises(ParameterError, match=msg):
        check_bands([[0], [1]], None, 2, **options)
