"""cv= given as a scikit-learn splitter or (train, test) index arrays.

Every form is checked against explicit scikit-learn Ridge refits on the very
splits the splitter yields: exact validation errors per split and lambda, the
chosen lambda and the final model.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from sklearn.model_selection import (
    GroupKFold,
    KFold,
    LeaveOneGroupOut,
    PredefinedSplit,
    RepeatedKFold,
    ShuffleSplit,
    StratifiedGroupKFold,
    StratifiedKFold,
    TimeSeriesSplit,
)

from streamridge import StreamRidgeClassifierCV, StreamRidgeCV, load_model, load_stats, merge, save_stats
from streamridge.errors import ParameterError
from streamridge.folds.schemes import FoldScheme, folds_from_splits
from streamridge.io.model_file import read_model, save_model
from tests.conftest import ill_conditioned
from tests.reference import balanced_weights, fit_ridge

ALPHAS = np.array([1e-3, 0.1, 1.0, 10.0, 300.0])


def make_data(rng, kind="well", M=120, N=6, T=1, offset=1e3):
    if kind == "well":
        X = rng.standard_normal((M, N)) * rng.uniform(0.5, 3, N) + rng.uniform(-2, 2, N)
    else:  # cond(X'X) = 1e12 after centering, and a large offset (without intercept the offset would
        # make the uncentered X'X singular in float64: cond 1e12 x offset^2)
        X = ill_conditioned(rng, M, N, cond_sv=1e6) + offset
    Y = X @ rng.standard_normal((N, T)) + 0.5 * rng.standard_normal((M, T))
    return X, (Y[:, 0] if T == 1 else Y)


def split_errors(
    X,
    Y,
    splits,
    alphas,
    *,
    fit_intercept=True,
    standardize=False,
    w=None,
    cls=None,
    n_classes=1,
    balanced=False,
):
    """Validation SSE of shape (R, n_splits, T): one scikit-learn Ridge refit per split and lambda."""
    Y = Y.reshape(len(X), -1)
    out = np.zeros((len(alphas), len(splits), Y.shape[1]))
    for k, (tr, te) in enumerate(splits):
        wt = np.ones(len(tr)) if w is None else w[tr].astype(float)
        wv = np.ones(len(te)) if w is None else w[te].astype(float)
        if balanced:
            wt = wt * balanced_weights(cls[tr], n_classes, wt)
            wv = wv * balanced_weights(cls[te], n_classes, wv)
        for r, a in enumerate(alphas):
            predict, _, _ = fit_ridge(X[tr], Y[tr], wt, a, fit_intercept, standardize)
            out[r, k] = (wv[:, None] * (predict(X[te]).reshape(len(te), -1) - Y[te]) ** 2).sum(axis=0)
    return out


def check_against_refits(est, X, Y, splits, *, rtol=1e-8, w=None, **kw):
    ref = split_errors(
        X, Y, splits, est.alphas_, w=w, fit_intercept=est.fit_intercept, standardize=est.standardize, **kw
    )
    assert est.n_folds_ == len(splits)
    np.testing.assert_allclose(est.fold_errors_, ref, rtol=rtol, atol=rtol * ref.max() * 1e-3)
    if np.ndim(est.alpha_) == 0:
        assert est.alpha_ == est.alphas_[np.argmin(ref.sum(axis=(1, 2)))]
    return ref


def _predefined(M):
    test_fold = np.repeat([-1, 0, 1, 2], [M // 6, M // 3, M // 4, M - M // 6 - M // 3 - M // 4])
    return PredefinedSplit(test_fold)


GROUPS = np.arange(120) % 7  # 7 groups, interleaved rows


SPLITTERS = {
    "KFold": lambda M: KFold(4),
    "KFold-shuffled": lambda M: KFold(5, shuffle=True, random_state=3),
    "GroupKFold": lambda M: GroupKFold(3),
    "LeaveOneGroupOut": lambda M: LeaveOneGroupOut(),
    "PredefinedSplit-with-train-only-rows": _predefined,
    "TimeSeriesSplit": lambda M: TimeSeriesSplit(4),
    "TimeSeriesSplit-test_size": lambda M: TimeSeriesSplit(3, test_size=20),
}


@pytest.mark.parametrize("name", list(SPLITTERS))
@pytest.mark.parametrize("kind", ["well", "ill"])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_splitter_equals_refits_on_its_splits(rng, name, kind, fit_intercept):
    X, y = make_data(rng, kind, offset=1e3 if fit_intercept else 0.0)
    cv = SPLITTERS[name](len(X))
    groups = GROUPS if "Group" in name else None
    est = StreamRidgeCV(ALPHAS, cv=cv, fit_intercept=fit_intercept, chunk_rows=37).fit(X, y, groups=groups)
    splits = list(cv.split(X, y, groups))
    rtol = 1e-8 if kind == "well" else 1e-5
    check_against_refits(est, X, y, splits, rtol=rtol)
    _, m, _ = fit_ridge(X, y, None, est.alpha_, fit_intercept, False)
    np.testing.assert_allclose(est.coef_, m.coef_, rtol=rtol, atol=rtol * np.abs(m.coef_).max())


@pytest.mark.parametrize(
    "name", ["KFold-shuffled", "TimeSeriesSplit", "PredefinedSplit-with-train-only-rows"]
)
@pytest.mark.parametrize("standardize", [False, True])
def test_weights_and_several_targets(rng, name, standardize):
    X, Y = make_data(rng, T=3)
    w = rng.uniform(0.2, 3.0, len(X))
    cv = SPLITTERS[name](len(X))
    est = StreamRidgeCV(ALPHAS, cv=cv, standardize=standardize, alpha_per_target=True).fit(
        X, Y, sample_weight=w
    )
    ref = check_against_refits(est, X, Y, list(cv.split(X)), w=w)
    best = ALPHAS[np.argmin(ref.sum(axis=1), axis=0)]
    np.testing.assert_array_equal(est.alpha_, best)


def test_iterable_of_pairs_generator_and_masks_equal_the_splitter(rng):
    X, y = make_data(rng)
    cv = KFold(4, shuffle=True, random_state=0)
    splits = list(cv.split(X))
    base = StreamRidgeCV(ALPHAS, cv=cv).fit(X, y)
    masks = []
    for tr, te in splits:
        mtr, mte = np.zeros(len(X), bool), np.zeros(len(X), bool)
        mtr[tr], mte[te] = True, True
        masks.append((mtr, mte))
    for given in (splits, (s for s in splits), [(list(tr), list(te)) for tr, te in splits], masks):
        est = StreamRidgeCV(ALPHAS, cv=given).fit(X, y)
        np.testing.assert_array_equal(est.fold_errors_, base.fold_errors_)
        np.testing.assert_array_equal(est.coef_, base.coef_)


def test_lazy_dask_arrays_equal_in_memory(rng):
    X, y = make_data(rng)
    for cv in (KFold(4, shuffle=True, random_state=1), TimeSeriesSplit(3), GroupKFold(4)):
        g = GROUPS if isinstance(cv, GroupKFold) else None
        mem = StreamRidgeCV(ALPHAS, cv=cv).fit(X, y, groups=g)
        lazy = StreamRidgeCV(ALPHAS, cv=cv).fit(
            da.from_array(X, chunks=(25, -1)),
            da.from_array(y, chunks=25),
            groups=None if g is None else da.from_array(g, chunks=25),
        )
        np.testing.assert_allclose(lazy.fold_errors_, mem.fold_errors_, rtol=1e-12)
        np.testing.assert_allclose(lazy.coef_, mem.coef_, rtol=1e-12)


def test_zarr_path_source(rng, tmp_path):
    zarr = pytest.importorskip("zarr")
    X, y = make_data(rng)
    root = zarr.open_group(str(tmp_path / "d.zarr"), mode="w")
    root.create_array("X", data=X, chunks=(30, X.shape[1]))
    root.create_array("y", data=y, chunks=(30,))
    cv = TimeSeriesSplit(4)
    est = StreamRidgeCV(ALPHAS, cv=cv).fit(str(tmp_path / "d.zarr"))
    check_against_refits(est, X, y, list(cv.split(X)))


@pytest.mark.parametrize("grouped", [False, True])
@pytest.mark.parametrize("balanced", [False, True])
@pytest.mark.parametrize("n_classes", [2, 3])
def test_classifier_stratified_splits_equal_refits(rng, balanced, n_classes, grouped):
    X, _ = make_data(rng)
    labels = rng.choice(
        np.array(["a", "b", "c"])[:n_classes],
        size=len(X),
        p=[0.6, 0.3, 0.1][:n_classes] / np.sum([0.6, 0.3, 0.1][:n_classes]),
    )
    w = rng.uniform(0.5, 2.0, len(X))
    cv = StratifiedGroupKFold(4) if grouped else StratifiedKFold(4, shuffle=True, random_state=0)
    groups = GROUPS if grouped else None
    est = StreamRidgeClassifierCV(ALPHAS, cv=cv, class_weight="balanced" if balanced else None)
    est.fit(X, labels, groups=groups, sample_weight=w)
    cls = np.searchsorted(est.classes_, labels)
    Y = (
        np.where(cls == 1, 1.0, -1.0)[:, None]
        if n_classes == 2
        else np.where(cls[:, None] == np.arange(n_classes), 1.0, -1.0)
    )
    splits = list(cv.split(X, labels, groups))
    check_against_refits(est, X, Y, splits, w=w, cls=cls, n_classes=n_classes, balanced=balanced)


def test_single_holdout_split(rng):
    """One (train, test) split: the training rows form a fold that is never validated."""
    X, y = make_data(rng)
    splits = [(np.arange(90), np.arange(90, 120))]
    est = StreamRidgeCV(ALPHAS, cv=splits).fit(X, y)
    assert est.n_folds_ == 1 and est.stats_.n_folds == 2
    check_against_refits(est, X, y, splits)
    with pytest.raises(ParameterError, match="alpha_rule='1se' needs at least 2 validated folds"):
        StreamRidgeCV(ALPHAS, cv=splits, alpha_rule="1se").fit(X, y)


def test_forward_chaining_trains_only_on_the_past(rng):
    """A TimeSeriesSplit fit must not see later rows: changing them leaves the first split's error unchanged."""
    X, y = make_data(rng)
    cv = TimeSeriesSplit(3)
    a = StreamRidgeCV(ALPHAS, cv=cv).fit(X, y)
    y2 = y.copy()
    y2[90:] += 100.0  # the last test fold only
    b = StreamRidgeCV(ALPHAS, cv=cv).fit(X, y2)
    np.testing.assert_array_equal(a.fold_errors_[:, :2], b.fold_errors_[:, :2])
    assert np.all(b.fold_errors_[:, 2] > a.fold_errors_[:, 2])
    assert a.stats_.meta["scheme"]["training"] == "forward"


