"""Feature maps inside the pass: streamed statistics = in-memory features, predict on raw inputs, prefixes, files, CLI."""

from __future__ import annotations

import json

import dask.array as da
import numpy as np
import pytest

import streamridge as sr
from streamridge import cli
from streamridge.errors import InputError, NonFiniteError
from streamridge.features import Concat, Delays, EchoStateNetwork, Nystroem, Pipeline, RandomHidden
from streamridge.io.model_file import load_model, read_model, save_model
from streamridge.sources import write_zarr
from tests.features.test_features import all_maps

ALPHAS = np.logspace(-4, 3, 12)
STATS = ("weight", "count", "mean_x", "mean_y", "sxx", "sxy", "syy")


@pytest.fixture
def data(rng):
    """Six series of unequal length, two targets."""
    lengths = [70, 130, 45, 200, 90, 65]
    X = rng.standard_normal((sum(lengths), 3))
    g = np.repeat([11, 3, 8, 5, 20, 1], lengths)
    Y = np.column_stack([np.sin(X[:, 0]) + 0.1 * rng.standard_normal(len(g)), X[:, 1] * X[:, 2]])
    return X, Y, g


def assert_stats_close(a, b, rtol=1e-12):
    for name in STATS:
        x, y = getattr(a, name), getattr(b, name)
        scale = max(np.abs(y).max(), 1e-300)
        assert np.abs(x - y).max() <= rtol * scale, (name, np.abs(x - y).max() / scale)


@pytest.mark.parametrize("fmap", all_maps(), ids=lambda m: type(m).__name__)
def test_streamed_stats_equal_in_memory_features(fmap, data):
    X, Y, g = data
    ref_est = sr.StreamRidgeCV(cv="groups")
    fitted = None
    for chunk_rows, sched in [(600, "sync"), (37, "threads"), (101, "threads"), (5, "sync")]:
        est = sr.StreamRidgeCV(cv="groups", features=fmap, chunk_rows=chunk_rows, scheduler=sched)
        s = est.compute_stats(X, Y, groups=g)
        if fitted is None:
            fitted = est.features_
            ref = ref_est.compute_stats(fitted.transform(X, groups=g), Y, groups=g)
        np.testing.assert_array_equal(est.features_.transform(X, groups=g), fitted.transform(X, groups=g))
        assert_stats_close(s, ref)
    assert s.n_features == fitted.n_features_out_


def test_processes_scheduler(data):
    X, Y, g = data
    for fmap in (Concat([EchoStateNetwork(15, seed=3), Nystroem(8)]),):
        est = sr.StreamRidgeCV(cv="groups", features=fmap, chunk_rows=53, scheduler="processes")
        s = est.compute_stats(X, Y, groups=g)
        ref = sr.StreamRidgeCV(cv="groups").compute_stats(est.features_.transform(X, groups=g), Y, groups=g)
        assert_stats_close(s, ref)


@pytest.mark.slow
def test_local_cluster(data):
    X, Y, g = data
    est = sr.StreamRidgeCV(cv="groups", features=EchoStateNetwork(15), chunk_rows=53, scheduler="local:2")
    s = est.compute_stats(X, Y, groups=g)
    ref = sr.StreamRidgeCV(cv="groups").compute_stats(est.features_.transform(X, groups=g), Y, groups=g)
    assert_stats_close(s, ref)


def test_washout_rows_left_out(data):
    X, Y, g = data
    est = sr.StreamRidgeCV(cv="groups", features=EchoStateNetwork(10, washout=20), chunk_rows=33)
    s = est.compute_stats(X, Y, groups=g)
    F = est.features_.transform(X, groups=g)
    pos_in_series = np.concatenate(
        [
            np.arange(n)
            for n in np.unique(g, return_counts=True)[1][np.argsort(np.unique(g, return_index=True)[1])]
        ]
    )
    keep = pos_in_series >= 20
    ref = sr.StreamRidgeCV(cv="groups").compute_stats(F, Y, groups=g, sample_weight=keep.astype(float))
    assert s.n_rows == len(g) - 20 * 6
    for name in ("weight", "mean_x", "mean_y", "sxx", "sxy", "syy"):
        np.testing.assert_allclose(
            getattr(s, name), getattr(ref, name), rtol=1e-12, atol=1e-12 * np.abs(getattr(ref, name)).max()
        )


