"""A fit with candidate feature maps: the candidate and lambda chosen equal brute force over separate fits."""

from __future__ import annotations

import numpy as np
import pytest

import streamridge as sr
from streamridge.errors import InputError, ParameterError
from streamridge.features import EchoStateNetwork, Nystroem, RandomHidden
from streamridge.stats import memory


@pytest.fixture
def data(rng):
    lengths = [70, 130, 45, 200, 90, 65]
    X = rng.standard_normal((sum(lengths), 3))
    g = np.repeat([11, 3, 8, 5, 20, 1], lengths)
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.standard_normal(len(g))
    return X, y, g


def brute_force(maps, X, y, g, **kw):
    """(index, alpha, cv error) of the best of separate fits (first of equal errors)."""
    fits = [sr.StreamRidgeCV(cv="groups", features=m, chunk_rows=53, **kw).fit(X, y, groups=g) for m in maps]
    errors = [float(f.cv_errors_[list(f.alphas_).index(f.alpha_)].sum()) for f in fits]
    best = int(np.argmin(errors))
    return best, fits[best].alpha_, errors, fits[best]


@pytest.mark.parametrize(
    "maps",
    [
        EchoStateNetwork.grid(n_units=12, spectral_radius=[0.5, 0.9], leak_rate=[0.3, 1.0], washout=5),
        Nystroem.grid(n_components=10, gamma=[0.1, 0.5, 2.0]),
        RandomHidden.grid(n_units=[8, 15], activation=["tanh", "relu"]),
    ],
    ids=["esn", "nystroem", "random_hidden"],
)
def test_chosen_candidate_and_lambda_equal_brute_force(maps, data):
    X, y, g = data
    best, alpha, errors, ref = brute_force(maps, X, y, g)
    est = sr.StreamRidgeCV(cv="groups", features=maps, chunk_rows=53).fit(X, y, groups=g)
    assert [row["chosen"] for row in est.candidates_].index(True) == best
    assert est.features_.get_params() == maps[best].get_params()
    assert est.alpha_ == alpha
    np.testing.assert_allclose([row["cv_error"] for row in est.candidates_], errors, rtol=1e-10)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(est.predict(X, groups=g), ref.predict(X, groups=g), rtol=1e-9, atol=1e-12)


def test_one_se_band(data):
    X, y, g = data
    maps = EchoStateNetwork.grid(n_units=12, spectral_radius=[0.5, 0.9], leak_rate=[0.3, 1.0], washout=5)
    est = sr.StreamRidgeCV(cv="groups", features=maps, chunk_rows=53).fit(X, y, groups=g)
    rows = est.candidates_
    best = next(r for r in rows if r["chosen"])
    bound = best["cv_error"] + best["std_error"]
    assert [r["within_1se"] for r in rows] == [r["cv_error"] <= bound for r in rows]
    assert best["within_1se"]
    assert rows[0]["params"]["spectral_radius"] == 0.5 and rows[1]["params"]["leak_rate"] == 1.0


def test_prefixes_chosen_per_candidate(data):
    X, y, g = data
    maps = RandomHidden.grid(n_units=20, activation=["tanh", "relu"])
    best, _, _, ref = brute_force(maps, X, y, g, feature_prefixes=[5, 10, 20])
    est = sr.StreamRidgeCV(cv="groups", features=maps, chunk_rows=53, feature_prefixes=[5, 10, 20])
    est.fit(X, y, groups=g)
    assert est.features_.activation == maps[best].activation
    assert est.n_features_selected_ == ref.n_features_selected_ and est.alpha_ == ref.alpha_


def test_grid_keeps_seeds_equal_and_orders_last_fastest():
    maps = EchoStateNetwork.grid(spectral_radius=[0.7, 0.9], leak_rate=[0.1, 0.3, 1.0], n_units=50)
    assert len(maps) == 6
    assert [(m.spectral_radius, m.leak_rate) for m in maps][:4] == [
        (0.7, 0.1),
        (0.7, 0.3),
        (0.7, 1.0),
        (0.9, 0.1),
    ]
    assert {m.seed for m in maps} == {0} and {m.n_units for m in maps} == {50}