@pytest.mark.parametrize("selection", ["forward", "backward"])
def test_feature_selection_on_forward_chaining_splits(rng, selection):
    """Selection uses the same per-split forms: the final set's errors equal refits on those features."""
    X, y = make_data(rng, N=8)
    cv = TimeSeriesSplit(4)
    est = StreamRidgeCV(ALPHAS, cv=cv, selection=selection).fit(X, y)
    sub = np.flatnonzero(est.support_)
    assert 0 < len(sub) <= 8
    ref = split_errors(X[:, sub], y, list(cv.split(X)), ALPHAS)
    np.testing.assert_allclose(est.fold_errors_, ref, rtol=1e-8)


# ------------------------------------------------------------------ refusals


@pytest.mark.parametrize(
    "cv, match",
    [
        (
            ShuffleSplit(3, test_size=0.3, random_state=0),
            "not a partition of the rows: row .* test sets of splits",
        ),
        (RepeatedKFold(n_splits=3, n_repeats=2, random_state=0), "not a partition of the rows"),
        (TimeSeriesSplit(3, gap=2), r"in no test set and not in the training set of split 0"),
        (TimeSeriesSplit(3, max_train_size=20), r"in no test set and not in the training set"),
        ([(np.arange(60), np.arange(60, 120)), (np.arange(30), np.arange(30))], "split 1 has rows in both"),
        (
            [(np.arange(60, 100), np.arange(60)), (np.arange(60), np.arange(60, 100))],
            r"rows \[100, 101, 102, 103, 104\] are in no test set",
        ),
        (
            [(np.arange(60, 120), np.arange(60)), (np.arange(30), np.arange(60, 120))],
            "training set of cv split 1 is neither",
        ),
        (
            [(np.arange(60, 120), np.arange(60)), (np.arange(60), np.arange(60, 121))],
            "index 120 is out of range for 120 rows",
        ),
        ([(np.arange(60, 120), np.arange(60)), (np.arange(60),)], "split 1 is not a \\(train, test\\) pair"),
        (
            [(np.arange(60, 120), np.r_[np.arange(60), 5]), (np.arange(60), np.arange(60, 120))],
            "split 0 repeats rows in its test set",
        ),
        (
            [(np.r_[np.arange(60, 120), 61], np.arange(60)), (np.arange(60), np.arange(60, 120))],
            "split 0 repeats rows in its training set",
        ),
        (
            [(np.arange(60, 120), np.arange(60)), (np.arange(60), np.zeros(0, int))],
            "split 1 has an empty test set",
        ),
        (
            [(np.zeros(0, int), np.arange(60)), (np.arange(60), np.arange(60, 120))],
            "split 0 has an empty training set",
        ),
        ([(np.ones(120, bool), np.ones(119, bool))], r"the test mask has shape \(119,\); expected \(120,\)"),
        ([], "cv gave no"),
        ([(np.arange(60, 120), np.arange(60)), (np.arange(60), np.arange(60, 120.0))], "must be integers"),
        (GroupKFold(3), "cannot split 120 sample"),  # no groups given
        ("fold", "cv must be an int >= 2, 'groups', 'blocks', a scikit-learn splitter"),
        (1.5, "cv must be"),
        (True, "cv must be"),
    ],
)
def test_unusable_splits_are_refused_in_one_line(rng, cv, match):
    X, y = make_data(rng)
    with pytest.raises(ParameterError, match=match) as info:
        StreamRidgeCV(ALPHAS, cv=cv).fit(X, y)
    assert "\n" not in str(info.value)


