"""``streamridge fit --features grid.toml``: a grid of candidate maps fitted in one pass, listed by ``info``."""

from __future__ import annotations

import numpy as np
import pytest

import streamridge as sr
from streamridge import cli
from streamridge.features import EchoStateNetwork
from streamridge.io.model_file import load_model
from streamridge.sources import write_zarr

GRID = 'map = "esn"\nn_units = 20\nspectral_radius = [0.5, 0.9]\nleak_rate = [0.3, 1.0]\nwashout = 5\n'


@pytest.fixture
def data(rng):
    X = rng.standard_normal((900, 3))
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.standard_normal(900)
    return X, y, np.repeat(np.arange(9), 100)


def run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_fit_grid_file_fits_four_candidates_as_the_python_api(data, tmp_path, capsys):
    X, y, g = data
    store = write_zarr(tmp_path / "d.zarr", X, y, g, chunk_rows=128)
    (tmp_path / "grid.toml").write_text(GRID)
    model = tmp_path / "m.npz"
    fit = ["fit", "--data", store, "--out", model, "--groups", "groups", "--leave-group-out", "--quiet"]
    assert run(capsys, *fit, "--features", tmp_path / "grid.toml")[0] == 0
    got = load_model(model)
    maps = EchoStateNetwork.grid(n_units=20, spectral_radius=[0.5, 0.9], leak_rate=[0.3, 1.0], washout=5)
    ref = sr.StreamRidgeCV(cv="groups", features=maps).fit(X, y, groups=g)
    assert [r["params"] for r in got.candidates_] == [r["params"] for r in ref.candidates_]
    assert [r["chosen"] for r in got.candidates_] == [r["chosen"] for r in ref.candidates_]
    assert sum(r["chosen"] for r in got.candidates_) == 1
    assert got.features_.get_params() == ref.features_.get_params() and got.alpha_ == ref.alpha_
    np.testing.assert_allclose(
        [r["cv_error"] for r in got.candidates_], [r["cv_error"] for r in ref.candidates_], rtol=1e-10
    )
    code, out, _ = run(capsys, "info", model)
    assert code == 0 and "candidates  4 feature maps in one pass" in out
    rows = [line.split("lambda")[0].strip(" *+") for line in out.splitlines() if "CV SSE" in line]
    assert rows == [
        "leak_rate=0.3 spectral_radius=0.5",
        "leak_rate=1.0 spectral_radius=0.5",
        "leak_rate=0.3 spectral_radius=0.9",
        "leak_rate=1.0 spectral_radius=0.9",
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            'map = "esn"\nleak_rate = []\n',
            "map 'esn': leak_rate has no values (an empty list is an empty grid)",
        ),
        (
            'map = "esn"\nleak_rate = [0.3, 2]\n',
            "map 'esn': leak_rate must be a number in (0, 1]; got leak_rate=2",
        ),
        (
            'map = "pipeline"\n[[maps]]\nmap = "delays"\nn_delays = [0, 1]\n',
            "map 'delays' at maps[0]: n_delays must be an integer >= 1; got n_delays=0",
        ),
    ],
    ids=["empty", "bad-value", "bad-value-in-part"],
)
def test_bad_grid_is_one_line_exit_2(data, tmp_path, capsys, text, message):
    X, y, g = data
    store = write_zarr(tmp_path / "d.zarr", X, y, g, chunk_rows=128)
    path = tmp_path / "grid.toml"
    path.write_text(text)
    model = tmp_path / "m.npz"
    code, _, err = run(capsys, "fit", "--data", store, "--out", model, "--features", path)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert (
        err.startswith(f"streamridge: error: features file {str(path)!r}: {message}") and not model.exists()
    )


def test_stats_refuses_a_grid_naming_the_file(data, tmp_path, capsys):
    X, y, g = data
    store = write_zarr(tmp_path / "d.zarr", X, y, g, chunk_rows=128)
    (tmp_path / "grid.toml").write_text(GRID)
    out = tmp_path / "s.npz"
    code, _, err = run(capsys, "stats", "--data", store, "--out", out, "--features", tmp_path / "grid.toml")
    assert code == 2 and not out.exists()
    assert err == (
        f"streamridge: error: stats --features {tmp_path / 'grid.toml'}: the file describes a grid of 4 candidate "
        "maps; statistics are those of one map: give each parameter one value, or fit the grid "
        "(fit --data ... --features FILE)\n"
    )
