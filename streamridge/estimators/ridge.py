"""scikit-learn compatible estimators: validate, run the pass, dispatch to the solvers.

The estimators own no numerics: :mod:`streamridge.datapass.driver` computes
:class:`~streamridge.stats.foldstats.FoldStats`, :mod:`streamridge.forms.build` turns them into
per-fold quadratic forms and :mod:`streamridge.solvers` / :mod:`streamridge.selection`
score lambdas and feature sets.
"""

from __future__ import annotations

from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin

from streamridge.estimators.core import RidgeClassifierCVCore, RidgeCVCore
from streamridge.stats.foldstats import FoldStats

__all__ = ["FoldStats", "StreamRidgeCV", "StreamRidgeClassifierCV"]

_COMMON_DOC = """
    Parameters
    ----------
    alphas : array-like of shape (n_alphas,) or None
        Grid of regularization strengths (positive).  None: a log-spaced grid
        of 50 values from 1e-6 to 1e3 times the mean eigenvalue of X'X.
    cv : int, "groups", "blocks", scikit-learn splitter or iterable of (train, test)
        K folds by a seeded hash of the global row index (of the group id when
        ``groups`` are given), one fold per group, or ``n_blocks`` contiguous blocks.
        A splitter (KFold, StratifiedKFold, GroupKFold, LeaveOneGroupOut,
        PredefinedSplit, TimeSeriesSplit, ...; ``split(X, y, groups)`` is called
        once) or (train, test) index arrays give an explicit fold per row: the
        test sets must be disjoint, and every training set all rows outside its
        test set (K-fold) or all rows before it (forward chaining, as
        TimeSeriesSplit).  Rows in no test set are trained on and never
        validated.  Splits that are not of these forms (ShuffleSplit, a
        TimeSeriesSplit gap) are refused; ``fit`` only, not ``partial_fit``.
        See docs/folds.md.
    fit_intercept : bool
        Unpenalized intercept, computed exactly per training fold.
    standardize : bool
        Scale features by the training part's standard deviation (ddof=0);
        lambda applies to the scaled coefficients, ``coef_`` is in original units.
    alpha_per_target : bool
        One lambda per target (sharing each fold's eigendecomposition).
    random_state : int
        Seed of the fold hash.
    solver : {"eigen", "covariance"}
        Eigen method (one eigendecomposition per fold) or one solve per lambda and fold.
    alpha_rule : {"min", "1se"}
        Smallest summed CV error (ties to the larger lambda) or the one-standard-error rule.
    n_blocks : int
        Number of folds for ``cv="blocks"``.
    selection : {None, "forward", "backward", "op-rr"}
        Feature selection with lambda re-chosen for every feature set.
    max_features, min_features : int or None
        Stop the selection path early.
    force_features : sequence of int or None
        Features that always stay in the model.
    patience : int or None
        Stop the selection path after this many steps without improvement.
    chunk_rows : int or None
        Rows per partition (task) of the data pass, rounded to whole stored
        chunks (None: about 64 MB of X per partition).
    scheduler : None, "threads", "processes", "sync", "local:N", address or Client
        Where the data pass runs.
    checkpoint : path or None
        Directory for a resumable pass: completed chunks are saved every few
        seconds; refitting with the same data and options resumes (``fit`` only).
    progress : bool
        Show a progress bar during the pass (and during the metric pass of ``scoring``).
    skip_nonfinite : bool
        Drop rows with NaN/inf instead of failing.
    features : FeatureMap or None
        A map from :mod:`streamridge.features` (e.g. ``EchoStateNetwork(500)``)
        applied to X chunk by chunk inside the pass; ``predict`` takes raw inputs
        and applies it.  An unfitted map is fitted on the data (``features_``).
    feature_prefixes : sequence of int or None
        Choose the number of leading features n and lambda jointly by the same
        K-fold CV (one pass; one eigendecomposition per fold and prefix).
    nested : bool
        Also run nested cross-validation from the same statistics (K >= 3
        folds): for every outer fold, the whole model selection on the other
        folds, scored on that fold (:mod:`streamridge.model_selection.nested`).
    scoring : str or None
        Choose lambda by this metric, the mean over folds of its per-fold value
        (scikit-learn's scorer names).  "r2" and "correlation" (Pearson's r,
        per target) of a regressor are computed from the statistics, with no
        pass over the rows, for one lambda per target or one for all, plain or
        banded.  The others ("neg_mean_absolute_error", "neg_mean_squared_error",
        "neg_root_mean_squared_error", "explained_variance"; classifiers
        "accuracy", "balanced_accuracy", "f1", "f1_macro", "f1_micro",
        "f1_weighted", "precision", "recall", "roc_auc") take one extra pass
        over the rows (:mod:`streamridge.model_selection.scoring`), with any
        feature map (a stateful one runs every series in row order again,
        washout rows left out, as in the statistics pass).  None: squared error.
    rescore : int or None
        With ``selection`` and ``scoring``: re-score the ``rescore`` best steps
        of the path by the metric (in the same extra pass) and keep the best.
    bands : list of index arrays or slices, dict name -> columns, "concat" or None
        Banded ridge: the feature columns of every band (feature space), every
        feature in exactly one band; "concat" takes one band per part of a
        ``Concat`` feature map.  A weight vector gamma (one entry per band)
        multiplies band b's features by sqrt(gamma_b), so its penalty is
        lambda / gamma_b; the weight vector and lambda are chosen together by
        the same K-fold CV, per target with ``alpha_per_target``, from the
        statistics (no extra pass).  See docs/guide/encoding.md.
    band_weights : int, array of shape (n_samples, n_bands) or None
        The weight vectors searched with ``bands``: an int samples that many
        on the simplex (the equal weights, each band alone, then Dirichlet
        samples seeded by ``random_state``, as himalaya's ``BandedRidgeCV``);
        an array gives them; None samples 20 (at least one more than the bands).
    solve_memory : int, str or None
        Memory of one batch of targets' per-fold forms in the model selection
        and the final solve, in bytes or as "2GB"; many targets are scored and
        solved in batches of this size.  None: 1 GiB.
"""


