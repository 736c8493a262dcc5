"""A banded model's bands, weights and scores survive a model file; the schema checks their shapes."""

from __future__ import annotations

import json

import numpy as np
import pytest

import streamridge as sr
from streamridge.errors import ModelFileError
from streamridge.io.model_file import load_model, read_model, save_model

BANDS = {"low": [0, 1, 2], "mid": [3, 4, 5, 6], "high": [7, 8]}


@pytest.fixture
def banded(rng):
    X = rng.standard_normal((160, 9))
    Y = X @ rng.standard_normal((9, 4)) + rng.standard_normal((160, 4))
    m = sr.StreamRidgeCV(
        np.logspace(-1, 3, 5), cv=4, bands=BANDS, band_weights=7, alpha_per_target=True, scoring="r2"
    )
    return m.fit(X, Y), X, Y


def test_banded_model_round_trip(banded, tmp_path):
    m, X, Y = banded
    save_model(m, tmp_path / "m.npz")
    back = load_model(tmp_path / "m.npz")
    for name in (
        "band_weights_",
        "band_weight_candidates_",
        "band_scores_",
        "band_fold_scores_",
        "band_cv_r2_",
        "cv_scores_",
    ):
        np.testing.assert_array_equal(getattr(back, name), getattr(m, name), err_msg=name)
    assert [b.tolist() for b in back.bands_] == [b.tolist() for b in m.bands_]
    assert back.band_names_ == ["low", "mid", "high"]
    np.testing.assert_array_equal(back.predict(X, split=True), m.predict(X, split=True))
    np.testing.assert_array_equal(back.score(X, Y, split=True), m.score(X, Y, split=True))
    header, _ = read_model(tmp_path / "m.npz")
    summary = header["band_summary"]
    assert summary["names"] == ["low", "mid", "high"] and summary["sizes"] == [3, 4, 2]
    assert summary["n_candidates"] == 7 and sum(summary["leading"]) == 4
    np.testing.assert_allclose(summary["cv_r2"], m.band_cv_r2_.mean(axis=1))


def rewrite(path, out, *, header=None, arrays=None, drop=()):
    with np.load(path, allow_pickle=False) as z:
        content = {k: np.array(z[k]) for k in z.files if k not in drop}
    doc = json.loads(bytes(content["header_json"]).decode())
    doc.update(header or {})
    content["header_json"] = np.frombuffer(json.dumps(doc).encode(), dtype=np.uint8)
    content.update(arrays or {})
    np.savez(out, **content)
    return out


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            {"arrays": {"band_index": np.array([0, 0, 0, 1, 1, 1, 1, 2, 3])}},
            "band_index holds bands outside [0, 3) for 3 band_names",
        ),
        (
            {"arrays": {"band_index": np.zeros(4, dtype=np.int64)}},
            "array band_index has shape (4,), expected (9,)",
        ),
        (
            {"arrays": {"band_weights": np.ones((4, 2))}},
            "array band_weights has shape (4, 2), expected (3,) or (4, 3)",
        ),
        (
            {"arrays": {"band_fold_scores": np.ones((7, 5, 4, 3))}},
            "array band_fold_scores has shape (7, 5, 4, 3), expected (7, 5, 4, 4)",
        ),
        (
            {"header": {"band_names": None}},
            "arrays ['band_cv_r2', 'band_fold_scores', 'band_index', 'band_scores', 'band_weight_candidates', "
            "'band_weights'] of a banded model but no band_names",
        ),
        ({"header": {"band_names": "low"}}, "band_names must be a list of strings; got a string"),
        (
            {"drop": ("band_index",)},
            "band_names is given but the array band_index (the band of every feature) is missing",
        ),
    ],
)
def test_band_arrays_are_checked(banded, tmp_path, change, problem):
    m, _, _ = banded
    save_model(m, tmp_path / "m.npz")
    bad = rewrite(tmp_path / "m.npz", tmp_path / "bad.npz", **change)
    with pytest.raises(ModelFileError) as e:
        load_model(bad)
    assert str(e.value) == f"not a valid streamridge model file: {bad}: {problem}"