def test_warmup_in_the_pass_is_close_not_exact(rng):
    """One long series: warm-up restarts let its chunks run in parallel; the statistics deviate a little."""
    X = rng.standard_normal((2400, 2))
    y = rng.standard_normal(2400)
    exact = sr.StreamRidgeCV(cv=3, features=EchoStateNetwork(20, seed=1), chunk_rows=300).compute_stats(X, y)
    dev = {}
    for W in (5, 100):
        warm = sr.StreamRidgeCV(
            cv=3, features=EchoStateNetwork(20, seed=1, warmup=W), chunk_rows=300
        ).compute_stats(X, y)
        dev[W] = np.abs(warm.sxx - exact.sxx).max() / np.abs(exact.sxx).max()
    assert dev[5] > 1e-6
    assert dev[100] < 1e-9, dev


@pytest.mark.parametrize(
    "fmap",
    [RandomHidden(20, direct=True), EchoStateNetwork(15), Pipeline([Delays(2), Nystroem(10)])],
    ids=lambda m: type(m).__name__,
)
def test_predict_raw_equals_transform_then_predict(fmap, data):
    X, Y, g = data
    est = sr.StreamRidgeCV(cv="groups", features=fmap, alphas=ALPHAS, chunk_rows=64).fit(X, Y, groups=g)
    F = est.features_.transform(X, groups=g)
    expected = F @ est.coef_.T + est.intercept_
    np.testing.assert_allclose(est.predict(X, groups=g), expected, rtol=1e-12, atol=1e-12)
    lazy = est.predict(da.from_array(X, chunks=(50, 3)), groups=da.from_array(g, chunks=50))
    np.testing.assert_allclose(lazy.compute(), expected, rtol=1e-12, atol=1e-12)
    direct = sr.StreamRidgeCV(cv="groups", alphas=ALPHAS).fit(F, Y, groups=g)
    np.testing.assert_allclose(est.coef_, direct.coef_, rtol=1e-8, atol=1e-10)
    assert est.alpha_ == direct.alpha_


def test_classifier_with_rvfl(rng):
    X = rng.standard_normal((300, 2))
    labels = np.where(X[:, 0] ** 2 + X[:, 1] ** 2 > 1.4, "out", "in")
    clf = sr.StreamRidgeClassifierCV(
        cv=4, features=RandomHidden(60, activation="rbf", direct=True), class_weight="balanced"
    ).fit(X, labels)
    F = clf.features_.transform(X)
    scores = F @ clf.coef_.T + clf.intercept_
    np.testing.assert_allclose(clf.decision_function(X), scores[:, 0], atol=1e-12)
    assert clf.score(X, labels) > 0.9


@pytest.mark.parametrize(
    ("standardize", "fit_intercept", "per_target"),
    [(False, True, False), (True, True, True), (False, False, False)],
)
def test_prefixes_equal_brute_force(data, standardize, fit_intercept, per_target):
    X, Y, _g = data
    sizes = [3, 8, 15, 30, 43]
    est = sr.StreamRidgeCV(
        cv=5,
        features=RandomHidden(40, direct=True, seed=2),
        feature_prefixes=sizes,
        alphas=ALPHAS,
        standardize=standardize,
        fit_intercept=fit_intercept,
        alpha_per_target=per_target,
        chunk_rows=90,
    )
    est.fit(X, Y)
    F = est.features_.transform(X)
    brute = []
    for n in sizes:
        b = sr.StreamRidgeCV(
            cv=5,
            alphas=ALPHAS,
            standardize=standardize,
            fit_intercept=fit_intercept,
            alpha_per_target=per_target,
        ).fit(F[:, :n], Y)
        cv = b.cv_errors_
        err = cv[np.argmin(cv.sum(axis=1))].sum() if not per_target else cv.min(axis=0).sum()
        brute.append((n, err, b))
    np.testing.assert_array_equal(est.prefix_sizes_, sizes)
    np.testing.assert_allclose(est.prefix_errors_, [e for _, e, _ in brute], rtol=1e-10)
    n_best, _, b_best = min(brute, key=lambda t: t[1])
    assert est.n_features_selected_ == n_best
    np.testing.assert_allclose(est.cv_errors_, b_best.cv_errors_, rtol=1e-10)
    np.testing.assert_array_equal(est.alpha_, b_best.alpha_)
    np.testing.assert_allclose(est.coef_[:, :n_best], b_best.coef_, rtol=1e-8, atol=1e-10)
    assert np.all(est.coef_[:, n_best:] == 0) and est.support_.sum() == n_best
    assert len({round(e, 6) for e in est.prefix_errors_}) == len(
        sizes
    )  # the curve is not flat: the choice matters


