"""Series spans: shards and partial_fit calls of a stateful map refuse a series that one pass would refuse."""

from __future__ import annotations

import json

import numpy as np
import pytest

import streamridge as sr
from streamridge.cli import main
from streamridge.errors import IncompatibleStatsError, InputError, ModelFileError
from streamridge.features import EchoStateNetwork
from streamridge.sources import write_zarr
from streamridge.stats.foldstats import load_stats, save_stats
from streamridge.stats.series_spans import find_clash, join

RETURNING = [0, 1, 0, 2, 3, 4]  # series 0 comes back after series 1 (blocks of 100 rows)
CONTINUED = [250, 150, 100, 100]  # series 0 in rows 0:250, then 1, 2, 3


@pytest.fixture
def rows(rng):
    X = rng.standard_normal((600, 3))
    y = X[:, 0] + 0.1 * rng.standard_normal(600)
    return X, y


def _store(tmp_path, X, y, groups):
    return write_zarr(
        str(tmp_path / "d.zarr"), X.astype(np.float32), y, groups=np.asarray(groups, np.int32), chunk_rows=100
    )


def _stats(capsys, store, features, rows, out):
    code = main(["stats", "--data", store, "--groups", "groups", "--features", str(features), "--folds", "2",
                 "--rows", rows, "--out", str(out), "--quiet"])  # fmt: skip
    return code, capsys.readouterr().err


def test_shards_holding_a_returning_series_are_refused_at_merge(tmp_path, rows, capsys):
    """Each shard passes (series 0 is whole in each); merge refuses them, as one pass refuses the data: a model
    fitted from them would run series 0's second part from rest."""
    X, y = rows
    store = _store(tmp_path, X, y, np.repeat(RETURNING, 100))
    features = tmp_path / "f.json"
    features.write_text(json.dumps({"map": "esn", "n_units": 10, "seed": 1}))
    a, b, s = tmp_path / "a.npz", tmp_path / "b.npz", tmp_path / "s.npz"
    assert _stats(capsys, store, features, "0:200", a) == (0, "")
    assert _stats(capsys, store, features, "200:600", b) == (0, "")
    for order in ([a, b], [b, a]):
        assert main(["merge", *map(str, order), "--out", str(s)]) == 2
        err = capsys.readouterr().err
        assert err == (
            "streamridge: error: series 0 starts again at row 200 (rows 200:300) after its rows 0:100 in other "
            "statistics; a stateful feature map runs each series once, from its first row, so these statistics "
            "restarted it from rest; merge only statistics that each hold whole series (sort the data by series, "
            "then time, and cut shards between series)\n"
        )
        assert not s.exists()
    assert load_stats(a).meta["series_spans"] == [[0, 0, 100], [1, 100, 200]]
    assert load_stats(b).meta["series_spans"] == [[0, 200, 300], [2, 300, 400], [3, 400, 500], [4, 500, 600]]
    code = main(["fit", "--data", store, "--groups", "groups", "--features", str(features), "--folds", "2",
                 "--out", str(tmp_path / "m.npz"), "--quiet"])  # fmt: skip
    assert code == 2 and "series 0 starts again at row 200 after other series" in capsys.readouterr().err


def test_a_series_split_between_shards_is_refused_as_one_pass_cannot_run_it_so(tmp_path, rows, capsys):
    """Series 0 in rows 0:250: one pass runs it on; a shard at row 200 is refused (it would restart it from
    rest); shards cut where series start merge to the statistics of one pass, spans and all."""
    X, y = rows
    store = _store(tmp_path, X, y, np.repeat(np.arange(4), CONTINUED))
    features = tmp_path / "f.json"
    features.write_text(json.dumps({"map": "esn", "n_units": 10, "seed": 1, "washout": 5}))
    code, err = _stats(capsys, store, features, "200:600", tmp_path / "x.npz")
    assert code == 2 and "cuts a series at row 200" in err
    for name, cut in (("a", "0:250"), ("b", "250:600")):
        assert _stats(capsys, store, features, cut, tmp_path / f"{name}.npz") == (0, "")
    assert (
        main(
            [
                "merge",
                str(tmp_path / "b.npz"),
                str(tmp_path / "a.npz"),
                "--out",
                str(tmp_path / "s.npz"),
                "--quiet",
            ]
        )
        == 0
    )
    assert main(["fit", "--data", store, "--groups", "groups", "--features", str(features), "--folds", "2",
                 "--out", str(tmp_path / "m.npz"), "--save-stats", str(tmp_path / "w.npz"), "--quiet"]) == 0  # fmt: skip
    merged, whole = load_stats(tmp_path / "s.npz"), load_stats(tmp_path / "w.npz")
    assert (
        merged.meta["series_spans"]
        == whole.meta["series_spans"]
        == [[0, 0, 250], [1, 250, 400], [2, 400, 500], [3, 500, 600]]
    )
    np.testing.assert_allclose(merged.sxx, whole.sxx, rtol=1e-12, atol=1e-12 * np.abs(whole.sxx).max())
    # the two parts of series 0, were they computed (the check at --rows bypassed), are refused at merge
    first, rest = ([[0, 0, 200]], [[0, 200, 250], [1, 250, 400]])
    assert find_clash(first, rest) == (0, [0, 0, 200], [0, 200, 250])
    assert find_clash(first, rest, continues=True) is None  # partial_fit: the state ran on
    assert join(first, rest, continues=True) == [[0, 0, 250], [1, 250, 400]]


