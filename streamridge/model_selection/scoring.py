"""Model selection by a metric (``scoring=``) from the metric pass, and ``rescore`` of a selection path.

The squared-error search (:mod:`streamridge.solvers`, :mod:`streamridge.selection`)
needs no rows; a metric such as balanced accuracy or ROC AUC needs the
predictions, so the fold models of every lambda (for ``rescore=k``: of the k
best steps of the selection path) are scored by one extra pass
(:mod:`streamridge.model_selection.metric_pass`).  Lambda is chosen as scikit-learn's
``GridSearchCV`` does, by the mean over folds of the per-fold score (greater is
better), ties to the larger lambda; the one-standard-error rule takes the
largest lambda whose mean score is within one standard error (over folds) of
the best.

A metric can be undefined on a fold: ROC AUC ranks rows of one class against
the other, so a fold whose validation rows hold one class has none
(:data:`UNDEFINED_WHY`).  Such folds are known from the statistics before the
metric pass (:func:`undefined_folds`).  Undefined in every fold: a one-line
:class:`~streamridge.errors.FoldError` before the pass.  Undefined in some: those
folds are skipped for the metric -- their ``cv_scores_`` columns are NaN, means
and standard errors are over the other folds -- and the fit summary says so
(:func:`score_summary`: "roc_auc undefined in folds 2, 4 (one class): averaged
over 3 folds").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from streamridge.errors import FoldError
from streamridge.model_selection.metric_pass import make_plan, metric_pass
from streamridge.model_selection.metrics import ClassTally, fold_scores

#: mean scores within this relative distance of the best are tied (the larger lambda wins)
TIE_RTOL = 1e-12

#: why a metric is undefined on a fold, by scoring (others: a fold without weighted validation rows)
UNDEFINED_WHY = {"roc_auc": "one class"}
_NO_ROWS = "no weighted rows"


def undefined_folds(stats: Any, scoring: str) -> np.ndarray:
    """Folds whose validation rows leave ``scoring`` undefined, a bool array of shape (K,).

    From the statistics' per (fold, class) weights: ROC AUC needs positive weight in
    two classes, every metric some positive weight.
    """
    classes = (np.asarray(stats.weight) > 0).sum(axis=1)
    return classes < (2 if scoring == "roc_auc" else 1)


def check_defined(undefined: np.ndarray, scoring: str) -> None:
    """Refuse a metric undefined on the validation rows of every fold, naming the metric and why.

    Raises
    ------
    FoldError
    """
    if not np.all(undefined):
        return
    K = undefined.shape[0]
    if scoring == "roc_auc":
        why = (
            f"the validation rows of each of the {K} folds hold one class, and ROC AUC ranks rows of one class "
            "against the other; use folds that mix the classes (e.g. cv=K rather than groups that each hold "
            "one class) or another scoring, e.g. 'balanced_accuracy'"
        )
    else:
        why = f"none of the {K} folds has validation rows of positive weight; use fewer folds"
    raise FoldError(f"scoring={scoring!r} is undefined in every validation fold: {why}")


def _nanmean(a: np.ndarray, axis: Any, keepdims: bool = False) -> np.ndarray:
    """Mean over ``axis`` of the values that are not NaN; NaN (and no warning) where there are none."""
    ok = ~np.isnan(a)
    n = ok.sum(axis=axis, keepdims=keepdims)
    total = np.where(ok, a, 0.0).sum(axis=axis, keepdims=keepdims)
    return np.where(n > 0, total / np.maximum(n, 1), np.nan)


def _nanse(a: np.ndarray, axis: int) -> np.ndarray:
    """Standard error of the mean over ``axis`` of the values that are not NaN (std ddof=1 / sqrt(n)); 0 below 2 values."""
    ok = ~np.isnan(a)
    n = ok.sum(axis=axis)
    mean = _nanmean(a, axis, keepdims=True)
    ss = np.where(ok, (a - mean) ** 2, 0.0).sum(axis=axis)
    return np.where(n > 1, np.sqrt(ss / np.maximum(n - 1, 1)) / np.sqrt(np.maximum(n, 1)), 0.0)


def choose_by_score(
    scores: np.ndarray, alphas: np.ndarray, *, per_target: bool, one_se: bool = False
) -> np.ndarray:
    """Index of the chosen lambda from per-fold scores (greater is better).

    Parameters
    ----------
    scores : array of shape (R, K, T)
    alphas : array of shape (R,)
    per_target : bool
        One lambda per target; else the score averaged over targets.
    one_se : bool
        Largest lambda whose mean score is within one standard error
        (``std over folds / sqrt(K)``, of the best lambda) of the best.

    Returns
    -------
    array of int of shape (T,) if per_target else shape ()

    Notes
    -----
    NaN scores (a fold where the metric is undefined) are left out of the means
    and of the standard error: K counts the folds scored.
    """
    S = scores if per_target else _nanmean(scores, axis=2, keepdims=True)
    mean = _nanmean(S, axis=1)  # (R, T')
    mean = np.where(np.isnan(mean), -np.inf, mean)
    best = np.argmax(mean, axis=0)
    cols = np.arange(mean.shape[1])
    bound = mean[best, cols]
    if one_se:
        bound = bound - _nanse(S[best, :, cols], axis=1)
    bound = bound - TIE_RTOL * np.abs(bound)
    ok = mean >= bound[None, :]
    order = np.argsort(alphas, kind="stable")
    ranked = ok[order]
    idx = order[ranked.shape[0] - 1 - np.argmax(ranked[::-1], axis=0)]
    return idx if per_target else idx[0]


def path_supports(
    path: np.ndarray, direction: str, n_features: int, force: tuple[int, ...]
) -> list[np.ndarray]:
    """Feature set (bool mask) after every step of a selection path table (``selection_path_``)."""
    feats = [int(f) for f in path["feature"][1:]]
    out = []
    for i in range(len(path)):
        m = np.zeros(n_features, dtype=bool)
        if direction == "backward":
            m[:] = True
            m[feats[:i]] = False
        else:
            m[list(force)] = True
            m[feats[:i]] = True
        out.append(m)
    return out


def best_steps(path: np.ndarray, k: int, lo: int, hi: int) -> list[int]:
    """The k steps of lowest CV error among sets of size in [lo, hi] (ties to fewer features)."""
    ok = [i for i in range(len(path)) if lo <= int(path["n_features"][i]) <= hi] or list(range(len(path)))
    return sorted(ok, key=lambda i: (float(path["cv_error"][i]), int(path["n_features"][i]), i))[:k]


def selected_order(
    path: np.ndarray, direction: str, support: np.ndarray, force: tuple[int, ...]
) -> np.ndarray:
    """Features of ``support``, most important first (as ``SelectionResult.selected``)."""
    feats = [int(f) for f in path["feature"][1:]]
    if direction == "backward":
        left = np.ones(support.shape[0], dtype=bool)
        left[feats] = False
        order = [int(f) for f in np.flatnonzero(left)] + feats[::-1]
    else:
        order = list(force) + feats
    return np.array([f for f in order if support[f]], dtype=np.int64)


@dataclass
class MetricChoice:
    """Outcome of :func:`select_by_metric`.

    Attributes
    ----------
    index : int or array of int
        Chosen lambda (per target with ``per_target``).
    candidate : int
        Which of the candidate feature sets won.
    scores : array of shape (n_sets, R, K, T)
        Per-fold score of every set and lambda.
    set_scores : array of shape (n_sets,)
        Mean score of every set at its chosen lambda(s).
    confusion : array of shape (K, C, C) or None
        A classifier's weighted confusion counts per fold of the chosen model.
    """

    index: Any
    candidate: int
    scores: np.ndarray
    set_scores: np.ndarray
    confusion: np.ndarray | None = None


def select_by_metric(
    source: Any,
    spec: Any,
    stats: Any,
    forms: Any,
    alphas: np.ndarray,
    supports: list[np.ndarray],
    scoring: str,
    *,
    per_target: bool,
    one_se: bool,
    row_offset: int = 0,
    scheduler: Any = None,
    partition_rows: int | None = None,
    progress: Any = False,
) -> MetricChoice:
    """Score every (set, lambda) by one metric pass; choose lambda per set, then the best set (ties: earlier).

    Folds where ``scoring`` is undefined are skipped (their scores NaN); undefined
    in every fold is refused before the pass (:func:`check_defined`).  ``row_offset``,
    ``scheduler``, ``partition_rows`` and ``progress`` are the pass's (:func:`metric_pass`).
    """
    undefined = undefined_folds(stats, scoring)
    check_defined(undefined, scoring)
    n_classes = 0 if spec.classes is None else len(spec.classes)
    plan = make_plan(stats, forms, alphas, supports, n_classes=n_classes, auc=scoring == "roc_auc")
    tally = metric_pass(
        source,
        spec,
        plan,
        row_offset=row_offset,
        scheduler=scheduler,
        partition_rows=partition_rows,
        progress=progress,
    )
    R = len(alphas)
    per_model = fold_scores(tally, scoring)  # (n_sets * R, K, T)
    undefined = undefined | np.isnan(per_model).all(axis=(0, 2))  # rows the pass left out (a washout)
    check_defined(undefined, scoring)
    per_model[:, undefined] = np.nan
    scores = per_model.reshape(len(supports), R, *per_model.shape[1:])
    idx, set_scores = [], []
    for s in range(len(supports)):
        i = choose_by_score(scores[s], alphas, per_target=per_target, one_se=one_se)
        mean = _nanmean(scores[s], axis=1)  # (R, T)
        val = mean[i, np.arange(mean.shape[1])].mean() if per_target else _nanmean(mean[int(i)], axis=0)
        idx.append(i)
        set_scores.append(float(val))
    best = int(np.argmax(np.asarray(set_scores)))  # first maximum: the candidate listed first wins ties
    confusion = None
    if isinstance(tally, ClassTally):
        confusion = tally.confusion[:, best * R + int(idx[best])]
    return MetricChoice(idx[best], best, scores, np.asarray(set_scores), confusion)


def score_summary(estimator: Any) -> dict[str, Any] | None:
    """JSON-safe summary of ``cv_scores_`` (None without ``scoring``): the metric, its mean over folds
    per lambda, and at the chosen lambda its mean and standard error over folds.

    Folds where the metric is undefined (NaN in ``cv_scores_``) are left out of the
    means; ``undefined_folds`` lists them and ``note`` says so in words.
    """
    scores = getattr(estimator, "cv_scores_", None)
    scoring = getattr(estimator, "scoring", None)
    if scores is None or scoring is None:
        return None
    S = np.asarray(scores, dtype=np.float64)
    S = S if S.ndim == 3 else S[:, :, None]  # (R, K, T)
    alphas = np.asarray(estimator.alphas_)
    T = S.shape[2]
    chosen = np.broadcast_to(np.asarray(estimator.alpha_), (T,))
    idx = [int(np.argmin(np.abs(alphas - a))) for a in chosen]
    at = np.stack([S[i, :, t] for t, i in enumerate(idx)], axis=1).mean(axis=1)  # (K,) averaged over targets
    undefined = np.flatnonzero(np.isnan(S).all(axis=(0, 2)))
    mean = _nanmean(S.reshape(S.shape[0], -1), axis=1)
    finite = mean[np.isfinite(mean)]
    out: dict[str, Any] = {
        "scoring": scoring,
        "score": float(_nanmean(at, axis=0)),
        "std_error": float(_nanse(at, axis=0)),
        "best_on_grid": float(finite.max()) if finite.size else None,
        "mean_per_alpha": [None if not np.isfinite(v) else float(v) for v in mean],
    }
    if undefined.size:
        scored = S.shape[1] - undefined.size
        out["undefined_folds"] = [int(k) for k in undefined]
        out["note"] = (
            f"{scoring} undefined in fold{'s' if undefined.size > 1 else ''} {', '.join(str(k) for k in undefined)} "
            f"({UNDEFINED_WHY.get(str(scoring), _NO_ROWS)}): averaged over {scored} fold{'s' if scored != 1 else ''}"
        )
    confusion = getattr(estimator, "cv_confusion_", None)
    if confusion is not None:
        total = np.asarray(confusion, dtype=np.float64).sum(axis=0)  # (C, C) over folds
        true = total.sum(axis=1)
        err = 1.0 - np.diag(total) / np.where(true > 0, true, np.nan)
        out["per_class_error"] = [None if not np.isfinite(e) else float(e) for e in err]
    if hasattr(estimator, "rescore_steps_"):
        out["rescore_steps"] = [int(i) for i in estimator.rescore_steps_]
        out["rescore_scores"] = [float(v) for v in estimator.rescore_scores_]
    return out