def test_prefix_errors_are_the_minimum_over_lambda(data):
    X, Y, g = data
    est = sr.StreamRidgeCV(
        cv="groups", features=EchoStateNetwork(30), feature_prefixes=[5, 30], alphas=ALPHAS
    ).fit(X, Y[:, 0], groups=g)
    assert est.n_features_selected_ in (5, 30)
    assert est.prefix_alphas_.shape == (2,)
    with pytest.raises(ValueError, match=r"feature_prefixes must be a list of ints in 1..30"):
        sr.StreamRidgeCV(features=EchoStateNetwork(30), feature_prefixes=[31]).fit(X, Y[:, 0])
    with pytest.raises(ValueError, match="feature_prefixes and selection cannot be combined"):
        sr.StreamRidgeCV(feature_prefixes=[2], selection="forward").fit(X, Y[:, 0])


def test_model_file_stores_the_map(data, tmp_path):
    X, Y, g = data
    est = sr.StreamRidgeCV(
        cv="groups",
        features=Pipeline([Delays(2), EchoStateNetwork(12)]),
        feature_prefixes=[4, 12],
        alphas=ALPHAS,
    ).fit(X, Y, groups=g)
    save_model(est, tmp_path / "m.npz")
    header, _arrays = read_model(tmp_path / "m.npz")
    assert (
        header["features"]["map"] == "pipeline"
        and header["prefixes"]["n_features_selected"] == est.n_features_selected_
    )
    back = load_model(tmp_path / "m.npz")
    np.testing.assert_array_equal(back.predict(X, groups=g), est.predict(X, groups=g))
    np.testing.assert_array_equal(back.prefix_errors_, est.prefix_errors_)
    import zipfile

    with zipfile.ZipFile(tmp_path / "m.npz") as z:  # arrays only, loadable without pickle
        for name in z.namelist():
            np.load(z.open(name), allow_pickle=False)


def test_pass_errors(data):
    X, Y, g = data
    bad_g = g.copy()
    bad_g[400:420] = 11  # series 11 (rows 0-69) comes back
    with pytest.raises(InputError, match=r"series 11 starts again at row 400"):
        sr.StreamRidgeCV(cv=3, features=EchoStateNetwork(5), chunk_rows=64).fit(X, Y, groups=bad_g)
    sr.StreamRidgeCV(cv=3, features=RandomHidden(5), chunk_rows=64).fit(X, Y, groups=bad_g)  # stateless: fine
    Xn = X.copy()
    Xn[77, 1] = np.nan
    with pytest.raises(
        NonFiniteError,
        match=r"X has NaN or inf in 1 row\(s\) .*rows \[77\].*stateful feature map cannot skip",
    ):
        sr.StreamRidgeCV(cv=3, features=EchoStateNetwork(5), skip_nonfinite=True).fit(Xn, Y, groups=g)
    est = sr.StreamRidgeCV(cv=3, features=RandomHidden(5), skip_nonfinite=True).fit(Xn, Y, groups=g)
    assert est.stats_.n_rows == len(g) - 1
    Xo = X.copy()
    Xo[123] = 1e307
    with pytest.raises(
        NonFiniteError,
        match=r"feature map RandomHidden produced NaN or inf in 1 row\(s\), first at rows \[123\]",
    ):
        sr.StreamRidgeCV(
            cv=3, features=RandomHidden(5, activation="relu", input_scaling=100.0), chunk_rows=50
        ).fit(Xo, Y)
    fitted = RandomHidden(5).fit(X[:, :2])
    with pytest.raises(
        InputError, match="X has 3 features, but RandomHidden is expecting 2 features as input"
    ):
        sr.StreamRidgeCV(features=fitted).fit(X, Y)
    with pytest.raises(ValueError, match="features must be a feature map"):
        sr.StreamRidgeCV(features="esn").fit(X, Y)


