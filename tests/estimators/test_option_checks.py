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
import streamridge.estimators.base as base
import streamridge.model_selection.scoring as scoring
from streamridge import cli
from streamridge.errors import FoldError, ParameterError
from streamridge.features import RandomHidden
from streamridge.model_selection.scoring import choose_by_score, score_summary
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


# ---------------------------------------------------------------------- metrics undefined on validation folds
def one_class_groups(rng, mixed=(0, 1, 3, 5)):
    """Six groups of 20 rows; the groups not in ``mixed`` hold one class (2: class 1, 4: class 0, others alternate)."""
    X = rng.standard_normal((120, 4))
    g = np.repeat(np.arange(6), 20)
    y = (X[:, 0] + 0.7 * rng.standard_normal(120) > 0).astype(np.int64)
    for k in range(6):
        if k not in mixed:
            y[g == k] = k % 2 if k in (2, 4) else 1 - (k % 2)
    return X, y, g


def test_roc_auc_undefined_in_every_fold_is_refused_before_the_metric_pass(rng, monkeypatch):
    X, _, g = one_class_groups(rng)
    y = g % 2  # every group (fold) holds one class

    def boom(*args, **kwargs):
        raise AssertionError("the metric pass ran")

    monkeypatch.setattr(scoring, "metric_pass", boom)
    est = sr.StreamRidgeClassifierCV(ALPHAS, cv="groups", scoring="roc_auc")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(FoldError) as info:
            est.fit(X, y, groups=g)
    assert str(info.value) == (
        "scoring='roc_auc' is undefined in every validation fold: the validation rows of each of the 6 folds hold "
        "one class, and ROC AUC ranks rows of one class against the other; use folds that mix the classes (e.g. "
        "cv=K rather than groups that each hold one class) or another scoring, e.g. 'balanced_accuracy'"
    )


def test_roc_auc_undefined_in_every_fold_cli(tmp_path, rng, capsys):
    X, _, g = one_class_groups(rng)
    store = write_zarr(str(tmp_path / "d.zarr"), X, g % 2, groups=g, chunk_rows=40)
    out = tmp_path / "m.npz"
    line = error(
        capsys, "fit", "--data", store, "--classify", "--groups", "groups", "--leave-group-out",
        "--scoring", "roc_auc", "--out", out, "--quiet",
    )  # fmt: skip
    assert line.startswith("streamridge: error: scoring='roc_auc' is undefined in every validation fold: ")
    assert not out.exists()


def test_roc_auc_undefined_in_some_folds_skips_them(rng):
    X, y, g = one_class_groups(rng)
    est = sr.StreamRidgeClassifierCV(ALPHAS, cv="groups", scoring="roc_auc")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy warning leaks
        est.fit(X, y, groups=g)
        summary = score_summary(est)
    S = est.cv_scores_
    assert S.shape == (3, 6)
    assert np.isnan(S[:, [2, 4]]).all() and np.isfinite(S[:, [0, 1, 3, 5]]).all()
    defined = S[:, [0, 1, 3, 5]]
    assert (
        est.alpha_ == ALPHAS[int(choose_by_score(defined[:, :, None], np.asarray(ALPHAS), per_target=False))]
    )
    i = ALPHAS.index(est.alpha_)
    assert summary["undefined_folds"] == [2, 4]
    assert summary["note"] == "roc_auc undefined in folds 2, 4 (one class): averaged over 4 folds"
    assert summary["score"] == pytest.approx(defined[i].mean(), rel=1e-12)
    assert summary["std_error"] == pytest.approx(defined[i].std(ddof=1) / 2.0, rel=1e-12)


def test_roc_auc_undefined_in_some_folds_cli_summary(tmp_path, rng, capsys):
    X, y, g = one_class_groups(rng)
    store = write_zarr(str(tmp_path / "d.zarr"), X, y, groups=g, chunk_rows=40)
    common = [
        "fit",
        "--data",
        store,
        "--classify",
        "--groups",
        "groups",
        "--leave-group-out",
        "--scoring",
        "roc_auc",
    ]
    assert cli.main([*common, "--out", str(tmp_path / "m.npz")]) == 0
    out, err = capsys.readouterr()
    assert "warning" not in err.lower() and "Warning" not in out
    assert "            roc_auc undefined in folds 2, 4 (one class): averaged over 4 folds\n" in out
    assert cli.main([*common, "--out", str(tmp_path / "m2.npz"), "--json"]) == 0  # --json: no progress bar
    out, err = capsys.readouterr()
    assert err == "" and json.loads(out)["scores"]["undefined_folds"] == [2, 4]


def test_one_se_counts_only_the_folds_scored():
    """The standard error of the one-standard-error rule is over the folds where the metric is defined."""
    alphas = np.array([1.0, 10.0])
    s = np.full((2, 4, 1), np.nan)
    s[0, :2, 0] = [0.9, 0.7]  # mean 0.8, std 0.1414, SE over 2 folds 0.1 (over 4: 0.0707)
    s[1, :2, 0] = [0.72, 0.72]  # within 0.1 of 0.8, not within 0.0707
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert int(choose_by_score(s, alphas, per_target=False, one_se=True)) == 1
        assert int(choose_by_score(s, alphas, per_target=False)) == 0


