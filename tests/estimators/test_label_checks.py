"""Classifier labels, checked by the estimators.

Continuous float labels are refused for lazy sources exactly as for in-memory
arrays, and label sets (or shapes) whose statistics cannot fit in memory are
refused before the pass, naming the size.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

import streamridge.stats.memory as memory
from streamridge import StreamRidgeClassifierCV, StreamRidgeCV
from streamridge.errors import FoldError, InputError
from streamridge.sources import open_source


@pytest.fixture
def continuous(rng):
    X = rng.standard_normal((200, 3))
    return X, X @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.standard_normal(200)


def _write_zarr(path, X, y):
    zarr = pytest.importorskip("zarr")
    root = zarr.open_group(str(path), mode="w")
    root.create_array("X", data=X, chunks=(50, X.shape[1]))
    root.create_array("y", data=y, chunks=(50,))
    return str(path)


def _as(kind, X, y, tmp_path):
    if kind == "numpy":
        return X, y
    if kind == "dask":
        return da.from_array(X, chunks=(50, -1)), da.from_array(y, chunks=50)
    path = _write_zarr(tmp_path / "d.zarr", X, y)
    if kind == "zarr-path":
        return path, None
    return open_source(path), None  # a Source


@pytest.mark.parametrize("kind", ["numpy", "dask", "zarr-path", "source"])
def test_continuous_labels_are_refused_for_every_source(continuous, tmp_path, kind):
    X, y = _as(kind, *continuous, tmp_path)
    rows = []
    with pytest.raises(InputError, match="Unknown label type: continuous") as info:
        StreamRidgeClassifierCV(progress=rows.append).fit(X, y)
    assert "\n" not in str(info.value)
    assert rows == []  # refused before the pass


@pytest.mark.parametrize("kind", ["numpy", "dask", "zarr-path"])
def test_integer_valued_float_labels_are_classes(continuous, tmp_path, kind):
    Xn, yc = continuous
    labels = (yc > 0).astype(np.float64) * 2.0  # floats 0.0 / 2.0: binary, as scikit-learn says
    X, y = _as(kind, Xn, labels, tmp_path)
    clf = StreamRidgeClassifierCV(alphas=[1.0]).fit(X, y)
    np.testing.assert_array_equal(clf.classes_, [0.0, 2.0])


def test_lazy_2d_labels_are_refused(continuous):
    X, y = continuous
    Y = np.c_[y > 0, y > 1].astype(int)
    with pytest.raises(InputError, match=r"1-D class labels y; got y of shape \(200, 2\)"):
        StreamRidgeClassifierCV().fit(da.from_array(X, chunks=(50, -1)), da.from_array(Y, chunks=(50, -1)))


@pytest.mark.filterwarnings("ignore:The number of unique classes")
def test_too_many_classes_for_memory_is_refused_before_the_pass(rng, monkeypatch):
    monkeypatch.setattr(memory, "available_memory", lambda: 10**9)
    X = rng.standard_normal((2000, 300))
    labels = rng.integers(0, 200, 2000)  # 200 classes: 5 x 200 x (300^2 + 300 x 200) x 8 B = 1.2 GB per copy
    rows = []
    for data in ((X, labels), (da.from_array(X, chunks=(500, -1)), da.from_array(labels, chunks=500))):
        # large statistics are one running total on this machine's cores: at least one copy
        with pytest.raises(
            InputError,
            match=r"5 folds x 200 classes x 300 features take 1\.2 GB per copy and a pass over 4 chunk\(s\) holds at "
            r"least one copy, more than the 1\.0 GB of memory available; check that y holds class labels",
        ) as info:
            StreamRidgeClassifierCV(progress=rows.append, chunk_rows=500).fit(*data)
        assert "\n" not in str(info.value)
    assert rows == []
    # the same labels fit when the memory is there
    monkeypatch.setattr(memory, "available_memory", lambda: 6 * 10**9)
    assert StreamRidgeClassifierCV(alphas=[1.0]).fit(X[:, :20], labels).classes_.shape == (200,)


def test_statistics_larger_than_any_memory_are_refused(rng):
    """No monkeypatching: 1 TB per copy is refused on any machine, at once."""
    X = rng.standard_normal((30, 50_000))
    with pytest.raises(InputError, match=r"5 folds x 10 classes x 50000 features take 1000\.\d GB per copy"):
        StreamRidgeClassifierCV().fit(X, np.arange(30) % 10)
    with pytest.raises(
        InputError, match=r"5 folds x 50000 features take 100\.\d GB .* use fewer features or folds"
    ):
        StreamRidgeCV().fit(X, rng.standard_normal(30))


def test_unknown_memory_does_not_block(rng, monkeypatch):
    monkeypatch.setattr(memory, "available_memory", lambda: None)
    X = rng.standard_normal((40, 3))
    assert StreamRidgeCV(alphas=[1.0]).fit(X, X[:, 0]).coef_.shape == (3,)


def test_memory_bound_is_a_lower_bound_of_the_pass(monkeypatch):
    """3 + floor(log2(chunks)) copies; exactly enough memory passes, one byte less is refused."""
    assert [memory.pass_copies(n) for n in (1, 2, 3, 4, 10, 1000)] == [3, 4, 4, 5, 6, 12]
    one = 8 * 5 * 3 * (100 * 100 + 100 * 3 + 100 + 2 * 3 + 2)
    monkeypatch.setattr(memory, "available_memory", lambda: 6 * one)
    memory.check_stats_memory(5, 3, 100, 3, n_chunks=10)
    monkeypatch.setattr(memory, "available_memory", lambda: 6 * one - 1)
    with pytest.raises(InputError, match=r"a pass over 10 chunk\(s\) holds at least 6 copies"):
        memory.check_stats_memory(5, 3, 100, 3, n_chunks=10)


LABEL_CASES = {
    "ints": np.array([0, 1, 2]),
    "bools": np.array([False, True]),
    "strings": np.array(["a", "b"]),
    "object strings": np.array(["a", "b"], dtype=object),
    "integral floats": np.array([0.0, 2.0, 5.0]),
    "float32 integral": np.array([-1.0, 1.0], dtype=np.float32),
    "continuous": np.array([0.0, 0.5, 1.0]),
    "float32 continuous": np.array([0.25, 1.0], dtype=np.float32),
    "nan": np.array([0.0, 1.0, np.nan]),
    "inf": np.array([0.0, np.inf]),
    "objects": np.array([1, 2], dtype=object),
    "bytes": np.array([b"a", b"b"]),
    "complex": np.array([1 + 1j, 2 + 0j]),
    "large ints": np.array([0, 2**62]),
}


@pytest.mark.parametrize("case", sorted(LABEL_CASES))
def test_distinct_label_check_agrees_with_scikit_learn(case):
    """The scikit-learn-free check of a lazy y's distinct labels (what ``streamridge fit --classify``
    runs) accepts and refuses what ``check_classification_targets`` does, with its message."""
    from sklearn.utils.multiclass import check_classification_targets

    from streamridge.estimators.base import _check_distinct_labels

    labels = LABEL_CASES[case]
    try:
        check_classification_targets(labels)
    except (ValueError, TypeError) as exc:
        expected: str | None = " ".join(str(exc).split())
    else:
        expected = None
    try:
        _check_distinct_labels(labels)
    except InputError as exc:
        got: str | None = str(exc)
    else:
        got = None
    if expected is None or got is None:
        assert got == expected
    elif case == "complex":
        assert expected.startswith("Complex data not supported") and got.startswith(
            "Complex data not supported"
        )
    else:
        assert got == expected


def test_many_distinct_lazy_labels_do_not_warn(rng, recwarn):
    """More than 20 classes in a lazy y: scikit-learn's 'more unique classes than half the samples'
    warning counted the distinct values as samples; the distinct-label check does not warn."""
    X = rng.standard_normal((1000, 3))
    labels = np.arange(1000) % 25
    StreamRidgeClassifierCV(alphas=[1.0]).fit(
        da.from_array(X, chunks=(250, -1)), da.from_array(labels, chunks=250)
    )
    assert not [w for w in recwarn if "unique classes" in str(w.message)]


def test_balanced_partial_fit_with_a_class_without_rows_names_the_label() -> None:
    """classes=[0, 1, 7] with no row of class 7: the error names the label 7, not its index."""
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((200, 3)), rng.integers(0, 2, 200)
    with pytest.raises(
        FoldError, match=r"^class 7 has no rows; class_weight='balanced' .*drop the class from classes="
    ):
        StreamRidgeClassifierCV(class_weight="balanced").partial_fit(X, y, classes=[0, 1, 7])