# ---------------------------------------------------------------------- command line
def run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_fit_predict_info_with_a_map(data, tmp_path, capsys):
    X, Y, g = data
    store = write_zarr(tmp_path / "d.zarr", X.astype(np.float32), Y[:, 0], g, chunk_rows=64)
    (tmp_path / "f.toml").write_text('map = "esn"\nn_units = 20\nspectral_radius = 0.8\nseed = 4\n')
    code, out, err = run(
        capsys,
        "fit",
        "--data",
        store,
        "--groups",
        "groups",
        "--leave-group-out",
        "--features",
        tmp_path / "f.toml",
        "--prefixes",
        5,
        10,
        20,
        "--out",
        tmp_path / "m.npz",
        "--json",
        "--alphas",
        *ALPHAS,
    )
    assert code == 0, err
    est = sr.StreamRidgeCV(
        cv="groups",
        features=EchoStateNetwork(20, spectral_radius=0.8, seed=4),
        feature_prefixes=[5, 10, 20],
        alphas=ALPHAS,
    )
    est.fit(X.astype(np.float32), Y[:, 0], groups=g)
    model = load_model(tmp_path / "m.npz")
    np.testing.assert_allclose(model.coef_, est.coef_, rtol=1e-10, atol=1e-12)
    code, out, err = run(
        capsys,
        "predict",
        "--model",
        tmp_path / "m.npz",
        "--data",
        store,
        "--groups",
        "groups",
        "--out",
        tmp_path / "p.zarr",
        "--quiet",
    )
    assert code == 0, err
    import zarr

    pred = np.asarray(zarr.open_group(str(tmp_path / "p.zarr"), mode="r")["predictions"])
    F = model.features_.transform(X.astype(np.float32), groups=g)
    np.testing.assert_allclose(pred.reshape(-1), F @ model.coef_ + model.intercept_, rtol=1e-12, atol=1e-12)
    code, out, _ = run(capsys, "info", tmp_path / "m.npz")
    assert "feature map esn(n_units=20" in out and f"prefixes    chosen {model.n_features_selected_}" in out


@pytest.mark.parametrize("classify", [False, True])
def test_cli_predict_with_a_stateless_map_reads_x_once(data, tmp_path, capsys, monkeypatch, classify):
    """``predict`` with a stateless map reads X through the reader, each row once, and maps it a tile of
    outputs at a time (tiles of 7 rows here); predictions (and scores) equal the map's features times
    the model."""
    from streamridge.datapass import predict as pass_predict
    from streamridge.sources import _zarr

    X, Y, g = data
    y = (Y[:, 0] > np.median(Y[:, 0])).astype(int) * 3 if classify else Y[:, 0]
    store = write_zarr(tmp_path / "d.zarr", X.astype(np.float32), y, g, chunk_rows=64)
    (tmp_path / "f.toml").write_text('map = "random_hidden"\nn_units = 30\nseed = 2\n')
    extra = ["--classify"] if classify else []
    code, _, err = run(
        capsys,
        "fit",
        "--data",
        store,
        "--features",
        tmp_path / "f.toml",
        "--out",
        tmp_path / "m.npz",
        "--quiet",
        *extra,
    )
    assert code == 0, err
    reads = []
    original = _zarr.ZarrReader.read

    def counting(self, start, stop):
        if len(self.shape) == 2:
            reads.append((start, stop))
        return original(self, start, stop)

    monkeypatch.setattr(_zarr.ZarrReader, "read", counting)
    monkeypatch.setattr(pass_predict, "MAP_TILE_BYTES", 7 * 8 * 30)
    scores = ["--scores"] if classify else []
    code, _, err = run(
        capsys,
        "predict",
        "--model",
        tmp_path / "m.npz",
        "--data",
        store,
        "--out",
        tmp_path / "p.zarr",
        "--quiet",
        *scores,
    )
    assert code == 0, err
    assert sorted(r for a, b in reads for r in range(a, b)) == list(range(len(X)))
    import zarr

    group = zarr.open_group(str(tmp_path / "p.zarr"), mode="r")
    model = load_model(tmp_path / "m.npz")
    linear = model.features_.transform(X.astype(np.float32)) @ np.atleast_2d(model.coef_).T + model.intercept_
    if classify:
        np.testing.assert_allclose(group["scores"][:], linear[:, 0], rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(group["predictions"][:], np.where(linear[:, 0] > 0, 3, 0))
        np.testing.assert_array_equal(group["predictions"][:], model.predict(X.astype(np.float32)))
    else:
        np.testing.assert_allclose(group["predictions"][:], linear[:, 0], rtol=1e-12, atol=1e-12)


def test_cli_features_list_and_errors(tmp_path, capsys, data):
    for argv in (["features"], ["features", "--help"]):
        code, out, _ = run(capsys, *argv)
        assert (
            code == 0
            and "esn" in out
            and "EchoStateNetwork" in out
            and "nystroem" in out
            and "spectral_radius=0.9" in out
        )
    code, out, _ = run(capsys, "features", "--json")
    assert json.loads(out)["random_hidden"]["params"]["n_units"] == 100
    X, Y, g = data
    store = write_zarr(tmp_path / "d.zarr", X, Y[:, 0], g, chunk_rows=64)
    (tmp_path / "bad.json").write_text('{"map": "esn", "units": 5}')
    code, _, err = run(
        capsys, "fit", "--data", store, "--features", tmp_path / "bad.json", "--out", tmp_path / "m.npz"
    )
    assert code == 2 and "has no parameter 'units'" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "m.npz").exists()


