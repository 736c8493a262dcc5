"""scoring= with a stateful feature map (streamridge.model_selection.metric_lanes): the metric pass maps every series in row order
with its state carried, as the statistics pass does, so the per-fold scores equal transforming each series in
memory, leaving out the washout rows, refitting per fold and lambda and scoring with scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import metrics as skm

import streamridge as sr
from streamridge import cli
from streamridge.features import Delays, EchoStateNetwork, Pipeline, RandomHidden
from streamridge.folds.schemes import FoldScheme
from streamridge.forms.build import build_forms
from streamridge.io.model_file import load_model
from streamridge.model_selection.metric_pass import make_plan, metric_pass
from streamridge.model_selection.metrics import roc_auc
from streamridge.sources import write_zarr
from tests.conftest import dask_source
from tests.reference import fit_ridge, part_weights

ALPHAS = np.logspace(-2, 3, 6)
WASHOUT = 8

SK = {
    "r2": lambda y, p, w: skm.r2_score(y, p, sample_weight=w),
    "neg_mean_absolute_error": lambda y, p, w: -skm.mean_absolute_error(y, p, sample_weight=w),
    "accuracy": lambda y, p, w: skm.accuracy_score(y, p, sample_weight=w),
    "balanced_accuracy": lambda y, p, w: skm.balanced_accuracy_score(y, p, sample_weight=w),
}


def maps() -> list[tuple[str, object]]:
    return [
        ("esn", EchoStateNetwork(20, spectral_radius=0.8, input_scaling=0.5, washout=WASHOUT, seed=3)),
        ("delays", Delays(3)),
        ("delays-rvfl", Pipeline([Delays(2), RandomHidden(15, seed=1, direct=True)])),
    ]


@pytest.fixture
def series(rng):
    """Eight series of unequal length (ids not sorted), a target that needs the past, labels from it."""
    lengths = [70, 130, 45, 160, 90, 65, 110, 30]
    ids = np.array([11, 3, 8, 5, 20, 1, 14, 7])
    X = rng.standard_normal((sum(lengths), 2))
    g = np.repeat(ids, lengths)
    y = np.zeros(len(g))
    for s in ids:
        r = np.flatnonzero(g == s)
        u = X[r]
        y[r[2:]] = 0.8 * u[1:-1, 0] - 0.5 * u[:-2, 1] * u[2:, 0]
    y += 0.2 * rng.standard_normal(len(g))
    return X, y, g


def labels(y, C):
    return np.searchsorted(np.quantile(y, [0.7] if C == 2 else [0.4, 0.8]), y)  # unbalanced


def position_in_series(g):
    heads = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    return np.arange(len(g)) - np.repeat(heads, np.diff(np.r_[heads, len(g)]))


def reference_scores(F, target, folds, scoring, *, C=0, balanced=False, sw=None, alphas=ALPHAS):
    """(R, K) per-fold scores of explicit scikit-learn refits on the rows of F (the kept rows)."""
    K = int(folds.max()) + 1
    cls = np.asarray(target, dtype=int) if C else np.zeros(len(F), int)
    if C == 2:
        Y = np.where(cls == 1, 1.0, -1.0)[:, None]
    elif C:
        Y = -np.ones((len(F), C))
        Y[np.arange(len(F)), cls] = 1.0
    else:
        Y = np.asarray(target, dtype=float)[:, None]
    out = np.zeros((len(alphas), K))
    for k in range(K):
        tr, va = folds != k, folds == k
        wt = part_weights(sw, cls, max(C, 1), balanced, tr)
        for r, a in enumerate(alphas):
            predict, _, _ = fit_ridge(F[tr], Y[tr], wt, a, True, False)
            P = predict(F[va]).reshape(va.sum(), -1)
            pred = P[:, 0] if not C else (P[:, 0] > 0).astype(int) if C == 2 else P.argmax(axis=1)
            out[r, k] = SK[scoring](target[va], pred, None if sw is None else sw[va])
    return out


def reference_of(est, X, target, g, scoring, *, C=0, balanced=False, washout=0, F=None):
    """Scores of the in-memory features of every series (``F``: given features) on the rows kept by the pass."""
    F = est.features_.transform(X, groups=g) if F is None else F
    keep = position_in_series(g) >= washout
    folds = FoldScheme.from_dict(est.stats_.meta["scheme"]).assign(0, len(g), g)
    assert len(np.unique(folds[keep])) == est.stats_.n_folds  # every fold has rows
    return reference_scores(F[keep], target[keep], folds[keep], scoring, C=C, balanced=balanced)


def fit(fmap, X, target, g, scoring, *, C=0, cv="groups", chunk_rows=None, scheduler="sync", **kw):
    cls = sr.StreamRidgeClassifierCV if C else sr.StreamRidgeCV
    extra = {"class_weight": "balanced"} if C == 3 else {}
    est = cls(
        ALPHAS,
        cv=cv,
        scoring=scoring,
        features=fmap,
        chunk_rows=chunk_rows,
        scheduler=scheduler,
        **extra,
        **kw,
    )
    return est.fit(X, target, groups=g)


TASKS = [("r2", 0), ("accuracy", 2), ("balanced_accuracy", 3)]


@pytest.mark.parametrize(("name", "fmap"), maps(), ids=[n for n, _ in maps()])
@pytest.mark.parametrize(("scoring", "C"), TASKS, ids=[t[0] for t in TASKS])
@pytest.mark.parametrize("cv", ["groups", 3])
def test_scores_equal_transform_then_refit(series, name, fmap, scoring, C, cv):
    X, y, g = series
    target = labels(y, C) if C else y
    washout = WASHOUT if name == "esn" else 0
    ref = None
    for chunk_rows, scheduler in [(None, "sync"), (37, "threads"), (5, "sync")]:
        m = fit(fmap, X, target, g, scoring, C=C, cv=cv, chunk_rows=chunk_rows, scheduler=scheduler)
        if ref is None:
            ref = reference_of(m, X, target, g, scoring, C=C, balanced=C == 3, washout=washout)
            assert np.ptp(ref.mean(axis=1)) > 1e-3  # the lambdas really score differently
        np.testing.assert_allclose(
            m.cv_scores_, ref, rtol=1e-8, atol=1e-10, err_msg=f"{chunk_rows} {scheduler}"
        )
        mean = ref.mean(axis=1)
        assert m.alpha_ == ALPHAS[np.flatnonzero(mean >= mean.max() - 1e-12 * abs(mean.max()))].max()


def test_washout_rows_are_not_scored(series):
    """Scores over all rows (washout included) differ: the metric pass leaves out what the statistics pass did."""
    X, y, g = series
    m = fit(EchoStateNetwork(20, spectral_radius=0.8, washout=25, seed=3), X, y, g, "r2", chunk_rows=33)
    np.testing.assert_allclose(
        m.cv_scores_, reference_of(m, X, y, g, "r2", washout=25), rtol=1e-8, atol=1e-10
    )
    assert np.abs(m.cv_scores_ - reference_of(m, X, y, g, "r2", washout=0)).max() > 1e-3


def warmup_features(fmap, X, g, chunk_rows, W):
    """The features a warmup=W pass sees: every chunk run from rest W rows (at most to its series' start) before it."""
    F = np.empty((len(X), fmap.n_features_out_))
    head = np.arange(len(g)) - position_in_series(g)
    for s in range(0, len(X), chunk_rows):
        e = min(s + chunk_rows, len(X))
        lo = max(int(head[s]), s - W)
        F[s:e] = fmap.transform(X[lo:e], groups=g[lo:e])[s - lo :]
    return F


@pytest.mark.parametrize("W", [3, 60])
def test_warmup_scores_the_features_of_the_warmup_pass(series, W):
    X, y, g = series
    esn = EchoStateNetwork(20, spectral_radius=0.95, washout=3, warmup=W, seed=3)
    m = fit(esn, X, y, g, "neg_mean_absolute_error", chunk_rows=50, scheduler="threads")
    F = warmup_features(m.features_, X, g, 50, W)
    ref = reference_of(m, X, y, g, "neg_mean_absolute_error", washout=3, F=F)
    np.testing.assert_allclose(m.cv_scores_, ref, rtol=1e-8, atol=1e-10)
    exact = reference_of(m, X, y, g, "neg_mean_absolute_error", washout=3)
    if W == 3:  # a short warm-up changes the features, and the scores follow the pass, not the exact map
        assert np.abs(ref - exact).max() > 1e-4


def test_roc_auc_within_its_bound(series):
    X, y, g = series
    cls = labels(y, 2)
    esn = EchoStateNetwork(20, spectral_radius=0.8, input_scaling=0.5, washout=WASHOUT, seed=3)
    est = sr.StreamRidgeClassifierCV(ALPHAS, cv="groups", features=esn).fit(X, cls, groups=g)
    forms = build_forms(est.stats_)
    plan = make_plan(est.stats_, forms, ALPHAS, [np.ones(20, bool)], n_classes=2, auc=True)
    F = est.features_.transform(X, groups=g)
    keep = position_in_series(g) >= WASHOUT
    folds = FoldScheme.from_dict(est.stats_.meta["scheme"]).assign(0, len(g), g)
    base = None
    for chunk_rows, scheduler in [(41, "sync"), (41, "threads"), (500, "sync")]:
        src = dask_source(X, cls, groups=g, chunk_rows=chunk_rows)
        done: list[int] = []
        tally = metric_pass(src, est._spec, plan, scheduler=scheduler, progress=done.append)
        assert sum(done) == len(g)  # every row reported once, lane by lane
        auc, bound = roc_auc(tally)
        assert np.all(bound < 0.02)
        for k in range(est.stats_.n_folds):
            va = keep & (folds == k)
            tr = keep & (folds != k)
            for r, a in enumerate(ALPHAS):
                predict, _, _ = fit_ridge(F[tr], np.where(cls[tr] == 1, 1.0, -1.0), None, a, True, False)
                ref = skm.roc_auc_score(cls[va], predict(F[va]))
                assert abs(auc[k, r] - ref) <= bound[k, r] + 1e-12
        if base is None:
            base = tally
        elif chunk_rows == 41:  # same chunking: bitwise on every scheduler
            np.testing.assert_array_equal(tally.hist, base.hist)
            np.testing.assert_array_equal(tally.confusion, base.confusion)


def test_nonfinite_targets_skipped(series):
    X, y, g = series
    yn = y.copy()
    yn[[15, 300, 301]] = np.nan
    m = fit(maps()[0][1], X, yn, g, "r2", chunk_rows=40, skip_nonfinite=True)
    F = m.features_.transform(X, groups=g)
    keep = (position_in_series(g) >= WASHOUT) & np.isfinite(yn)
    folds = FoldScheme.from_dict(m.stats_.meta["scheme"]).assign(0, len(g), g)
    ref = reference_scores(F[keep], yn[keep], folds[keep], "r2")
    np.testing.assert_allclose(m.cv_scores_, ref, rtol=1e-8, atol=1e-10)


def check_schedulers(series, schedulers):
    X, y, g = series
    cls = labels(y, 3)
    for fmap, target, scoring, C in ((maps()[0][1], y, "r2", 0), (maps()[2][1], cls, "balanced_accuracy", 3)):
        got = [fit(fmap, X, target, g, scoring, C=C, cv=3, chunk_rows=29, scheduler=s) for s in schedulers]
        for m in got[1:]:
            np.testing.assert_array_equal(m.cv_scores_, got[0].cv_scores_)
            assert m.alpha_ == got[0].alpha_


def test_identical_on_threads_and_processes(series):
    check_schedulers(series, ("threads", "processes"))


@pytest.mark.slow
def test_identical_on_a_cluster(series):
    check_schedulers(series, ("sync", "local:2"))


def test_rescore_with_a_stateful_map(series):
    """Backward selection over delay features, the 4 best steps re-scored by r2 through the lanes."""
    X, y, g = series
    m = sr.StreamRidgeCV(
        ALPHAS, cv="groups", features=Delays(3), selection="backward", scoring="r2", rescore=4, chunk_rows=45
    )
    m.fit(X, y, groups=g)
    F = m.features_.transform(X, groups=g)
    folds = FoldScheme.from_dict(m.stats_.meta["scheme"]).assign(0, len(g), g)
    path = m.selection_path_
    best = []
    for step in m.rescore_steps_:
        S = np.ones(F.shape[1], bool)
        S[path["feature"][1 : step + 1]] = False
        best.append(reference_scores(F[:, S], y, folds, "r2").mean(axis=1).max())
    np.testing.assert_allclose(m.rescore_scores_, best, rtol=1e-8)
    assert m.selection_best_step_ == m.rescore_steps_[int(np.argmax(best))]


def test_cli_fit_with_a_features_file_and_scoring(series, tmp_path, capsys):
    X, y, g = series
    cls = labels(y, 2)
    store = write_zarr(tmp_path / "d.zarr", X, cls, g, chunk_rows=64)
    (tmp_path / "esn.toml").write_text(
        'map = "esn"\nn_units = 20\nspectral_radius = 0.8\nwashout = 8\nseed = 3\n'
    )
    argv = [
        "fit",
        "--data",
        store,
        "--groups",
        "groups",
        "--leave-group-out",
        "--classify",
        "--features",
        tmp_path / "esn.toml",
        "--scoring",
        "balanced_accuracy",
        "--alphas",
        *ALPHAS,
        "--out",
        tmp_path / "m.npz",
    ]
    assert cli.main([str(a) for a in argv]) == 0, capsys.readouterr().err
    assert "metric pass: 100%" in capsys.readouterr().err  # the lanes' progress bar
    model = load_model(tmp_path / "m.npz")
    esn = EchoStateNetwork(20, spectral_radius=0.8, washout=8, seed=3)
    m = sr.StreamRidgeClassifierCV(ALPHAS, cv="groups", scoring="balanced_accuracy", features=esn).fit(
        X, cls, groups=g
    )
    ref = reference_of(m, X, cls, g, "balanced_accuracy", C=2, washout=8)
    np.testing.assert_allclose(model.cv_scores_, ref, rtol=1e-12)
    np.testing.assert_allclose(m.cv_scores_, ref, rtol=1e-12)
    assert model.alpha_ == m.alpha_


@pytest.mark.parametrize("group_bytes", [None, 8 * 20 * 8 * 3])
def test_lane_groups_and_row_slices(rng, monkeypatch, group_bytes):
    """Sixteen series cut at chunk ends: 16 lanes in two groups run in lockstep (and, with a small
    GROUP_BYTES, mapped 3 rows at a time): the scores still equal the in-memory reference."""
    from streamridge.datapass import lane_task, plan

    if group_bytes is not None:
        monkeypatch.setattr(lane_task, "GROUP_BYTES", group_bytes)
    g = np.repeat(np.arange(16)[::-1], 40)
    X = rng.standard_normal((len(g), 2))
    y = np.r_[0.0, X[:-1, 0]] * X[:, 1] + 0.1 * rng.standard_normal(len(g))
    esn = EchoStateNetwork(20, spectral_radius=0.8, washout=5, seed=2)
    src = dask_source(X, y, groups=g, chunk_rows=20)
    spec = fit(esn, X, y, g, "r2")._spec

    def sizes():
        calls = plan.lane_calls(src, spec, np.arange(0, len(g), 20), 0, lambda a, i: None)
        return [len(lane.lanes) for _, (lane, _s) in calls]

    assert sizes() == [16]  # lanes of one series each: LOCKSTEP_SERIES (16) of them step together
    monkeypatch.setattr(plan, "LOCKSTEP_SERIES", 8)  # groups of 8 lanes: two groups
    assert sizes() == [8, 8]
    for chunk_rows in (20, 40):
        m = fit(esn, X, y, g, "r2", cv=4, chunk_rows=chunk_rows, scheduler="threads")
        np.testing.assert_allclose(
            m.cv_scores_, reference_of(m, X, y, g, "r2", washout=5), rtol=1e-8, atol=1e-10
        )


@pytest.mark.parametrize("fmap", [Delays(2), EchoStateNetwork(15, washout=4, seed=5)], ids=["delays", "esn"])
def test_one_series_without_groups_and_hash_folds(rng, fmap):
    """No groups: one series over all rows, its rows hashed to K folds (each row scored on the features of
    the whole series up to it, as in the statistics pass)."""
    X = rng.standard_normal((300, 2))
    y = np.r_[0.0, X[:-1, 0]] + X[:, 1] ** 2 + 0.1 * rng.standard_normal(300)
    g = np.zeros(300, int)
    for chunk_rows in (None, 23):
        m = sr.StreamRidgeCV(ALPHAS, cv=4, scoring="r2", features=fmap, chunk_rows=chunk_rows).fit(X, y)
        washout = getattr(fmap, "washout", 0)
        np.testing.assert_allclose(
            m.cv_scores_, reference_of(m, X, y, g, "r2", washout=washout), rtol=1e-8, atol=1e-10
        )


def test_prefixes_with_scoring(series):
    """Reservoir size and lambda: the prefix is chosen by squared error, its lambda by the metric."""
    X, y, g = series
    esn = EchoStateNetwork(20, spectral_radius=0.8, input_scaling=0.5, washout=WASHOUT, seed=3)
    m = fit(esn, X, y, g, "neg_mean_absolute_error", feature_prefixes=[5, 20], chunk_rows=37)
    n = m.n_features_selected_
    F = m.features_.transform(X, groups=g)[:, :n]
    ref = reference_of(m, X, y, g, "neg_mean_absolute_error", washout=WASHOUT, F=F)
    np.testing.assert_allclose(m.cv_scores_, ref, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize(("scoring", "C"), [("r2", 0), ("balanced_accuracy", 3)])
def test_sample_weights(series, rng, scoring, C):
    X, y, g = series
    target = labels(y, C) if C else y
    sw = rng.uniform(0.1, 2.0, len(g))
    esn = EchoStateNetwork(20, spectral_radius=0.8, input_scaling=0.5, washout=WASHOUT, seed=3)
    cls = sr.StreamRidgeClassifierCV if C else sr.StreamRidgeCV
    extra = {"class_weight": "balanced"} if C else {}
    m = cls(ALPHAS, cv=3, scoring=scoring, features=esn, chunk_rows=37, **extra).fit(
        X, target, groups=g, sample_weight=sw
    )
    F = m.features_.transform(X, groups=g)
    keep = position_in_series(g) >= WASHOUT
    folds = FoldScheme.from_dict(m.stats_.meta["scheme"]).assign(0, len(g), g)
    ref = reference_scores(F[keep], target[keep], folds[keep], scoring, C=C, balanced=bool(C), sw=sw[keep])
    np.testing.assert_allclose(m.cv_scores_, ref, rtol=1e-8, atol=1e-10)