def test_partial_fit_refuses_splits(rng):
    X, y = make_data(rng)
    with pytest.raises(ParameterError, match="partial_fit cannot add rows"):
        StreamRidgeCV(ALPHAS, cv=KFold(3)).partial_fit(X, y)
    est = StreamRidgeCV(ALPHAS, cv=KFold(3)).fit(X, y)
    with pytest.raises(ParameterError, match="partial_fit cannot add rows"):
        est.partial_fit(X, y)
    # the same through statistics loaded from a file
    again = StreamRidgeCV(ALPHAS, cv=3).fit_stats(est.stats_)
    with pytest.raises(ParameterError, match="explicit cv splits"):
        again.partial_fit(X, y)


# ------------------------------------------------------------------ metadata, files, shards


def test_scheme_is_stored_without_pickle_and_round_trips(rng, tmp_path):
    X, y = make_data(rng)
    cv = _predefined(len(X))
    est = StreamRidgeCV(ALPHAS, cv=cv).fit(X, y)
    d = est.stats_.meta["scheme"]
    assert d["kind"] == "splits" and d["train_only"] == 1 and d["training"] == "complement"
    assert d["n_folds"] == 4 and d["n_rows"] == len(X) and len(d["digest"]) == 32
    scheme = FoldScheme.from_dict(d)
    np.testing.assert_array_equal(scheme.fold_ids(), cv.test_fold + 1)
    save_stats(est.stats_, tmp_path / "s.npz")
    with np.load(tmp_path / "s.npz", allow_pickle=False) as f:
        assert all(f[k].dtype != object for k in f.files)
    again = StreamRidgeCV(ALPHAS, cv=3).fit_stats(load_stats(tmp_path / "s.npz"))
    np.testing.assert_array_equal(again.fold_errors_, est.fold_errors_)
    assert again.n_folds_ == 3
    save_model(est, tmp_path / "m.npz")
    header, _ = read_model(tmp_path / "m.npz")
    assert (
        "cv" in header["params_dropped"] and header["scheme"] == d
    )  # folds recorded once, not as index lists
    m = load_model(tmp_path / "m.npz")
    assert m.n_folds_ == 3 and m._spec.scheme == est._spec.scheme
    np.testing.assert_array_equal(m.predict(X), est.predict(X))
    # the CV summary covers the validated rows only (not the train-only fold 0)
    from streamridge.report.summary import estimator_summary

    summary = estimator_summary(est)
    val = cv.test_fold >= 0
    r2 = 1 - est.cv_errors_[list(est.alphas_).index(est.alpha_)] / ((y[val] - y[val].mean()) ** 2).sum()
    assert summary["cv_r2"] == pytest.approx(r2, rel=1e-10)
    assert summary["cv_mse"] == pytest.approx(est.cv_errors_.min() / val.sum(), rel=1e-10)


