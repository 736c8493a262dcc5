"""The one model selection: the feature set and lambda chosen from per-fold forms.

An estimator's fit calls :func:`choose_model` on the forms of all K folds;
nested cross-validation (:func:`streamridge.model_selection.nested.nested_cv`) calls the very
same function on the forms of the K - 1 other folds of every outer fold.
What it runs depends on the :class:`SelectionConfig`:

.. code-block:: text

    alphas = the grid given, or default_alphas(full.A)
    feature_prefixes:  (prefix size, lambda) by CV             streamridge.selection.prefixes
    selection:         forward / backward / OP-RR path and      streamridge.selection
                       its stopping rule -> feature set S
    otherwise:         S = all features
    lambda = choose(fold_errors(forms restricted to S))       streamridge.solvers.grid.choose

with ``alpha_rule="1se"`` (``one_se``), ``alpha_per_target`` (``per_target``)
and class weights (``balanced``, applied when the forms are built) as the
estimator's parameters say.  The result, a :class:`Choice`, holds the chosen
set and lambda, the fold errors of the chosen set and the selection or prefix
result it came from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from streamridge.forms.build import Forms, FullForm
from streamridge.solvers import fold_errors
from streamridge.solvers.grid import check_alphas, choose, default_alphas

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
    """

    support: np.ndarray
    alphas: np.ndarray
    index: np.ndarray
    errors: np.ndarray
    selection: SelectionResult | None = None
    prefixes: PrefixResult | None = None

    @property
    def alpha(self) -> float | np.ndarray:
        """Chosen lambda: a float, or one per target."""
        a = self.alphas[self.index]
        return float(a) if np.ndim(a) == 0 else np.asarray(a)


def choose_model(forms: Forms, full: FullForm, cfg: SelectionConfig) -> Choice:
    """The model selection of the estimators on one set of folds.

    Parameters
    ----------
    forms : Forms
        Per-fold forms of the folds to select on.
    full : FullForm
        Training form of all their rows (the default grid and OP-RR's ranking).
    cfg : SelectionConfig

    Returns
    -------
    Choice
        With ``errors`` of shape (R, K, T): the fold errors of the chosen set;
        ``selection`` set when ``cfg.selection`` ran, ``prefixes`` when ``cfg.prefixes`` did.

    Raises
    ------
    ParameterError
        For invalid ``alphas`` or ``prefixes``.
    """
    alphas = default_alphas(full.A) if cfg.alphas is None else check_alphas(cfg.alphas)
    if cfg.prefixes is not None:
        return _choose_prefix(forms, alphas, cfg)
    if cfg.selection is None:
        E = fold_errors(forms, alphas, solver=cfg.solver)
        return Choice(np.ones(full.A.shape[0], dtype=bool), alphas, _choose_alpha(E, alphas, cfg), E)
    path = selection_path(forms, full, alphas, cfg)
    support = np.asarray(path.support, dtype=bool)
    E = fold_errors(forms.subset(np.flatnonzero(support)), alphas, solver=cfg.solver)
    return Choice(support, alphas, _choose_alpha(E, alphas, cfg), E, selection=path)


def _choose_alpha(E: np.ndarray, alphas: np.ndarray, cfg: SelectionConfig) -> np.ndarray:
    """Index of the chosen lambda of fold errors E of shape (R, K, T) (:func:`streamridge.solvers.grid.choose`)."""
    return np.asarray(choose(E, alphas, per_target=cfg.per_target, one_se=cfg.one_se))


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
    estimator: object, alphas: Sequence[float] | np.ndarray | None, balanced: bool | np.ndarray
) -> SelectionConfig:
    """The :class:`SelectionConfig` of a streamridge estimator's parameters."""
    g = estimator.__dict__
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
    )
