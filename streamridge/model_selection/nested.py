"""Nested cross-validation from the per-fold statistics (no pass over rows).

The statistics are kept per fold, so for an outer fold o the inner
cross-validation is just the statistics of the other folds: the whole model
selection (lambda grid, lambda search, the selection path with its stopping
rule or the prefix size of ``feature_prefixes``, ``alpha_rule``,
``alpha_per_target``, class weights) runs on the K - 1
inner folds -- the very function a fit calls,
:func:`streamridge.model_selection.choose.choose_model`, with the fit's
:class:`~streamridge.model_selection.choose.SelectionConfig` -- the chosen
model is refitted on all of them, and it is scored on fold o from fold o's
statistics:

.. code-block:: text

    for o in 1..K:
        S_o, lambda_o = model_selection(stats without fold o)          # inner CV, K - 1 folds
        W_o = (At_o[S,S] + lambda_o I)^-1 Bt_o[S]                      # refit on the other folds
        nested_error_o = W_o' Av_o[S,S] W_o - 2 W_o' Bv_o[S] + cv_o     # scored on fold o

``At_o, Bt_o, Av_o, Bv_o, cv_o`` are fold o's training/validation forms of
:func:`streamridge.forms.build.build_forms` on all K folds: the training part of
fold o is exactly the rows of the other folds, so ``W_o`` is the model that a
fit on those rows would return.  The result equals running the same selection
on the rows of the other folds, for every outer fold.  Cost: K model
selections on statistics already in memory, run concurrently on the cores
(:func:`streamridge.parallel.map_folds`).

The inner selections choose as the fit does: by squared error, or by R² or
correlation (``scoring``, from the statistics), plain or banded ridge (a
banded model is scored with each target's weight vector and lambda).  The
outer folds are scored by squared error; a metric of the metric pass
(``scoring=`` of a classifier, or another regression metric) does not enter nested CV.

The plain CV error of the model chosen on all folds is optimistic because the
same folds chose and scored it; :func:`nested_summary` reports how far below
the nested estimate it lies.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from streamridge.errors import FoldError, ParameterError
from streamridge.forms.build import Forms, build_forms
from streamridge.model_selection import choose
from streamridge.model_selection.batches import selection_forms

# re-exported: the model selection's names stay importable from here
from streamridge.model_selection.choose import Choice as Choice
from streamridge.model_selection.choose import SelectionConfig as SelectionConfig
from streamridge.model_selection.choose import choose_model as choose_model
from streamridge.model_selection.choose import config_of as config_of
from streamridge.parallel import map_folds
from streamridge.solvers.banded import feature_gains
from streamridge.solvers.linalg import psd_eigh, spectral_solve
from streamridge.stats.foldstats import FoldStats

_FIELDS = ("weight", "count", "mean_x", "mean_y", "sxx", "sxy", "syy")

#: nested CV needs at least this many folds (two inner folds for every outer fold)
MIN_FOLDS = 3


@dataclass
class NestedResult:
    """Outcome of :func:`nested_cv`.

    Attributes
    ----------
    errors : array of shape (K, T)
        Squared error on outer fold o of the model chosen and fitted on the
        other folds (weighted as the plain CV weights fold o).
    alphas : list of float or array of shape (T,)
        Lambda chosen for every outer fold.
    supports : array of bool of shape (K, N)
        Feature set chosen for every outer fold.
    """

    errors: np.ndarray
    alphas: list[float | np.ndarray]
    supports: np.ndarray


def drop_fold(stats: FoldStats, fold: int) -> FoldStats:
    """The statistics of every fold but ``fold`` (K - 1 folds, order kept)."""
    keep = np.arange(stats.n_folds) != fold
    return FoldStats.from_arrays([getattr(stats, a)[keep] for a in _FIELDS], stats.meta)


def score_fold(
    forms: Forms, k: int, support: np.ndarray, alpha: float | np.ndarray, gains: np.ndarray | None = None
) -> np.ndarray:
    """Validation squared error of shape (T,) on fold k of the model fitted on its training part.

    ``W = (At[S,S] + alpha I)^+ Bt[S]`` by one eigendecomposition with the
    numerical null space removed (:mod:`streamridge.solvers.linalg`), scored by
    ``W' Av W - 2 W' Bv + cv``; an empty set scores ``cv`` (intercept only).
    With ``gains`` (banded ridge), of the features scaled by them
    (``A -> G A G``, ``B -> G B``; features of gain 0 left out).
    """
    S = np.flatnonzero(support if gains is None else support & (gains > 0))
    if S.size == 0:
        return forms.cv[k].copy()
    At, Bt, Av, Bv = forms.At[k][np.ix_(S, S)], forms.Bt[k][S], forms.Av[k][np.ix_(S, S)], forms.Bv[k][S]
    if gains is not None:
        g = gains[S]
        At, Av, Bt, Bv = At * np.outer(g, g), Av * np.outer(g, g), Bt * g[:, None], Bv * g[:, None]
    W = spectral_solve(psd_eigh(At), Bt, np.asarray(alpha, dtype=np.float64))
    return np.einsum("nt,nt->t", W, Av @ W) - 2.0 * np.einsum("nt,nt->t", W, Bv) + forms.cv[k]


def score_choice(forms: Forms, k: int, choice: Choice) -> np.ndarray:
    """:func:`score_fold` of a chosen model, shape (T,): banded ridge by each target's weight vector."""
    if choice.banded is None or choice.bands is None:
        return score_fold(forms, k, choice.support, choice.alpha)
    T, N = forms.cv.shape[1], forms.At.shape[1]
    w_idx = np.broadcast_to(np.asarray(choice.banded.weight_index), (T,))
    alpha = np.broadcast_to(np.asarray(choice.alpha, dtype=np.float64), (T,))
    out = np.empty(T)
    for s in np.unique(w_idx):
        cols = np.flatnonzero(w_idx == s)
        sub = dataclasses.replace(
            forms, Bt=forms.Bt[:, :, cols], Bv=forms.Bv[:, :, cols], cv=forms.cv[:, cols]
        )
        gains = feature_gains(list(choice.bands.columns), choice.bands.weights[s], N)
        out[cols] = score_fold(sub, k, choice.support, alpha[cols], gains)
    return out


