"""The command line, run in-process through ``cli.main`` and once as ``python -m streamridge``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr

from streamridge import cli
from streamridge.io.model_file import load_model, read_model
from streamridge.sources import open_source, write_zarr

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(tmp_path, rng):
    """A small regression data set with groups, in a zarr store."""
    X = rng.standard_normal((600, 5)).astype(np.float32)
    y = X @ rng.standard_normal(5) + 0.2 * rng.standard_normal(600)
    groups = np.repeat(np.arange(6), 100)
    return write_zarr(
        tmp_path / "d.zarr", X, y, groups, chunk_rows=128, feature_names=[f"f{i}" for i in range(5)]
    )


def run(capsys, *argv):
    """Run the CLI in-process; return (exit code, stdout, stderr)."""
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def leftovers(directory):
    return sorted(n for n in os.listdir(directory) if n.startswith((".tmp-", ".old-")))


# ---------------------------------------------------------------------- fit
def test_fit_json(store, tmp_path, capsys):
    model = tmp_path / "m.npz"
    code, out, err = run(capsys, "fit", "--data", store, "--out", model, "--json", "--folds", "4")
    assert code == 0, err
    facts = json.loads(out)
    assert facts["alpha"] > 0 and facts["rows"] == 600 and facts["features"] == 5 and facts["folds"] == 4
    assert len(facts["cv"]["fold_sse"]) == 4 and facts["cv"]["cv_r2"] > 0.9
    assert set(facts["timings"]) >= {"pass_s", "solve_s", "rows_per_s"}
    assert facts["model"] == str(model) and model.exists()
    assert load_model(model).alpha_ == facts["alpha"]


def test_fit_text_summary_leave_group_out(store, tmp_path, capsys):
    model = tmp_path / "m.npz"
    code, out, _ = run(
        capsys, "fit", "--data", store, "--groups", "groups", "--leave-group-out", "--out", model,
        "--alphas", "0.01", "0.1", "1", "10", "--quiet",
    )  # fmt: skip
    assert code == 0 and out == ""
    code, out, _ = run(
        capsys,
        "fit",
        "--data",
        store,
        "--groups",
        "groups",
        "--leave-group-out",
        "--out",
        model,
        "--overwrite",
    )
    assert code == 0
    for text in (
        "zarr store",
        "rows",
        "leave one group out",
        "lambda",
        "CV error",
        "RMSE",
        "pass",
        str(model),
    ):
        assert text in out
    assert load_model(model).n_folds_ == 6


def test_fit_equals_estimator(store, tmp_path, capsys):
    from streamridge import StreamRidgeCV

    model = tmp_path / "m.npz"
    code, _, _ = run(
        capsys, "fit", "--data", store, "--out", model, "--standardize", "--seed", "3", "--quiet"
    )
    assert code == 0
    est = StreamRidgeCV(standardize=True, random_state=3).fit(open_source(store))
    np.testing.assert_allclose(load_model(model).coef_, est.coef_, rtol=1e-12)


def test_fit_from_saved_statistics(store, tmp_path, capsys):
    model, stats, again = tmp_path / "m.npz", tmp_path / "s.npz", tmp_path / "m2.npz"
    code, _, err = run(
        capsys, "fit", "--data", store, "--out", model, "--save-stats", stats, "--include-stats", "--quiet"
    )
    assert code == 0, err
    for source in (stats, model):
        code, out, err = run(
            capsys, "fit", "--stats", source, "--out", again, "--alphas", "0.1", "1", "--json", "--overwrite"
        )
        assert code == 0, err
        assert json.loads(out)["cv"]["n_alphas"] == 2
    np.testing.assert_array_equal(load_model(again).alphas_, [0.1, 1.0])


@pytest.mark.parametrize("command", ["fit", "stats"])
def test_cli_runs_the_estimator_it_builds_unchanged(store, tmp_path, capsys, monkeypatch, command):
    """The estimator a command runs has the options as given (``--scheduler local:1``, not a started
    cluster), and nothing sets its parameters after the pass: the model file records what ran."""
    from streamridge.estimators.core import RidgeCVCore

    method = "fit" if command == "fit" else "compute_stats"
    real, seen = getattr(RidgeCVCore, method), {}

    def recording(self, *args, **kwargs):
        seen["before"] = self.get_params()
        out = real(self, *args, **kwargs)
        seen["after"], seen["estimator"] = self.get_params(), self
        return out

    monkeypatch.setattr(RidgeCVCore, method, recording)
    out = tmp_path / "out.npz"
    code, _, err = run(capsys, command, "--data", store, "--scheduler", "local:1", "--out", out, "--quiet")
    assert code == 0, err
    assert seen["before"]["scheduler"] == "local:1"
    assert seen["estimator"].get_params() == seen["after"] == seen["before"]
    if command == "fit":
        header, _ = read_model(out)
        assert header["params"]["scheduler"] == "local:1" and header["params_dropped"] == []


def test_fit_classifier_and_predict_labels(tmp_path, rng, capsys):
    X = rng.standard_normal((400, 4))
    labels = np.digitize(X[:, 0] + 0.5 * X[:, 1], [-0.5, 0.5]) * 10
    store = write_zarr(tmp_path / "c.zarr", X, labels)
    model, preds = tmp_path / "c.npz", tmp_path / "p.zarr"
    code, _, err = run(capsys, "fit", "--data", store, "--classify", "--balanced", "--out", model, "--quiet")
    assert code == 0, err
    est = load_model(model)
    assert est.classes_.tolist() == [0, 10, 20] and est.class_weight == "balanced"
    code, _, err = run(
        capsys, "predict", "--model", model, "--data", store, "--out", preds, "--scores", "--quiet"
    )
    assert code == 0, err
    group = zarr.open_group(str(preds), mode="r")
    np.testing.assert_array_equal(group["predictions"][:], est.predict(X))
    np.testing.assert_allclose(group["scores"][:], est.decision_function(X), rtol=1e-12)
    assert (group["predictions"][:] == labels).mean() > 0.6  # chance: 1/3


# ---------------------------------------------------------------------- predict
@pytest.mark.parametrize("name", ["p.zarr", "p.h5"])
def test_predict_writes_estimator_predictions(store, tmp_path, capsys, name):
    model, preds = tmp_path / "m.npz", tmp_path / name
    assert run(capsys, "fit", "--data", store, "--out", model, "--quiet")[0] == 0
    code, out, err = run(
        capsys, "predict", "--model", model, "--data", store, "--out", preds, "--chunk-rows", "50"
    )
    assert code == 0, err
    assert "600 rows" in out
    if name.endswith(".h5"):
        import h5py

        with h5py.File(preds, "r") as f:
            values = f["predictions"][:]
    else:
        values = zarr.open_group(str(preds), mode="r")["predictions"][:]
    assert values.shape == (600,)
    X = open_source(store).X  # dask, with the feature names of the store
    np.testing.assert_allclose(values, load_model(model).predict(X).compute(), rtol=1e-12)
    assert leftovers(tmp_path) == []


def test_predict_two_targets(tmp_path, rng, capsys):
    X = rng.standard_normal((300, 3))
    Y = X @ rng.standard_normal((3, 2))
    store = write_zarr(tmp_path / "d2.zarr", X, Y)
    model, preds = tmp_path / "m.npz", tmp_path / "p.zarr"
    assert run(capsys, "fit", "--data", store, "--out", model, "--alpha-per-target", "--quiet")[0] == 0
    code, out, _ = run(capsys, "predict", "--model", model, "--data", store, "--out", preds, "--json")
    assert code == 0 and json.loads(out)["shape"] == [300, 2]
    values = zarr.open_group(str(preds), mode="r")["predictions"][:]
    np.testing.assert_allclose(values, load_model(model).predict(X), rtol=1e-12)


class _Closing:
    """An iterator over ``it`` whose ``close`` calls ``on_close`` (a generator's own cannot be replaced)."""

    def __init__(self, it, on_close):
        self._it, self.close = it, on_close

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._it)