class StreamRidgeCV(RegressorMixin, BaseEstimator, RidgeCVCore):
    __doc__ = (
        "Ridge regression with exact K-fold lambda search from streamed statistics.\n"
        + _COMMON_DOC
        + """
    Attributes
    ----------
    coef_ : array of shape (n_features,) or (n_targets, n_features)
    intercept_ : float or array of shape (n_targets,)
    alpha_ : float or array of shape (n_targets,)
    alphas_ : array of shape (n_alphas,)
    cv_errors_ : array of shape (n_alphas,) or (n_alphas, n_targets)
        Validation squared error summed over all folds.
    fold_errors_ : array of shape (n_alphas, n_folds, n_targets)
    n_folds_ : int
        Folds that are validated (explicit splits may add one train-only fold to ``stats_``).
    stats_ : FoldStats
    feature_names_ : array of str
        Feature names read from the data source or statistics (when it has them).
        ``feature_names_in_`` is set only for DataFrame input, as in scikit-learn.
    support_ : array of bool of shape (n_features,)
        Features of the final model (all unless ``selection``).
    selected_features_ : array of int
        With ``selection``: the final set, most important first.
    selection_path_ : structured array
        With ``selection``: per step the feature added/removed, set size, lambda,
        CV error and its standard error (step 0 is the starting set).
    nested_cv_errors_ : array of shape (n_folds,) or (n_folds, n_targets)
        With ``nested=True``: squared error on each outer fold of the model
        selected and fitted on the other folds.
    nested_summary_ : dict
        With ``nested=True``: nested CV error, per-fold mean and spread, the
        plain CV error of the chosen model and how far it lies below
        (:func:`streamridge.model_selection.nested.nested_summary`).
    cv_scores_ : array of shape (n_alphas, n_folds) or (n_alphas, n_folds, n_targets)
        With ``scoring``: the metric per lambda and fold (per target for
        several regression targets) of the chosen feature set (with ``bands``:
        of each target's chosen weight vector).
    bands_ : list of arrays of int
        With ``bands``: the feature columns of every band.
    band_names_ : list of str
        With ``bands``: the dict's keys, the Concat parts' maps, or band0, band1, ...
    band_weights_ : array of shape (n_targets, n_bands) or (n_bands,)
        With ``bands``: the chosen weight vector of every target (one for all
        without ``alpha_per_target``, or for 1-D y).
    band_weight_candidates_ : array of shape (n_samples, n_bands)
        With ``bands``: the weight vectors searched.
    band_scores_ : array of shape (n_samples, n_targets) or (n_samples,)
        With ``bands``: each weight vector's mean score over folds (squared
        error without ``scoring``) at its best lambda, per target (summed over
        targets for one choice).
    band_fold_scores_ : array of shape (n_samples, n_alphas, n_folds, n_targets)
        With ``bands``: every score, when they fit in 256 MB (else only ``band_scores_``).
    rescore_steps_, rescore_scores_ : arrays of shape (rescore,)
        With ``rescore``: the path steps re-scored and their mean score.
    timings_ : dict
    features_ : FeatureMap
        With ``features``: the fitted map.
    prefix_sizes_, prefix_errors_, prefix_alphas_ : arrays of shape (n_prefixes,)
        With ``feature_prefixes``: the sizes, the CV error (summed over folds and
        targets) at each size's best lambda, and that lambda.
    n_features_selected_ : int
        With ``feature_prefixes``: the chosen size (``support_`` is its first n features).
    """
    )

    def __sklearn_tags__(self):  # type: ignore[no-untyped-def]
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    def score(self, X, y, sample_weight=None, *, split=False, groups=None):  # type: ignore[no-untyped-def]
        """R² of ``predict(X)`` (scikit-learn's ``score``), or with ``split=True`` R² per band and target.

        ``split=True`` (a model fitted with ``bands``; no ``sample_weight``):
        array of shape (n_bands, n_targets), or (n_bands,) for 1-D y, the
        product measure of himalaya's ``r2_score_split`` on y and the band
        predictions centered over the rows; the sum over bands is the R² when
        the prediction's mean over the rows equals y's.  X may be a dask array
        (y then a dask or NumPy array), scored one chunk of rows at a time.
        ``groups`` (series id per row) matters only for a stateful feature map.
        """
        if not split:
            if groups is not None:
                from sklearn.metrics import r2_score

                return r2_score(y, self.predict(X, groups), sample_weight=sample_weight)
            return super().score(X, y, sample_weight=sample_weight)
        if sample_weight is not None:
            from streamridge.errors import ParameterError

            raise ParameterError("score(split=True) takes no sample_weight; drop it or split=True")
        from streamridge.estimators.split import score_split

        return score_split(self, X, y, groups)


