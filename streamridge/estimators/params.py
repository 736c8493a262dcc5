"""Declarative checks of the estimators' parameters, run once when a fit starts.

Each parameter of :class:`~streamridge.StreamRidgeCV` and
:class:`~streamridge.StreamRidgeClassifierCV` has one constraint in
:data:`REGRESSOR_CONSTRAINTS` / :data:`CLASSIFIER_CONSTRAINTS` (the classes'
``_parameter_constraints``, as scikit-learn's).  A value a constraint refuses is
a one-line :class:`~streamridge.errors.ParameterError` naming the parameter and
the value, ``"alphas must be positive and finite; got alphas=[-1.0]"``.
Parameters whose rules live where they are used (the lambda grid, ``cv``, the
scoring names, the feature maps) are checked by those packages' own functions,
whose messages have the same form.  Rules between parameters (``rescore`` needs
``selection`` and ``scoring``, ...) are :func:`check_relations`.

Nothing here imports scikit-learn: the command line fits without it.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from streamridge.datapass.scheduling import StartingCluster
from streamridge.errors import ParameterError
from streamridge.folds.splits import check_cv, is_splits
from streamridge.model_selection.bands import STATS_SCORINGS, check_bands
from streamridge.model_selection.batches import solve_bytes
from streamridge.model_selection.metrics import check_scoring
from streamridge.model_selection.nested import check_nested
from streamridge.solvers import SOLVERS
from streamridge.solvers.grid import check_alphas

SCORING_NEEDS_ROWS = (
    "scoring= needs a second pass over the rows; fit on the data, not on statistics alone (or drop scoring)"
)
NOT_WITH_SPLITS = (
    "{} is not supported yet with explicit splits (cv= a splitter or (train, test) pairs); "
    "use cv=K, 'groups' or 'blocks', or drop {}"
)


@dataclass(frozen=True)
class Rule:
    """A parameter's accepted values: ``accepts(value)``, and ``text`` completing "NAME must be ...".

    Refused: ``ParameterError("NAME must be TEXT; got NAME=VALUE")``.
    """

    text: str
    accepts: Callable[[Any], bool]

    def check(self, name: str, value: Any) -> None:
        """Raise :class:`ParameterError` unless ``value`` is accepted."""
        if not self.accepts(value):
            raise ParameterError(f"{name} must be {self.text}; got {name}={value!r}")


@dataclass(frozen=True)
class Checked:
    """A parameter checked by the function of the package that uses the value.

    ``check_value(value)`` raises a one-line :class:`ParameterError` naming the
    parameter and the value (e.g. :func:`streamridge.solvers.grid.check_alphas`).
    """

    check_value: Callable[[Any], object]

    def check(self, name: str, value: Any) -> None:
        """Raise :class:`ParameterError` unless ``value`` is accepted."""
        self.check_value(value)


Constraint = Rule | Checked


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _is_bool(value: Any) -> bool:
    return isinstance(value, (bool, np.bool_))


def options(*values: str | None) -> Rule:
    """One of ``values`` (strings, or None): "'min' or '1se'"."""
    words = ["None" if v is None else repr(v) for v in values]
    text = words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"
    return Rule(text, lambda v: (v is None and None in values) or (isinstance(v, str) and v in values))


def integer(low: int, *, optional: bool = False, why: str = "") -> Rule:
    """An integer >= ``low`` (a NumPy integer too, never a bool); ``optional``: or None."""
    text = f"an integer >= {low}{f' ({why})' if why else ''}{' or None' if optional else ''}"
    return Rule(text, lambda v: (optional and v is None) or (_is_int(v) and v >= low))


BOOLEAN = Rule("True or False", _is_bool)


def _integers(value: Any, low: int) -> list[Any] | None:
    """The items of a list, tuple or 1-D array of integers >= ``low`` (None if it is not one; never consumed)."""
    if not isinstance(value, (Sequence, np.ndarray)) or isinstance(value, (str, bytes)):
        return None
    items = list(value)
    return items if all(_is_int(n) and n >= low for n in items) else None


def _feature_indices(value: Any) -> bool:
    """Distinct integers >= 0 (feature indices; their range is checked with the features)."""
    items = _integers(value, 0)
    return items is not None and len({int(f) for f in items}) == len(items)


def _prefix_sizes(value: Any) -> bool:
    """A non-empty list of integers >= 1 (their range is checked with the features of the model)."""
    return bool(_integers(value, 1))


def _scheduler(value: Any) -> bool:
    """A scheduler spec of :mod:`streamridge.datapass.scheduling`: None, a string, a started cluster or a Client."""
    client = hasattr(value, "scheduler_info") and hasattr(value, "submit")
    return value is None or isinstance(value, (str, StartingCluster)) or client


def _bands(value: Any) -> bool:
    """None, ``"concat"``, a mapping name -> columns or a list of columns (each band is checked with the features)."""
    if isinstance(value, str):
        return value == "concat"
    return value is None or isinstance(value, (Mapping, Sequence, np.ndarray))


def _band_weights(value: Any) -> bool:
    """None, an int or an array of weight vectors (their number and shape are checked with the bands)."""
    array = isinstance(value, (Sequence, np.ndarray)) and not isinstance(value, str)
    return value is None or _is_int(value) or array


def row_scoring(scoring: str | None, *, classifier: bool) -> bool:
    """Whether ``scoring`` needs the metric pass over the rows (all but R² and correlation of a regressor)."""
    return scoring is not None and (classifier or scoring not in STATS_SCORINGS)


def _features(value: Any) -> None:
    """None, a feature map of :mod:`streamridge.features` or a list of candidate maps, with valid parameters."""
    if value is None:
        return
    from streamridge.estimators.mapped import check_map  # scikit-learn's transformers: imported with a map

    check_map(value)


def _solver(value: Any) -> None:
    """A name in the solver registry as it is now (:data:`streamridge.solvers.SOLVERS`)."""
    options(*SOLVERS).check("solver", value)


def _alphas(value: Any) -> None:
    if value is not None:
        check_alphas(value)


def check_class_weight(value: Any) -> None:
    """None, ``"balanced"``, or a dict of label to a finite weight >= 0.

    Raises
    ------
    ParameterError
    """
    if value is None or (isinstance(value, str) and value == "balanced"):
        return
    if not isinstance(value, dict):
        raise ParameterError(
            f"class_weight must be None, 'balanced' or a dict {{label: weight}}; got class_weight={value!r}"
        )
    for weight in value.values():
        real = isinstance(weight, numbers.Real) and not _is_bool(weight)
        if not real:
            raise ParameterError(
                f"class_weight must map labels to numbers (weights); got class_weight={value!r}"
            )
        if not (np.isfinite(float(weight)) and float(weight) >= 0):
            raise ParameterError(f"class_weight values must be non-negative; got class_weight={value!r}")


def _common(*, classifier: bool) -> dict[str, Constraint]:
    """The constraints of the parameters both estimators have, in the constructors' order."""
    return {
        "alphas": Checked(_alphas),
        "cv": Checked(check_cv),
        "fit_intercept": BOOLEAN,
        "standardize": BOOLEAN,
        "alpha_per_target": BOOLEAN,
        "random_state": Rule(
            "an integer or None (the seed of the fold hash)", lambda v: v is None or _is_int(v)
        ),
        "solver": Checked(_solver),
        "alpha_rule": options("min", "1se"),
        "n_blocks": integer(2, why="the folds of cv='blocks'"),
        "selection": options(None, "forward", "backward", "op-rr"),
        "max_features": integer(1, optional=True),
        "min_features": integer(1, optional=True),
        "force_features": Rule(
            "None or a list of distinct feature indices (integers >= 0)",
            lambda v: v is None or _feature_indices(v),
        ),
        "patience": integer(1, optional=True),
        "chunk_rows": integer(1, optional=True),
        "scheduler": Rule(
            "None, 'threads', 'processes', 'sync', 'local:N', a scheduler address or a distributed.Client",
            _scheduler,
        ),
        "checkpoint": Rule(
            "None or a directory path", lambda v: v is None or isinstance(v, (str, os.PathLike))
        ),
        "progress": Rule(
            "True, False or a callable taking the rows done", lambda v: _is_bool(v) or callable(v)
        ),
        "skip_nonfinite": BOOLEAN,
        "features": Checked(_features),
        "feature_prefixes": Rule(
            "None or a non-empty list of integers >= 1", lambda v: v is None or _prefix_sizes(v)
        ),
        "nested": BOOLEAN,
        "scoring": Checked(lambda v: check_scoring(v, classifier=classifier)),
        "rescore": integer(1, optional=True, why="steps of the path to re-score"),
        "bands": Rule(
            "None, a list of feature index arrays or slices, a dict name -> columns, or 'concat'", _bands
        ),
        "band_weights": Rule(
            "None, an int (weight vectors to sample) or an array of shape (n_samples, n_bands)", _band_weights
        ),
        "solve_memory": Checked(solve_bytes),
    }


