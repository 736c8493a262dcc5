"""Options refused in one line where they cannot be honoured, and as early as they are known.

``fit --stats`` with options of the pass that would change the model, metrics undefined on
some or every validation fold, refusals known before the data pass (a mock pass that raises
proves that no row was accumulated), nested CV with balanced class weights where a class sits
in one group, and a lambda grid holding something that is not a number.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import streamridge as sr
import streamridge._base as base
import streamridge.scoring as scoring
from streamridge import cli
from streamridge.errors import FoldError, ParameterError
from streamridge.features import RandomHidden
from streamridge.scoring import choose_by_score, score_summary
from streamridge.sources import write_zarr

ALPHAS = [0.1, 1.0, 10.0]


def error(capsys, *argv):
    """Run the CLI; assert exit code 2 and one clean line; return the line."""
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2, (code, out, err)
    assert len(lines) == 1 and lines[0].startswith("streamridge: error: "), err
    assert "Traceback" not in err and "Warning" not in err, err
    return lines[0]


@pytest.fixture
def store(tmp_path, rng):
    X = rng.standard_normal((300, 4)).astype(np.float32)
    y = X @ np.array([1.0, 2.0, 3.0, 4.0]) + rng.standard_normal(300)
    return write_zarr(str(tmp_path / "d.zarr"), X, y, groups=np.repeat(np.arange(6), 50), chunk_rows=100)


@pytest.fixture
def no_pass(monkeypatch):
    """The statistics pass raises if it runs: a refusal seen with it came before any row was accumulated."""

    def boom(*args, **kwargs):
        raise AssertionError("the data pass ran")

    monkeypatch.setattr(base, "accumulate", boom)


# ---------------------------------------------------------------------- fit --stats and the options of the pass
@pytest.fixture
def stats_files(tmp_path, store):
    (tmp_path / "f.json").write_text(json.dumps({"map": "random_hidden", "n_units": 10}))
    plain, mapped = tmp_path / "s.npz", tmp_path / "sf.npz"
    assert cli.main(["stats", "--data", store, "--out", str(plain), "--quiet"]) == 0
    assert (
        cli.main(
            [
                "stats",
                "--data",
                store,
                "--features",
                str(tmp_path / "f.json"),
                "--out",
                str(mapped),
                "--quiet",
            ]
        )
        == 0
    )
    return plain, mapped


def test_fit_stats_refuses_features(tmp_path, stats_files, capsys):
    plain, mapped = stats_files
    out = tmp_path / "m.npz"
    line = error(capsys, "fit", "--stats", plain, "--features", tmp_path / "f.json", "--out", out)
    assert line == (
        f"streamridge: error: fit --stats cannot apply --features {tmp_path / 'f.json'}: the statistics in {plain} "
        "were accumulated without a feature map, so a model fitted from them has none; drop --features, or compute "
        "statistics with it (stats --data ... --features FILE)"
    )
    line = error(capsys, "fit", "--stats", mapped, "--features", tmp_path / "missing.json", "--out", out)
    assert (
        f"the statistics in {mapped} were accumulated with their own map random_hidden(n_units=10, " in line
    )
    assert "which the model uses; drop --features" in line  # refused before the features file is read
    assert not out.exists()


@pytest.mark.parametrize(
    ("options", "names"),
    [
        (["--x", "X"], "--x names an array"),
        (["--y", "y2"], "--y names an array"),
        (["--groups", "groups"], "--groups names an array"),
        (["--weights", "w", "--y", "y"], "--y, --weights name arrays"),
    ],
)
def test_fit_stats_refuses_array_names(tmp_path, stats_files, capsys, options, names):
    plain, _ = stats_files
    line = error(capsys, "fit", "--stats", plain, *options, "--out", tmp_path / "m.npz")
    assert line.startswith(f"streamridge: error: fit --stats reads no data: {names} of the data")
    assert f"the statistics in {plain} were accumulated from their own X, y, groups and weights" in line


@pytest.mark.parametrize(
    ("options", "dropped"),
    [
        (["--folds", "4"], "--folds 4"),
        (["--seed", "2"], "--seed 2"),
        (["--folds", "4", "--seed", "2"], "--folds 4 --seed 2"),
        (["--leave-group-out"], "--leave-group-out"),
        (["--blocks", "5"], "--blocks 5"),
    ],
)
def test_fit_stats_refuses_other_folds(tmp_path, stats_files, capsys, options, dropped):
    plain, _ = stats_files
    line = error(capsys, "fit", "--stats", plain, *options, "--out", tmp_path / "m.npz")
    assert line.startswith(
        f"streamridge: error: fit --stats cannot change the folds: the statistics in {plain} hold 5 folds "
        f"(rows hashed to folds, seed 0); drop {dropped}, or compute statistics with"
    )


def test_fit_stats_accepts_agreeing_folds_and_options_of_the_pass(tmp_path, stats_files, capsys):
    """Fold options equal to the statistics' and options that shape only the pass leave the model as it is."""
    plain, _ = stats_files
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    assert (
        cli.main(["fit", "--stats", str(plain), "--alphas", *map(str, ALPHAS), "--out", str(a), "--quiet"])
        == 0
    )
    extra = ["--folds", "5", "--seed", "0", "--chunk-rows", "7", "--skip-nonfinite", "--scheduler", "sync",
             "--checkpoint", str(tmp_path / "ck"), "--storage-options", '{"anon": true}']  # fmt: skip
    assert (
        cli.main(
            ["fit", "--stats", str(plain), "--alphas", *map(str, ALPHAS), *extra, "--out", str(b), "--quiet"]
        )
        == 0
    )
    ma, mb = sr.load_model(a), sr.load_model(b)
    assert ma.alpha_ == mb.alpha_
    np.testing.assert_array_equal(ma.coef_, mb.coef_)


