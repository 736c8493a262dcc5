"""The fitted model of a fit's statistics: the choice by a metric, the refit on all rows, nested CV.

The estimators call these with the forms of their statistics and the
:class:`~streamridge.model_selection.choose.SelectionConfig` of their parameters;
each returns the values and fitted attributes it computed, and the estimator sets them.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from streamridge.datapass.driver import PassSpec
from streamridge.errors import InputError, ParameterError
from streamridge.estimators.params import NOT_WITH_SPLITS, SCORING_NEEDS_ROWS, row_scoring
from streamridge.forms.build import Forms, FullForm, TargetBatches
from streamridge.model_selection import choose as model_choice
from streamridge.model_selection.attributes import choice_attributes
from streamridge.model_selection.band_split import cv_split_r2
from streamridge.model_selection.batches import selection_forms
from streamridge.model_selection.choose import Choice, SelectionConfig, path_table
from streamridge.model_selection.metrics import check_scoring
from streamridge.model_selection.nested import chosen_cv_error, nested_cv, nested_summary
from streamridge.model_selection.refit import refit
from streamridge.solvers import fold_errors
from streamridge.stats.foldstats import FoldStats


def _rescored_supports(
    choice: Choice, config: SelectionConfig, rescore: int, n_features: int
) -> tuple[Any, Any, Any]:
    """The path steps to re-score, their feature sets and the path table (the chosen set alone without them)."""
    from streamridge.model_selection.scoring import best_steps, path_supports

    assert choice.selection is not None
    path = path_table(choice.selection)
    steps = best_steps(path, rescore, int(config.min_features or 0), int(config.max_features or n_features))
    direction = "backward" if config.selection == "backward" else "forward"
    every = path_supports(path, direction, n_features, config.force)
    return steps, [every[i] for i in steps], path


def choose_by_metric(
    rows: tuple[Any, int],
    spec: PassSpec,
    stats: FoldStats,
    forms: Any,
    choice: Choice,
    config: SelectionConfig,
    *,
    scoring: str,
    rescore: int | None,
    classifier: bool,
    scheduler: Any,
    progress: Any,
    partition_rows: int | None = None,
) -> tuple[Choice, dict[str, Any]]:
    """Lambda (and with ``rescore`` the path step) of ``choice`` re-chosen by ``scoring`` from one metric pass.

    Parameters
    ----------
    rows : (source, first row)
        The rows of the fit's statistics pass.
    spec : PassSpec
        The statistics pass's folds, classes and feature map.

    Returns
    -------
    choice : Choice
        The new choice.
    attrs : dict
        The metric's fitted attributes (``cv_scores_``; ``cv_confusion_`` of a
        classifier; ``rescore_steps_``, ``rescore_scores_`` with ``rescore``); see
        :mod:`streamridge.model_selection.scoring`.
    """
    from streamridge.model_selection.scoring import select_by_metric, selected_order

    check_scoring(scoring, classifier=classifier, n_classes=stats.n_classes)
    supports, steps, path = [choice.support], None, None
    if rescore is not None and choice.selection is not None:
        steps, supports, path = _rescored_supports(choice, config, int(rescore), stats.n_features)
    res = select_by_metric(
        rows[0],
        spec,
        stats,
        forms,
        choice.alphas,
        supports,
        str(scoring),
        per_target=config.per_target,
        one_se=config.one_se,
        row_offset=rows[1],
        scheduler=scheduler,
        partition_rows=partition_rows,
        progress=progress,
    )
    sc = res.scores[res.candidate]  # (R, K, T)
    attrs: dict[str, Any] = {"cv_scores_": sc if sc.shape[2] > 1 else sc[:, :, 0]}
    if res.confusion is not None:
        attrs["cv_confusion_"] = res.confusion
    choice = dataclasses.replace(choice, index=np.asarray(res.index))
    if steps is not None and path is not None and choice.selection is not None:
        support = supports[res.candidate]
        selected = selected_order(path, str(config.selection), support, config.force)
        step = dataclasses.replace(
            choice.selection, best_step=int(steps[res.candidate]), support=support, selected=selected
        )
        E = fold_errors(forms.subset(np.flatnonzero(support)), choice.alphas, solver=config.solver)
        choice = dataclasses.replace(choice, support=support, errors=E, selection=step)
        attrs["rescore_steps_"] = np.asarray(steps, dtype=np.int64)
        attrs["rescore_scores_"] = res.set_scores
    return choice, attrs


def nested_attributes(
    stats: FoldStats, forms: Forms | None, config: SelectionConfig, cv_error: float, *, one_output: bool
) -> dict[str, Any]:
    """``nested_cv_errors_`` and ``nested_summary_``: nested CV from the same statistics and config.

    See :mod:`streamridge.model_selection.nested`; ``one_output``: a 1-D y, one error per fold.
    ``forms``: the outer folds' forms (None: forms by batches of targets, built again there).
    """
    res = nested_cv(stats, config, outer=forms)
    return {
        "nested_cv_errors_": res.errors[:, 0] if one_output else res.errors,
        "nested_summary_": nested_summary(res, cv_error),
    }


NESTED_ATTRS = ("nested_cv_errors_", "nested_summary_")


@dataclass
class FittedModel:
    """What :func:`select_model` chose and fitted.

    Attributes
    ----------
    attrs : dict
        The fitted attributes: ``coef_``, ``intercept_``, those of the choice (``alpha_``,
        ``cv_errors_``, ...), of a metric pass (``cv_scores_``, ...) and of nested CV
        (:data:`NESTED_ATTRS`).
    metric_s : float
        Seconds of the metric pass (0.0 without ``scoring``).
    """

    attrs: dict[str, Any]
    metric_s: float = 0.0


def coefficients(
    coef: np.ndarray, intercept: np.ndarray, *, one_output: bool, fit_intercept: bool
) -> dict[str, Any]:
    """``coef_`` and ``intercept_`` shaped like y: 1-D and a float for one regression target; 0 without an intercept."""
    b: float | np.ndarray = float(intercept[0]) if one_output else intercept
    if not fit_intercept:
        b = 0.0 if one_output else np.zeros_like(intercept)
    return {"coef_": coef[0] if one_output else coef, "intercept_": b}


def _check_weights(stats: FoldStats, *, classifier: bool) -> None:
    if stats.n_rows > 0 and stats.weight.sum() <= 0:
        raise InputError("sample_weight is zero for every row; give some rows a positive weight")
    if classifier and int((stats.weight.sum(axis=0) > 0).sum()) < 2:
        raise InputError(
            "only one class has rows with positive sample weight; a classifier needs at least two classes"
        )


def model_forms(
    stats: FoldStats, spec: PassSpec, config: SelectionConfig, *, whole: bool = True
) -> tuple[Forms | TargetBatches, FullForm]:
    """The per-fold forms and the training form of all rows that the model is selected from.

    :func:`streamridge.model_selection.batches.selection_forms`: with ``whole`` False
    and more targets than ``config.max_bytes`` holds, the forms by batches of targets.

    Raises
    ------
    ParameterError
        ``alpha_rule='1se'`` with fewer than 2 validated folds.
    """
    forms, full = selection_forms(
        stats, config, train_only=spec.scheme.train_only, forward=spec.scheme.forward, whole=whole
    )
    if config.one_se and forms.n_folds < 2:
        raise ParameterError(
            "alpha_rule='1se' needs at least 2 validated folds (for its standard error); these cv splits validate 1"
        )
    return forms, full


def select_candidate(
    stats: list[FoldStats], spec: PassSpec, config: SelectionConfig, *, classifier: bool
) -> tuple[int, list[dict[str, Any]]]:
    """The candidate map chosen with lambda by CV (:mod:`streamridge.model_selection.candidates`) and ``candidates_``.

    ``spec.features`` holds the candidates, ``stats`` their statistics in the same order.
    """
    from streamridge.model_selection.candidates import candidates_table, choose_candidate

    for s in stats:
        _check_weights(s, classifier=classifier)
    result = choose_candidate(stats, lambda s: model_forms(s, spec, config), config)
    params = [candidate_params(m) for m in spec.features.candidates]
    return result.best, candidates_table(result, params)


def candidate_params(fmap: Any) -> dict[str, Any]:
    """A candidate map's name and its JSON-able scalar parameters (given arrays left out)."""
    out: dict[str, Any] = {"map": fmap.name}
    for name, v in fmap.get_params(deep=False).items():
        if v is None or isinstance(v, (bool, int, float, str)):
            out[name] = v
        elif isinstance(v, np.generic):
            out[name] = v.item()
    return out