def test_grid_refuses_unknown_and_empty():
    with pytest.raises(ParameterError, match=r"EchoStateNetwork\.grid: unknown parameter 'radius'"):
        EchoStateNetwork.grid(radius=[0.5])
    with pytest.raises(
        ParameterError, match=r"EchoStateNetwork\.grid: leak_rate has no values; give at least one"
    ):
        EchoStateNetwork.grid(leak_rate=[])


def test_candidates_with_different_washouts_are_refused(data):
    X, y, g = data
    maps = EchoStateNetwork.grid(n_units=5, washout=[0, 10])
    with pytest.raises(ParameterError, match=r"must leave out the same rows; got washouts \[0, 10\]"):
        sr.StreamRidgeCV(cv="groups", features=maps).fit(X, y, groups=g)


@pytest.mark.parametrize(
    ("kw", "what"),
    [
        ({"nested": True}, "nested=True"),
        ({"scoring": "r2"}, "scoring="),
        ({"checkpoint": "ck"}, "checkpoint="),
        ({"bands": [[0, 1], [2, 3]]}, "bands="),
    ],
)
def test_options_refused_with_candidates(kw, what, data, tmp_path):
    X, y, g = data
    maps = RandomHidden.grid(n_units=[4, 6])
    with pytest.raises(ParameterError, match=f"{what} cannot be used with a list of candidate feature maps"):
        sr.StreamRidgeCV(cv="groups", features=maps, **kw).fit(X, y, groups=g)
    with pytest.raises(
        ParameterError, match="partial_fit cannot be used with a list of candidate feature maps"
    ):
        sr.StreamRidgeCV(cv="groups", features=maps).partial_fit(X, y, groups=g)


def test_memory_check_counts_every_candidate(data, monkeypatch):
    X, y, g = data
    maps = RandomHidden.grid(n_units=1500, activation=["tanh", "relu"])
    monkeypatch.setattr(memory, "available_memory", lambda: 4 * 10**8)
    memory.check_stats_memory(6, 1, 1500, 1, 1)  # one candidate alone fits
    with pytest.raises(InputError) as err:
        sr.StreamRidgeCV(cv="groups", features=maps).fit(X, y, groups=g)
    msg = str(err.value)
    # 2 x 6 folds x (1500^2 + 3 x 1500 + 4) x 8 bytes: both candidates' statistics counted
    assert "the statistics of 6 folds x 1500 features for each of 2 candidate maps" in msg
    assert "candidate maps take 0.2 GB per copy" in msg  # 216,288,384 bytes
    assert msg.endswith("use fewer or smaller candidate feature maps, or fewer folds")


def test_candidates_saved_shown_and_checked(data, tmp_path, capsys):
    import json

    from streamridge import cli
    from streamridge.io.model_file import load_model, read_model, save_model

    X, y, g = data
    maps = RandomHidden.grid(n_units=[8, 15], activation=["tanh", "relu"])
    est = sr.StreamRidgeCV(cv="groups", features=maps, chunk_rows=53).fit(X, y, groups=g)
    path = tmp_path / "m.npz"
    save_model(est, path)
    back = load_model(path)
    assert back.candidates_ == est.candidates_
    np.testing.assert_array_equal(back.predict(X, groups=g), est.predict(X, groups=g))
    assert cli.main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "candidates  4 feature maps in one pass; * chosen, + within 1 SE of it" in out
    best = next(r for r in est.candidates_ if r["chosen"])
    line = f"activation={best['params']['activation']} n_units={best['params']['n_units']}"
    assert any(row.strip().startswith(f"* {line}") for row in out.splitlines())
    assert "activation: 'tanh'" not in out and "activation: tanh -> " in out
    report = tmp_path / "r.html"
    assert cli.main(["report", str(path), "--out", str(report)]) == 0
    assert "Candidate feature maps" in report.read_text() and "within 1 SE" in report.read_text()
    header, _ = read_model(path)
    rows = [dict(r, chosen=True) for r in header["candidates"]]
    with np.load(path, allow_pickle=False) as z:
        content = {k: np.array(z[k]) for k in z.files}
    doc = json.loads(bytes(content["header_json"]).decode())
    doc["candidates"] = rows
    content["header_json"] = np.frombuffer(json.dumps(doc).encode(), dtype=np.uint8)
    bad = tmp_path / "bad.npz"
    np.savez(bad, **content)
    with pytest.raises(Exception, match="candidates exactly one candidate must be chosen"):
        load_model(bad)