def test_long_shuffled_split_keeps_digest_not_runs(rng):
    M = 5000
    ids, scheme = folds_from_splits(KFold(5, shuffle=True, random_state=0).split(np.zeros((M, 1))), M)
    assert scheme.runs is None and scheme.fold_ids() is None and scheme.digest
    _, other = folds_from_splits(KFold(5, shuffle=True, random_state=1).split(np.zeros((M, 1))), M)
    assert other.digest != scheme.digest
    assert np.bincount(ids).tolist() == [1000] * 5


def test_shards_of_a_split_merge_into_the_full_pass(rng):
    X, y = make_data(rng)
    cv = KFold(4, shuffle=True, random_state=2)
    full = StreamRidgeCV(ALPHAS, cv=cv).fit(X, y)
    est = StreamRidgeCV(ALPHAS, cv=cv)
    parts = [est.compute_stats(X, y, rows=(a, b)) for a, b in ((0, 50), (50, 120))]
    merged = StreamRidgeCV(ALPHAS, cv=4).fit_stats(merge(parts[0], parts[1]))
    np.testing.assert_allclose(merged.fold_errors_, full.fold_errors_, rtol=1e-12)
    with pytest.raises(Exception, match="same features, targets and fold scheme"):
        other = StreamRidgeCV(ALPHAS, cv=KFold(4, shuffle=True, random_state=9)).compute_stats(
            X, y, rows=(50, 120)
        )
        merge(parts[0], other)


