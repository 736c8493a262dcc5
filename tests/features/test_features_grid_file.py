"""A features file's grid: a list given to a scalar-valued parameter describes one candidate map per value.

The same candidates as ``FeatureMap.grid``; a list given to a list-valued parameter (an array,
the parts of a composite) is its value; every refusal is one line naming the file, the map
and the parameter.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from streamridge.errors import ParameterError
from streamridge.features import (
    EchoStateNetwork,
    Nystroem,
    Pipeline,
    RandomHidden,
    make_map,
    read_features_file,
)
from streamridge.features._spec import MAX_CANDIDATES


def written(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def params(maps):
    return [m.get_params(deep=False) for m in maps]


def test_toml_grid_equals_the_python_grid(tmp_path):
    path = written(
        tmp_path,
        "grid.toml",
        'map = "esn"\nn_units = 20\nspectral_radius = [0.5, 0.9, 1.1]\nleak_rate = [0.3, 1.0]\nwashout = 5\n',
    )
    maps = read_features_file(path)
    expected = EchoStateNetwork.grid(
        n_units=20, spectral_radius=[0.5, 0.9, 1.1], leak_rate=[0.3, 1.0], washout=5
    )
    assert isinstance(maps, list) and len(maps) == 6
    assert params(maps) == params(expected)
    assert [(m.spectral_radius, m.leak_rate) for m in maps][:3] == [(0.5, 0.3), (0.5, 1.0), (0.9, 0.3)]


def test_json_grid_inside_params_and_strings(tmp_path):
    spec = {"map": "random_hidden", "params": {"n_units": [8, 15], "activation": ["tanh", "relu"], "seed": 3}}
    maps = read_features_file(written(tmp_path, "grid.json", json.dumps(spec)))
    assert params(maps) == params(RandomHidden.grid(n_units=[8, 15], activation=["tanh", "relu"], seed=3))


def test_a_file_without_a_list_is_one_map_and_a_list_of_one_value_one_candidate(tmp_path):
    one = read_features_file(written(tmp_path, "one.toml", 'map = "esn"\nn_units = 20\n'))
    assert isinstance(one, EchoStateNetwork) and one.n_units == 20
    single = read_features_file(written(tmp_path, "single.toml", 'map = "esn"\nn_units = [20]\n'))
    assert isinstance(single, list) and params(single) == params([EchoStateNetwork(20)])


def test_a_list_valued_parameter_keeps_its_list(tmp_path):
    """Nystroem's basis (rows) and an ESN's bias (a vector) are values; only gamma / leak_rate expand."""
    basis = [[0.0, 1.0], [1.0, 0.0], [2.0, 2.0]]
    spec = {"map": "nystroem", "n_components": 3, "basis": basis, "gamma": [0.1, 2.0]}
    maps = read_features_file(written(tmp_path, "ny.json", json.dumps(spec)))
    assert [m.gamma for m in maps] == [0.1, 2.0] and all(m.basis == basis for m in maps)
    esn = {"map": "esn", "n_units": 3, "bias": [0.1, 0.2, 0.3], "leak_rate": [0.5, 1.0]}
    maps = read_features_file(written(tmp_path, "esn.json", json.dumps(esn)))
    assert [m.leak_rate for m in maps] == [0.5, 1.0] and all(m.bias == [0.1, 0.2, 0.3] for m in maps)


def test_a_grid_inside_a_pipeline_part_expands_the_pipeline(tmp_path):
    spec = {
        "map": "pipeline",
        "maps": [
            {"map": "delays", "n_delays": [1, 2]},
            {"map": "esn", "n_units": 10, "leak_rate": [0.3, 1.0]},
        ],
    }
    maps = read_features_file(written(tmp_path, "pipe.json", json.dumps(spec)))
    assert all(isinstance(m, Pipeline) for m in maps)
    assert [(m.maps[0].n_delays, m.maps[1].leak_rate) for m in maps] == [
        (1, 0.3),
        (1, 1.0),
        (2, 0.3),
        (2, 1.0),
    ]
    assert spec["maps"][0]["n_delays"] == [1, 2]  # the description is not changed


def test_the_python_description_of_one_map_takes_no_grid():
    with pytest.raises(ParameterError) as err:
        make_map({"map": "nystroem", "gamma": [0.1, 2.0]})
    assert str(err.value) == (
        "feature map 'nystroem': gamma must be a finite number > 0 or null (None); got gamma=[0.1, 2.0]"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            'map = "esn"\nspectral_radius = []\n',
            "map 'esn': spectral_radius has no values (an empty list is an empty grid); give at least one value, "
            "or leave spectral_radius out",
        ),
        (
            'map = "esn"\nleak_rate = [0.3, 0]\n',
            "map 'esn': leak_rate must be a number in (0, 1]; got leak_rate=0",
        ),
        (
            'map = "esn"\nleak_rate = [[0.3], 1.0]\n',
            "map 'esn': leak_rate must be a number in (0, 1]; got leak_rate=[0.3]",
        ),
        (
            'map = "esn"\nwashout = [5, 10]\n',
            "the grid's candidate feature maps must leave out the same rows; got washouts [5, 10]; "
            "give every candidate the same washout",
        ),
        (
            'map = "pipeline"\n[[maps]]\nmap = "delays"\n[[maps]]\nmap = "esn"\nwarmup = [2, 8]\nwashout = 5\n',
            "map 'esn' at maps[1]: warmup must be >= washout; got warmup=2, washout=5",
        ),
        (
            'map = "esn"\nspectral_radius = [' + ", ".join(["0.9"] * 40) + "]\n"
            "leak_rate = [" + ", ".join(["1.0"] * 30) + "]\n",
            f"the grid of map 'esn' over spectral_radius (40 values) x leak_rate (30 values) describes 1200 "
            f"candidate maps, more than {MAX_CANDIDATES}; give fewer values",
        ),
    ],
    ids=["empty", "bad-value", "nested-list", "washouts", "conflict-in-part", "too-many"],
)
def test_bad_grids_are_refused_naming_file_map_and_parameter(tmp_path, text, message):
    path = written(tmp_path, "grid.toml", text)
    with pytest.raises(ParameterError) as err:
        read_features_file(path)
    assert str(err.value) == f"features file {str(path)!r}: {message}"


def test_grid_candidates_fit_as_the_python_grid(rng, tmp_path):
    """The candidates of a file, given to a fit, are the Python grid's: the same features."""
    X = rng.standard_normal((50, 2))
    path = written(tmp_path, "grid.toml", 'map = "nystroem"\nn_components = 5\ngamma = [0.5, 2.0]\n')
    for got, ref in zip(read_features_file(path), Nystroem.grid(n_components=5, gamma=[0.5, 2.0])):
        np.testing.assert_array_equal(got.fit(X).transform(X), ref.fit(X).transform(X))