def check_nested(n_folds: int) -> None:
    """Nested CV needs at least :data:`MIN_FOLDS` folds; raise a one-line :class:`ParameterError` otherwise."""
    if n_folds < MIN_FOLDS:
        raise ParameterError(
            f"nested=True needs at least {MIN_FOLDS} folds (two inner folds per outer fold); "
            f"got {n_folds}; use cv >= {MIN_FOLDS} or drop nested"
        )


def check_balanced_classes(stats: FoldStats, balanced: bool | np.ndarray) -> None:
    """Refuse ``class_weight='balanced'`` when a class has rows in one fold only.

    Balanced weights divide by each class's weight in the training rows; the model
    selection for that outer fold runs on the other folds, which hold none of the
    class.  The message names the label, the fold (and its group under
    leave-one-group-out) and the fix.

    Raises
    ------
    FoldError
    """
    if balanced is not True or stats.n_classes < 2:
        return
    present = stats.count > 0  # (K, C)
    lonely = np.flatnonzero(present.sum(axis=0) == 1)
    if lonely.size == 0:
        return
    c = int(lonely[0])
    o = int(np.flatnonzero(present[:, c])[0])
    labels = stats.meta.get("classes")
    label = labels[c] if labels is not None and c < len(labels) else c
    scheme = stats.meta.get("scheme") or {}
    groups = scheme.get("group_values")
    where = f" (group {groups[o]!r})" if scheme.get("kind") == "logo" and groups is not None else ""
    raise FoldError(
        f"nested CV with class_weight='balanced': class {label!r} has rows only in outer fold {o}{where}, so the "
        f"model selection on the other folds has none of them to weight; spread every class over at least two "
        f"folds (more groups holding class {label!r}, or cv=K over rows), or drop class_weight='balanced' "
        "(--balanced) or nested (--nested)"
    )


def nested_cv(stats: FoldStats, cfg: SelectionConfig, *, outer: Forms | None = None) -> NestedResult:
    """Run the whole model selection on the other folds and score it on each outer fold.

    Parameters
    ----------
    stats : FoldStats
        K >= 3 folds.
    cfg : SelectionConfig
    outer : Forms or None
        ``build_forms(stats, ...)`` with the same options, if already built.

    Returns
    -------
    NestedResult
    """
    check_nested(stats.n_folds)
    check_balanced_classes(stats, cfg.balanced)
    fi, std, bal = cfg.fit_intercept, cfg.standardize, cfg.balanced
    if outer is None:
        outer = build_forms(stats, fit_intercept=fi, standardize=std, balanced=bal)
    forms_o: Forms = outer

    def one(o: int) -> tuple[np.ndarray, float | np.ndarray, np.ndarray]:
        inner = drop_fold(stats, o)
        try:
            forms, full = selection_forms(inner, cfg)
        except FoldError as exc:
            raise FoldError(f"nested CV, outer fold {o}: {exc}") from None
        c = choose.choose_model(forms, full, cfg)  # the very model selection of a fit
        return score_choice(forms_o, o, c), c.alpha, c.support

    done = map_folds(one, stats.n_folds)  # outer folds on the cores; inner work runs serially in each
    errors, alphas, supports = (list(c) for c in zip(*done))
    return NestedResult(np.stack(errors), alphas, np.stack(supports))


def chosen_cv_error(E: np.ndarray, index: np.ndarray, per_target: bool) -> float:
    """Plain CV error (summed over folds and targets) at the chosen lambda(s); E of shape (R, K, T)."""
    if per_target and np.ndim(index) == 1:
        return float(sum(E[int(i), :, t].sum() for t, i in enumerate(index)))
    return float(E[int(index)].sum())


def nested_summary(result: NestedResult, cv_error: float) -> dict[str, object]:
    """JSON-safe summary of a nested CV.

    Parameters
    ----------
    result : NestedResult
    cv_error : float
        Plain CV error of the chosen model (all folds chose and scored it).

    Returns
    -------
    dict
        ``nested_cv_error`` (summed over outer folds and targets), ``fold_mean``,
        ``fold_std`` (ddof=1) and ``std_error`` (``sqrt(K) * fold_std``, the
        standard error of the sum) of the per-fold errors, ``cv_error``,
        ``optimism = (nested_cv_error - cv_error) / nested_cv_error`` (how far
        the plain CV error lies below the nested one, as a fraction of it),
        and per outer fold the error ``fold_errors`` (summed over targets), the
        chosen ``alphas`` and the set sizes ``n_features``.
    """
    per_fold = result.errors.sum(axis=1)
    K = per_fold.shape[0]
    total = float(per_fold.sum())
    std = float(np.std(per_fold, ddof=1)) if K > 1 else 0.0
    return {
        "nested_cv_error": total,
        "fold_mean": float(per_fold.mean()),
        "fold_std": std,
        "std_error": float(np.sqrt(K) * std),
        "cv_error": float(cv_error),
        "optimism": (total - float(cv_error)) / total if total > 0 else 0.0,
        "fold_errors": [float(e) for e in per_fold],
        "alphas": [a.tolist() if isinstance(a, np.ndarray) else float(a) for a in result.alphas],
        "n_features": [int(s.sum()) for s in result.supports],
    }