@pytest.mark.parametrize("ahead", [False, True])
@pytest.mark.parametrize(
    "chunk_rows, budget", [(None, 256 * 2**20), (120, 256 * 2**20), (900, 256 * 2**20), (None, 64 * 500)]
)
def test_predict_reads_each_stored_chunk_once(tmp_path, rng, chunk_rows, budget, ahead):
    """Predictions through the reader equal the estimator's, whatever the source's row chunks (smaller
    than the stored chunks, larger, or a budget below one stored chunk), and decode every stored chunk
    once, with the next blocks computed ahead of the one written or not."""
    from zarr.storage import LocalStore

    from streamridge import StreamRidgeClassifierCV, StreamRidgeCV
    from streamridge.cli.predict import RowStream
    from streamridge.datapass.predict import PredictKernel, predict_blocks
    from tests.datapass.test_partitions import CountingStore

    X = rng.standard_normal((3000, 6)).astype(np.float32) + 100.0
    y = X @ rng.standard_normal(6) + rng.standard_normal(3000)
    write_zarr(tmp_path / "d.zarr", X, y, chunk_rows=500)
    store = CountingStore(LocalStore(tmp_path / "d.zarr", read_only=True))
    src = open_source(
        zarr.open_group(store, mode="r"), y=None, require_y=False, chunk_rows=chunk_rows, memory_budget=budget
    )
    three = np.digitize(y, np.quantile(y, [0.3, 0.6]))
    for est, scores in [
        (StreamRidgeCV(cv=3).fit(X, y), False),
        (StreamRidgeClassifierCV(cv=3).fit(X, three), False),
        (StreamRidgeClassifierCV(cv=3).fit(X, three), True),
        (StreamRidgeClassifierCV(cv=3).fit(X, y > np.median(y)), True),
    ]:
        store.reads.clear()
        blocks = predict_blocks(est, src, scores=scores, window=None if ahead else 1)
        stream = RowStream(blocks, 3000, PredictKernel(est, scores=scores).empty())
        closed = []
        real_close = blocks.close
        stream._blocks = _Closing(blocks, lambda c=closed, f=real_close: c.append(1) or f())
        outs = [stream.output(i) for i in range(2 if scores else 1)]
        step = src.row_chunks()[0]  # the writer's slices: the same rows of every output in turn
        got = [[], []]
        for s in range(0, 3000, step):
            for i, out in enumerate(outs):
                got[i].append(out[s : s + step])
        refs = [est.predict(X)] + ([est.decision_function(X)] if scores else [])
        for out, parts, ref in zip(outs, got, refs):
            values = np.concatenate(parts)
            assert out.shape == ref.shape and out.dtype == ref.dtype
            if ref.dtype.kind == "f":
                np.testing.assert_allclose(values, ref, rtol=1e-12)
            else:
                np.testing.assert_array_equal(values, ref)
        assert store.chunk_reads("X") == {f"X/c/{k}/0": 1 for k in range(6)}
        assert closed == [1]  # the pass closed by the stream once its last row was taken, not by the GC


