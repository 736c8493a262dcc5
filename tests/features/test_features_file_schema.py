"""Features files and map parameters: one schema check, typed parameters, memory checked before a map is drawn.

Every refusal is one line naming the file, the map and the parameter (CLI: exit 2, no traceback).
"""

from __future__ import annotations

import inspect
import json

import numpy as np
import pytest

import streamridge as sr
import streamridge.stats.memory
from streamridge import cli
from streamridge.errors import FoldError, InputError, ParameterError
from streamridge.features import (
    MAPS,
    Concat,
    Delays,
    Distances,
    EchoStateNetwork,
    Nystroem,
    Pipeline,
    RandomHidden,
    make_map,
    read_features_file,
)
from streamridge.features._spec import MAX_DEPTH
from streamridge.sources import write_zarr


@pytest.fixture
def store(tmp_path, rng):
    """600 rows of 4 inputs in 6 series of 100 rows (column ``groups``)."""
    X = rng.standard_normal((600, 4))
    y = X @ rng.standard_normal(4) + 0.1 * rng.standard_normal(600)
    return write_zarr(tmp_path / "d.zarr", X, y, np.repeat(np.arange(6), 100), chunk_rows=128)


def fit_cli(capsys, tmp_path, store, features, *extra):
    """``streamridge fit --features FILE``: (exit code, stderr)."""
    argv = [
        "fit",
        "--data",
        store,
        "--groups",
        "groups",
        "--leave-group-out",
        "--out",
        tmp_path / "m.npz",
        "--quiet",
        "--features",
        features,
        *extra,
    ]
    code = cli.main([str(a) for a in argv])
    return code, capsys.readouterr().err


def refused(capsys, tmp_path, store, name, text, expected):
    """Write ``text`` to ``name``, fit with it: exit 2 and exactly ``streamridge: error: <expected>``."""
    path = tmp_path / name
    path.write_text(text)
    code, err = fit_cli(capsys, tmp_path, store, path)
    assert (code, err) == (2, f"streamridge: error: {expected.format(f=path)}\n")
    assert not (tmp_path / "m.npz").exists()


# ---------------------------------------------------------------- a string is not a boolean
def test_string_false_for_direct_is_refused(store, tmp_path, capsys):
    refused(
        capsys,
        tmp_path,
        store,
        "f.json",
        '{"map": "random_hidden", "n_units": 10, "direct": "false"}',
        "features file '{f}': map 'random_hidden': direct must be a boolean, true or false (not a string or a "
        'number); got direct="false"',
    )


def test_string_for_nystroem_whiten_is_refused(store, tmp_path, capsys):
    refused(
        capsys,
        tmp_path,
        store,
        "f.json",
        '{"map": "nystroem", "n_components": 5, "whiten": "no"}',
        "features file '{f}': map 'nystroem': whiten must be a boolean, true or false (not a string or a "
        'number); got whiten="no"',
    )