def _lazy_xy(n_chunks, rows, calls):
    """X and y of each chunk produced by one shared dask task (a simulation), counting its runs."""
    import dask

    def simulate(i):
        calls.append(i)
        r = np.random.default_rng(i)
        u = r.standard_normal((rows, 2))
        return u, u[:, 0] ** 2

    outs = [dask.delayed(simulate, pure=True)(i) for i in range(n_chunks)]
    X = da.concatenate([da.from_delayed(o[0], shape=(rows, 2), dtype=float) for o in outs])
    y = da.concatenate([da.from_delayed(o[1], shape=(rows,), dtype=float) for o in outs])
    return X, y


@pytest.mark.parametrize("features", [None, RandomHidden(5)], ids=["raw", "mapped"])
def test_shared_upstream_of_x_and_y_runs_once_per_chunk(features):
    calls: list[int] = []
    X, y = _lazy_xy(6, 50, calls)
    sr.StreamRidgeCV(cv=3, features=features, scheduler="threads").compute_stats(X, y)
    assert sorted(calls) == list(range(6)), calls  # was [0, 0, 1, 1, ...]: X and y computed separately


@pytest.mark.parametrize(
    "fmap", [EchoStateNetwork(12, leak_rate=0.5, washout=15), Delays(3)], ids=lambda m: type(m).__name__
)
@pytest.mark.parametrize("with_groups", [True, False])
def test_partial_fit_continues_series_across_calls(fmap, with_groups, data):
    """Batches that cut series in the middle give the statistics of one fit (the state is carried)."""
    X, Y, g = data
    groups = g if with_groups else None
    whole = sr.StreamRidgeCV(cv=2, features=fmap, chunk_rows=40).fit(X, Y, groups=groups)
    inc = sr.StreamRidgeCV(cv=2, features=whole.features_, chunk_rows=40)
    for a, b in [(0, 250), (250, 251), (251, 333), (333, 600)]:  # cuts inside series 5 (twice) and 20
        inc.partial_fit(X[a:b], Y[a:b], groups=None if groups is None else groups[a:b])
    assert_stats_close(inc.stats_, whole.stats_)
    fresh = sr.StreamRidgeCV(cv=2, features=whole.features_, chunk_rows=40)
    fresh.partial_fit(X[:250], Y[:250], groups=None if groups is None else groups[:250])
    fresh.partial_fit(X[250:], Y[250:], groups=None if groups is None else groups[250:])
    assert_stats_close(fresh.stats_, whole.stats_)