@pytest.mark.parametrize("step", [1, 7, 40, 130, 1000])
def test_row_stream_takes_each_block_once(step):
    """Consecutive slices of any size (within a block, across blocks, longer than several) of two outputs
    in turn: the rows asked for, each block taken once and only when a slice reaches it; a slice of rows
    already let go is refused."""
    from streamridge.cli.predict import RowStream

    chunks = (30, 30, 25, 50, 1, 64)
    n = sum(chunks)
    values = np.arange(n * 2.0).reshape(n, 2)
    starts = np.cumsum((0, *chunks))[:-1].tolist()
    taken = []

    def blocks():
        for a, m in zip(starts, chunks):
            taken.append(a)
            yield a, (values[a : a + m] * 10, values[a : a + m, 0].astype(np.int64))

    stream = RowStream(blocks(), n, (np.empty((0, 2)), np.empty(0, np.int64)))
    a, b = stream.output(0), stream.output(1)
    got = []
    for s in range(0, n, step):
        got.append((a[s : s + step], b[s : s + step]))
        assert taken[-1] < s + step  # no block taken before a slice reaches it
    np.testing.assert_array_equal(np.concatenate([g[0] for g in got]), values * 10)
    np.testing.assert_array_equal(np.concatenate([g[1] for g in got]), values[:, 0])
    assert taken == starts
    with pytest.raises(ValueError, match="read once, in order"):
        a[10:20]
    assert a.shape == (n, 2) and b.dtype == np.int64 and b.ndim == 1