REGRESSOR_CONSTRAINTS: dict[str, Constraint] = _common(classifier=False)
CLASSIFIER_CONSTRAINTS: dict[str, Constraint] = {
    **_common(classifier=True),
    "class_weight": Checked(check_class_weight),
}


class EstimatorParams:
    """The constructor parameters of the estimators: declared, read, set and checked.

    ``get_params`` / ``set_params`` serve the scikit-learn-free classes of
    :mod:`streamridge.estimators.core`; the public estimators put scikit-learn's
    ``BaseEstimator`` first in their bases, whose own serve them.  ``_parameter_constraints``
    (set by each class) holds one constraint per parameter; :meth:`_check_params` checks
    them when a fit starts.
    """

    _classifier = False
    _model_name = "StreamRidgeCV"  # the public class of this model: model files and messages name it
    _parameter_constraints: dict[str, Constraint]

    # the constructor's parameters (set by the classes of streamridge.estimators.core)
    alphas: Any
    cv: Any
    fit_intercept: bool
    standardize: bool
    alpha_per_target: bool
    random_state: Any
    solver: str
    alpha_rule: str
    n_blocks: int
    selection: str | None
    max_features: int | None
    min_features: int | None
    force_features: Any
    patience: int | None
    chunk_rows: int | None
    scheduler: Any
    checkpoint: Any
    progress: Any
    skip_nonfinite: bool
    features: Any
    feature_prefixes: Any
    nested: bool
    scoring: str | None
    rescore: int | None
    bands: Any
    band_weights: Any
    solve_memory: Any

    @classmethod
    def _param_names(cls) -> list[str]:
        import inspect

        sig = inspect.signature(cls.__init__)
        return sorted(p.name for p in sig.parameters.values() if p.name != "self" and p.kind != p.VAR_KEYWORD)

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor's parameters (as scikit-learn's; nested maps' parameters are not expanded)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> Any:
        """Set constructor parameters by name; unknown names are refused."""
        names = self._param_names()
        for name, value in params.items():
            if name not in names:
                raise ParameterError(
                    f"invalid parameter {name!r} for {self._model_name}; valid parameters: {names}"
                )
            setattr(self, name, value)
        return self

    def _check_params(self) -> None:
        """Every parameter against its constraint, then the rules between them (:func:`check_params`)."""
        params = {name: getattr(self, name) for name in self._parameter_constraints}
        check_params(params, self._parameter_constraints, classifier=self._classifier)


