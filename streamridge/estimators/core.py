"""The estimators without scikit-learn: what ``streamridge fit`` runs.

:class:`RidgeCVCore` and :class:`RidgeClassifierCVCore` hold the constructors, ``fit``,
``partial_fit`` and ``predict`` of :class:`~streamridge.StreamRidgeCV` and
:class:`~streamridge.StreamRidgeClassifierCV`, which add scikit-learn's ``BaseEstimator``
and mixins (tags, ``score``, cloning, deep parameters).  The command line fits these
classes directly from sources, so a ``fit`` does not import scikit-learn (about 0.65 s
of CPU); model files name the public class and load as it.
"""

from __future__ import annotations

from typing import Any, Self

import numpy as np

from streamridge.errors import ParameterError
from streamridge.estimators.base import StreamRidgeBase
from streamridge.estimators.params import CLASSIFIER_CONSTRAINTS, REGRESSOR_CONSTRAINTS
from streamridge.folds.schemes import plain

_PREFIX_ATTRS = ("prefix_sizes_", "prefix_errors_", "prefix_alphas_", "n_features_selected_")


class RidgeCVCore(StreamRidgeBase):
    """Ridge regression with exact K-fold lambda search (the parameters: see :class:`~streamridge.StreamRidgeCV`)."""

    _parameter_constraints = REGRESSOR_CONSTRAINTS

    def __init__(
        self,
        alphas=None,
        *,
        cv=5,
        fit_intercept=True,
        standardize=False,
        alpha_per_target=False,
        random_state=0,
        solver="eigen",
        alpha_rule="min",
        n_blocks=5,
        selection=None,
        max_features=None,
        min_features=None,
        force_features=None,
        patience=None,
        chunk_rows=None,
        scheduler=None,
        checkpoint=None,
        progress=False,
        skip_nonfinite=False,
        features=None,
        feature_prefixes=None,
        nested=False,
        scoring=None,
        rescore=None,
        bands=None,
        band_weights=None,
        solve_memory=None,
    ):  # type: ignore[no-untyped-def]
        self.alphas = alphas
        self.cv = cv
        self.fit_intercept = fit_intercept
        self.standardize = standardize
        self.alpha_per_target = alpha_per_target
        self.random_state = random_state
        self.solver = solver
        self.alpha_rule = alpha_rule
        self.n_blocks = n_blocks
        self.selection = selection
        self.max_features = max_features
        self.min_features = min_features
        self.force_features = force_features
        self.patience = patience
        self.chunk_rows = chunk_rows
        self.scheduler = scheduler
        self.checkpoint = checkpoint
        self.progress = progress
        self.skip_nonfinite = skip_nonfinite
        self.features = features
        self.feature_prefixes = feature_prefixes
        self.nested = nested
        self.scoring = scoring
        self.rescore = rescore
        self.bands = bands
        self.band_weights = band_weights
        self.solve_memory = solve_memory

    def fit(self, X: Any, y: Any = None, groups: Any = None, sample_weight: Any = None) -> Self:
        """Stream over the rows once, then choose lambda by K-fold CV and fit on all rows.

        Parameters
        ----------
        X : array of shape (n_samples, n_features), dask array, Source or path
        y : array of shape (n_samples,) or (n_samples, n_targets), or None with a source
        groups : array of shape (n_samples,) or None
        sample_weight : array of shape (n_samples,) or None
        """
        for attr in (
            "stats_",
            "selection_path_",
            "selected_features_",
            "selection_best_step_",
            *_PREFIX_ATTRS,
        ):
            self.__dict__.pop(attr, None)
        return self._fit(X, y, groups, sample_weight, partial=False)

    def partial_fit(self, X: Any, y: Any = None, groups: Any = None, sample_weight: Any = None) -> Self:
        """Add rows (global row indices continue across calls) and refit from the merged statistics.

        With ``cv="groups"`` each new group id adds a fold (a call may hold one series).
        """
        return self._fit(X, y, groups, sample_weight, partial=True)

    def predict(self, X: Any, groups: Any = None, *, split: bool = False) -> Any:
        """Predictions of shape (n_samples,) or (n_samples, n_targets).

        ``groups`` (series id per row) matters only for a stateful feature map.
        ``split=True`` (a model fitted with ``bands``): each band's part, shape
        (n_bands, n_samples[, n_targets]), without the intercept: the sum over
        bands plus ``intercept_`` is the prediction.
        """
        if split:
            from streamridge.estimators.split import predict_split

            return predict_split(self, X, groups)
        return self._shape_predictions(self._linear(X, groups))

    def _shape_predictions(self, out: Any) -> Any:
        return out[:, 0] if self._y_1d else out