# ---------------------------------------------------------------------- a lambda grid of non-numbers
@pytest.mark.parametrize(
    ("alphas", "message"),
    [
        (
            [1, 2, "a"],
            "alphas must be real numbers: alphas[2] is of type str, not int or float; got alphas=[1, 2, 'a']",
        ),
        (
            [1.0, None],
            "alphas must be real numbers: alphas[1] is of type NoneType, not int or float; got alphas=[1.0, None]",
        ),
        (
            (0.5, 2j),
            "alphas must be real numbers: alphas[1] is of type complex, not int or float; got alphas=(0.5, 2j)",
        ),
        (
            [[1, 2], [3]],
            "alphas must be real numbers: alphas[0] is of type list, not int or float; got alphas=[[1, 2], [3]]",
        ),
        (np.array(["1", "2"]), "alphas must be real numbers: alphas[0] is of type str_, not int or float"),
        ("abc", "alphas must be a number or a 1-D list of positive numbers, not str; got alphas='abc'"),
        (
            {"a": 1},
            "alphas must be a number or a 1-D list of positive numbers, not dict; got alphas={'a': 1}",
        ),
    ],
)
def test_non_numeric_alphas_name_the_element_and_its_type(rng, alphas, message):
    X = rng.standard_normal((40, 3))
    with pytest.raises(ParameterError) as info:
        sr.StreamRidgeCV(alphas=alphas).fit(X, X[:, 0])
    assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)
    assert str(info.value).startswith(message)


def test_numeric_alphas_still_accepted(rng):
    X = rng.standard_normal((40, 3))
    for alphas in (5, [1, 2.5], np.array([0.1, 1.0], dtype=np.float32), [np.int64(3), 0.5]):
        m = sr.StreamRidgeCV(alphas=alphas).fit(X, X[:, 0])
        np.testing.assert_array_equal(m.alphas_, np.atleast_1d(np.asarray(alphas, dtype=np.float64)))