def test_older_schemes_dicts_are_unchanged_and_splits_round_trip():
    """Statistics saved before explicit splits existed still merge: their scheme dicts gain no keys."""
    assert FoldScheme("hash", 5).to_dict() == {
        "kind": "hash",
        "n_folds": 5,
        "seed": 0,
        "n_rows": None,
        "group_values": None,
    }
    with pytest.raises(ParameterError, match="trains on the complement"):
        FoldScheme("hash", 5, training="forward")
    ids, scheme = folds_from_splits(TimeSeriesSplit(3).split(np.zeros((40, 1))), 40)
    assert scheme.forward and scheme.train_only == 1 and list(scheme.validated) == [1, 2, 3]
    assert FoldScheme.from_dict(scheme.to_dict()) == scheme
    bad = {**scheme.to_dict(), "runs": [[0, 10], [1, 10]]}  # covers 20 of 40 rows
    with pytest.raises(ParameterError, match="summing to n_rows=40"):
        FoldScheme.from_dict(bad)
    np.testing.assert_array_equal(scheme.fold_ids(), ids)
    np.testing.assert_array_equal(ids, np.repeat([0, 1, 2, 3], 10))


@pytest.mark.parametrize("cv", [TimeSeriesSplit(4), KFold(4), KFold(4, shuffle=True, random_state=5)])
def test_fold_runs_and_fold_column_agree(rng, monkeypatch, cv):
    """Contiguous folds are computed from stored runs (no column); without runs the fold-id column
    is used.  Both give the same statistics, also for shards at row offsets."""
    import streamridge.folds.schemes as folds_mod

    X, y = make_data(rng)
    est = StreamRidgeCV(ALPHAS, cv=cv, chunk_rows=17)
    runs = est.fit(X, y).fold_errors_
    assert est._spec.scheme.runs is not None  # at most MAX_RUNS runs for 120 rows
    shards = [est.compute_stats(X, y, rows=r) for r in ((0, 55), (55, 120))]
    monkeypatch.setattr(folds_mod, "MAX_RUNS", 0)  # force the column path
    col = StreamRidgeCV(ALPHAS, cv=cv, chunk_rows=17).fit(X, y)
    assert col._spec.scheme.runs is None
    np.testing.assert_array_equal(col.fold_errors_, runs)
    merged = StreamRidgeCV(ALPHAS).fit_stats(merge(shards[0], shards[1]))
    np.testing.assert_allclose(merged.fold_errors_, runs, rtol=1e-12)


def test_splits_with_a_stateful_feature_map_keep_series_ids(rng, monkeypatch):
    """Contiguous split folds come from the row index, so the groups stay series ids for a stateful map:
    the CV equals the same splits on the map's features computed in memory.  Non-contiguous folds
    would need the groups column and are refused in one line."""
    import streamridge.folds.schemes as folds_mod
    from streamridge.features import EchoStateNetwork

    X, y = make_data(rng, N=3)
    series = np.repeat([0, 1, 2, 3], 30)
    esn = EchoStateNetwork(20, seed=0)
    cv = TimeSeriesSplit(3)
    est = StreamRidgeCV(ALPHAS, cv=cv, features=esn, chunk_rows=25).fit(X, y, groups=series)
    F = est.features_.transform(X, series)
    ref = StreamRidgeCV(ALPHAS, cv=cv).fit(F, y)
    np.testing.assert_allclose(est.fold_errors_, ref.fold_errors_, rtol=1e-9)
    monkeypatch.setattr(folds_mod, "MAX_RUNS", 0)
    with pytest.raises(ParameterError, match="cannot be combined with a stateful feature map"):
        StreamRidgeCV(ALPHAS, cv=KFold(3, shuffle=True, random_state=0), features=esn).fit(
            X, y, groups=series
        )