@pytest.mark.parametrize("name", ["p.zarr", "p.h5"])
@pytest.mark.parametrize("case", ["plain", "plain with series ids", "stateful map"])
def test_predict_scores_read_x_once(tmp_path, rng, capsys, monkeypatch, name, case):
    """``--scores`` takes predictions and scores from one read of X: through the reader (series ids are
    not needed without a stateful map), and in a stateful map's lanes (each series in row order, the
    stored chunks shared by series decoded once); the labels are those of the scores."""
    import h5py

    from streamridge.sources import _zarr

    X = rng.standard_normal((600, 4))
    labels = np.digitize(X[:, 0] + 0.5 * X[:, 1], [-0.5, 0.5])
    g = np.repeat(np.arange(6), 100)
    store = write_zarr(tmp_path / "c.zarr", X, labels, g, chunk_rows=128)
    model, preds = tmp_path / "m.npz", tmp_path / name
    fmap = []
    if case == "stateful map":
        (tmp_path / "f.toml").write_text('map = "esn"\nn_units = 10\nseed = 1\n')
        fmap = ["--groups", "groups", "--leave-group-out", "--features", tmp_path / "f.toml"]
    assert run(capsys, "fit", "--data", store, "--out", model, "--classify", "--quiet", *fmap)[0] == 0
    reads = []
    original = _zarr.ZarrReader.read

    def counting(self, start, stop):
        if len(self.shape) == 2:  # X
            reads.append((start, stop))
        return original(self, start, stop)

    monkeypatch.setattr(_zarr.ZarrReader, "read", counting)
    extra = ["--groups", "groups"] if case != "plain" else []
    code, _, err = run(
        capsys,
        "predict",
        "--model",
        model,
        "--data",
        store,
        "--out",
        preds,
        "--scores",
        "--chunk-rows",
        "100",
        *extra,
    )
    assert code == 0, err
    rows = sorted(r for a, b in reads for r in range(a, b))
    assert rows == list(range(600))  # every row of X read once
    if name.endswith(".h5"):
        with h5py.File(preds, "r") as f:
            labels, scores = f["predictions"][:], f["scores"][:]
    else:
        group = zarr.open_group(str(preds), mode="r")
        labels, scores = group["predictions"][:], group["scores"][:]
    est = load_model(model)
    ids = g if case == "stateful map" else None
    np.testing.assert_allclose(scores, est.decision_function(X, ids), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(labels, est.predict(X, ids))


@pytest.mark.parametrize("series", [True, False])
def test_predict_with_a_stateful_map_runs_its_lanes(tmp_path, rng, capsys, monkeypatch, series):
    """A stateful map's series are mapped in lanes (several in lockstep, lane groups on threads): the same
    predictions as the dask views (taken where a group's outputs exceed LANE_OUTPUT_BYTES: one long series)
    and as transform-then-predict; without series ids, all rows are one series."""
    from streamridge.cli import predict as cli_predict
    from streamridge.datapass import predict as pass_predict

    X = rng.standard_normal((900, 3))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(900)
    g = np.repeat(np.arange(9), 100)  # 9 series: two lane groups
    store = write_zarr(tmp_path / "d.zarr", X, y, g, chunk_rows=128)
    (tmp_path / "f.toml").write_text('map = "esn"\nn_units = 10\nseed = 1\n')
    fit = ["--groups", "groups", "--leave-group-out"] if series else []
    assert (
        run(
            capsys,
            "fit",
            "--data",
            store,
            "--out",
            tmp_path / "m.npz",
            "--quiet",
            "--features",
            tmp_path / "f.toml",
            *fit,
        )[0]
        == 0
    )
    real, used = cli_predict._dask_batches, []
    monkeypatch.setattr(cli_predict, "_dask_batches", lambda *a, **k: used.append(1) or real(*a, **k))
    extra = ["--groups", "groups"] if series else []
    outs = []
    for limit in (pass_predict.LANE_OUTPUT_BYTES, 8):
        monkeypatch.setattr(pass_predict, "LANE_OUTPUT_BYTES", limit)
        out = tmp_path / f"p{limit}.zarr"
        assert (
            run(
                capsys,
                "predict",
                "--model",
                tmp_path / "m.npz",
                "--data",
                store,
                "--out",
                out,
                "--quiet",
                *extra,
            )[0]
            == 0
        )
        outs.append(zarr.open_group(str(out), mode="r")["predictions"][:])
    assert used == [1]  # the second run only
    model = load_model(tmp_path / "m.npz")
    ref = model.features_.transform(X, groups=g if series else None) @ model.coef_ + model.intercept_
    for got in outs:
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("path", ["reader", "lanes", "dask"])
def test_failed_predict_leaves_no_output(store, tmp_path, capsys, monkeypatch, path):
    """A block that fails midway: rows read through the reader; a stateful map's lanes; or the dask views,
    taken by a map with ``warmup`` (predictions carry the state exactly)."""
    from streamridge.datapass import lane_task
    from streamridge.estimators.core import (
        RidgeCVCore as StreamRidgeCV,  # the class `predict` loads the model as
    )

    model, preds = tmp_path / "m.npz", tmp_path / "p.zarr"
    fmap = []
    if path != "reader":
        warmup = "warmup = 20\n" if path == "dask" else ""
        (tmp_path / "f.toml").write_text(f'map = "esn"\nn_units = 10\nseed = 1\n{warmup}')
        fmap = ["--groups", "groups", "--leave-group-out", "--features", tmp_path / "f.toml"]
    assert run(capsys, "fit", "--data", store, "--out", model, "--quiet", *fmap)[0] == 0
    if path == "lanes":
        original_read = lane_task.read_chunk
        reads = []

        def failing_read(chunk, cache=None):
            reads.append(chunk)
            if len(reads) == 4:
                raise ValueError("disk on fire")
            return original_read(chunk, cache)

        monkeypatch.setattr(lane_task, "read_chunk", failing_read)
    elif path == "reader":
        original_rows = StreamRidgeCV._linear_rows
        calls = []

        def failing_rows(self, X):
            calls.append(len(X))
            if len(calls) == 4:
                raise ValueError("disk on fire")
            return original_rows(self, X)

        monkeypatch.setattr(StreamRidgeCV, "_linear_rows", failing_rows)
    else:
        original = StreamRidgeCV.predict

        def failing(self, X, groups=None):
            def boom(block, block_info=None):
                if block_info[0]["chunk-location"][0] == 2:
                    raise ValueError("disk on fire")
                return block

            out = original(self, X, groups)
            return out.map_blocks(boom, dtype=out.dtype, meta=np.empty((0,)))

        monkeypatch.setattr(StreamRidgeCV, "predict", failing)
    extra = ["--groups", "groups"] if path != "reader" else []
    code, _, err = run(
        capsys, "predict", "--model", model, "--data", store, "--out", preds, "--chunk-rows", "100", *extra
    )
    assert code == 2 and "disk on fire" in err
    assert path != "lanes" or len(reads) == 4
    assert not preds.exists() and leftovers(tmp_path) == []


# ---------------------------------------------------------------------- info, demo, subprocess
def test_info_text_and_json(store, tmp_path, capsys):
    model = tmp_path / "m.npz"
    assert run(capsys, "fit", "--data", store, "--out", model, "--folds", "3", "--quiet")[0] == 0
    code, out, _ = run(capsys, "info", model)
    assert code == 0
    for text in ("streamridge-model v1", "StreamRidgeCV", "f0, f1", "lambda", "CV error", "folds       3"):
        assert text in out
    code, out, _ = run(capsys, "info", model, "--json")
    header = json.loads(out)
    assert header == read_model(model)[0] and header["n_features_in"] == 5


def test_demo_quick(tmp_path, capsys):
    out_dir = tmp_path / "demo"
    code, out, err = run(
        capsys, "demo", "--quick", "--series", "3", "--rows-per-series", "400", "--out", out_dir, "--json"
    )
    assert code == 0, err
    facts = json.loads(out)
    assert facts["rows"] == 1200 and facts["features"] == 200 and facts["folds"] == 3
    assert facts["test_nrmse"] < 0.6
    assert (out_dir / "narma10.zarr").is_dir() and (out_dir / "model.npz").is_file()
    source = open_source(out_dir / "narma10.zarr", groups="groups")
    assert source.feature_names[:2] == ["r0", "r1"] and source.groups is not None


def test_python_dash_m(store, tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    model = tmp_path / "m.npz"
    cmd = [sys.executable, "-m", "streamridge", "fit", "--data", store, "--out", str(model), "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["alpha"] > 0
    bad = [
        sys.executable,
        "-m",
        "streamridge",
        "fit",
        "--data",
        str(tmp_path / "nope.zarr"),
        "--out",
        "x.npz",
    ]
    proc = subprocess.run(bad, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith("streamridge: error:") and proc.stderr.count("\n") == 1


# ---------------------------------------------------------------------- errors
def _expect_error(capsys, argv, *, contains=""):
    code, _out, err = run(capsys, *argv)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("streamridge: error: "), err
    assert "Traceback" not in err and contains in lines[0]
    return lines[0]


@pytest.mark.parametrize(
    ("extra", "contains"),
    [
        (["--alphas", "-1", "2"], "alphas must be positive"),
        (["--folds", "1"], "cv must be an int >= 2"),
        (["--x", "features"], "it has: X, groups, y"),
        (["--y", "target"], "'target' not found"),
        (["--leave-group-out"], "needs --groups"),
        (["--balanced"], "--balanced needs --classify"),
        (["--folds", "1000"], "use fewer folds"),
    ],
)
def test_fit_errors_leave_no_model(store, tmp_path, capsys, extra, contains):
    model = tmp_path / "m.npz"
    _expect_error(capsys, ["fit", "--data", store, "--out", model, *extra], contains=contains)
    assert not model.exists() and leftovers(tmp_path) == []


def test_fit_missing_data_file(tmp_path, capsys):
    _expect_error(
        capsys, ["fit", "--data", tmp_path / "nope.zarr", "--out", tmp_path / "m.npz"], contains="nope.zarr"
    )
    assert not (tmp_path / "m.npz").exists()


def test_fit_error_during_pass_leaves_no_model(tmp_path, rng, capsys):
    X = rng.standard_normal((300, 3))
    X[250, 1] = np.nan
    store = write_zarr(tmp_path / "nan.zarr", X, rng.standard_normal(300), chunk_rows=50)
    model = tmp_path / "m.npz"
    _expect_error(capsys, ["fit", "--data", store, "--out", model, "--quiet"], contains="NaN")
    assert not model.exists() and leftovers(tmp_path) == []


def test_fit_unwritable_output_fails_before_the_pass(store, tmp_path, capsys):
    _expect_error(
        capsys, ["fit", "--data", store, "--out", tmp_path / "no" / "m.npz"], contains="does not exist"
    )


def test_predict_wrong_number_of_features(store, tmp_path, rng, capsys):
    model, preds = tmp_path / "m.npz", tmp_path / "p.zarr"
    assert run(capsys, "fit", "--data", store, "--out", model, "--quiet")[0] == 0
    other = write_zarr(tmp_path / "o.zarr", rng.standard_normal((50, 7)))
    _expect_error(
        capsys, ["predict", "--model", model, "--data", other, "--out", preds], contains="7 features"
    )
    assert not preds.exists()


@pytest.mark.parametrize("what", ["missing", "text"])
def test_bad_model_files(store, tmp_path, capsys, what):
    model = tmp_path / "m.npz"
    if what == "text":
        model.write_text("not a model")
    _expect_error(capsys, ["info", model])
    _expect_error(capsys, ["predict", "--model", model, "--data", store, "--out", tmp_path / "p.zarr"])


def test_usage_errors_exit_2(capsys):
    assert cli.main(["fit", "--data", "x.zarr"]) == 2  # --out is required
    assert "required" in capsys.readouterr().err
    assert cli.main(["fit", "--data", "x", "--stats", "y", "--out", "m"]) == 2
    assert cli.main(["nonsense"]) == 2
    assert cli.main(["fit", "--data", "x", "--out", "m", "--chunk-rows", "0"]) == 2
    assert cli.main(["--version"]) == 0


def test_debug_shows_traceback(tmp_path, capsys):
    code, _, err = run(
        capsys, "fit", "--data", tmp_path / "nope.zarr", "--out", tmp_path / "m.npz", "--debug"
    )
    assert code == 2 and "Traceback" in err and err.strip().splitlines()[-1].startswith("streamridge: error:")