def check_params(
    params: Mapping[str, Any], constraints: Mapping[str, Constraint], *, classifier: bool
) -> None:
    """Check every parameter against its constraint, then the rules between parameters.

    Parameters
    ----------
    params : mapping of name to value
        The estimator's constructor parameters (all of those in ``constraints``).
    constraints : mapping of name to Rule or Checked
    classifier : bool
        Whether the estimator is the classifier (the rules between parameters differ).

    Raises
    ------
    ParameterError
        One line naming the parameter and the value.
    """
    for name, constraint in constraints.items():
        constraint.check(name, params[name])
    check_relations(params, classifier=classifier)


def check_relations(params: Mapping[str, Any], *, classifier: bool) -> None:
    """Refuse combinations of valid parameters that cannot be honoured together.

    Raises
    ------
    ParameterError
    """
    cv, selection, scoring = params["cv"], params["selection"], params["scoring"]
    if params["feature_prefixes"] is not None and selection is not None:
        raise ParameterError(
            "feature_prefixes and selection cannot be combined; choose the prefix size or select features"
        )
    if params["nested"]:
        if _is_int(cv):
            check_nested(int(cv))
        if is_splits(cv):
            raise ParameterError(NOT_WITH_SPLITS.format("nested=True", "nested"))
    if row_scoring(scoring, classifier=classifier) and is_splits(cv):
        raise ParameterError(NOT_WITH_SPLITS.format("scoring=", "scoring"))
    if scoring is not None and classifier and params["alpha_per_target"]:
        raise ParameterError("scoring= chooses one lambda for all classes; drop alpha_per_target or scoring")
    if params["rescore"] is None:
        return
    if selection is None:
        raise ParameterError(
            "rescore re-scores steps of a selection path; set selection= (--select) or drop rescore"
        )
    if scoring is None:
        raise ParameterError(
            "rescore needs the metric to re-score by; set scoring= (--scoring) or drop rescore"
        )