def test_chunk_whose_rows_are_all_dropped(rng):
    """Regression: a chunk with every row skipped (NaN, or a washout) failed to reshape its empty y."""
    X = rng.standard_normal((100, 2))
    y = rng.standard_normal(100)
    X[40:60] = np.nan
    est = sr.StreamRidgeCV(cv=2, skip_nonfinite=True, chunk_rows=20).fit(X, y)
    assert est.stats_.n_rows == 80


def test_checkpoint_resumes_a_pass_with_a_map(data, tmp_path, monkeypatch):
    """A pass with a stateful map stopped after some lanes resumes at a lane boundary to the same statistics."""
    import streamridge.datapass.lane_task as lane_task
    import streamridge.datapass.plan as plan
    from streamridge.datapass.driver import PassReport, accumulate
    from streamridge.sources import open_source

    X, Y, g = data
    monkeypatch.setattr(
        plan, "LANE_GROUP", 1
    )  # one lane per task, so that the pass stops between the two lanes
    monkeypatch.setattr(plan, "LOCKSTEP_SERIES", 1)
    est = sr.StreamRidgeCV(cv="groups", features=EchoStateNetwork(10), chunk_rows=40)
    whole = est.compute_stats(X, Y, groups=g)
    spec = est._spec
    src = open_source(X, y=Y, groups=g, chunk_rows=40)
    real = lane_task.lane_task

    def failing(lane, *args):
        if lane.first >= 5:
            raise OSError("disk went away")
        return real(lane, *args)

    monkeypatch.setattr(lane_task, "lane_task", failing)
    with pytest.raises(Exception, match="disk went away"):
        accumulate(src, spec, scheduler="sync", checkpoint=tmp_path / "ck", checkpoint_every_s=0)
    monkeypatch.setattr(lane_task, "lane_task", real)
    report = PassReport()
    resumed = accumulate(
        src, spec, scheduler="sync", checkpoint=tmp_path / "ck", checkpoint_every_s=0, report=report
    )
    # chunks of 40 rows, not cut at series heads (only chunks over 600 / (8 tasks x 1 lane) = 75 rows are);
    # series 8 starts at row 200 = chunk 5, the only chunk that starts a series after chunk 0, so the lanes
    # are chunks 0-4 and 5-14
    assert report.extra["resumed_chunks"] == 5
    for name in STATS:
        np.testing.assert_allclose(
            getattr(resumed, name),
            getattr(whole, name),
            rtol=1e-12,
            atol=1e-12 * np.abs(getattr(whole, name)).max(),
        )


