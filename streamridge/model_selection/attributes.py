"""An estimator's fitted attributes of a :class:`~streamridge.model_selection.choose.Choice`.

A pure function of the choice: the estimator sets what :func:`choice_attributes`
returns and removes the others of :data:`CHOICE_ATTRS` and :data:`METRIC_ATTRS`
(left by an earlier fit with other parameters).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamridge.model_selection.choose import Choice, path_table

#: the selection path's attributes (with ``selection``)
SELECTION_ATTRS = ("selection_path_", "selection_best_step_", "selected_features_")
#: the prefix curve's attributes (with ``feature_prefixes``)
PREFIX_ATTRS = ("prefix_sizes_", "prefix_errors_", "prefix_alphas_", "n_features_selected_")
#: the attributes of ``scoring=``, set from the metric pass of a fit (:mod:`streamridge.model_selection.scoring`)
METRIC_ATTRS = ("cv_scores_", "cv_confusion_", "rescore_steps_", "rescore_scores_")
#: banded ridge's attributes (with ``bands``)
BAND_ATTRS = (
    "band_cv_r2_",
    "bands_",
    "band_names_",
    "band_weights_",
    "band_weight_candidates_",
    "band_scores_",
    "band_fold_scores_",
)
#: every attribute :func:`choice_attributes` may return
CHOICE_ATTRS = (
    "alphas_",
    "fold_errors_",
    "cv_errors_",
    "n_folds_",
    "support_",
    "alpha_",
    *SELECTION_ATTRS,
    *PREFIX_ATTRS,
    *BAND_ATTRS,
)


def choice_attributes(choice: Choice, *, one_output: bool) -> dict[str, Any]:
    """The fitted attributes of a chosen model, by name.

    Parameters
    ----------
    choice : Choice
    one_output : bool
        A regressor fitted on 1-D y: ``cv_errors_`` of shape (R,) and a float ``alpha_``.

    Returns
    -------
    dict
        ``alphas_``, ``fold_errors_``, ``cv_errors_``, ``n_folds_`` (validated
        folds), ``support_``, ``alpha_`` (a float for one lambda, also for 1-D y
        with ``alpha_per_target``); with a selection path ``selection_path_``,
        ``selection_best_step_``, ``selected_features_``; with prefixes
        ``prefix_sizes_``, ``prefix_errors_``, ``prefix_alphas_``, ``n_features_selected_``;
        with a scoring from the statistics ``cv_scores_`` (and ``rescore_steps_``,
        ``rescore_scores_``); with bands :func:`band_attributes`.
    """
    E = choice.errors
    cv_errors = E.sum(axis=1)  # (R, T)
    alpha = choice.alphas[choice.index]
    out: dict[str, Any] = {
        "alphas_": np.asarray(choice.alphas),
        "fold_errors_": E,
        "cv_errors_": cv_errors[:, 0] if one_output else cv_errors,
        "n_folds_": int(E.shape[1]),
        "support_": choice.support,
        "alpha_": float(np.ravel(alpha)[0]) if np.ndim(alpha) == 0 or one_output else np.asarray(alpha),
    }
    if choice.selection is not None:
        out["selection_path_"] = path_table(choice.selection)
        out["selection_best_step_"] = int(choice.selection.best_step)
        out["selected_features_"] = np.asarray(choice.selection.selected, dtype=np.int64)
    if choice.prefixes is not None:
        res = choice.prefixes
        out["prefix_sizes_"] = res.sizes
        out["prefix_errors_"] = res.errors
        out["prefix_alphas_"] = np.asarray([choice.alphas[i] for i in res.alpha_index])
        out["n_features_selected_"] = int(res.sizes[res.best])
    if choice.scores is not None:
        sc = choice.scores
        out["cv_scores_"] = sc if sc.shape[2] > 1 else sc[:, :, 0]
    if choice.rescore_steps is not None:
        out["rescore_steps_"] = choice.rescore_steps
        out["rescore_scores_"] = choice.rescore_scores
    if choice.banded is not None and choice.bands is not None:
        out.update(band_attributes(choice, one_output=one_output))
    return out


def band_attributes(choice: Choice, *, one_output: bool) -> dict[str, Any]:
    """Banded ridge's fitted attributes of a choice with ``banded``.

    Returns
    -------
    dict
        ``bands_`` (the columns of every band), ``band_names_``,
        ``band_weights_`` (the chosen weight vector: (n_targets, n_bands), or
        (n_bands,) for one choice or 1-D y), ``band_weight_candidates_`` (the
        (S, n_bands) weight vectors searched), ``band_scores_`` (each weight
        vector's mean score over folds at its best lambda: (S, n_targets), or
        (S,)), and ``band_fold_scores_`` (S, n_alphas, n_folds, n_targets) when
        every score was kept; ``band_cv_r2_`` (n_bands, n_targets), or
        (n_bands,) for 1-D y, the cross-validated R² of every band, when computed.
    """
    res, bands = choice.banded, choice.bands
    assert res is not None and bands is not None
    chosen = res.band_weights
    scores = res.cv_scores
    out: dict[str, Any] = {
        "bands_": [np.asarray(c, dtype=np.int64) for c in bands.columns],
        "band_names_": list(bands.names),
        "band_weights_": chosen[0] if one_output and chosen.ndim == 2 else chosen,
        "band_weight_candidates_": np.asarray(bands.weights),
        "band_scores_": scores[:, 0] if one_output and scores.ndim == 2 else scores,
    }
    if res.fold_scores is not None:
        out["band_fold_scores_"] = res.fold_scores
    if choice.band_r2 is not None:
        out["band_cv_r2_"] = choice.band_r2[:, 0] if one_output else choice.band_r2
    return out
