"""fit --bands / --band-weights / --scoring r2 / --solve-memory; info and report show the bands."""

from __future__ import annotations

import json

import pytest

from streamridge import cli
from streamridge.cli.bands import parse_bands
from streamridge.errors import ParameterError
from streamridge.io.model_file import load_model
from streamridge.sources import write_zarr


@pytest.fixture
def store(rng, tmp_path):
    X = rng.standard_normal((300, 6))
    Y = X[:, :2] @ rng.standard_normal((2, 3)) + 0.3 * X[:, 2:] @ rng.standard_normal((4, 3))
    Y += rng.standard_normal((300, 3))
    return write_zarr(tmp_path / "d.zarr", X, Y, chunk_rows=100)


def run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_parse_bands():
    assert parse_bands("0:2,2:6") == [slice(0, 2), slice(2, 6)]
    assert parse_bands("a=0:2, b=2:6") == {"a": slice(0, 2), "b": slice(2, 6)}
    assert parse_bands("concat") == "concat"
    for bad, msg in (
        ("0:2,", "got --bands '0:2,'"),
        ("a=0:2,2:6", "name every range or none"),
        ("3:1", "got '3:1'"),
        ("x", "got --bands 'x'"),
    ):
        with pytest.raises(ParameterError, match=msg):
            parse_bands(bad)


def test_fit_with_bands_info_and_report(store, tmp_path, capsys):
    model = tmp_path / "m.npz"
    code, out, err = run(
        capsys, "fit", "--data", store, "--bands", "first=0:2,rest=2:6", "--band-weights", "8", "--scoring", "r2",
        "--alpha-per-target", "--alphas", "0.1", "1", "10", "100", "--out", model,
    )  # fmt: skip
    assert code == 0, err
    assert "bands       2 bands, 8 weight vectors searched; 3 targets" in out
    assert "metric pass" not in err
    m = load_model(model)
    assert m.band_names_ == ["first", "rest"] and m.band_weights_.shape == (3, 2)
    assert m.band_weight_candidates_.shape == (8, 2)
    code, out, _ = run(capsys, "info", model)
    assert code == 0 and "bands       2 bands" in out
    line = next(x for x in out.splitlines() if x.strip().startswith("first"))
    assert line.split()[1] == "2"  # features of the band
    code, out, _ = run(capsys, "info", model, "--json")
    assert json.loads(out)["band_summary"]["names"] == ["first", "rest"]
    html, png = tmp_path / "r.html", tmp_path / "png"
    code, _, err = run(capsys, "report", model, "--out", html, "--png", png)
    assert code == 0, err
    text = html.read_text()
    assert "Band weights" in text and "R² per band" in text
    assert (png / "bands.png").exists() and (png / "bands_r2.png").exists()


def test_bands_from_a_json_file(store, tmp_path, capsys):
    spec = tmp_path / "bands.json"
    spec.write_text(json.dumps({"low": [0, 1], "high": "2:6"}))
    model = tmp_path / "m.npz"
    code, _, err = run(
        capsys, "fit", "--data", store, "--bands", spec, "--solve-memory", "1MB", "--out", model, "--quiet"
    )
    assert code == 0, err
    m = load_model(model)
    assert m.band_names_ == ["low", "high"] and [b.tolist() for b in m.bands_] == [[0, 1], [2, 3, 4, 5]]
    assert m.solve_memory == "1MB"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--bands", "0:2,2:5"],
            "features [5] (1 of 6) are in no band; put every feature in exactly one band",
        ),
        (["--bands", "0:2,2:6", "--band-weights", "2"], "band_weights must be at least 3 for 2 bands"),
        (["--band-weights", "5"], "band_weights needs bands"),
        (
            ["--bands", "0:2,2:6", "--select", "forward"],
            "bands= chooses band weights, selection='forward' chooses features",
        ),
        (
            ["--bands", "concat"],
            "bands='concat' takes one band per part of a Concat feature map; got no feature map",
        ),
        (
            ["--solve-memory", "lots"],
            "solve_memory must be a positive size in bytes (or like '2GB'); got solve_memory='lots'",
        ),
    ],
)
def test_bad_band_options_are_one_line(store, tmp_path, capsys, args, message):
    code, _, err = run(capsys, "fit", "--data", store, *args, "--out", tmp_path / "m.npz")
    assert code == 2 and err.count("\n") == 1 and err.startswith("streamridge: error: ") and message in err
    assert not (tmp_path / "m.npz").exists()