BAD_VALUES = [  # (map, parameter, value, what it must be)
    ("random_hidden", "n_units", 2.5, "an integer >= 1"),
    ("random_hidden", "n_units", True, "an integer >= 1"),
    ("random_hidden", "n_units", None, "an integer >= 1"),
    ("random_hidden", "activation", "gelu", 'one of "tanh", "sigmoid", "relu", "rbf"'),
    ("random_hidden", "input_scaling", "1", "a finite number > 0"),
    ("random_hidden", "input_scaling", float("inf"), "a finite number > 0"),
    ("random_hidden", "bias_scaling", -0.5, "a finite number >= 0"),
    ("random_hidden", "direct", 1, "a boolean, true or false (not a string or a number)"),
    ("random_hidden", "seed", 1.0, "a non-negative integer"),
    ("esn", "n_units", 10.0, "an integer >= 1"),
    ("esn", "spectral_radius", float("nan"), "a finite number > 0"),
    ("esn", "input_scaling", 0, "a finite number > 0"),
    ("esn", "leak_rate", 0, "a number in (0, 1]"),
    ("esn", "sparsity", 1.0, "a number in [0, 1)"),
    ("esn", "bias_scaling", False, "a finite number >= 0"),
    ("esn", "washout", 2.5, "a non-negative integer"),
    ("esn", "warmup", 0, "an integer >= 1 or null (None)"),
    ("esn", "seed", -1, "a non-negative integer"),
    ("esn", "activation", "softmax", 'one of "tanh", "sigmoid", "relu", "identity"'),
    (
        "esn",
        "W",
        [[1, 2], [3, 4], [5, 6]],
        "a square list of rows of finite numbers, as many rows as columns (an array of shape (n_units, n_units))",
    ),
    (
        "esn",
        "W_in",
        [[1, 2], [3]],
        "a list of rows of finite numbers, all rows of the same length (an array of shape (n_units, n_features_in))",
    ),
    ("esn", "bias", [0.1, "a"], "a list of finite numbers (an array of shape (n_units,))"),
    ("nystroem", "n_components", "5", "an integer >= 1"),
    ("nystroem", "kernel", "linear", 'one of "rbf", "laplacian", "polynomial"'),
    ("nystroem", "gamma", 0.0, "a finite number > 0 or null (None)"),
    ("nystroem", "degree", 2.0, "an integer >= 1"),
    ("nystroem", "coef0", None, "a finite number"),
    ("nystroem", "whiten", "true", "a boolean, true or false (not a string or a number)"),
    ("nystroem", "seed", None, "a non-negative integer"),
    ("distances", "n_references", 0, "an integer >= 1"),
    ("distances", "metric", "cosine", 'one of "euclidean", "sqeuclidean", "cityblock"'),
    ("distances", "references", [[1, 2], [3]], "a list of rows of finite numbers"),
    ("distances", "seed", 2**64, "a non-negative integer"),
    ("delays", "n_delays", 2e8, "an integer >= 1"),
]


@pytest.mark.parametrize(("name", "param", "value", "must"), BAD_VALUES)
def test_every_parameter_is_checked_by_type_in_a_file(tmp_path, name, param, value, must):
    path = tmp_path / "f.json"
    path.write_text(json.dumps({"map": name, param: value}))
    with pytest.raises(ParameterError) as info:
        read_features_file(path)
    msg = str(info.value)
    assert msg.startswith(f"features file '{path}': map '{name}': {param} must be {must}")
    assert f"; got {param}={json.dumps(value)}" in msg and "\n" not in msg


@pytest.mark.parametrize(("name", "param", "value", "must"), BAD_VALUES)
def test_every_parameter_is_checked_by_type_in_python(rng, name, param, value, must):
    cls = MAPS[name]
    fmap = cls(**{param: value})
    with pytest.raises(ParameterError) as info:
        fmap.fit(rng.standard_normal((50, 2)))
    msg = str(info.value)
    assert msg.startswith(f"{cls.__name__}: {param} must be {must}") and f"; got {param}={value!r}" in msg
    with pytest.raises(ParameterError, match=f"^{cls.__name__}: {param} must be"):
        sr.StreamRidgeCV(features=cls(**{param: value})).fit(
            rng.standard_normal((50, 2)), rng.standard_normal(50)
        )


def test_python_string_false_fits_no_rvfl(rng):
    X, y = rng.standard_normal((80, 4)), rng.standard_normal(80)
    with pytest.raises(
        ParameterError, match=r"^RandomHidden: direct must be a boolean.*; got direct='false'$"
    ):
        sr.StreamRidgeCV(features=RandomHidden(10, direct="false")).fit(X, y)
    assert sr.StreamRidgeCV(features=RandomHidden(10, direct=np.bool_(False))).fit(X, y).coef_.shape == (10,)


def test_every_map_declares_every_parameter():
    for cls in MAPS.values():
        params = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
        assert list(cls._param_constraints) == params, cls.__name__