class StreamRidgeClassifierCV(ClassifierMixin, BaseEstimator, RidgeClassifierCVCore):
    __doc__ = (
        "Ridge classifier (targets +1/-1 per class, one-vs-rest) with exact K-fold lambda search.\n"
        + _COMMON_DOC
        + """
    class_weight : None, "balanced" or dict
        "balanced" is class-reweighted ridge regression (CRRR): in every training
        and validation part each row of class c gets weight n_part / (C n_part,c),
        with n the sample-weight sums (row counts when unweighted), as
        scikit-learn's ``compute_class_weight(..., sample_weight=)``.
        A dict {label: weight} gives fixed per-class weights.

    Attributes
    ----------
    classes_ : array of shape (n_classes,)
    coef_ : array of shape (1, n_features) for two classes, else (n_classes, n_features)
    intercept_ : array of shape (1,) or (n_classes,)
    alpha_, alphas_, cv_errors_, fold_errors_, n_folds_, stats_ : see StreamRidgeCV
    nested_cv_errors_, nested_summary_ : see StreamRidgeCV (``nested=True``)
    cv_scores_, rescore_steps_, rescore_scores_ : see StreamRidgeCV (``scoring``)
    cv_confusion_ : array of shape (n_folds, n_classes, n_classes)
        With ``scoring``: weighted confusion counts [true, predicted] per fold
        of the chosen model (per-class error, balanced error rate).
    """
    )