@pytest.mark.parametrize("cv", ["groups", 2])
def test_partial_fit_refuses_a_series_from_an_earlier_call(rows, cv):
    """partial_fit refuses series 0 again (its second part would run from rest); the refused call changes nothing."""
    X, y = rows
    g = np.repeat(RETURNING, 100)
    est = sr.StreamRidgeCV(cv=cv, features=EchoStateNetwork(10, seed=1))
    try:
        est.partial_fit(X[:200], y[:200], groups=g[:200])
    except InputError:  # cv=2: one fold is still empty; the statistics are kept
        pass
    before = est.stats_.copy()
    with pytest.raises(InputError) as e:
        est.partial_fit(X[200:], y[200:], groups=g[200:])
    assert str(e.value) == (
        "series 0 starts again at row 200 (rows 200:300 of this partial_fit call) after its rows 0:100 in an earlier "
        "call; a stateful feature map carries only the series that ended the previous call into the next and would "
        "restart this one from rest; give each series' rows contiguously and in time order (sort the data by "
        "series, then time)"
    )
    assert est.stats_.meta == before.meta and est.stats_.n_rows == 200
    with pytest.raises(InputError, match="series 0 starts again at row 200 after other series"):
        sr.StreamRidgeCV(cv=cv, features=EchoStateNetwork(10, seed=1)).fit(X, y, groups=g)


def test_partial_fit_runs_on_the_series_that_ended_the_previous_call(rows):
    """Series 0 in rows 0:250, calls of rows 0:200 and 200:600: the state is carried, as in one pass."""
    X, y = rows
    g = np.repeat(np.arange(4), CONTINUED)
    fmap = EchoStateNetwork(10, seed=1, washout=5)
    whole = sr.StreamRidgeCV(cv="groups", features=fmap).fit(X, y, groups=g)
    inc = sr.StreamRidgeCV(cv="groups", features=whole.features_)
    with pytest.raises(InputError, match="got 1 so far"):  # one series so far
        inc.partial_fit(X[:200], y[:200], groups=g[:200])
    inc.partial_fit(X[200:], y[200:], groups=g[200:])
    assert inc.stats_.meta["series_spans"] == whole.stats_.meta["series_spans"]
    assert inc.stats_.meta["series_spans"] == [[0, 0, 250], [1, 250, 400], [2, 400, 500], [3, 500, 600]]
    np.testing.assert_allclose(
        inc.stats_.sxx, whole.stats_.sxx, rtol=1e-12, atol=1e-12 * np.abs(whole.stats_.sxx).max()
    )


def test_statistics_without_spans_still_load_and_merge(rows, tmp_path):
    """Files written before series_spans existed load; their merge is unchecked (nothing known to check)."""
    X, y = rows
    g = np.repeat(np.arange(4), CONTINUED)
    est = sr.StreamRidgeCV(cv=2, features=EchoStateNetwork(10, seed=1))
    a = est.compute_stats(X, y, groups=g, rows=(0, 250))
    b = sr.StreamRidgeCV(cv=2, features=est.features_).compute_stats(X, y, groups=g, rows=(250, 600))
    del a.meta["series_spans"]
    save_stats(a, tmp_path / "old.npz")
    old = load_stats(tmp_path / "old.npz")
    assert "series_spans" not in old.meta
    assert (
        sr.merge(old, b).meta["series_spans"]
        == b.meta["series_spans"]
        == [[1, 250, 400], [2, 400, 500], [3, 500, 600]]
    )
    with pytest.raises(IncompatibleStatsError, match=r"overlap in rows \[250, 600\)"):  # the same shard twice
        sr.merge(b, b.copy())


def test_a_malformed_series_spans_field_is_refused(rows, tmp_path):
    X, y = rows
    s = sr.StreamRidgeCV(cv=2, features=EchoStateNetwork(10, seed=1)).compute_stats(
        X, y, groups=np.repeat(np.arange(4), CONTINUED)
    )
    for bad, problem in (
        ([[0, 0]], "series_spans must be a list of [series id, first row, end row]"),
        ([[0, 5, 5]], "series_spans must hold rows 0 <= first < end"),
        ([[0, 0, 5], [0, 5, 9]], "series_spans names series 0 twice"),
        ({"0": [0, 5]}, "series_spans must be a list of [series id, first row, end row]; got dict"),
    ):
        s.meta["series_spans"] = bad
        save_stats(s, tmp_path / "bad.npz")
        with pytest.raises(ModelFileError) as e:
            load_stats(tmp_path / "bad.npz")
        assert str(e.value).startswith(
            f"not a valid streamridge statistics file: {tmp_path / 'bad.npz'}: {problem}"
        )