def test_parts_of_a_composite_map_are_checked(rng, tmp_path):
    with pytest.raises(
        ParameterError, match=r"^EchoStateNetwork: washout must be a non-negative integer; got washout=2.5$"
    ):
        sr.StreamRidgeCV(features=Pipeline([Delays(1), EchoStateNetwork(5, washout=2.5)])).fit(
            rng.standard_normal((50, 2)), rng.standard_normal(50)
        )
    path = tmp_path / "f.json"
    path.write_text(
        json.dumps(
            {
                "map": "concat",
                "maps": [{"map": "delays"}, {"map": "pipeline", "maps": [{"map": "esn", "seed": -3}]}],
            }
        )
    )
    with pytest.raises(ParameterError) as info:
        read_features_file(path)
    assert str(info.value) == (
        f"features file '{path}': map 'esn' at maps[1].maps[0]: seed must be a non-negative integer; got seed=-3"
    )


# ---------------------------------------------------------------- keys beside params
def test_key_beside_params_is_refused(store, tmp_path, capsys):
    refused(
        capsys,
        tmp_path,
        store,
        "f.json",
        '{"map": "esn", "params": {"n_units": 10}, "washout": 50}',
        "features file '{f}': map 'esn': 'washout' beside 'params' would be ignored; put every parameter inside "
        "'params', or write them all beside 'map' without 'params'",
    )


def test_params_form_and_flat_form_make_the_same_map():
    a = make_map({"map": "esn", "params": {"n_units": 10, "washout": 50}})
    b = make_map({"map": "esn", "n_units": 10, "washout": 50})
    assert a.get_params() == b.get_params() and a.washout == 50


def test_duplicate_key_is_refused(store, tmp_path, capsys):
    refused(
        capsys,
        tmp_path,
        store,
        "f.json",
        '{"map": "esn", "washout": 5, "washout": 50}',
        "features file '{f}': the key 'washout' appears twice in one object; keep one",
    )


# ---------------------------------------------------------------- malformed files: one line, exit 2
@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        (
            "f.json",
            '{"map": ["esn"]}',
            "features file '{f}': the key 'map' must name a map (a string: one of random_hidden, esn, nystroem, "
            'distances, delays, concat, pipeline); got map=["esn"]',
        ),
        (
            "f.json",
            '{"map": "esn", "params": 5}',
            "features file '{f}': map 'esn': params must be an object of parameters; got params=5",
        ),
        (
            "f.json",
            '{"map": "esn", "seed": null}',
            "features file '{f}': map 'esn': seed must be a non-negative integer; got seed=null",
        ),
        (
            "f.toml",
            'map = "esn"\nseed = 1979-05-27\n',
            "features file '{f}': map 'esn': seed must be a non-negative integer; got seed=1979-05-27 (a date or time)",
        ),
        (
            "f.json",
            "[1, 2]",
            "features file '{f}': a feature map is described by an object with a 'map' key (one of random_hidden, "
            "esn, nystroem, distances, delays, concat, pipeline); got [1, 2]",
        ),
        (
            "f.json",
            '{"map": "pipeline", "maps": [{"map": "delays"}, 7]}',
            "features file '{f}': maps[1]: a feature map is described by an object with a 'map' key (one of "
            "random_hidden, esn, nystroem, distances, delays, concat, pipeline); got 7",
        ),
        (
            "f.json",
            '{"map": "concat", "maps": []}',
            "features file '{f}': map 'concat': maps must be a non-empty list of map objects; got maps=[]",
        ),
        (
            "f.json",
            '{"map": "esn", "format_version": "1"}',
            "features file '{f}': map 'esn': format_version must be an integer from 1 to 1 (this streamridge's); "
            'got format_version="1"',
        ),
    ],
)
def test_malformed_features_file(store, tmp_path, capsys, name, text, expected):
    refused(capsys, tmp_path, store, name, text, expected)


def nested(depth):
    spec = {"map": "delays", "n_delays": 1}
    for _ in range(depth - 1):
        spec = {"map": "pipeline", "maps": [spec]}
    return spec


def test_pipeline_nested_400_deep(store, tmp_path, capsys):
    refused(
        capsys,
        tmp_path,
        store,
        "f.json",
        json.dumps(nested(400)),
        f"features file '{{f}}': maps are nested more than {MAX_DEPTH} deep (the map at maps[0].maps[0]...maps[0] "
        f"is at depth {MAX_DEPTH + 1}); nest fewer maps (a pipeline of pipelines is one pipeline of all their steps)",
    )