# ---------------------------------------------------------------------- refused before the data pass
@pytest.mark.parametrize(
    ("make", "fit_kw", "words"),
    [
        (
            lambda: sr.StreamRidgeCV(features=RandomHidden(10), feature_prefixes=[5, 50]),
            {},
            "feature_prefixes must be a list of ints in 1..10 (the number of features); got feature_prefixes=[5, 50]",
        ),
        (
            lambda: sr.StreamRidgeClassifierCV(scoring="roc_auc"),
            {"y": np.arange(120) % 3},
            "scoring='roc_auc' is for two classes; got 3 classes; use e.g. 'balanced_accuracy'",
        ),
        (
            lambda: sr.StreamRidgeCV(cv="groups", nested=True),
            {"groups": np.repeat([4, 9], 60)},
            "nested=True needs at least 3 folds (two inner folds per outer fold); got 2",
        ),
        (
            lambda: sr.StreamRidgeCV(cv="blocks", n_blocks=2, nested=True),
            {},
            "nested=True needs at least 3 folds (two inner folds per outer fold); got 2",
        ),
    ],
    ids=["prefixes", "roc_auc-3-classes", "nested-2-groups", "nested-2-blocks"],
)
def test_refused_before_the_pass(rng, no_pass, make, fit_kw, words):
    X = rng.standard_normal((120, 4))
    with pytest.raises(ParameterError) as info:
        make().fit(X, fit_kw.get("y", X[:, 0]), groups=fit_kw.get("groups"))
    assert words in str(info.value)


def test_refused_before_the_pass_cli(tmp_path, store, no_pass, capsys):
    (tmp_path / "f.json").write_text(json.dumps({"map": "random_hidden", "n_units": 10}))
    out = tmp_path / "m.npz"
    line = error(
        capsys, "fit", "--data", store, "--features", tmp_path / "f.json", "--prefixes", 5, 50, "--out", out
    )
    assert "feature_prefixes must be a list of ints in 1..10" in line
    with pytest.raises(AssertionError, match="the data pass ran"):  # six groups: accepted up to the pass
        cli.main(
            ["fit", "--data", store, "--groups", "groups", "--leave-group-out", "--nested", "--out", str(out)]
        )
    groups = np.repeat([0, 1], 150)
    X = np.random.default_rng(0).standard_normal((300, 3))
    two = write_zarr(
        str(tmp_path / "two.zarr"), X, (np.arange(300) % 3).astype(np.int64), groups=groups, chunk_rows=100
    )
    line = error(
        capsys, "fit", "--data", two, "--groups", "groups", "--leave-group-out", "--nested", "--out", out
    )
    assert "nested=True needs at least 3 folds (two inner folds per outer fold); got 2" in line
    line = error(capsys, "fit", "--data", two, "--classify", "--scoring", "roc_auc", "--out", out)
    assert "scoring='roc_auc' is for two classes; got 3 classes" in line
    assert not out.exists()


# ---------------------------------------------------------------------- nested CV with balanced class weights
def test_nested_balanced_names_the_label_and_group(rng):
    X = rng.standard_normal((120, 4))
    g = np.repeat(np.arange(6), 20) + 10
    y = np.where(X[:, 0] > 0, 1, 3)
    y[g == 14] = 7  # class 7 lives in group 14 only
    est = sr.StreamRidgeClassifierCV(ALPHAS, cv="groups", class_weight="balanced", nested=True)
    with pytest.raises(FoldError) as info:
        est.fit(X, y, groups=g)
    assert str(info.value) == (
        "nested CV with class_weight='balanced': class 7 has rows only in outer fold 4 (group 14), so the model "
        "selection on the other folds has none of them to weight; spread every class over at least two folds "
        "(more groups holding class 7, or cv=K over rows), or drop class_weight='balanced' (--balanced) or "
        "nested (--nested)"
    )
    sr.StreamRidgeClassifierCV(ALPHAS, cv="groups", nested=True).fit(
        X, y, groups=g
    )  # unweighted classes: fine


def test_nested_balanced_string_label(rng):
    X = rng.standard_normal((120, 4))
    g = np.repeat(np.arange(6), 20)
    y = np.where(X[:, 0] > 0, "a", "b").astype(object)
    y[g == 1] = "rare"
    est = sr.StreamRidgeClassifierCV(ALPHAS, cv="groups", class_weight="balanced", nested=True)
    with pytest.raises(FoldError, match=r"class 'rare' has rows only in outer fold 1 \(group 1\)"):
        est.fit(X, y, groups=g)


def test_nested_balanced_cli(tmp_path, rng, capsys):
    X = rng.standard_normal((120, 4))
    g = np.repeat(np.arange(6), 20)
    y = np.where(X[:, 0] > 0, 1, 3)
    y[g == 2] = 7
    store = write_zarr(str(tmp_path / "d.zarr"), X, y, groups=g, chunk_rows=40)
    line = error(
        capsys, "fit", "--data", store, "--classify", "--balanced", "--nested", "--groups", "groups",
        "--leave-group-out", "--out", tmp_path / "m.npz", "--quiet",
    )  # fmt: skip
    assert line.startswith(
        "streamridge: error: nested CV with class_weight='balanced': class 7 has rows only in outer fold 2 (group 2)"
    )
    assert line.endswith("or drop class_weight='balanced' (--balanced) or nested (--nested)")


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
