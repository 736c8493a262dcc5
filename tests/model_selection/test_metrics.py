"""Metrics from the metric pass equal scikit-learn's metrics on explicit per-fold refits' predictions."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import metrics as skm

import streamridge as sr
from streamridge.datapass.spec import PassSpec
from streamridge.errors import ParameterError
from streamridge.folds.schemes import FoldScheme
from streamridge.forms.build import build_forms
from streamridge.model_selection.metric_pass import make_plan, metric_pass
from streamridge.model_selection.metrics import (
    AUC_BINS,
    CLASSIFICATION_SCORERS,
    REGRESSION_SCORERS,
    ClassTally,
    fold_scores,
    roc_auc,
)
from streamridge.model_selection.scoring import choose_by_score
from tests.conftest import dask_source
from tests.reference import fit_ridge, part_weights

K = 4
ALPHAS = np.logspace(-3, 3, 7)


def folds_of(stats, M):
    return FoldScheme.from_dict(stats.meta["scheme"]).assign(0, M)


def coded(cls, C):
    if C == 2:
        return np.where(cls == 1, 1.0, -1.0)[:, None]
    Y = -np.ones((len(cls), C))
    Y[np.arange(len(cls)), cls] = 1.0
    return Y


def refit_predictions(
    X, Y, folds, alphas, *, sw=None, cls=None, C=1, balanced=False, fit_intercept=True, standardize=False
):
    """Predictions on every fold of the models refitted on the other folds: list over folds of (R, m_k, T)."""
    cls_ = np.zeros(len(X), int) if cls is None else cls
    out = []
    for k in range(K):
        tr, va = folds != k, folds == k
        wt = part_weights(sw, cls_, C, balanced, tr)
        preds = []
        for a in alphas:
            predict, _, _ = fit_ridge(X[tr], Y[tr], wt, a, fit_intercept, standardize)
            preds.append(predict(X[va]).reshape(va.sum(), -1))
        out.append(np.stack(preds))
    return out


def weighted_corr(y, p, w):
    w = np.ones_like(y) if w is None else w
    my, mp = np.average(y, weights=w), np.average(p, weights=w)
    return np.sum(w * (y - my) * (p - mp)) / np.sqrt(np.sum(w * (y - my) ** 2) * np.sum(w * (p - mp) ** 2))


SK_REGRESSION = {
    "r2": lambda y, p, w: skm.r2_score(y, p, sample_weight=w),
    "neg_mean_absolute_error": lambda y, p, w: -skm.mean_absolute_error(y, p, sample_weight=w),
    "neg_mean_squared_error": lambda y, p, w: -skm.mean_squared_error(y, p, sample_weight=w),
    "neg_root_mean_squared_error": lambda y, p, w: -skm.root_mean_squared_error(y, p, sample_weight=w),
    "explained_variance": lambda y, p, w: skm.explained_variance_score(y, p, sample_weight=w),
    "correlation": weighted_corr,
}


def regression_data(rng, M=200, N=6, T=1, ill=False, offset=0.0):
    X = rng.standard_normal((M, N)) + offset
    if ill:
        X[:, -1] = X[:, 0] + 1e-6 * rng.standard_normal(M)
        X[:, -2] = 1e3 * X[:, 1]
    Y = X @ rng.standard_normal((N, T)) + rng.standard_normal((M, T)) + 5.0
    return X, Y


def tally_of(est, X, y, sw=None, *, scoring="r2", chunk_rows=None, scheduler="sync"):
    """Fit the statistics with ``est``, then run the metric pass over every lambda directly."""
    est.fit(X, y, sample_weight=sw)
    bal = est._balanced()
    forms = build_forms(
        est.stats_, fit_intercept=est.fit_intercept, standardize=est.standardize, balanced=bal
    )
    C = 0 if est._spec.classes is None else len(est._spec.classes)
    plan = make_plan(
        est.stats_, forms, ALPHAS, [np.ones(X.shape[1], bool)], n_classes=C, auc=scoring == "roc_auc"
    )
    src = dask_source(X, y, sample_weight=sw, chunk_rows=chunk_rows)
    return metric_pass(src, est._spec, plan, scheduler=scheduler)


REG_CASES = [
    {},
    {"fit_intercept": False},
    {"standardize": True},
    {"weights": True},
    {"T": 3},
    {"ill": True},
    {"offset": 1e6},
]


@pytest.mark.parametrize("case", REG_CASES, ids=lambda c: "-".join(c) or "plain")
def test_regression_metrics_equal_sklearn_on_refits(rng, case):
    X, Y = regression_data(
        rng, T=case.get("T", 1), ill=case.get("ill", False), offset=case.get("offset", 0.0)
    )
    sw = rng.uniform(0.1, 2.0, len(X)) if case.get("weights") else None
    fi, std = case.get("fit_intercept", True), case.get("standardize", False)
    est = sr.StreamRidgeCV(ALPHAS, cv=K, fit_intercept=fi, standardize=std)
    tally = tally_of(est, X, Y, sw, chunk_rows=37)
    folds = folds_of(est.stats_, len(X))
    preds = refit_predictions(X, Y, folds, ALPHAS, sw=sw, fit_intercept=fi, standardize=std)
    rtol = 1e-5 if case.get("ill") or case.get("offset") else 1e-8
    for name in REGRESSION_SCORERS:
        got = fold_scores(tally, name)  # (R, K, T)
        ref = np.zeros_like(got)
        for k in range(K):
            va = folds == k
            w = None if sw is None else sw[va]
            for r in range(len(ALPHAS)):
                for t in range(Y.shape[1]):
                    ref[r, k, t] = SK_REGRESSION[name](Y[va, t], preds[k][r, :, t], w)
        np.testing.assert_allclose(got, ref, rtol=rtol, atol=1e-10 * np.abs(ref).max(), err_msg=name)


def classification_data(rng, C, M=240, N=5):
    X = rng.standard_normal((M, N))
    s = X @ rng.standard_normal(N) + 0.8 * rng.standard_normal(M)
    cls = np.searchsorted(np.quantile(s, [0.75] if C == 2 else [0.5, 0.85]), s)  # unbalanced
    return X, cls


SK_CLASSIFICATION = {
    "accuracy": lambda y, p, w: skm.accuracy_score(y, p, sample_weight=w),
    "balanced_accuracy": lambda y, p, w: skm.balanced_accuracy_score(y, p, sample_weight=w),
    "f1": lambda y, p, w: skm.f1_score(y, p, sample_weight=w, zero_division=0),
    "f1_macro": lambda y, p, w: skm.f1_score(y, p, average="macro", sample_weight=w, zero_division=0),
    "f1_micro": lambda y, p, w: skm.f1_score(y, p, average="micro", sample_weight=w, zero_division=0),
    "f1_weighted": lambda y, p, w: skm.f1_score(y, p, average="weighted", sample_weight=w, zero_division=0),
    "precision": lambda y, p, w: skm.precision_score(y, p, sample_weight=w, zero_division=0),
    "recall": lambda y, p, w: skm.recall_score(y, p, sample_weight=w, zero_division=0),
}


@pytest.mark.parametrize("C", [2, 3])
@pytest.mark.parametrize("class_weight", [None, "balanced"])
@pytest.mark.parametrize("weights", [False, True])
def test_classification_metrics_equal_sklearn_on_refits(rng, C, class_weight, weights):
    X, cls = classification_data(rng, C)
    sw = rng.uniform(0.1, 2.0, len(X)) if weights else None
    est = sr.StreamRidgeClassifierCV(ALPHAS, cv=K, class_weight=class_weight)
    tally = tally_of(est, X, cls, sw, scoring="roc_auc" if C == 2 else "accuracy", chunk_rows=50)
    folds = folds_of(est.stats_, len(X))
    preds = refit_predictions(
        X, coded(cls, C), folds, ALPHAS, sw=sw, cls=cls, C=C, balanced=class_weight == "balanced"
    )
    names = [n for n in SK_CLASSIFICATION if C == 2 or n not in ("f1", "precision", "recall")]
    for name in names:
        got = fold_scores(tally, name)[:, :, 0]
        ref = np.zeros_like(got)
        for k in range(K):
            va = folds == k
            w = None if sw is None else sw[va]
            for r in range(len(ALPHAS)):
                s = preds[k][r]
                p = (s[:, 0] > 0).astype(int) if C == 2 else s.argmax(axis=1)
                ref[r, k] = SK_CLASSIFICATION[name](cls[va], p, w)
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12, err_msg=name)
    if C == 2:
        auc, bound = roc_auc(tally)
        assert np.all(bound < 2e-3)  # ~1/(2 B) with B = 1024 for near-normal scores
        for k in range(K):
            va = folds == k
            for r in range(len(ALPHAS)):
                ref = skm.roc_auc_score(
                    cls[va], preds[k][r][:, 0], sample_weight=None if sw is None else sw[va]
                )
                assert abs(auc[k, r] - ref) <= bound[k, r] + 1e-12


def test_auc_bound_is_tight_when_all_scores_share_a_bin():
    """One bin holding everything: every pair is a tie, AUC 1/2 and bound 1/2 (the exact AUC may be anything)."""
    t = ClassTally.zeros(1, 1, 2, AUC_BINS)
    t.hist[0, 0, 0, 7] = 3.0
    t.hist[0, 0, 1, 7] = 2.0
    auc, bound = roc_auc(t)
    assert auc[0, 0] == 0.5 and bound[0, 0] == 0.5
    t.hist[0, 0, 1, 7], t.hist[0, 0, 1, 9] = 0.0, 2.0  # positives above: exact
    auc, bound = roc_auc(t)
    assert auc[0, 0] == 1.0 and bound[0, 0] == 0.0


@pytest.mark.parametrize("scoring", ["r2", "neg_mean_absolute_error"])
@pytest.mark.parametrize("alpha_rule", ["min", "1se"])
def test_chosen_lambda_equals_reference(rng, scoring, alpha_rule):
    X, Y = regression_data(rng, M=120, N=12)
    m = sr.StreamRidgeCV(ALPHAS, cv=K, scoring=scoring, alpha_rule=alpha_rule).fit(X, Y[:, 0])
    folds = folds_of(m.stats_, len(X))
    preds = refit_predictions(X, Y, folds, ALPHAS)
    ref = np.array(
        [
            [SK_REGRESSION[scoring](Y[folds == k, 0], preds[k][r, :, 0], None) for k in range(K)]
            for r in range(len(ALPHAS))
        ]
    )
    np.testing.assert_allclose(m.cv_scores_, ref, rtol=1e-8)
    mean = ref.mean(axis=1)
    bound = mean.max()
    if alpha_rule == "1se":
        bound -= ref[mean.argmax()].std(ddof=1) / np.sqrt(K)
    expect = ALPHAS[np.flatnonzero(mean >= bound * (1 + 1e-12 * np.sign(-bound)))].max()
    assert m.alpha_ == expect


def test_choose_by_score_ties_and_per_target():
    alphas = np.array([1.0, 10.0, 100.0])
    s = np.zeros((3, 4, 2))
    s[:, :, 0] = [[0.5], [0.7], [0.7]]  # tie -> larger lambda
    s[:, :, 1] = [[0.9], [0.1], [0.2]]
    assert list(choose_by_score(s, alphas, per_target=True)) == [2, 0]
    assert int(choose_by_score(s, alphas, per_target=False)) == 0  # mean over targets: 0.7, 0.4, 0.45


def test_classifier_balanced_accuracy_chooses_like_reference(rng):
    X, cls = classification_data(rng, 2, M=160, N=10)
    m = sr.StreamRidgeClassifierCV(ALPHAS, cv=K, class_weight="balanced", scoring="balanced_accuracy").fit(
        X, cls
    )
    folds = folds_of(m.stats_, len(X))
    preds = refit_predictions(X, coded(cls, 2), folds, ALPHAS, cls=cls, C=2, balanced=True)
    ref = np.array(
        [
            [skm.balanced_accuracy_score(cls[folds == k], preds[k][r][:, 0] > 0) for k in range(K)]
            for r in range(len(ALPHAS))
        ]
    )
    np.testing.assert_allclose(m.cv_scores_, ref, rtol=1e-12)
    mean = ref.mean(axis=1)
    assert m.alpha_ == ALPHAS[np.flatnonzero(mean >= mean.max() * (1 - 1e-12))].max()


def test_rescore_picks_the_best_step_by_the_metric(rng):
    """Every step re-scored: the chosen set is the step whose best lambda has the highest mean score."""
    X, cls = classification_data(rng, 2, M=160, N=5)
    m = sr.StreamRidgeClassifierCV(
        ALPHAS, cv=K, selection="backward", scoring="balanced_accuracy", rescore=5
    ).fit(X, cls)
    folds = folds_of(m.stats_, len(X))
    path = m.selection_path_
    assert sorted(m.rescore_steps_) == sorted(np.argsort(path["cv_error"], kind="stable")[:5])
    best = []
    for step in m.rescore_steps_:
        S = np.ones(5, bool)
        S[path["feature"][1 : step + 1]] = False
        preds = refit_predictions(X[:, S], coded(cls, 2), folds, ALPHAS)
        ref = np.array(
            [
                [skm.balanced_accuracy_score(cls[folds == k], preds[k][r][:, 0] > 0) for k in range(K)]
                for r in range(len(ALPHAS))
            ]
        )
        best.append(ref.mean(axis=1).max())
    np.testing.assert_allclose(m.rescore_scores_, best, rtol=1e-12)
    chosen = m.rescore_steps_[int(np.argmax(best))]
    assert m.selection_best_step_ == chosen
    assert m.support_.sum() == path["n_features"][chosen]


def check_identical(rng, schedulers):
    X, cls = classification_data(rng, 2, M=300)
    est = sr.StreamRidgeClassifierCV(ALPHAS, cv=K, class_weight="balanced")
    ref = tally_of(est, X, cls, scoring="roc_auc", chunk_rows=None, scheduler="sync")
    for chunk_rows in (41, 300):
        for scheduler in schedulers:
            t = tally_of(est, X, cls, scoring="roc_auc", chunk_rows=chunk_rows, scheduler=scheduler)
            np.testing.assert_array_equal(t.confusion, ref.confusion)
            np.testing.assert_array_equal(t.hist, ref.hist)
    Xr, Y = regression_data(rng, M=300, T=2, offset=1e6)
    est_r = sr.StreamRidgeCV(ALPHAS, cv=K)
    base = tally_of(est_r, Xr, Y, chunk_rows=41, scheduler="sync")
    for chunk_rows, scheduler in [(41, s) for s in schedulers] + [(300, "sync"), (7, schedulers[-1])]:
        t = tally_of(est_r, Xr, Y, chunk_rows=chunk_rows, scheduler=scheduler)
        for name in REGRESSION_SCORERS:
            a, b = fold_scores(t, name), fold_scores(base, name)
            if chunk_rows == 41:  # same chunking: bitwise, whatever the scheduler
                np.testing.assert_array_equal(a, b)
            else:
                np.testing.assert_allclose(a, b, rtol=1e-9)
    fits = [
        sr.StreamRidgeCV(ALPHAS, cv=K, scoring="r2", chunk_rows=c, scheduler=s).fit(Xr, Y)
        for c, s in ((41, "sync"), (7, schedulers[-1]))
    ]
    assert fits[0].alpha_ == fits[1].alpha_
    np.testing.assert_allclose(fits[0].cv_scores_, fits[1].cv_scores_, rtol=1e-9)


def test_results_identical_across_threads_and_chunkings(rng):
    check_identical(rng, ("sync", "threads"))


@pytest.mark.slow
@pytest.mark.parametrize("scheduler", ["processes", "local:2"])
def test_results_identical_on_processes_and_a_cluster(rng, scheduler):
    check_identical(rng, ("sync", scheduler))


@pytest.mark.parametrize(
    ("cls_", "kwargs", "message"),
    [
        ("reg", {"scoring": "roc_auc"}, "needs a classifier"),
        ("clf", {"scoring": "r2"}, "is a regression metric"),
        ("reg", {"scoring": "auc"}, "unknown scoring 'auc'"),
        ("reg", {"rescore": 3, "scoring": "r2"}, "set selection="),
        ("reg", {"rescore": 3, "selection": "forward"}, "set scoring="),
        ("reg", {"rescore": 0, "selection": "forward", "scoring": "r2"}, "rescore must be an integer >= 1"),
        ("clf3", {"scoring": "f1"}, "is for two classes"),
        ("clf", {"scoring": "accuracy", "alpha_per_target": True}, "drop alpha_per_target"),
    ],
)
def test_bad_input(rng, cls_, kwargs, message):
    X, cls = classification_data(rng, 3 if cls_ == "clf3" else 2, M=60)
    est = (
        sr.StreamRidgeCV(ALPHAS, cv=K, **kwargs)
        if cls_ == "reg"
        else sr.StreamRidgeClassifierCV(ALPHAS, cv=K, **kwargs)
    )
    with pytest.raises(ParameterError, match=message):
        est.fit(X, cls)


def test_scoring_needs_the_rows(rng):
    X, Y = regression_data(rng, M=60)
    m = sr.StreamRidgeCV(ALPHAS, cv=K).fit(X, Y[:, 0])
    with pytest.raises(ParameterError, match="not on statistics alone"):
        sr.StreamRidgeCV(ALPHAS, cv=K, scoring="neg_mean_absolute_error").fit_stats(m.stats_)
    with pytest.raises(ParameterError, match="use fit, not partial_fit"):
        sr.StreamRidgeCV(ALPHAS, cv=K, scoring="neg_mean_absolute_error").partial_fit(X, Y[:, 0])


def test_cv_scores_in_model_files_cli_and_info(rng, tmp_path, capsys):
    import json

    from streamridge import cli
    from streamridge.io.model_file import load_model, save_model

    X, cls = classification_data(rng, 2, M=120)
    m = sr.StreamRidgeClassifierCV(ALPHAS, cv=K, scoring="roc_auc", selection="forward", rescore=2).fit(
        X, cls
    )
    save_model(m, tmp_path / "m.npz")
    back = load_model(tmp_path / "m.npz")
    np.testing.assert_array_equal(back.cv_scores_, m.cv_scores_)
    np.testing.assert_array_equal(back.rescore_steps_, m.rescore_steps_)
    assert back.scoring == "roc_auc"
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", cls)
    data = ["--data", str(tmp_path / "X.npy"), "--y", str(tmp_path / "y.npy"), "--classify", "--folds", "4"]
    out = str(tmp_path / "c.npz")
    assert (
        cli.main(
            [
                "fit",
                *data,
                "--scoring",
                "balanced_accuracy",
                "--select",
                "forward",
                "--rescore",
                "2",
                "--out",
                out,
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "scoring     balanced_accuracy" in text and "rescored    path steps" in text
    assert cli.main(["fit", *data, "--scoring", "accuracy", "--out", out, "--json", "--overwrite"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["scores"]["scoring"] == "accuracy" and 0.5 < facts["scores"]["score"] <= 1.0
    assert cli.main(["info", out]) == 0
    assert "scoring     accuracy" in capsys.readouterr().out
    assert cli.main(["fit", *data, "--scoring", "r2", "--out", str(tmp_path / "bad.npz")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "regression metric" in err and not (tmp_path / "bad.npz").exists()
    assert (
        cli.main(
            ["fit", *data, "--rescore", "2", "--scoring", "accuracy", "--out", str(tmp_path / "bad.npz")]
        )
        == 2
    )
    assert "set selection=" in capsys.readouterr().err


def test_cli_fit_with_scoring_shows_the_metric_pass(rng, tmp_path, capsys):
    """A progress bar for the metric pass beside the data pass's (none with --quiet)."""
    from streamridge import cli
    from streamridge.sources import write_zarr

    X, Y = regression_data(rng, M=400)
    store = write_zarr(tmp_path / "d.zarr", X, Y[:, 0], chunk_rows=100)
    assert (
        cli.main(
            ["fit", "--data", str(store), "--scoring", "explained_variance", "--out", str(tmp_path / "m.npz")]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert (
        "data pass" in err and "metric pass: 100%" in err and "400/400" in err.split("metric pass: 100%")[1]
    )
    assert (
        cli.main(
            [
                "fit",
                "--data",
                str(store),
                "--scoring",
                "explained_variance",
                "--out",
                str(tmp_path / "m.npz"),
                "--overwrite",
                "--quiet",
            ]
        )
        == 0
    )
    assert "metric pass" not in capsys.readouterr().err


def test_scorer_lists_are_disjoint():
    assert not set(REGRESSION_SCORERS) & set(CLASSIFICATION_SCORERS)


def test_pass_spec_is_the_statistics_pass_spec(rng):
    """The metric pass assigns folds like the statistics pass: its fold weights equal the statistics'."""
    X, Y = regression_data(rng, M=150)
    sw = rng.uniform(0.5, 1.5, 150)
    est = sr.StreamRidgeCV(ALPHAS, cv=K)
    t = tally_of(est, X, Y, sw, chunk_rows=16)
    np.testing.assert_allclose(t.weight, est.stats_.weight[:, 0], rtol=1e-12)
    assert isinstance(est._spec, PassSpec)


def test_confusion_and_per_class_error_at_the_chosen_lambda(rng):
    X, cls = classification_data(rng, 3, M=180)
    m = sr.StreamRidgeClassifierCV(ALPHAS, cv=K, class_weight="balanced", scoring="balanced_accuracy").fit(
        X, cls
    )
    folds = folds_of(m.stats_, len(X))
    r = int(np.flatnonzero(ALPHAS == m.alpha_)[0])
    preds = refit_predictions(X, coded(cls, 3), folds, ALPHAS, cls=cls, C=3, balanced=True)
    for k in range(K):
        ref = skm.confusion_matrix(cls[folds == k], preds[k][r].argmax(axis=1), labels=[0, 1, 2])
        np.testing.assert_array_equal(m.cv_confusion_[k], ref)
    from streamridge.model_selection.scoring import score_summary

    total = m.cv_confusion_.sum(axis=0)
    expect = 1 - np.diag(total) / total.sum(axis=1)
    np.testing.assert_allclose(score_summary(m)["per_class_error"], expect, rtol=1e-12)


@pytest.mark.parametrize("setup", ["groups", "skip_nonfinite", "a_chunk_all_nonfinite"])
def test_metric_pass_folds_follow_the_statistics_pass(rng, setup):
    """Leave-one-group-out folds and skipped non-finite rows (also every row of a chunk): scores equal refits
    on the same folds and rows."""
    X, Y = regression_data(rng, M=160)
    y = Y[:, 0].copy()
    groups = None
    if setup == "groups":
        groups = rng.integers(0, 4, len(X))
        m = sr.StreamRidgeCV(ALPHAS, cv="groups", scoring="r2", chunk_rows=50).fit(X, y, groups=groups)
    else:
        X[[3, 77]] = np.nan
        y[100] = np.inf
        if setup == "a_chunk_all_nonfinite":
            X[50:100, 1] = np.nan
        m = sr.StreamRidgeCV(ALPHAS, cv=K, scoring="r2", skip_nonfinite=True, chunk_rows=50).fit(X, y)
    folds = FoldScheme.from_dict(m.stats_.meta["scheme"]).assign(0, len(X), groups)
    keep = np.isfinite(X).all(axis=1) & np.isfinite(y)
    Xk, Yk, fk = X[keep], y[keep][:, None], folds[keep]
    preds = refit_predictions(Xk, Yk, fk, ALPHAS)
    ref = np.array(
        [[skm.r2_score(Yk[fk == k, 0], preds[k][r, :, 0]) for k in range(K)] for r in range(len(ALPHAS))]
    )
    np.testing.assert_allclose(m.cv_scores_, ref, rtol=1e-8)


@pytest.mark.parametrize(
    ("name", "bad"),
    [
        ("cv_scores", np.zeros((2, 2))),
        ("nested_cv_errors", np.zeros(9)),
        ("cv_confusion", np.zeros((4, 3, 3))),
    ],
)
def test_model_file_schema_checks_the_score_arrays(rng, tmp_path, name, bad):
    from streamridge.errors import ModelFileError
    from streamridge.io.model_file import load_model, save_model

    X, cls = classification_data(rng, 2, M=80)
    m = sr.StreamRidgeClassifierCV(ALPHAS, cv=K, scoring="accuracy", nested=True).fit(X, cls)
    save_model(m, tmp_path / "m.npz")
    load_model(tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz", allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays[name] = bad
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ModelFileError, match=f"not a valid streamridge model file: .*array {name} has shape"):
        load_model(tmp_path / "bad.npz")


def test_the_estimator_keeps_no_handle_on_the_rows(rng):
    """The metric pass's source is dropped after fit, a failed fit and compute_stats (no data kept, pickles small)."""
    X, cls = classification_data(rng, 3, M=90)
    m = sr.StreamRidgeClassifierCV(ALPHAS, cv=K, scoring="accuracy").fit(X, cls)
    assert "_pass_source" not in m.__dict__
    with pytest.raises(ParameterError, match="is for two classes"):
        m.set_params(scoring="f1").fit(X, cls)
    assert "_pass_source" not in m.__dict__
    m.compute_stats(X, cls)
    assert "_pass_source" not in m.__dict__


def test_no_handle_on_the_rows_after_a_fit_that_fails_in_the_solve_stage(rng):
    X, Y = regression_data(rng, M=40)
    m = sr.StreamRidgeCV(ALPHAS, cv=K, scoring="r2")
    with pytest.raises(Exception, match="zero"):
        m.fit(X, Y[:, 0], sample_weight=np.zeros(40))
    assert "_pass_source" not in m.__dict__


def test_alpha_per_target_by_metric_equals_reference(rng):
    X, Y = regression_data(rng, M=120, N=10, T=3)
    Y[:, 1] += 3.0 * rng.standard_normal(120)  # a noisier target wants a larger lambda
    m = sr.StreamRidgeCV(ALPHAS, cv=K, scoring="r2", alpha_per_target=True).fit(X, Y)
    folds = folds_of(m.stats_, len(X))
    preds = refit_predictions(X, Y, folds, ALPHAS)
    ref = np.array(
        [
            [[skm.r2_score(Y[folds == k, t], preds[k][r, :, t]) for t in range(3)] for k in range(K)]
            for r in range(len(ALPHAS))
        ]
    )
    np.testing.assert_allclose(m.cv_scores_, ref, rtol=1e-8)
    mean = ref.mean(axis=1)  # (R, T)
    expect = [
        ALPHAS[np.flatnonzero(mean[:, t] >= mean[:, t].max() - 1e-12 * abs(mean[:, t].max()))].max()
        for t in range(3)
    ]
    np.testing.assert_array_equal(m.alpha_, expect)


def test_scoring_chooses_lambda_for_the_chosen_prefix(rng):
    X, Y = regression_data(rng, M=120, N=6)
    m = sr.StreamRidgeCV(ALPHAS, cv=K, scoring="neg_mean_absolute_error", feature_prefixes=[2, 4, 6]).fit(
        X, Y[:, 0]
    )
    n = m.n_features_selected_
    folds = folds_of(m.stats_, len(X))
    preds = refit_predictions(X[:, :n], Y, folds, ALPHAS)
    ref = np.array(
        [
            [-skm.mean_absolute_error(Y[folds == k, 0], preds[k][r, :, 0]) for k in range(K)]
            for r in range(len(ALPHAS))
        ]
    )
    np.testing.assert_allclose(m.cv_scores_, ref, rtol=1e-8)
    mean = ref.mean(axis=1)
    assert m.alpha_ == ALPHAS[np.flatnonzero(mean >= mean.max() - 1e-12 * abs(mean.max()))].max()


def test_explicit_splits_are_refused_for_nested_and_scoring(rng):
    from sklearn.model_selection import KFold

    X, Y = regression_data(rng, M=60)
    for kw in ({"nested": True}, {"scoring": "neg_mean_absolute_error"}):
        with pytest.raises(ParameterError, match="not supported yet with explicit splits"):
            sr.StreamRidgeCV(ALPHAS, cv=KFold(4), **kw).fit(X, Y[:, 0])
    stats = sr.StreamRidgeCV(ALPHAS, cv=KFold(4)).fit(X, Y[:, 0]).stats_
    est = sr.StreamRidgeCV(ALPHAS, nested=True)
    with pytest.raises(ParameterError, match="not supported yet with explicit splits"):
        est.fit_stats(stats)
    assert not hasattr(est, "coef_")  # refused before anything is fitted
