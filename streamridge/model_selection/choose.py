"""The one model selection: the feature set and lambda chosen from per-fold forms.

An estimator's fit calls :func:`choose_model` on the forms of all K folds;
nested cross-validation (:func:`streamridge.model_selection.nested.nested_cv`) calls the very
same function on the forms of the K - 1 other folds of every outer fold.
What it runs depends on the :class:`SelectionConfig`:

.. code-block:: text

    alphas = the grid given, or default_alphas(full.A)
    bands:             (weight vector, lambda) by CV            streamridge.solvers.banded
    feature_prefixes:  (prefix size, lambda) by CV             streamridge.selection.prefixes
    selection:         forward / backward / OP-RR path and      streamridge.selection
                       its stopping rule -> feature set S
    otherwise:         S = all features
    lambda = choose(fold_errors(forms restricted to S))       streamridge.solvers.grid.choose
           or, with scoring "r2" / "correlation", by the mean validation score of the same
           models, from the forms and the folds' own moments  streamridge.solvers.target_scores

with ``alpha_rule="1se"`` (``one_se``), ``alpha_per_target`` (``per_target``)
and class weights (``balanced``, applied when the forms are built) as the
estimator's parameters say.  The result, a :class:`Choice`, holds the chosen
set and lambda, the fold errors (and scores) of the chosen model and the
selection, prefix or banded search it came from.

Many targets: without a feature selection the targets are independent until
the choice (a lambda per target, or one for their summed scores), so the forms
are built and scored one batch of targets at a time
(:class:`~streamridge.forms.build.TargetBatches`,
:func:`streamridge.model_selection.batches.selection_forms`),
every fold decomposed once; the batches' width follows from ``max_bytes``.
None of it reads a row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from streamridge.errors import ParameterError
from streamridge.forms.build import Forms, FullForm, TargetBatches
from streamridge.model_selection.bands import STATS_SCORINGS, Bands, check_bands
from streamridge.model_selection.batches import DEFAULT_SOLVE_BYTES, solve_bytes, target_scores
from streamridge.solvers import fold_errors
from streamridge.solvers.banded import BandedSearch, banded_search
from streamridge.solvers.grid import check_alphas, default_alphas
from streamridge.solvers.target_scores import choose_scores

if TYPE_CHECKING:
    from streamridge.selection import SelectionResult
    from streamridge.selection.prefixes import PrefixResult


@dataclass(frozen=True)
class SelectionConfig:
    """Everything the model selection of an estimator depends on (besides the statistics).

    Attributes
    ----------
    fit_intercept, standardize : bool
    balanced : bool or array of shape (n_classes,)
        Class weights as :func:`streamridge.forms.build.class_factors` takes them.
    alphas : array of shape (R,) or None
        The lambda grid; None: :func:`streamridge.solvers.grid.default_alphas` of the
        training form (recomputed for every inner selection, as a fit on the
        rows of the other folds would).
    solver : {"eigen", "covariance"}
    one_se : bool
        ``alpha_rule="1se"`` (also the one-standard-error choice of the set).
    per_target : bool
        ``alpha_per_target``.
    selection : {None, "forward", "backward", "op-rr"}
    max_features, min_features, patience : int or None
    force : tuple of int
    prefixes : sequence of int or None
        ``feature_prefixes``: the number of leading features chosen with lambda
        (:mod:`streamridge.selection.prefixes`), as given (checked by :func:`choose_model`).
    scoring : {None, "r2", "correlation"}
        Choose lambda (and the band weights) by this validation score, computed
        from the forms (built ``with_moments``); None: squared error.
    rescore : int or None
        With ``selection`` and ``scoring``: the ``rescore`` best steps of the path
        re-scored by ``scoring``, the best kept.
    bands : Bands or None
        Banded ridge: the bands and weight vectors (:func:`~streamridge.model_selection.bands.check_bands`).
    max_bytes : int
        Memory of one batch of targets' forms (:class:`~streamridge.forms.build.TargetBatches`).
    """

    fit_intercept: bool = True
    standardize: bool = False
    balanced: bool | np.ndarray = False
    alphas: np.ndarray | None = None
    solver: str = "eigen"
    one_se: bool = False
    per_target: bool = False
    selection: str | None = None
    max_features: int | None = None
    min_features: int | None = None
    force: tuple[int, ...] = field(default_factory=tuple)
    patience: int | None = None
    prefixes: Sequence[int] | None = None
    scoring: str | None = None
    rescore: int | None = None
    bands: Bands | None = None
    max_bytes: int = DEFAULT_SOLVE_BYTES

    @property
    def batched(self) -> bool:
        """Whether the targets may be taken in batches (no feature selection ties them together)."""
        return self.selection is None and self.prefixes is None


@dataclass
class Choice:
    """A chosen model: feature set and lambda (index into the grid), and how they were chosen.

    Attributes
    ----------
    support : array of bool of shape (N,)
        The chosen feature set.
    alphas : array of shape (R,)
        The lambda grid searched.
    index : array of int of shape () or (T,)
        The chosen lambda: an index into ``alphas`` (one per target with ``per_target``).
    errors : array of shape (R, K, T)
        Validation squared error of the chosen set per lambda, fold and target.
    selection : SelectionResult or None
        The selection path, when ``selection`` ran.
    prefixes : PrefixResult or None
        The CV errors of every prefix size, when ``feature_prefixes`` ran.
    scoring : {None, "r2", "correlation"}
        What lambda was chosen by (None: squared error).
    scores : array of shape (R, K, T) or None
        With ``scoring``: the validation score of the chosen set per lambda, fold and target.
    bands : Bands or None
        With banded ridge: the bands and weight vectors searched.
    banded : BandedSearch or None
        With banded ridge: the search (every target's weight vector in ``weight_index``);
        ``errors`` and ``scores`` are then those of each target's chosen weight vector.
    rescore_steps, rescore_scores : arrays of shape (rescore,) or None
        With ``rescore``: the path steps re-scored and their mean score.
    band_r2 : array of shape (n_bands, T) or None
        With banded ridge, when computed (:func:`streamridge.model_selection.band_split.cv_split_r2`):
        the cross-validated R² of every band.
    """

    support: np.ndarray
    alphas: np.ndarray
    index: np.ndarray
    errors: np.ndarray
    selection: SelectionResult | None = None
    prefixes: PrefixResult | None = None
    scoring: str | None = None
    scores: np.ndarray | None = None
    bands: Bands | None = None
    banded: BandedSearch | None = None
    rescore_steps: np.ndarray | None = None
    rescore_scores: np.ndarray | None = None
    band_r2: np.ndarray | None = None

    @property
    def alpha(self) -> float | np.ndarray:
        """Chosen lambda: a float, or one per target."""
        a = self.alphas[self.index]
        return float(a) if np.ndim(a) == 0 else np.asarray(a)


def choose_model(forms: Forms | TargetBatches, full: FullForm, cfg: SelectionConfig) -> Choice:
    """The model selection of the estimators on one set of folds.

    Parameters
    ----------
    forms : Forms or TargetBatches
        Per-fold forms of the folds to select on (with ``scoring``: built ``with_moments``),
        or their statistics' forms by batches of targets
        (:func:`~streamridge.model_selection.batches.selection_forms`).
    full : FullForm
        Training form of all their rows (the default grid and OP-RR's ranking;
        with target batches, of any batch: its ``A`` alone is used).
    cfg : SelectionConfig

    Returns
    -------
    Choice
        With ``errors`` of shape (R, K, T): the fold errors of the chosen set;
        ``selection`` set when ``cfg.selection`` ran, ``prefixes`` when ``cfg.prefixes`` did,
        ``banded`` with ``cfg.bands``, ``scores`` with ``cfg.scoring``.

    Raises
    ------
    ParameterError
        For invalid ``alphas`` or ``prefixes``, or ``scoring`` without the folds' moments.
    """
    alphas = default_alphas(full.A) if cfg.alphas is None else check_alphas(cfg.alphas)
    if cfg.scoring is not None:
        _check_moments(forms, cfg.scoring)
    if cfg.bands is not None:
        return _choose_banded(forms, alphas, cfg)
    if cfg.batched:
        return _choose_all(forms, alphas, cfg)
    whole = forms if isinstance(forms, Forms) else forms.forms()
    if cfg.prefixes is not None:
        choice = _choose_prefix(whole, alphas, cfg)
    else:
        path = selection_path(whole, full, alphas, cfg)
        support = np.asarray(path.support, dtype=bool)
        E = fold_errors(whole.subset(np.flatnonzero(support)), alphas, solver=cfg.solver)
        choice = Choice(support, alphas, _choose_alpha(E, alphas, cfg), E, selection=path)
    return choice if cfg.scoring is None else _rechoose_by_score(whole, choice, cfg)


def _check_moments(forms: Forms | TargetBatches, scoring: str) -> None:
    """Scores need the folds' own moments: forms built ``with_moments``."""
    has = forms.moments is not None if isinstance(forms, Forms) else forms.with_moments
    if not has:
        raise ParameterError(
            f"scoring={scoring!r} needs the validation folds' moments; build the forms with_moments=True"
        )


def _choose_alpha(E: np.ndarray, alphas: np.ndarray, cfg: SelectionConfig) -> np.ndarray:
    """Index of the chosen lambda of fold errors E of shape (R, K, T) (:func:`streamridge.solvers.grid.choose`)."""
    return np.asarray(choose_scores(E, alphas, scoring="sse", per_target=cfg.per_target, one_se=cfg.one_se))


def _choose_by(E: np.ndarray, S: np.ndarray | None, alphas: np.ndarray, cfg: SelectionConfig) -> np.ndarray:
    """Index of the chosen lambda by the scores S (greater is better), or by the errors E without scoring."""
    if cfg.scoring is None or S is None:
        return _choose_alpha(E, alphas, cfg)
    return np.asarray(
        choose_scores(S, alphas, scoring=cfg.scoring, per_target=cfg.per_target, one_se=cfg.one_se)
    )


def _choose_all(forms: Forms | TargetBatches, alphas: np.ndarray, cfg: SelectionConfig) -> Choice:
    """All features: lambda from the fold errors (or scores) of every target batch."""
    E, S = target_scores(forms, alphas, cfg)
    N = forms.n_features if isinstance(forms, TargetBatches) else int(forms.At.shape[1])
    index = _choose_by(E, S, alphas, cfg)
    return Choice(np.ones(N, dtype=bool), alphas, index, E, scoring=cfg.scoring, scores=S)


def _choose_banded(forms: Forms | TargetBatches, alphas: np.ndarray, cfg: SelectionConfig) -> Choice:
    """Banded ridge: a weight vector and lambda per target (or for all) by :func:`~streamridge.solvers.banded.banded_search`."""
    assert cfg.bands is not None
    bands = cfg.bands
    res = banded_search(
        forms, list(bands.columns), bands.weights, alphas, scoring=cfg.scoring or "sse",
        per_target=cfg.per_target, one_se=cfg.one_se,
    )  # fmt: skip
    N = forms.n_features if isinstance(forms, TargetBatches) else int(forms.At.shape[1])
    return Choice(
        np.ones(N, dtype=bool), alphas, np.asarray(res.alpha_index), res.errors, scoring=cfg.scoring,
        scores=None if cfg.scoring is None else res.scores, bands=bands, banded=res,
    )  # fmt: skip


def _choose_prefix(forms: Forms, alphas: np.ndarray, cfg: SelectionConfig) -> Choice:
    """Prefix size and lambda chosen jointly (:func:`streamridge.selection.prefixes.prefix_errors`)."""
    from streamridge.selection.prefixes import check_prefixes, prefix_errors

    N = int(forms.At.shape[-1])
    sizes = check_prefixes(cfg.prefixes, N)
    res = prefix_errors(forms, alphas, sizes, solver=cfg.solver, per_target=cfg.per_target, one_se=cfg.one_se)
    support = np.zeros(N, dtype=bool)
    support[: int(res.sizes[res.best])] = True
    return Choice(
        support, alphas, np.asarray(res.alpha_index[res.best]), res.fold_errors[res.best], prefixes=res
    )


def _rechoose_by_score(forms: Forms, choice: Choice, cfg: SelectionConfig) -> Choice:
    """Lambda of the chosen set (with ``rescore``: of the best path steps) re-chosen by ``cfg.scoring``.

    As the metric pass does it (:func:`streamridge.model_selection.scoring.select_by_metric`),
    from the forms instead of the rows: per candidate set the lambda of the best
    mean score, then the set of the best mean score (ties: the earlier candidate).
    """
    import dataclasses

    from streamridge.model_selection.scoring import best_steps, path_supports, selected_order

    supports, steps, path = [choice.support], None, None
    if cfg.rescore is not None and choice.selection is not None:
        path, N = path_table(choice.selection), int(forms.At.shape[-1])
        steps = best_steps(path, int(cfg.rescore), int(cfg.min_features or 0), int(cfg.max_features or N))
        every = path_supports(path, "backward" if cfg.selection == "backward" else "forward", N, cfg.force)
        supports = [every[i] for i in steps]
    found = []
    for support in supports:
        E, S = target_scores(forms.subset(np.flatnonzero(support)), choice.alphas, cfg)
        assert S is not None
        index = _choose_by(E, S, choice.alphas, cfg)
        mean = S.mean(axis=1)  # (R, T)
        score = mean[index, np.arange(mean.shape[1])].mean() if cfg.per_target else mean[int(index)].mean()
        found.append((E, S, index, float(score)))
    best = int(np.argmax([f[3] for f in found]))  # the first maximum: the earlier candidate wins ties
    E, S, index, _ = found[best]
    choice = dataclasses.replace(choice, index=index, scoring=cfg.scoring, scores=S)
    if steps is None or path is None or choice.selection is None:
        return choice
    support = supports[best]
    selected = selected_order(path, str(cfg.selection), support, cfg.force)
    step = dataclasses.replace(
        choice.selection, best_step=int(steps[best]), support=support, selected=selected
    )
    return dataclasses.replace(
        choice, support=support, errors=E, selection=step,
        rescore_steps=np.asarray(steps, dtype=np.int64), rescore_scores=np.array([f[3] for f in found]),
    )  # fmt: skip


def selection_path(forms: Forms, full: FullForm, alphas: np.ndarray, cfg: SelectionConfig) -> SelectionResult:
    """The forward, backward or OP-RR path of ``cfg.selection`` with its stopping rule (:mod:`streamridge.selection`)."""
    from streamridge.selection import op_rr, select_features

    opts: dict[str, Any] = {
        "max_features": cfg.max_features,
        "min_features": cfg.min_features,
        "force": cfg.force,
        "one_se": cfg.one_se,
        "alpha_per_target": cfg.per_target,
    }
    if cfg.selection == "op-rr":
        return op_rr(forms, full, alphas, **opts)
    return select_features(forms, alphas, direction=str(cfg.selection), patience=cfg.patience, **opts)


def path_table(result: SelectionResult) -> np.ndarray:
    """The steps of a selection path as the structured array ``selection_path_``.

    Fields feature, n_features, alpha (NaN where a lambda per target was
    chosen), cv_error and std_error; one row per step, step 0 the starting set.
    """
    table = result.as_table()
    alpha_col = np.array([s.alpha if np.ndim(s.alpha) == 0 else np.nan for s in result.steps])
    path = np.zeros(len(table), dtype=[*table.dtype.descr[:2], ("alpha", "f8"), *table.dtype.descr[2:]])
    for name in table.dtype.names or ():
        path[name] = table[name]
    path["alpha"] = alpha_col
    return path


def config_of(
    estimator: object,
    alphas: Sequence[float] | np.ndarray | None,
    balanced: bool | np.ndarray,
    *,
    n_features: int | None = None,
) -> SelectionConfig:
    """The :class:`SelectionConfig` of a streamridge estimator's parameters.

    ``scoring`` enters the config when it is computed from the statistics
    (``"r2"``, ``"correlation"`` of a regressor; other metrics take the metric
    pass).  ``bands`` and ``band_weights`` are checked here
    (:func:`~streamridge.model_selection.bands.check_bands`) for ``n_features``
    (default: the estimator's statistics' features).
    """
    g = estimator.__dict__
    scoring = g.get("scoring")
    from_stats = (
        scoring if scoring in STATS_SCORINGS and not getattr(estimator, "_classifier", False) else None
    )
    bands = None
    if g.get("bands") is not None or g.get("band_weights") is not None:
        n = int(g["stats_"].n_features) if n_features is None else int(n_features)
        bands = check_bands(
            g.get("bands"), g.get("band_weights"), n, seed=int(g.get("random_state") or 0),
            feature_map=g.get("features_"), selection=g["selection"], prefixes=g.get("feature_prefixes"),
            scoring=scoring,
        )  # fmt: skip
    return SelectionConfig(
        fit_intercept=bool(g["fit_intercept"]),
        standardize=bool(g["standardize"]),
        balanced=balanced,
        alphas=None if alphas is None else np.asarray(alphas, dtype=np.float64),
        solver=str(g["solver"]),
        one_se=g["alpha_rule"] == "1se",
        per_target=bool(g["alpha_per_target"]),
        selection=g["selection"],
        max_features=g["max_features"],
        min_features=g["min_features"],
        force=tuple(int(f) for f in (g["force_features"] or ())),
        patience=g["patience"],
        prefixes=g.get("feature_prefixes"),
        scoring=from_stats,
        rescore=g.get("rescore") if from_stats is not None else None,
        bands=bands,
        max_bytes=solve_bytes(g.get("solve_memory")),
    )