def test_model_file_with_a_newer_map_format_is_refused(data, tmp_path):
    X, Y, g = data
    est = sr.StreamRidgeCV(cv="groups", features=RandomHidden(4), alphas=ALPHAS).fit(X, Y[:, 0], groups=g)
    save_model(est, tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz", allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    header = json.loads(bytes(arrays["header_json"]).decode())
    header["features"]["format_version"] = 99
    arrays["header_json"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    np.savez(tmp_path / "new.npz", **arrays)
    from streamridge.errors import ModelFileError

    with pytest.raises(ModelFileError, match="feature map format 99 is newer than this streamridge reads"):
        load_model(tmp_path / "new.npz")


def test_warmup_with_series(rng):
    """Warm-up rows never reach back into the previous series; chunks that start a series are exact."""
    X = rng.standard_normal((2400, 2))
    y = rng.standard_normal(2400)
    g = np.repeat([4, 1, 9], 800)
    kw = dict(cv="groups", chunk_rows=100)
    exact = sr.StreamRidgeCV(features=EchoStateNetwork(20, seed=1), **kw).compute_stats(X, y, groups=g)
    warm = sr.StreamRidgeCV(
        features=EchoStateNetwork(20, seed=1, warmup=150), scheduler="threads", **kw
    ).compute_stats(X, y, groups=g)
    short = sr.StreamRidgeCV(features=EchoStateNetwork(20, seed=1, warmup=3), **kw).compute_stats(
        X, y, groups=g
    )
    dev = np.abs(warm.sxx - exact.sxx).max() / np.abs(exact.sxx).max()
    assert dev < 1e-9
    assert np.abs(short.sxx - exact.sxx).max() / np.abs(exact.sxx).max() > 100 * max(dev, 1e-15)


def test_shards_with_a_stateful_map(data):
    """Shards cut between series merge to the one-pass statistics; a shard cutting a series is refused."""
    X, Y, g = data
    est = sr.StreamRidgeCV(cv="groups", features=EchoStateNetwork(8), chunk_rows=64)
    whole = est.compute_stats(X, Y, groups=g)
    est2 = sr.StreamRidgeCV(cv="groups", features=est.features_, chunk_rows=64)
    parts = [
        est2.compute_stats(X, Y, groups=g, rows=r) for r in [(0, 200), (200, 600)]
    ]  # series 8 starts at row 200
    assert_stats_close(sr.merge(*parts), whole)
    with pytest.raises(ValueError, match="cuts a series at row 250"):
        est2.compute_stats(X, Y, groups=g, rows=(250, 600))
    with pytest.raises(ValueError, match="cuts a series at row 5"):
        sr.StreamRidgeCV(cv=3, features=EchoStateNetwork(8)).compute_stats(X, Y, rows=(5, 600))


def test_cli_stats_with_a_map_shards_merge_and_fit(data, tmp_path, capsys):
    """`stats --features` on two row shards (leave-one-series-out, each shard its own series), `merge`, `fit --stats`:
    the model holds the map and equals a Python fit; the statistics file carries the map exactly."""
    from streamridge.stats.foldstats import load_stats

    X, Y, g = data
    store = write_zarr(tmp_path / "d.zarr", X.astype(np.float32), Y[:, 0], g, chunk_rows=64)
    (tmp_path / "f.json").write_text(
        json.dumps({"map": "esn", "n_units": 20, "spectral_radius": 0.8, "seed": 4, "washout": 3})
    )
    common = [
        "--data",
        store,
        "--groups",
        "groups",
        "--leave-group-out",
        "--features",
        tmp_path / "f.json",
        "--quiet",
    ]
    for name, rows in (("a", "0:245"), ("b", "245:600")):  # 245: series 5 starts there
        code, _, err = run(capsys, "stats", *common, "--rows", rows, "--out", tmp_path / f"{name}.npz")
        assert code == 0, err
    shard = load_stats(tmp_path / "a.npz")
    assert shard.n_folds == 3 and shard.meta["scheme"]["group_values"] == [3, 8, 11]
    code, _, err = run(
        capsys, "merge", tmp_path / "a.npz", tmp_path / "b.npz", "--out", tmp_path / "s.npz", "--quiet"
    )
    assert code == 0, err
    code, _, err = run(
        capsys,
        "fit",
        "--stats",
        tmp_path / "s.npz",
        "--prefixes",
        5,
        10,
        20,
        "--alphas",
        *ALPHAS,
        "--out",
        tmp_path / "m.npz",
        "--quiet",
    )
    assert code == 0, err
    est = sr.StreamRidgeCV(
        cv="groups",
        features=EchoStateNetwork(20, spectral_radius=0.8, seed=4, washout=3),
        feature_prefixes=[5, 10, 20],
        alphas=ALPHAS,
    ).fit(X.astype(np.float32), Y[:, 0], groups=g)
    model = load_model(tmp_path / "m.npz")
    assert model.features_.to_dict()["params"] == est.features_.to_dict()["params"]
    for name in ("w_in_", "bias_", "w_res_"):
        np.testing.assert_array_equal(getattr(model.features_, name), getattr(est.features_, name))
    assert model.n_features_in_ == 3 and model.n_features_selected_ == est.n_features_selected_
    np.testing.assert_allclose(model.coef_, est.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(model.predict(X, groups=g), est.predict(X, groups=g), rtol=1e-9, atol=1e-12)
    other = tmp_path / "g.json"
    other.write_text(json.dumps({"map": "esn", "n_units": 20, "seed": 5}))
    code, _, err = run(
        capsys,
        "stats",
        *common[:-3],
        "--features",
        other,
        "--rows",
        "245:600",
        "--out",
        tmp_path / "c.npz",
        "--quiet",
    )
    assert code == 0, err
    code, _, err = run(capsys, "merge", tmp_path / "a.npz", tmp_path / "c.npz", "--out", tmp_path / "t.npz")
    assert (
        code == 2
        and "differ in features" in err
        and len(err.strip().splitlines()) == 1
        and not (tmp_path / "t.npz").exists()
    )