def test_nesting_limit(tmp_path, rng):
    assert isinstance(make_map(nested(MAX_DEPTH)), Pipeline)
    with pytest.raises(ParameterError, match=f"nested more than {MAX_DEPTH} deep"):
        make_map(nested(MAX_DEPTH + 1))
    path = tmp_path / "f.json"
    path.write_text('{"map": "pipeline", "maps": [' * 100_000 + '{"map": "delays"}' + "]}" * 100_000)
    with pytest.raises(InputError) as info:
        read_features_file(path)
    assert (
        str(info.value)
        == f"features file '{path}' is nested too deeply to read; maps nest at most {MAX_DEPTH} deep"
    )


# ---------------------------------------------------------------- clearer messages
def test_negative_seed_names_seed(store, tmp_path, capsys):
    refused(
        capsys,
        tmp_path,
        store,
        "f.json",
        '{"map": "esn", "seed": -1}',
        "features file '{f}': map 'esn': seed must be a non-negative integer; got seed=-1",
    )


def test_fractional_washout_is_refused(store, tmp_path, capsys):
    refused(
        capsys,
        tmp_path,
        store,
        "f.json",
        '{"map": "esn", "n_units": 10, "washout": 2.5}',
        "features file '{f}': map 'esn': washout must be a non-negative integer; got washout=2.5",
    )


def test_features_file_that_is_a_directory(store, tmp_path, capsys):
    (tmp_path / "f.json").mkdir()
    code, err = fit_cli(capsys, tmp_path, store, tmp_path / "f.json")
    assert (code, err) == (
        2,
        f"streamridge: error: features file '{tmp_path / 'f.json'}' is a directory; name a JSON or TOML file\n",
    )


def test_non_numeric_basis_names_basis_and_file(store, tmp_path, capsys):
    refused(
        capsys,
        tmp_path,
        store,
        "f.json",
        '{"map": "nystroem", "n_components": 2, "basis": [["a", 1, 2, 3], [1, 2, 3, 4]]}',
        "features file '{f}': map 'nystroem': basis must be a list of rows of finite numbers, all rows of the same "
        'length (an array of shape (n, n_features_in)) or null (None); got basis=[["a", 1, 2, 3], [1, 2, 3, 4]]',
    )


def test_washout_longer_than_every_series(store, tmp_path, capsys):
    refused(
        capsys,
        tmp_path,
        store,
        "f.json",
        '{"map": "esn", "n_units": 10, "washout": 150}',
        "the feature map's washout of 150 rows is at least as long as the longest series (series 0, 100 rows), so "
        "every row would be left out of the statistics; use a washout shorter than 100 rows or longer series",
    )


def test_washout_of_a_pipeline_in_python(rng):
    X, y, g = rng.standard_normal((90, 2)), rng.standard_normal(90), np.repeat([3, 1, 2], [20, 40, 30])
    fmap = Concat([Delays(1), EchoStateNetwork(5, washout=40)])
    with pytest.raises(FoldError, match=r"washout of 40 rows .* longest series \(series 1, 40 rows\)"):
        sr.StreamRidgeCV(cv="groups", features=fmap).fit(X, y, groups=g)
    model = sr.StreamRidgeCV(cv="groups", features=Concat([Delays(1), EchoStateNetwork(5, washout=19)])).fit(
        X, y, groups=g
    )
    assert model.stats_.n_rows == 1 + 21 + 11  # the rows after the washout of each series


# ---------------------------------------------------------------- memory before anything is drawn
@pytest.fixture
def memory_16gb(monkeypatch):
    monkeypatch.setattr(streamridge.stats.memory, "available_memory", lambda: 16 * 10**9)


def never(what):
    def fail(*args, **kwargs):
        raise AssertionError(f"{what} before the memory check")

    return fail


def test_esn_of_30000_units_is_refused_before_it_is_drawn(store, tmp_path, capsys, memory_16gb, monkeypatch):
    monkeypatch.setattr(EchoStateNetwork, "_fit_arrays", never("the reservoir was drawn"))
    refused(
        capsys,
        tmp_path,
        store,
        "f.json",
        '{"map": "esn", "n_units": 30000}',
        "the statistics of 6 folds x 30000 features (the features of the map esn(n_units=30000)) take 43.2 GB per "
        "copy and a pass over 1 chunk(s) holds at least 3 copies (129.6 GB), more than the 16.0 GB of memory "
        "available; use a smaller feature map or fewer folds",
    )