def select_model(
    stats: FoldStats,
    spec: PassSpec,
    config: SelectionConfig,
    *,
    classifier: bool,
    y_1d: bool,
    fit_intercept: bool,
    scoring: str | None,
    rescore: int | None,
    nested: bool,
    rows: tuple[Any, int] | None,
    scheduler: Any,
    progress: Any,
    partition_rows: int | None = None,
) -> FittedModel:
    """Choose the model of ``stats`` by ``config`` (and ``scoring``), refit it on all rows, run nested CV.

    Parameters
    ----------
    stats : FoldStats
    spec : PassSpec
        Folds, classes and feature map of the statistics.
    config : SelectionConfig
        The estimator's model selection (:func:`streamridge.model_selection.choose.config_of`).
    classifier, y_1d : bool
        A classifier; a 1-D y (a regressor's fitted attributes are then 1-D).
    fit_intercept, scoring, rescore, nested :
        The estimator's parameters.
    rows : (source, first row) or None
        The rows of the statistics, for the metric pass of ``scoring`` (None: statistics alone).
    scheduler, progress, partition_rows :
        Of the metric pass (``partition_rows``: the estimator's ``chunk_rows``).
    """
    by_rows = row_scoring(scoring, classifier=classifier)
    if spec.scheme.kind == "splits":  # statistics of explicit splits (fit_stats)
        for on, what, name in ((nested, "nested=True", "nested"), (by_rows, "scoring=", "scoring")):
            if on:
                raise ParameterError(NOT_WITH_SPLITS.format(what, name))
    _check_weights(stats, classifier=classifier)
    forms, full = model_forms(stats, spec, config, whole=by_rows)
    choice = model_choice.choose_model(
        forms, full, config
    )  # looked up when called: one function for all callers
    if choice.banded is not None:
        choice = dataclasses.replace(choice, band_r2=cv_split_r2(forms, choice))
    metric: dict[str, Any] = {}
    metric_s = 0.0
    if scoring is not None and by_rows:
        if rows is None:
            raise ParameterError(SCORING_NEEDS_ROWS)
        t0 = time.perf_counter()
        choice, metric = choose_by_metric(
            rows, spec, stats, forms, choice, config, scoring=scoring, rescore=rescore, classifier=classifier,
            scheduler=scheduler, progress=progress, partition_rows=partition_rows,
        )  # fmt: skip
        metric_s = time.perf_counter() - t0
    one = y_1d and not classifier
    coef, intercept = refit(full if isinstance(forms, Forms) else forms, choice)
    attrs = {**choice_attributes(choice, one_output=one), **metric}
    attrs.update(coefficients(coef, intercept, one_output=one, fit_intercept=fit_intercept))
    if nested:
        cv_error = chosen_cv_error(choice.errors, choice.index, config.per_target)
        outer = forms if isinstance(forms, Forms) else None
        attrs.update(nested_attributes(stats, outer, config, cv_error, one_output=one))
    return FittedModel(attrs, metric_s)