class RidgeClassifierCVCore(StreamRidgeBase):
    """Ridge classifier, one-vs-rest (the parameters: see :class:`~streamridge.StreamRidgeClassifierCV`)."""

    _classifier = True
    _model_name = "StreamRidgeClassifierCV"
    _parameter_constraints = CLASSIFIER_CONSTRAINTS

    def __init__(
        self,
        alphas=None,
        *,
        cv=5,
        fit_intercept=True,
        standardize=False,
        alpha_per_target=False,
        class_weight=None,
        random_state=0,
        solver="eigen",
        alpha_rule="min",
        n_blocks=5,
        selection=None,
        max_features=None,
        min_features=None,
        force_features=None,
        patience=None,
        chunk_rows=None,
        scheduler=None,
        checkpoint=None,
        progress=False,
        skip_nonfinite=False,
        features=None,
        feature_prefixes=None,
        nested=False,
        scoring=None,
        rescore=None,
        bands=None,
        band_weights=None,
        solve_memory=None,
    ):  # type: ignore[no-untyped-def]
        self.alphas = alphas
        self.cv = cv
        self.fit_intercept = fit_intercept
        self.standardize = standardize
        self.alpha_per_target = alpha_per_target
        self.class_weight = class_weight
        self.random_state = random_state
        self.solver = solver
        self.alpha_rule = alpha_rule
        self.n_blocks = n_blocks
        self.selection = selection
        self.max_features = max_features
        self.min_features = min_features
        self.force_features = force_features
        self.patience = patience
        self.chunk_rows = chunk_rows
        self.scheduler = scheduler
        self.checkpoint = checkpoint
        self.progress = progress
        self.skip_nonfinite = skip_nonfinite
        self.features = features
        self.feature_prefixes = feature_prefixes
        self.nested = nested
        self.scoring = scoring
        self.rescore = rescore
        self.bands = bands
        self.band_weights = band_weights
        self.solve_memory = solve_memory

    def _balanced(self) -> bool | np.ndarray:
        """``class_weight`` (checked with the parameters) for the forms: a bool, or the factor of each class."""
        cw = self.class_weight
        if not isinstance(cw, dict):
            return cw == "balanced"
        return np.array([float(cw.get(plain(c), 1.0)) for c in self._labels])

    def fit(self, X: Any, y: Any = None, groups: Any = None, sample_weight: Any = None) -> Self:
        """Stream over the rows once, choose lambda by K-fold CV and fit; see StreamRidgeCV.fit."""
        for attr in (
            "stats_",
            "selection_path_",
            "selected_features_",
            "selection_best_step_",
            *_PREFIX_ATTRS,
        ):
            self.__dict__.pop(attr, None)
        return self._fit(X, y, groups, sample_weight, partial=False)

    def partial_fit(
        self, X: Any, y: Any = None, groups: Any = None, sample_weight: Any = None, classes: Any = None
    ) -> Self:
        """Add rows; ``classes`` (all labels) is required on the first call."""
        if not hasattr(self, "stats_") and classes is None:
            raise ParameterError(
                "classes must be passed on the first call to partial_fit (all labels that will occur)"
            )
        return self._fit(X, y, groups, sample_weight, classes, partial=True)

    @property
    def classes_(self) -> np.ndarray:
        """Class labels, sorted."""
        self._check_fitted()
        return np.asarray(self._labels)

    def decision_function(self, X: Any, groups: Any = None) -> Any:
        """Scores of shape (n_samples,) for two classes, else (n_samples, n_classes)."""
        return self._shape_scores(self._linear(X, groups))

    def predict(self, X: Any, groups: Any = None) -> Any:
        """Class labels (``groups``: series ids for a stateful feature map)."""
        return self._labels_of(self.decision_function(X, groups))

    def _labels_of(self, scores: Any) -> Any:
        classes = self.classes_
        idx = (scores > 0).astype(int) if scores.ndim == 1 else scores.argmax(axis=1)
        if hasattr(scores, "dask"):
            return idx.map_blocks(lambda i: classes[i], dtype=classes.dtype)
        return classes[idx]

    @staticmethod
    def _shape_scores(out: Any) -> Any:
        return out[:, 0] if out.shape[1] == 1 else out
