"""Model files: round trips of every estimator kind, no pickle, and the errors of bad files."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import streamridge
from streamridge import StreamRidgeClassifierCV, StreamRidgeCV
from streamridge.errors import ModelFileError
from streamridge.features import EchoStateNetwork
from streamridge.io.model_file import (
    MODEL_FORMAT,
    MODEL_VERSION,
    json_safe,
    load_model,
    read_model,
    save_model,
)
from streamridge.stats.foldstats import save_stats

FITTED = ("alpha_", "alphas_", "cv_errors_", "fold_errors_", "support_", "n_folds_", "coef_", "intercept_")


@pytest.fixture
def data(rng):
    X = rng.standard_normal((240, 6))
    w = rng.standard_normal((6, 2))
    Y = X @ w + 0.3 * rng.standard_normal((240, 2)) + 5.0
    return X, Y


def _roundtrip(est, tmp_path, **kw):
    path = tmp_path / "model.npz"
    save_model(est, path, **kw)
    return load_model(path), path


def _same_fitted(a, b):
    for name in FITTED:
        va, vb = getattr(a, name), getattr(b, name)
        assert type(va) is type(vb) or (isinstance(va, np.ndarray) and isinstance(vb, np.ndarray)), name
        np.testing.assert_array_equal(va, vb, err_msg=name)
    assert json_safe(a.get_params()) == json_safe(b.get_params())
    assert a.n_features_in_ == b.n_features_in_


def test_regressor_1d_roundtrip(data, tmp_path):
    X, Y = data
    est = StreamRidgeCV(cv=4, standardize=True).fit(X, Y[:, 0])
    loaded, _ = _roundtrip(est, tmp_path)
    assert isinstance(loaded, StreamRidgeCV)
    _same_fitted(est, loaded)
    assert isinstance(loaded.intercept_, float) and isinstance(loaded.alpha_, float)
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))
    assert loaded.predict(X).shape == (240,)
    assert loaded.score(X, Y[:, 0]) == est.score(X, Y[:, 0])
    assert not hasattr(loaded, "stats_")


def test_regressor_2d_alpha_per_target_roundtrip(data, tmp_path):
    X, Y = data
    est = StreamRidgeCV(cv=3, alpha_per_target=True, alphas=np.logspace(-3, 3, 7)).fit(X, Y)
    loaded, _ = _roundtrip(est, tmp_path)
    _same_fitted(est, loaded)
    assert loaded.predict(X).shape == (240, 2)
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))
    assert loaded.score(X, Y) == est.score(X, Y)


def test_regressor_no_intercept_roundtrip(data, tmp_path):
    X, Y = data
    est = StreamRidgeCV(cv=3, fit_intercept=False).fit(X, Y[:, :1])
    loaded, _ = _roundtrip(est, tmp_path)
    _same_fitted(est, loaded)
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))


def test_binary_classifier_roundtrip(data, tmp_path):
    X, Y = data
    y = np.where(Y[:, 0] > 5.0, 7, -3)
    est = StreamRidgeClassifierCV(cv=3, class_weight="balanced").fit(X, y)
    loaded, _ = _roundtrip(est, tmp_path)
    assert isinstance(loaded, StreamRidgeClassifierCV)
    _same_fitted(est, loaded)
    np.testing.assert_array_equal(loaded.classes_, [-3, 7])
    np.testing.assert_array_equal(loaded.decision_function(X), est.decision_function(X))
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))
    assert loaded.score(X, y) == est.score(X, y)


def _string_labels(Y):
    codes = np.digitize(Y[:, 0], np.quantile(Y[:, 0], [1 / 3, 2 / 3]))
    return np.array(["cat", "dog", "eel"])[codes]


def test_multiclass_string_labels_roundtrip(data, tmp_path):
    X, Y = data
    labels = _string_labels(Y)
    est = StreamRidgeClassifierCV(cv=3).fit(X, labels)
    loaded, path = _roundtrip(est, tmp_path)
    _same_fitted(est, loaded)
    assert loaded.classes_.tolist() == ["cat", "dog", "eel"]
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))
    np.testing.assert_array_equal(loaded.decision_function(X), est.decision_function(X))
    assert loaded.score(X, labels) == est.score(X, labels)
    with np.load(path, allow_pickle=False) as z:
        assert z["classes"].tolist() == ["cat", "dog", "eel"]


@pytest.mark.parametrize("kind", ["regressor", "classifier"])
def test_partial_fit_continues_after_load(data, tmp_path, kind):
    X, Y = data
    if kind == "regressor":
        y, make = Y[:, 0], lambda: StreamRidgeCV(cv=3)
        first = make().partial_fit(X[:150], y[:150])
    else:
        y, make = _string_labels(Y), lambda: StreamRidgeClassifierCV(cv=3)
        first = make().partial_fit(X[:150], y[:150], classes=["cat", "dog", "eel"])
    loaded, _ = _roundtrip(first, tmp_path, include_stats=True)
    loaded.partial_fit(X[150:], y[150:])
    first.partial_fit(X[150:], y[150:])
    np.testing.assert_allclose(loaded.coef_, first.coef_, rtol=1e-12)
    np.testing.assert_array_equal(loaded.predict(X), first.predict(X))


def test_file_needs_no_pickle_and_is_self_describing(data, tmp_path):
    X, Y = data
    est = StreamRidgeCV(cv=4).fit(X, Y[:, 0])
    _, path = _roundtrip(est, tmp_path, include_stats=True)
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}  # every member loads without pickle
    header = json.loads(bytes(arrays["header_json"]).decode())
    assert header["format"] == MODEL_FORMAT and header["format_version"] == MODEL_VERSION
    assert header["estimator"] == "StreamRidgeCV"
    assert header["streamridge_version"] == streamridge.__version__
    assert header["scheme"]["kind"] == "hash" and header["n_folds"] == 4
    assert header["params"]["cv"] == 4 and header["y_1d"] is True
    assert set(header["timings"]) == {"pass_s", "rows", "rows_per_s", "solve_s", "peak_rss_mb"}
    for name in ("coef", "intercept", "alpha", "alphas", "cv_errors", "fold_errors", "support"):
        assert name in arrays
    assert all(a.dtype != object for a in arrays.values())


def test_include_stats_allows_reselection(data, tmp_path):
    X, Y = data
    est = StreamRidgeCV(cv=4).fit(X, Y[:, 0])
    loaded, _ = _roundtrip(est, tmp_path, include_stats=True)
    for name in ("weight", "count", "sxx", "sxy", "syy", "mean_x", "mean_y"):
        np.testing.assert_array_equal(getattr(loaded.stats_, name), getattr(est.stats_, name))
    refit = StreamRidgeCV(cv=4).fit_stats(loaded.stats_)
    np.testing.assert_allclose(refit.coef_, est.coef_, rtol=1e-12)
    wider = StreamRidgeCV(alphas=[1e-3, 1.0, 1e3]).fit_stats(loaded.stats_)
    assert wider.alphas_.shape == (3,)


def test_unserialisable_params_are_dropped(data, tmp_path):
    X, Y = data
    est = StreamRidgeCV(cv=3, scheduler="sync").fit(X, Y[:, 0])
    est.scheduler = object()  # e.g. a distributed Client
    loaded, path = _roundtrip(est, tmp_path)
    header, _ = read_model(path)
    assert header["params_dropped"] == ["scheduler"]
    assert loaded.scheduler is None
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))


def test_feature_names_roundtrip(data, tmp_path):
    from streamridge.sources import open_source, write_zarr

    X, Y = data
    names = [f"f{i}" for i in range(6)]
    store = write_zarr(tmp_path / "d.zarr", X, Y[:, 0], feature_names=names)
    est = StreamRidgeCV(cv=3).fit(open_source(store))
    loaded, _ = _roundtrip(est, tmp_path)
    assert est.feature_names_.tolist() == names
    assert loaded.feature_names_.tolist() == names
    src = open_source(store)
    np.testing.assert_array_equal(loaded.predict(src.X).compute(), est.predict(src.X).compute())
    # names from a store are not sklearn's DataFrame feature_names_in_: plain arrays predict silently
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(loaded.predict(X), est.predict(X))


def test_resave_loaded_model(data, tmp_path):
    X, Y = data
    est = StreamRidgeCV(cv=3).fit(X, Y[:, 0])
    loaded, path = _roundtrip(est, tmp_path)
    second = tmp_path / "again.npz"
    save_model(loaded, second)
    again = load_model(second)
    np.testing.assert_array_equal(again.predict(X), est.predict(X))
    assert read_model(second)[0]["cv_summary"] == read_model(path)[0]["cv_summary"]
    with pytest.raises(ModelFileError, match="no stats_"):
        save_model(loaded, tmp_path / "x.npz", include_stats=True)


def test_selection_attributes_roundtrip(data, tmp_path):
    X, Y = data
    est = StreamRidgeCV(cv=3, selection="forward", max_features=3).fit(X, Y[:, 0])
    loaded, _ = _roundtrip(est, tmp_path)
    np.testing.assert_array_equal(loaded.selected_features_, est.selected_features_)
    _same_table(loaded.selection_path_, est.selection_path_)
    assert isinstance(est.selection_best_step_, int) and est.selection_best_step_ >= 1
    assert loaded.selection_best_step_ == est.selection_best_step_
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))


def _same_table(a, b):
    if isinstance(b, np.ndarray) and b.dtype.names:
        assert a.dtype == b.dtype
        for name in b.dtype.names:
            np.testing.assert_array_equal(a[name], b[name])
    else:
        assert json_safe(a, str) == json_safe(b, str)


def _fake_path():
    from streamridge.selection import SelectionResult, Step

    steps = [
        Step(-1, 0, 10.0, 40.0, np.array([10.0, 15.0, 15.0])),
        Step(2, 1, 1.0, 20.0, np.array([5.0, 7.0, 8.0])),
        Step(0, 2, 0.1, 18.0, np.array([6.0, 6.0, 6.0])),
    ]
    support = np.zeros(6, dtype=bool)
    support[[0, 2]] = True
    return SelectionResult("forward", steps, 2, support, np.array([2, 0]), np.logspace(-2, 2, 5))


def _same_path(a, b):
    assert type(a) is type(b) and a.direction == b.direction and a.best_step == b.best_step
    np.testing.assert_array_equal(a.support, b.support)
    np.testing.assert_array_equal(a.selected, b.selected)
    np.testing.assert_array_equal(a.alphas, b.alphas)
    for sa, sb in zip(a.steps, b.steps, strict=True):
        assert (sa.feature, sa.n_features, sa.alpha, sa.cv_error) == (
            sb.feature,
            sb.n_features,
            sb.alpha,
            sb.cv_error,
        )
        np.testing.assert_array_equal(sa.fold_errors, sb.fold_errors)


def test_selection_path_objects_roundtrip(data, tmp_path):
    from streamridge.report.summary import format_info

    X, Y = data
    est = StreamRidgeCV(cv=3).fit(X, Y[:, 0])
    est.selection_path_ = _fake_path()
    est.selected_features_ = np.array([2, 0])
    loaded, path = _roundtrip(est, tmp_path)
    _same_path(loaded.selection_path_, est.selection_path_)
    np.testing.assert_array_equal(loaded.selected_features_, [2, 0])
    est.selection_path_ = list(est.selection_path_.steps)
    loaded, path = _roundtrip(est, tmp_path)
    assert [s.feature for s in loaded.selection_path_] == [-1, 2, 0]
    text = format_info(read_model(path)[0], str(path))
    assert "selection   3 step(s)" in text and "(start)" in text
    table = np.zeros(3, dtype=[("feature", "i8"), ("n_features", "i8"), ("alpha", "f8"), ("cv_error", "f8")])
    table["feature"], table["n_features"] = [-1, 2, 0], [0, 1, 2]
    table["alpha"], table["cv_error"] = [10.0, np.nan, 0.1], [40.0, 20.0, 18.0]
    est.selection_path_, est.selection_best_step_ = table, 2
    loaded, path = _roundtrip(est, tmp_path)
    _same_table(loaded.selection_path_, table)
    assert loaded.selection_best_step_ == 2
    text = format_info(read_model(path)[0], str(path))
    assert "selection   3 step(s)" in text and text.count(" *") == 1


def test_top_level_load_model(data, tmp_path):
    X, Y = data
    est = StreamRidgeCV(cv=3).fit(X, Y[:, 0])
    save_model(est, tmp_path / "m.npz")
    np.testing.assert_array_equal(streamridge.load_model(tmp_path / "m.npz").predict(X), est.predict(X))


def test_save_is_atomic_and_replaces(data, tmp_path):
    X, Y = data
    path = tmp_path / "m.npz"
    path.write_bytes(b"old")
    save_model(StreamRidgeCV(cv=3).fit(X, Y[:, 0]), path)
    assert load_model(path).n_features_in_ == 6
    assert sorted(os.listdir(tmp_path)) == ["m.npz"]


def test_unfitted_estimator_cannot_be_saved(tmp_path):
    with pytest.raises(ModelFileError, match="not fitted"):
        save_model(StreamRidgeCV(), tmp_path / "m.npz")
    assert not (tmp_path / "m.npz").exists()


# ---------------------------------------------------------------------- bad files
@pytest.fixture
def model_file(data, tmp_path):
    X, Y = data
    path = tmp_path / "m.npz"
    save_model(StreamRidgeCV(cv=3).fit(X, Y[:, 0]), path)
    return path


def _rewrite_header(path, **changes):
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    header = json.loads(bytes(arrays["header_json"]).decode())
    header.update(changes)
    arrays["header_json"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    np.savez(path, **arrays)


def test_missing_file(tmp_path):
    with pytest.raises(ModelFileError, match="does not exist"):
        load_model(tmp_path / "nope.npz")


def test_not_a_model_file(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello\n")
    with pytest.raises(ModelFileError, match="not a readable streamridge model"):
        load_model(path)


def test_truncated_model_file(model_file):
    data = model_file.read_bytes()
    model_file.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFileError) as info:
        load_model(model_file)
    assert "\n" not in str(info.value)


def test_statistics_file_is_not_a_model(data, tmp_path):
    X, Y = data
    path = tmp_path / "s.npz"
    save_stats(StreamRidgeCV(cv=3).fit(X, Y[:, 0]).stats_, path)
    with pytest.raises(ModelFileError, match="not a streamridge model"):
        load_model(path)


def test_newer_format_version(model_file):
    _rewrite_header(model_file, format_version=MODEL_VERSION + 1)
    with pytest.raises(ModelFileError, match="newer than this streamridge"):
        load_model(model_file)


def test_other_format_name(model_file):
    _rewrite_header(model_file, format="something-else")
    with pytest.raises(ModelFileError, match="not a streamridge model"):
        load_model(model_file)


def test_unknown_estimator_class(model_file):
    _rewrite_header(model_file, estimator="Mystery")
    with pytest.raises(ModelFileError, match="unknown estimator class"):
        load_model(model_file)


def test_inconsistent_arrays(model_file):
    _rewrite_header(model_file, n_features_in=99)
    with pytest.raises(ModelFileError, match="inconsistent"):
        load_model(model_file)


def test_directory_is_not_a_model(tmp_path):
    with pytest.raises(ModelFileError, match="directory"):
        load_model(tmp_path)


@pytest.fixture
def given_esn_model(rng, tmp_path):
    """A model whose map is an echo state network of given matrices, its file and its data."""
    W = rng.standard_normal((12, 12))
    W *= 0.9 / np.max(np.abs(np.linalg.eigvals(W)))
    esn = EchoStateNetwork(
        W=W,
        W_in=rng.uniform(-1, 1, (12, 2)),
        bias=rng.uniform(-0.5, 0.5, 12),
        leak_rate=0.6,
        activation="sigmoid",
        washout=5,
    )
    X = rng.uniform(-1, 1, (400, 2))
    y = np.roll(X[:, 0], 1) * X[:, 1]
    g = np.repeat([0, 1, 2, 3], 100)
    model = StreamRidgeCV(cv="groups", features=esn).fit(X, y, groups=g)
    save_model(model, tmp_path / "m.npz")
    return model, tmp_path / "m.npz", X, g


def test_given_matrix_esn_roundtrip_stores_each_matrix_once(given_esn_model):
    model, path, X, g = given_esn_model
    with np.load(path) as z:
        assert sorted(k for k in z.files if k.startswith("fmap")) == [
            "fmap.params.W",
            "fmap.params.W_in",
            "fmap.params.bias",
        ]
    back = load_model(path)
    np.testing.assert_array_equal(back.features_.W, model.features_.W)
    assert back.features_.activation == "sigmoid" and back.features_.w_res_ is back.features_.W
    np.testing.assert_array_equal(back.predict(X, groups=g), model.predict(X, groups=g))


@pytest.mark.parametrize(
    ("W", "problem"),
    [
        (
            np.zeros((5, 5)),
            "feature map esn: EchoStateNetwork: the reservoir's sizes disagree: W has 5 rows, W_in 12 rows, "
            "bias 12 entries; ",
        ),
        (
            np.full((12, 12), np.nan),
            "feature map esn: EchoStateNetwork: W must be a square list of rows of finite numbers",
        ),
        (np.zeros((12, 3)), "feature map esn: EchoStateNetwork: W must be a square list of rows"),
    ],
)
def test_given_matrix_esn_file_schema(given_esn_model, tmp_path, W, problem):
    _, path, _, _ = given_esn_model
    with np.load(path) as z:
        content = {k: np.array(z[k]) for k in z.files}
    content["fmap.params.W"] = W
    np.savez(tmp_path / "bad.npz", **content)
    with pytest.raises(ModelFileError) as e:
        load_model(tmp_path / "bad.npz")
    assert str(e.value).startswith(f"not a valid streamridge model file: {tmp_path / 'bad.npz'}: {problem}")