def test_esn_map_alone_is_refused_before_it_is_drawn(rng, memory_16gb, monkeypatch):
    monkeypatch.setattr(EchoStateNetwork, "_fit_arrays", never("the reservoir was drawn"))
    expected = (
        "the feature map esn(n_units=45000) takes 32.4 GB (a 45000 x 45000 reservoir and its transpose) and 34.4 GB "
        "at the peak of its fit, more than the 16.0 GB of memory available; use a smaller n_units"
    )
    with pytest.raises(InputError) as info:
        EchoStateNetwork(45000).fit(rng.standard_normal((20, 4)))
    assert str(info.value) == expected
    with pytest.raises(InputError):
        Pipeline([Delays(1), EchoStateNetwork(45000)]).fit_width(2)


def test_delays_of_2e8_is_refused_before_names_are_built(rng, memory_16gb, monkeypatch):
    monkeypatch.setattr(Delays, "get_feature_names_out", never("the feature names were built"))
    X, y = rng.standard_normal((100, 4)), rng.standard_normal(100)
    with pytest.raises(InputError) as info:
        sr.StreamRidgeCV(features=Delays(n_delays=200_000_000)).fit(X, y)
    assert str(info.value) == (
        "the statistics of 5 folds x 800000004 features (the features of the map delays(n_delays=200000000)) take "
        "2.56e+07 TB per copy and a pass over 1 chunk(s) holds at least 3 copies (7.68e+07 TB), more than the 16.0 GB "
        "of memory available; use a smaller feature map or fewer folds"
    )


def all_maps():
    return [
        RandomHidden(12, direct=True),
        EchoStateNetwork(25),
        Nystroem(9),
        Nystroem(9, whiten=False),
        Distances(6),
        Delays(3),
        Concat([Delays(2), EchoStateNetwork(5)]),
        Pipeline([Delays(2), RandomHidden(7, direct=True)]),
        Nystroem(basis=np.ones((4, 3))),
        EchoStateNetwork(W=np.eye(6) * 0.5, W_in=np.ones((6, 3))),
    ]


def fitted_bytes(fmap):
    """Bytes of every array the fitted map holds (its fitted arrays and any other it keeps), each counted once."""
    parts = getattr(fmap, "maps_", None)
    if parts is not None:
        return sum(fitted_bytes(m) for m in parts)
    held = {}
    for v in vars(fmap).values():
        for a in v if isinstance(v, tuple) else (v,):
            if isinstance(a, np.ndarray):
                held[id(a)] = a.nbytes
    assert all(id(getattr(fmap, a)) in held for a in fmap._arrays)
    return sum(held.values())


@pytest.mark.parametrize("fmap", all_maps(), ids=lambda m: type(m).__name__)
def test_footprint_is_what_the_fit_makes(rng, fmap):
    fp = fmap.footprint(3)
    fmap.fit(rng.standard_normal((60, 3)))
    assert fp.width == fmap.n_features_out_
    assert fp.held == fitted_bytes(fmap)
    assert fp.peak >= fp.held


def test_partial_fit_batches_shorter_than_the_washout(rng):
    """A batch of one series shorter than the washout: the series goes on in the next batch, nothing is refused."""
    X, y, g = rng.standard_normal((300, 2)), rng.standard_normal(300), np.repeat([0, 1, 2], 100)
    model = sr.StreamRidgeCV(cv="groups", features=EchoStateNetwork(5, washout=50))
    for a in range(0, 300, 20):
        try:
            model.partial_fit(X[a : a + 20], y[a : a + 20], groups=g[a : a + 20])
        except FoldError as exc:  # folds without rows yet: the message of partial_fit, not the washout's
            assert "washout" not in str(exc)
    whole = sr.StreamRidgeCV(cv="groups", features=model.features_).fit(X, y, groups=g)
    assert model.stats_.n_rows == whole.stats_.n_rows == 150
