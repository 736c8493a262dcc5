"""Feature maps on their own: chunked = whole-array, ESN = an explicit per-series loop, descriptions, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.linear_model import Ridge
from sklearn.pipeline import make_pipeline

from streamridge.errors import InputError, ModelFileError, NonFiniteError, ParameterError
from streamridge.features import (
    MAPS,
    Concat,
    Delays,
    Distances,
    EchoStateNetwork,
    Nystroem,
    Pipeline,
    RandomHidden,
    decode,
    describe,
    encode,
    from_dict,
    make_map,
    read_features_file,
    sample_rows,
)


def all_maps():
    """One instance of every map and option (ids for parametrize)."""
    maps = [
        RandomHidden(12, activation=a, direct=d, seed=3)
        for a in ("tanh", "sigmoid", "relu", "rbf")
        for d in (False, True)
    ]
    maps += [
        EchoStateNetwork(25, leak_rate=0.6, bias_scaling=0.2, spectral_radius=0.95, seed=1),
        EchoStateNetwork(10, sparsity=0.0, input_scaling=0.3),
        Nystroem(9, kernel="rbf"),
        Nystroem(9, kernel="laplacian", whiten=False),
        Nystroem(9, kernel="polynomial", degree=2),
        Distances(6),
        Distances(6, metric="sqeuclidean"),
        Distances(6, metric="cityblock"),
        Delays(3),
        Concat([Delays(2), RandomHidden(5)]),
        Pipeline([Delays(2), RandomHidden(7, direct=True)]),
        Pipeline([Delays(1), Nystroem(5)]),
    ]
    return maps


MAP_IDS = [describe(m)[:60] for m in all_maps()]


@pytest.fixture
def series(rng):
    X = rng.standard_normal((400, 3))
    g = np.repeat([7, 2, 9, 4], [90, 130, 1, 179])
    return X, g


CHUNKINGS = [[400], [1] * 5 + [395], [90, 40, 1, 269], [7] * 57 + [1], [133, 133, 134]]


def chunked(fmap, X, g, sizes):
    state, parts, a = fmap.init_state(), [], 0
    for m in sizes:
        F, state = fmap.apply_chunk(X[a : a + m], a, None if g is None else g[a : a + m], state)
        parts.append(F)
        a += m
    return np.vstack(parts)


@pytest.mark.parametrize("fmap", all_maps(), ids=MAP_IDS)
def test_chunked_equals_whole(fmap, series):
    X, g = series
    fmap.fit(X)
    whole = fmap.transform(X, groups=g)
    assert whole.shape == (400, fmap.n_features_out_)
    assert np.all(np.isfinite(whole))
    for sizes in CHUNKINGS:
        np.testing.assert_allclose(chunked(fmap, X, g, sizes), whole, rtol=0, atol=1e-12)
    if fmap.stateful:  # the series really matter: without groups, one long series
        assert np.abs(fmap.transform(X) - whole).max() > 1e-3


def esn_reference(esn, X, g):
    """Explicit loop over each series from rest (obviously correct)."""
    out = np.zeros((X.shape[0], esn.n_units))
    for s in np.unique(g):
        rows = np.flatnonzero(g == s)
        x = np.zeros(esn.n_units)
        for r in rows:
            x = (1 - esn.leak_rate) * x + esn.leak_rate * np.tanh(
                esn.w_in_ @ X[r] + esn.bias_ + esn.w_res_ @ x
            )
            out[r] = x
    return out


@pytest.mark.parametrize("leak", [1.0, 0.3])
def test_esn_states_equal_one_run_per_series(series, leak):
    X, g = series
    esn = EchoStateNetwork(20, leak_rate=leak, bias_scaling=0.5, seed=4).fit(X)
    ref = esn_reference(esn, X, g)
    for sizes in CHUNKINGS:
        np.testing.assert_allclose(chunked(esn, X, g, sizes), ref, rtol=0, atol=1e-12)
    assert np.max(np.abs(np.linalg.eigvals(esn.w_res_))) == pytest.approx(0.9, rel=1e-10)
    assert np.mean(esn.w_res_ == 0) == pytest.approx(0.9, abs=0.05)


def test_esn_many_series_in_one_chunk_run_in_lockstep(rng):
    """A chunk of 40 series of lengths 1..60 (batched: one GEMM per step), the first continuing the chunk before."""
    lengths = rng.integers(1, 61, 40)
    X = rng.standard_normal((int(lengths.sum()), 2))
    g = np.repeat(rng.permutation(1000)[:40], lengths)
    esn = EchoStateNetwork(30, leak_rate=0.4, bias_scaling=0.3, seed=2).fit(X)
    ref = esn_reference(esn, X, g)
    cut = int(lengths[0]) // 2 + 1  # inside series 0 (or right after a 1-step series)
    np.testing.assert_allclose(chunked(esn, X, g, [cut, X.shape[0] - cut]), ref, rtol=0, atol=1e-12)
    _, state = esn.apply_chunk(X, 0, g, esn.init_state())
    assert state[0] == g[-1] and state[1] == lengths[-1]
    np.testing.assert_allclose(state[2], ref[-1], rtol=0, atol=1e-12)


def test_delays_reference(series):
    X, g = series
    d = Delays(2).fit(X)
    F = d.transform(X, groups=g)
    for r in range(X.shape[0]):
        for k in range(3):
            same = r - k >= 0 and g[r - k] == g[r]
            np.testing.assert_array_equal(F[r, 3 * k : 3 * k + 3], X[r - k] if same else 0.0)


def test_nystroem_whitened_reproduces_the_kernel(rng):
    """k(x, B) K_BB^-1 k(B, z) = <f(x), f(z)>; with all rows as basis it is the exact kernel."""
    X = rng.standard_normal((30, 4))
    ny = Nystroem(30, gamma=0.3).fit(X)
    F = ny.transform(X)
    K = np.exp(-0.3 * ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
    np.testing.assert_allclose(F @ F.T, K, atol=1e-8)
    raw = Nystroem(30, gamma=0.3, whiten=False, basis=X[:5]).fit(X)
    np.testing.assert_allclose(raw.transform(X), K[:, :5], atol=1e-14)


def test_distances_reference(rng):
    X, R = rng.standard_normal((20, 3)), rng.standard_normal((4, 3))
    for metric, fn in [
        ("euclidean", lambda d: np.sqrt((d**2).sum(-1))),
        ("sqeuclidean", lambda d: (d**2).sum(-1)),
        ("cityblock", lambda d: np.abs(d).sum(-1)),
    ]:
        F = Distances(4, references=R, metric=metric).fit(X).transform(X)
        np.testing.assert_allclose(F, fn(X[:, None, :] - R[None]), atol=1e-12)


def test_random_hidden_reference(rng):
    X = rng.standard_normal((20, 3))
    m = RandomHidden(5, activation="sigmoid", direct=True, seed=9).fit(X)
    H = 1 / (1 + np.exp(-(X @ m.weights_.T + m.bias_)))
    np.testing.assert_allclose(m.transform(X), np.hstack([X, H]), atol=1e-14)


def test_sample_rows_same_for_every_chunking(rng):
    import dask.array as da

    X = rng.standard_normal((500, 2))
    s = sample_rows(X, 17, seed=5)
    for c in (500, 1, 33, 250):
        np.testing.assert_array_equal(sample_rows(da.from_array(X, chunks=(c, 2)), 17, seed=5), s)
    assert len({tuple(r) for r in s}) == 17
    assert not np.array_equal(sample_rows(X, 17, seed=6), s)


@pytest.mark.parametrize("fmap", all_maps(), ids=MAP_IDS)
def test_description_roundtrip_and_determinism(fmap, series):
    X, g = series
    fmap.fit(X)
    F = fmap.transform(X, groups=g)
    obj, arrays = encode(fmap)
    text = json.dumps(obj)  # pure JSON
    back = decode(json.loads(text), {k: np.array(v) for k, v in arrays.items()})
    np.testing.assert_array_equal(back.transform(X, groups=g), F)
    np.testing.assert_array_equal(from_dict(fmap.to_dict()).transform(X, groups=g), F)
    unfitted = json.dumps(encode(clone(fmap))[0])
    again = make_map(json.loads(unfitted)).fit(X)  # same params and seed -> same map
    np.testing.assert_array_equal(again.transform(X, groups=g), F)
    with pytest.raises(ParameterError, match="hold the fitted state of a saved map"):
        make_map(json.loads(text))  # a fitted map's arrays are never dropped silently


def test_sklearn_pipeline(rng):
    X = rng.standard_normal((200, 2))
    y = np.sin(X[:, 0]) + X[:, 1] ** 2
    pipe = make_pipeline(RandomHidden(50, seed=1), Ridge(alpha=1e-3)).fit(X, y)
    rh = RandomHidden(50, seed=1).fit(X)
    np.testing.assert_allclose(
        pipe.predict(X), Ridge(alpha=1e-3).fit(rh.transform(X), y).predict(rh.transform(X))
    )
    assert pipe.score(X, y) > 0.9


def test_warmup_deviation_measured_and_bounded(rng):
    """Restarting W steps before a chunk: the state error decays with W (spectral radius 0.9)."""
    X = rng.standard_normal((3000, 2))
    esn = EchoStateNetwork(40, spectral_radius=0.9, leak_rate=1.0, seed=2).fit(X)
    exact = esn.transform(X)
    devs = {}
    for W in (5, 20, 50, 100):
        worst = 0.0
        for s in range(500, 3000, 500):
            _, st = esn.apply_chunk(X[s - W : s], s - W, None, esn.init_state())
            F, _ = esn.apply_chunk(X[s : s + 500], s, None, st)
            worst = max(worst, float(np.abs(F - exact[s : s + 500]).max()))
        devs[W] = worst
    assert devs[5] > devs[20] > devs[50] > devs[100]
    assert devs[5] > 1e-3  # warm-up is an approximation
    assert devs[100] < 1e-6, devs


def test_out_of_order_series_is_an_error(series):
    X, _ = series
    g = np.repeat([1, 2, 1], [100, 100, 200])
    for fmap in (EchoStateNetwork(5), Delays(1)):
        fmap.fit(X)
        with pytest.raises(InputError, match=r"series 1 starts again at row 200 .*contiguous"):
            fmap.transform(X, groups=g)
    RandomHidden(3).fit(X).transform(X, groups=g)  # stateless maps do not care


def test_non_finite_features_are_an_error(rng):
    X = rng.standard_normal((50, 2))
    X[17] = 1e307
    fmap = RandomHidden(4, activation="relu", input_scaling=100.0).fit(X)
    with pytest.raises(NonFiniteError, match=r"RandomHidden produced NaN or inf in .*rows \[17\]"):
        fmap.transform(X)


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ({"map": "resevoir"}, "unknown feature map 'resevoir'; maps: random_hidden, esn"),
        ({"map": "esn", "n_unit": 5}, "feature map 'esn' has no parameter 'n_unit'; its parameters: n_units"),
        (
            {"map": "esn", "leak_rate": 2.0},
            r"feature map 'esn': leak_rate must be a number in \(0, 1\]; got leak_rate=2.0$",
        ),
        ({"map": "random_hidden", "activation": "gelu"}, "activation must be one of"),
        (
            {"map": "nystroem", "n_components": 0},
            "feature map 'nystroem': n_components must be an integer >= 1; got n_components=0$",
        ),
        (
            {"map": "pipeline", "maps": "esn"},
            "feature map 'pipeline': maps must be a non-empty list of map objects; got maps=\"esn\"$",
        ),
        ({"n_units": 5}, "'map' key"),
    ],
)
def test_bad_parameters(spec, match):
    with pytest.raises(ParameterError, match=match):
        make_map(spec)


def test_features_file_json_and_toml(tmp_path):
    (tmp_path / "f.json").write_text(
        json.dumps(
            {
                "map": "pipeline",
                "maps": [
                    {"map": "delays", "n_delays": 2},
                    {"map": "random_hidden", "n_units": 30, "direct": True},
                ],
            }
        )
    )
    (tmp_path / "f.toml").write_text('map = "esn"\nn_units = 50\nspectral_radius = 0.8\nwashout = 10\n')
    p = read_features_file(tmp_path / "f.json")
    assert isinstance(p, Pipeline) and p.maps[1].n_units == 30
    e = read_features_file(tmp_path / "f.toml")
    assert isinstance(e, EchoStateNetwork) and (e.n_units, e.spectral_radius, e.washout) == (50, 0.8, 10)
    (tmp_path / "bad.json").write_text("{map: esn}")
    with pytest.raises(InputError, match="is not valid JSON"):
        read_features_file(tmp_path / "bad.json")
    with pytest.raises(InputError, match="does not exist"):
        read_features_file(tmp_path / "missing.json")


def test_newer_map_format_is_refused():
    d = RandomHidden(3).fit_width(2).to_dict()
    d["format_version"] = 99
    with pytest.raises(ModelFileError, match="newer than this streamridge reads"):
        from_dict(d)


def test_width_mismatch(rng):
    fmap = RandomHidden(3).fit(rng.standard_normal((10, 2)))
    with pytest.raises(
        InputError, match="X has 3 features, but RandomHidden is expecting 2 features as input"
    ):
        fmap.transform(rng.standard_normal((10, 3)))


def test_registry_lists_every_map():
    assert set(MAPS) == {"random_hidden", "esn", "nystroem", "distances", "delays", "concat", "pipeline"}