def check_selection(
    params: Mapping[str, Any],
    scheme: Any,
    n_classes: int | None,
    n_features: int,
    *,
    classifier: bool,
    feature_map: Any = None,
) -> None:
    """Refuse, before any pass, the model selection options that the folds, classes or features rule out.

    ``nested=True`` with fewer than 3 folds, a two-class ``scoring`` with more classes,
    ``feature_prefixes`` beyond the features of the model (a map's output width),
    ``bands`` and ``band_weights`` that do not fit the features (or ``feature_map``,
    the fitted map, for ``bands="concat"``): each is known from the fold scheme, the labels and the map before a row is
    accumulated.  ``scheme`` None (``partial_fit``, whose folds grow with the
    series): the fold count is checked when the model is selected.

    Parameters
    ----------
    params : mapping
        The estimator's ``nested``, ``scoring``, ``feature_prefixes``, ``bands``,
        ``band_weights``, ``random_state`` and ``selection``.
    scheme : FoldScheme or None
    n_classes : int or None
        A classifier's classes (None: not known yet, or a regressor).
    n_features : int
        Features of the model.
    """
    if params["nested"] and scheme is not None and scheme.kind != "splits":
        check_nested(scheme.n_folds)
    if n_classes is not None:
        check_scoring(params["scoring"], classifier=classifier, n_classes=n_classes)
    if params["feature_prefixes"] is not None:
        from streamridge.selection.prefixes import check_prefixes

        check_prefixes(params["feature_prefixes"], n_features)
    check_bands(
        params["bands"], params["band_weights"], n_features, seed=int(params["random_state"] or 0),
        feature_map=feature_map, selection=params["selection"], prefixes=params["feature_prefixes"],
        scoring=params["scoring"],
    )  # fmt: skip


def check_candidates(
    features: Any,
    *,
    partial: bool,
    shard: bool,
    nested: bool,
    scoring: Any,
    checkpoint: Any,
    bands: Any = None,
) -> None:
    """Refuse, before any pass, what candidate feature maps (``features`` a list) cannot do."""
    if not isinstance(features, (list, tuple)):
        return
    refused = (
        (partial, "partial_fit", "fit with all rows"),
        (shard, "compute_stats", "compute the statistics of one map (a fit's chosen features_)"),
        (nested, "nested=True", "drop nested, or nest the fit of one map"),
        (scoring is not None, "scoring=", "drop scoring; the candidates are chosen by squared error"),
        (checkpoint is not None, "checkpoint=", "drop checkpoint"),
        (bands is not None, "bands=", "drop bands, or fit banded ridge on one map"),
    )
    for on, what, fix in refused:
        if on:
            raise ParameterError(f"{what} cannot be used with a list of candidate feature maps; {fix}")
