"""The shared machinery of the estimators: input validation, the pass, model selection.

:class:`StreamRidgeBase` validates parameters and input, fixes folds and classes on
the first call, runs the data pass (:mod:`streamridge.datapass.driver`), builds the forms
(:mod:`streamridge.forms.build`), hands them to the one model selection
(:func:`streamridge.model_selection.choose.choose_model`, which nested CV calls too)
and sets the fitted attributes of its choice (:mod:`streamridge.model_selection.attributes`).
The public classes live in :mod:`streamridge.estimators.ridge`.

Nothing here imports scikit-learn at module level: the command line fits with the
scikit-learn-free classes of :mod:`streamridge.estimators.core` (data from sources only), and
scikit-learn's input validation is imported where in-memory arrays are validated.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np

from streamridge._version import __version__
from streamridge.datapass.driver import PassReport, PassSpec, accumulate
from streamridge.datapass.scheduling import scheduler_session
from streamridge.errors import FoldError, InputError, ParameterError
from streamridge.folds.schemes import FoldScheme, make_scheme, plain
from streamridge.folds.splits import check_cv, is_splits, split_folds, with_folds
from streamridge.forms.build import Forms
from streamridge.model_selection import choose as model_choice
from streamridge.model_selection.attributes import CHOICE_ATTRS, METRIC_ATTRS, choice_attributes
from streamridge.model_selection.band_split import cv_split_r2
from streamridge.model_selection.bands import STATS_SCORINGS, check_bands
from streamridge.model_selection.batches import selection_forms, solve_bytes
from streamridge.model_selection.choose import Choice, SelectionConfig, config_of, path_table
from streamridge.model_selection.metrics import check_scoring
from streamridge.model_selection.nested import check_nested, chosen_cv_error, nested_cv, nested_summary
from streamridge.model_selection.refit import refit
from streamridge.parallel import solve_stage_limits
from streamridge.solvers import fold_errors
from streamridge.solvers.grid import check_alphas
from streamridge.stats.foldstats import FoldStats, merge
from streamridge.stats.memory import check_stats_memory
from streamridge.stats.series_spans import describe_rows, find_clash

_SELECTIONS = (None, "forward", "backward", "op-rr")
_SCORING_NEEDS_ROWS = (
    "scoring= needs a second pass over the rows; fit on the data, not on statistics alone (or drop scoring)"
)
_NOT_WITH_SPLITS = (
    "{} is not supported yet with explicit splits (cv= a splitter or (train, test) pairs); "
    "use cv=K, 'groups' or 'blocks', or drop {}"
)


def _features_json(fmap: Any) -> dict[str, Any]:
    from streamridge.features import to_json

    return to_json(fmap)


def _check_folds(stats: FoldStats, partial: bool) -> None:
    """Refuse, when the model is selected, statistics whose folds cannot be cross-validated yet.

    Leave-one-group-out statistics need 2 groups; after ``partial_fit`` every fold needs rows.
    Batches and shards are not checked: one of them may hold a single series.
    """
    scheme = stats.meta.get("scheme") or {}
    fix = "call partial_fit with more rows before predicting" if partial else "merge statistics of more groups"
    if scheme.get("kind") == "logo" and stats.n_folds < 2:
        raise FoldError(f"cv='groups' needs at least 2 distinct groups; got {stats.n_folds} so far; {fix}")
    if partial and stats.count.sum(axis=1).min() == 0:
        raise FoldError(f"after {stats.n_rows} sample(s) some of the {stats.n_folds} folds are still empty; {fix}")


AFFINE_TILE_BYTES = 2**20  # float64 rows converted at a time by _affine (they stay in cache for the product)


def _affine(X: Any, coef: np.ndarray, intercept: np.ndarray) -> np.ndarray:
    """``X @ coef.T + intercept`` in float64: (m, outputs).

    Rows of another dtype are converted a tile of ``AFFINE_TILE_BYTES`` at a
    time into one buffer: no float64 copy of the whole block (4x faster for
    50,000 x 200 float32 rows, the same products row by row).
    """
    X = np.asarray(X)
    coef = np.asarray(coef, dtype=np.float64)
    if X.dtype == np.float64 or X.ndim != 2 or X.shape[0] == 0:
        return np.asarray(X, dtype=np.float64) @ coef.T + intercept
    m, n = X.shape
    step = max(1, AFFINE_TILE_BYTES // (8 * max(n, 1)))
    out = np.empty((m, coef.shape[0]))
    tile = np.empty((min(step, m), n))
    for s in range(0, m, step):
        e = min(m, s + step)
        np.copyto(tile[: e - s], X[s:e])
        np.matmul(tile[: e - s], coef.T, out=out[s:e])
    out += intercept
    return out


def _slice_rows(src: Any, start: int, stop: int) -> Any:
    """The same source restricted to rows [start, stop)."""

    if hasattr(src, "select_rows"):
        return src.select_rows(start, stop)
    sl = {n: None if getattr(src, n) is None else getattr(src, n)[start:stop] for n in ("X", "y", "groups", "sample_weight")}
    desc = f"{getattr(src, 'description', 'data')} rows {start}:{stop}"
    if dataclasses.is_dataclass(src):
        return dataclasses.replace(src, description=desc, **sl)  # type: ignore[type-var]
    return type(src)(**{**vars(src), **sl})


def _stateful(spec: PassSpec) -> bool:
    """Whether the pass runs a stateful feature map (its statistics record their series' rows)."""
    return spec.features is not None and bool(spec.features.stateful)


def _check_label_type(y: np.ndarray) -> None:
    """Refuse continuous (or otherwise unknown) in-memory labels in one line, as scikit-learn does."""
    from sklearn.utils.multiclass import check_classification_targets

    try:
        check_classification_targets(y)
    except ValueError as exc:
        raise InputError(" ".join(str(exc).split())) from None


def _check_distinct_labels(labels: np.ndarray) -> None:
    """Refuse the distinct values of a lazy y that are not class labels, without scikit-learn.

    The distinct values' type is the labels' type, so this is scikit-learn's
    ``check_classification_targets`` on 1-D labels, with its messages: non-integral
    (or non-finite) floats, complex numbers, bytes, objects that are not strings.
    scikit-learn's warning for more distinct labels than half the rows does not
    apply here (every value occurs at least once in the distinct values).
    """
    kind = labels.dtype.kind
    unknown = "Unknown label type: {}. Maybe you are trying to fit a classifier, which expects discrete classes on a regression target with continuous values."
    if kind == "S" or (kind == "O" and labels.size and isinstance(labels.flat[0], bytes)):
        raise InputError("Support for labels represented as bytes is not supported. Convert the labels to a string or integer format.")
    if kind == "c":
        raise InputError("Complex data not supported; class labels must be integers or strings")
    if kind == "O" and labels.size and not isinstance(labels.flat[0], str):
        raise InputError(unknown.format("unknown"))
    if kind == "f":
        if not np.all(np.isfinite(labels)):
            what = "NaN" if np.any(np.isnan(labels)) else "infinity or a value too large for dtype('float64')"
            raise InputError(f"Input y contains {what}.")
        if np.any(labels != labels.astype(np.int64).astype(labels.dtype)):
            raise InputError(unknown.format("continuous"))


def _is_lazy(a: Any) -> bool:
    """Data that goes through open_source (dask arrays, Sources, paths, zarr groups, h5py files/groups)."""
    storage = type(a).__module__.split(".")[0] in ("zarr", "h5py") and type(a).__name__ in ("Group", "File")
    return a is not None and (hasattr(a, "dask") or type(a).__name__ == "Source" or isinstance(a, str) or storage)


class StreamRidgeBase:
    """Shared fit/partial_fit/solve logic of the regressor and the classifier.

    ``get_params`` / ``set_params`` are those of the scikit-learn-free classes
    (:mod:`streamridge.estimators.core`); the public estimators put ``BaseEstimator`` first
    in their bases, so scikit-learn's own (deep parameters, validation) serve them.
    """

    _classifier = False
    _model_name = "StreamRidgeCV"  # the public class of this model: model files and messages name it

    stats_: FoldStats
    _spec: PassSpec

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
    scoring: str | None
    rescore: int | None
    bands: Any
    band_weights: Any
    solve_memory: Any

    def _balanced(self) -> bool | np.ndarray:
        return False

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
                raise ParameterError(f"invalid parameter {name!r} for {self._model_name}; valid parameters: {names}")
            setattr(self, name, value)
        return self

    def _validate_X(self, X: Any, *, reset: bool, **kw: Any) -> Any:
        """In-memory X checked as scikit-learn does (``n_features_in_``, feature names where it can).

        The public estimators use ``validate_data``; the classes of :mod:`streamridge.estimators.core`
        (no scikit-learn tags) get the same array checks and feature count.
        """
        from sklearn.utils.validation import check_array, validate_data

        if hasattr(self, "__sklearn_tags__"):
            return validate_data(self, X, reset=reset, dtype="numeric", **kw)
        X = check_array(X, dtype="numeric", **kw)
        if reset:
            self.n_features_in_ = int(X.shape[1])
        elif X.shape[1] != self.n_features_in_:
            raise InputError(f"X has {X.shape[1]} features, but {self._model_name} is expecting {self.n_features_in_} features as input")
        return X

    def _check_fitted(self) -> None:
        if not hasattr(self, "coef_"):
            from sklearn.utils.validation import check_is_fitted

            check_is_fitted(self, "coef_")  # scikit-learn's NotFittedError

    # ------------------------------------------------------------------ validation
    def _check_params(self) -> None:
        if self.alphas is not None:
            check_alphas(self.alphas)
        check_cv(self.cv)
        if self.solver not in ("eigen", "covariance"):
            raise ParameterError(f"solver must be 'eigen' or 'covariance'; got solver={self.solver!r}")
        if self.alpha_rule not in ("min", "1se"):
            raise ParameterError(f"alpha_rule must be 'min' or '1se'; got alpha_rule={self.alpha_rule!r}")
        if self.selection not in _SELECTIONS:
            raise ParameterError(
                f"selection must be one of {_SELECTIONS}; got selection={self.selection!r}"
            )
        if self.chunk_rows is not None and int(self.chunk_rows) < 1:
            raise ParameterError(f"chunk_rows must be >= 1; got chunk_rows={self.chunk_rows}")
        solve_bytes(getattr(self, "solve_memory", None))
        self._check_feature_params()
        self._check_nested()
        self._check_scoring()

    # ------------------------------------------------------------------ feature maps (streamridge.features)
    def _check_feature_params(self) -> None:
        if getattr(self, "features", None) is not None:  # the feature maps are scikit-learn transformers
            from streamridge.estimators.mapped import check_map

            check_map(self.features)
        if getattr(self, "feature_prefixes", None) is not None and self.selection is not None:
            raise ParameterError("feature_prefixes and selection cannot be combined; choose the prefix size or select features")

    def _fit_features(self, src: Any) -> Any:
        """The fitted feature map of this fit (None without ``features``); sets ``features_``, ``feature_names_``."""
        self.__dict__.pop("features_", None)
        if getattr(self, "features", None) is None:
            return None
        from streamridge.estimators.mapped import fit_map

        self.features_ = fit_map(self.features, src.X, src.groups)
        self.feature_names_ = self.features_.get_feature_names_out()
        return self.features_

    def _row_scoring(self) -> bool:
        """Whether ``scoring`` needs the metric pass over the rows (all but R² and correlation of a regressor)."""
        scoring = getattr(self, "scoring", None)
        return scoring is not None and (self._classifier or scoring not in STATS_SCORINGS)

    def _check_scoring(self) -> None:
        scoring, rescore = getattr(self, "scoring", None), getattr(self, "rescore", None)
        check_scoring(scoring, classifier=self._classifier)
        if self._row_scoring() and is_splits(self.cv):
            raise ParameterError(_NOT_WITH_SPLITS.format("scoring=", "scoring"))
        if scoring is not None and self._classifier and self.alpha_per_target:
            raise ParameterError("scoring= chooses one lambda for all classes; drop alpha_per_target or scoring")
        if rescore is None:
            return
        if isinstance(rescore, (bool, np.bool_)) or not isinstance(rescore, (int, np.integer)) or rescore < 1:
            raise ParameterError(f"rescore must be an integer >= 1 (steps of the path to re-score); got rescore={rescore!r}")
        if self.selection is None:
            raise ParameterError("rescore re-scores steps of a selection path; set selection= (--select) or drop rescore")
        if scoring is None:
            raise ParameterError("rescore needs the metric to re-score by; set scoring= (--scoring) or drop rescore")

    def _check_nested(self) -> None:
        nested = getattr(self, "nested", False)
        if not isinstance(nested, (bool, np.bool_)):
            raise ParameterError(f"nested must be True or False; got nested={nested!r}")
        if nested and isinstance(self.cv, (int, np.integer)):
            check_nested(int(self.cv))
        if nested and is_splits(self.cv):
            raise ParameterError(_NOT_WITH_SPLITS.format("nested=True", "nested"))

    def _encode_labels(self, y: np.ndarray, classes: Any, *, reset: bool) -> np.ndarray:
        """Integer codes of in-memory labels (sets ``_labels`` on the first call)."""
        _check_label_type(y)
        if reset:
            labels = np.unique(y) if classes is None else np.unique(np.asarray(classes))
            if labels.shape[0] < 2:
                raise InputError(f"y has only one class ({labels.tolist()}); a classifier needs at least two classes")
            self._labels = labels
        labels = self._labels
        codes = np.clip(np.searchsorted(labels, y), 0, len(labels) - 1)
        unknown = labels[codes] != y
        if np.any(unknown):
            raise InputError(
                f"labels {np.unique(y[unknown])[:5].tolist()} are not among classes {labels.tolist()}; "
                "pass all classes (classes=) on the first partial_fit"
            )
        return codes

    def _source(self, X: Any, y: Any, groups: Any, sample_weight: Any, *, reset: bool, labels: Any = None) -> Any:
        from streamridge.sources import open_source

        if _is_lazy(X):
            src = open_source(X, y=y if y is not None else "y", groups=groups, sample_weight=sample_weight, chunk_rows=self.chunk_rows)
            if reset:
                self.n_features_in_ = src.n_features()
                if src.feature_names:
                    self.feature_names_ = np.asarray(src.feature_names, dtype=object)
            elif src.n_features() != self.n_features_in_:
                raise InputError(
                    f"X has {src.n_features()} features, but {self._model_name} is expecting "
                    f"{self.n_features_in_} features as input"
                )
            return src
        from sklearn.utils.validation import check_array, check_consistent_length, column_or_1d

        if y is None:
            raise ValueError(f"{self._model_name} requires y to be passed, but the target y is None")
        # finiteness is checked chunk by chunk in the pass (errors name the rows; skip_nonfinite drops them)
        X = self._validate_X(X, reset=reset, ensure_all_finite=False)
        y = check_array(
            y, ensure_2d=False, dtype=None if self._classifier else "numeric", ensure_all_finite=False,
            input_name="y", ensure_min_samples=0,
        )
        check_consistent_length(X, y)
        if y.ndim > 2:
            raise InputError(f"y must be 1-D or 2-D (n_samples, n_targets); got shape {y.shape}")
        if self._classifier:
            y = self._encode_labels(column_or_1d(y, warn=True), labels, reset=reset)
        if sample_weight is not None:
            sample_weight = np.asarray(sample_weight, dtype=np.float64)
            if sample_weight.ndim == 0:
                sample_weight = np.full(X.shape[0], float(sample_weight))
            if sample_weight.shape != (X.shape[0],):
                raise InputError(
                    f"sample_weight has shape {sample_weight.shape}; expected ({X.shape[0]},), one weight per row"
                )
        if groups is not None:
            groups = np.asarray(groups).reshape(-1)
            if groups.shape[0] != X.shape[0]:
                raise InputError(f"groups has {groups.shape[0]} entries for {X.shape[0]} rows of X")
        return open_source(X, y=y, groups=groups, sample_weight=sample_weight, chunk_rows=self.chunk_rows)

    def _scheme(self, src: Any, *, partial: bool, shard: bool = False) -> tuple[FoldScheme, np.ndarray | None]:
        """The fold scheme and, for explicit splits, the fold id of every row.

        A ``partial_fit`` batch or a shard may hold a single series: its folds are
        checked when the model is selected, not here.
        """
        cv = self.cv
        if is_splits(cv):
            if partial:
                raise ParameterError(
                    "cv given as splits fixes the fold of every row of one data set; partial_fit cannot add "
                    "rows to it; use fit, or cv=K with partial_fit"
                )
            return split_folds(cv, src, int(self.random_state or 0))
        return self._rule_scheme(src, partial=partial, batch=partial or shard), None

    def _rule_scheme(self, src: Any, *, partial: bool, batch: bool) -> FoldScheme:
        n = src.n_rows()
        cv = self.cv
        has_groups = src.shape("groups") is not None
        if cv == "blocks" and partial:
            raise ParameterError("cv='blocks' needs the row count up front; partial_fit takes cv=K")
        K = self.n_blocks if cv == "blocks" else (None if cv == "groups" else int(cv))
        if cv != "groups" and K is not None and n < K:
            raise FoldError(f"got {n} sample(s) but cv={cv} needs at least {K} rows, one per fold; use fewer folds")
        gv = None
        if cv == "groups":
            if not has_groups:
                raise ParameterError("cv='groups' needs groups (one id per row)")
            gv = src.distinct("groups")
        scheme = make_scheme(
            cv, seed=int(self.random_state or 0), has_groups=has_groups, n_rows=n, group_values=gv,
            n_blocks=self.n_blocks, min_groups=1 if batch else 2,
        )
        if scheme.kind == "group" and not batch:
            n_groups = len(src.distinct("groups"))
            if n_groups < scheme.n_folds:
                raise FoldError(f"got {n_groups} distinct groups but cv={cv} needs at least {scheme.n_folds}; use fewer folds")
        return scheme

    def _classes(self, src: Any, classes: Any = None) -> tuple[Any, ...] | None:
        if not self._classifier:
            return None
        if classes is None:
            shape = src.shape("y")
            if len(shape) == 2 and shape[1] != 1:
                raise InputError(f"a classifier needs 1-D class labels y; got y of shape {shape}")
            labels = src.distinct("y")
            _check_distinct_labels(labels)
        else:
            labels = np.unique(np.asarray(classes))
        if labels.shape[0] < 2:
            raise InputError(
                f"y has only one class ({labels.tolist()}); a classifier needs at least two classes"
            )
        return tuple(labels.tolist())

    # ------------------------------------------------------------------ public API
    def _fit(self, X: Any, y: Any, groups: Any, sample_weight: Any, classes: Any = None, *, partial: bool) -> Any:
        report = PassReport()
        if partial and self._row_scoring():
            raise ParameterError("scoring= needs all rows in one pass; use fit, not partial_fit (or drop scoring)")
        self._check_params()
        with self._pass_session():
            return self._fit_pass(X, y, groups, sample_weight, classes, partial=partial, report=report)

    @contextlib.contextmanager
    def _pass_session(self) -> Iterator[None]:
        """Every pass inside the block (statistics, metric) uses one scheduler; ``local:N`` starts now.

        Its worker processes start while the data is opened and the pass planned
        (:func:`streamridge.datapass.scheduling.scheduler_session`); :meth:`_scheduler` returns it.
        """
        with scheduler_session(self.scheduler) as scheduler:
            self._session_scheduler = scheduler
            try:
                yield
            finally:
                self.__dict__.pop("_session_scheduler", None)

    def _fit_pass(self, X: Any, y: Any, groups: Any, sample_weight: Any, classes: Any, *, partial: bool, report: PassReport) -> Any:
        stats = self._run_pass(X, y, groups, sample_weight, classes, partial=partial, report=report)
        self._features_state = report.extra.get("features_state")  # a series continued by the next partial_fit
        if partial and hasattr(self, "stats_"):
            # leave-one-group-out: new series add folds; a stateful map ran on from the last call's state
            stats = merge(self.stats_, stats, continues=_stateful(self._spec))
            self._spec = dataclasses.replace(self._spec, scheme=FoldScheme.from_dict(stats.meta["scheme"]))
        self.stats_ = stats
        _check_folds(stats, partial)
        try:
            return self._fit_stats(stats, report)
        finally:
            self.__dict__.pop("_pass_source", None)  # the metric pass's handle on the rows, never kept

    def compute_stats(
        self, X: Any, y: Any = None, groups: Any = None, sample_weight: Any = None, *, rows: tuple[int, int] | None = None
    ) -> FoldStats:
        """Run only the data pass and return its statistics (no model selection).

        Parameters
        ----------
        X, y, groups, sample_weight : as in ``fit``
        rows : (start, stop) or None
            Process only this row range of the data (a shard).  Folds are those of
            the whole data (global row indices), so the statistics of disjoint
            shards merge (:func:`streamridge.merge`) into those of one pass.

        Returns
        -------
        FoldStats
            With ``meta["row_ranges"] = [[start, stop]]``.
        """
        report = PassReport()
        try:
            with self._pass_session():
                stats = self._run_pass(X, y, groups, sample_weight, None, partial=False, report=report, rows=rows, shard=True)
        finally:
            self.__dict__.pop("_pass_source", None)
        self.timings_ = {
            "pass_s": report.seconds, "rows": report.rows, "rows_per_s": report.rows_per_s, "solve_s": 0.0,
            "peak_rss_mb": report.extra.get("peak_rss_mb"),
        }
        return stats

    def _run_pass(
        self, X: Any, y: Any, groups: Any, sample_weight: Any, classes: Any, *, partial: bool, report: PassReport,
        rows: tuple[int, int] | None = None, shard: bool = False,
    ) -> FoldStats:
        """Validate the input, fix folds/classes on the first call and accumulate statistics."""
        self._check_params()
        first = not (partial and hasattr(self, "stats_"))
        src = self._source(X, y, groups, sample_weight, reset=first, labels=classes)
        if src.shape("y") is None:
            raise InputError("no target y was given or found in the data source; pass y")
        if first:
            if self._classifier and not _is_lazy(X):
                labels: tuple[Any, ...] | None = tuple(range(len(self._labels)))
            else:
                labels = self._classes(src, classes)
                if labels is not None:
                    self._labels = np.asarray(labels)
            scheme, fold_ids = self._scheme(src, partial=partial, shard=shard)
            n_targets = self._n_targets(src, labels)
            n_model, mapped_by = src.n_features(), None
            if getattr(self, "features", None) is not None:  # the map's declared width: checked before it is drawn
                from streamridge.estimators.mapped import declared_width

                n_model, mapped_by = declared_width(self.features, src.n_features())
            check_stats_memory(
                scheme.n_folds, 1 if labels is None else len(labels), n_model, n_targets, len(src.row_chunks()),
                mapped_by=mapped_by,
            )
            features = self._fit_features(src)  # before explicit fold ids can take the groups column
            if fold_ids is not None:
                src = with_folds(src, scheme, fold_ids, series=features is not None and features.stateful)
            n_model = src.n_features() if features is None else int(features.n_features_out_)
            if not shard:  # statistics only (a shard): no model is selected from them here
                self._check_selection(None if partial else scheme, None if labels is None else len(labels), n_model)
            self._spec = PassSpec(scheme, labels, n_targets, bool(self.skip_nonfinite), features, open_end=partial)
            self._y_1d = (len(src.shape("y")) == 1) if labels is None else True
            offset, spans = 0, None
        else:
            if self._spec.scheme.kind == "splits":
                raise ParameterError(
                    "these statistics use folds from explicit cv splits; partial_fit cannot add rows to them; "
                    "refit with all rows"
                )
            if self._classifier and classes is not None and not np.array_equal(np.unique(np.asarray(classes)), self._labels):
                raise ParameterError(f"classes changed between partial_fit calls: {self._labels.tolist()} vs {np.unique(classes).tolist()}")
            if not self._classifier and (len(src.shape("y")) == 1) != self._y_1d:
                raise InputError("y changed between 1-D and 2-D across partial_fit calls")
            offset = int(self.stats_.meta.get("rows_seen", self.stats_.n_rows))
            spans = self._continued_spans(src, offset)  # before any change: a refused call changes nothing
            if self._spec.scheme.kind == "logo":  # this batch's series are its folds; merged by group id
                self._spec = dataclasses.replace(self._spec, scheme=self._rule_scheme(src, partial=True, batch=True))
            if self._spec.features is not None and self._spec.features.stateful:
                self._spec = dataclasses.replace(self._spec, features_state=getattr(self, "_features_state", None))
        n = src.n_rows()
        if rows is not None:
            start, stop = int(rows[0]), min(int(rows[1]), n)
            if not 0 <= start < stop:
                raise ParameterError(f"rows must be START:STOP with 0 <= START < STOP <= {n}; got {rows[0]}:{rows[1]}")
            if self._spec.features is not None:
                from streamridge.estimators.mapped import check_shard_start

                check_shard_start(self._spec.features, src.groups, start)
            src = _slice_rows(src, start, stop)
            offset = start
            if self._spec.scheme.kind == "logo":  # a shard's folds are its own series; shards merge by group id
                self._spec = dataclasses.replace(self._spec, scheme=self._rule_scheme(src, partial=False, batch=True))
        if not partial:
            self._pass_source = (src, offset)  # for the metric pass (scoring=); dropped after the fit
        meta = self._meta(src)
        meta["row_ranges"] = [[offset, offset + src.n_rows()]]
        if _stateful(self._spec):
            from streamridge.estimators.mapped import series_spans

            meta["series_spans"] = series_spans(src, offset) if spans is None else spans
        with warnings.catch_warnings():
            # float64 overflow of the co-moments is reported by the solve stage as one ScaleError line
            warnings.filterwarnings("ignore", r"(overflow|invalid value|underflow) encountered", RuntimeWarning)
            return accumulate(
                src, self._spec, row_offset=offset, scheduler=self._scheduler(), progress=self.progress, meta=meta, report=report,
                checkpoint=None if partial else self.checkpoint,
            )

    def _check_selection(self, scheme: FoldScheme | None, n_classes: int | None, n_features: int) -> None:
        """Refuse, before any pass, the model selection options that the folds, classes or features rule out.

        ``nested=True`` with fewer than 3 folds, a two-class ``scoring`` with more classes,
        ``feature_prefixes`` beyond the features of the model (a map's output width):
        each is known from the fold scheme, the labels and the map before a row is
        accumulated.  ``scheme`` None (``partial_fit``, whose folds grow with the
        series): the fold count is checked when the model is selected.
        """
        if getattr(self, "nested", False) and scheme is not None and scheme.kind != "splits":
            check_nested(scheme.n_folds)
        if n_classes is not None:
            check_scoring(getattr(self, "scoring", None), classifier=self._classifier, n_classes=n_classes)
        if getattr(self, "feature_prefixes", None) is not None:
            from streamridge.selection.prefixes import check_prefixes

            check_prefixes(self.feature_prefixes, n_features)
        self._check_bands(n_features)

    def _check_bands(self, n_features: int) -> None:
        """``bands`` and ``band_weights`` checked as the model selection will (before a pass reads a row)."""
        check_bands(
            getattr(self, "bands", None), getattr(self, "band_weights", None), n_features,
            seed=int(self.random_state or 0), feature_map=self.__dict__.get("features_"),
            selection=self.selection, prefixes=getattr(self, "feature_prefixes", None),
            scoring=getattr(self, "scoring", None),
        )  # fmt: skip

    def _continued_spans(self, src: Any, offset: int) -> list[list[Any]] | None:
        """The series spans of a ``partial_fit`` call with a stateful map (None without one).

        Raises
        ------
        InputError
            A series of the call came in an earlier call and did not end it (the map would
            restart it from rest).
        """
        from streamridge.estimators.mapped import series_spans

        if not _stateful(self._spec):
            return None
        spans = series_spans(src, offset)
        clash = find_clash(self.stats_.meta.get("series_spans") or [], spans, continues=True)
        if clash is not None:
            series, early, late = clash
            raise InputError(
                f"series {series!r} starts again at row {late[1]} ({describe_rows(late)} of this partial_fit "
                f"call) after its {describe_rows(early)} in an earlier call; a stateful feature map carries "
                "only the series that ended the previous call into the next and would restart this one from "
                "rest; give each series' rows contiguously and in time order (sort the data by series, then time)"
            )
        return spans

    def _scheduler(self) -> Any:
        """The scheduler of this fit's passes: a cluster started by :func:`scheduler_session`, or ``scheduler``."""
        return self.__dict__.get("_session_scheduler", self.scheduler)

    def _n_targets(self, src: Any, labels: Any) -> int:
        if labels is not None:
            return 1 if len(labels) == 2 else len(labels)
        shape = src.shape("y")
        return 1 if len(shape) == 1 else int(shape[1])

    def _meta(self, src: Any) -> dict[str, Any]:
        """Metadata of the pass's statistics (with a feature map: the fitted map, so a model fitted from them has it)."""
        spec = self._spec
        return {
            "scheme": spec.scheme.to_dict(),
            "classes": None if spec.classes is None else [plain(c) for c in self._labels],
            "n_features": src.n_features() if spec.features is None else spec.features.n_features_out_,
            "n_targets": spec.n_targets,
            "task": "classification" if self._classifier else "regression",
            "feature_names": (list(src.feature_names) if getattr(src, "feature_names", None) else None)
            if spec.features is None else [str(n) for n in spec.features.get_feature_names_out()],
            "target_names": list(src.target_names) if getattr(src, "target_names", None) else None,
            "y_1d": bool(self._y_1d),
            "streamridge_version": __version__,
            **({} if spec.features is None else {"features": _features_json(spec.features)}),
            "source": str(getattr(src, "description", "") or "") or None,
        }

    def fit_stats(self, stats: FoldStats) -> Any:
        """Model selection and final fit from precomputed statistics (no pass over rows).

        Parameters
        ----------
        stats : FoldStats
            E.g. from :func:`streamridge.stats.foldstats.load_stats` or a merge of shards.
        """
        self._check_params()
        if self._row_scoring():
            raise ParameterError(_SCORING_NEEDS_ROWS)
        task = stats.meta.get("task", "regression")
        if (task == "classification") != self._classifier:
            fix = "StreamRidgeClassifierCV (--classify)" if task == "classification" else "StreamRidgeCV (no --classify)"
            raise ParameterError(f"these statistics are for {task}; fit them with {fix}")
        classes = stats.meta.get("classes")
        scheme = FoldScheme.from_dict(stats.meta["scheme"]) if "scheme" in stats.meta else FoldScheme("hash", stats.n_folds)
        if classes is not None:
            self._labels = np.asarray(classes)
        self._spec = PassSpec(scheme, None if classes is None else tuple(range(len(classes))) if stats.meta.get("classes_encoded", True) else tuple(classes), stats.n_targets)
        self._y_1d = bool(stats.meta.get("y_1d", stats.n_targets == 1))
        self.n_features_in_ = stats.n_features
        if stats.meta.get("feature_names"):
            self.feature_names_ = np.asarray(stats.meta["feature_names"], dtype=object)
        self.__dict__.pop("features_", None)
        if stats.meta.get("features") is not None:  # statistics of a map's features: the model applies the map
            from streamridge.features import from_json

            self.features_ = from_json(stats.meta["features"])
            self.n_features_in_ = int(self.features_.n_features_in_)
        self.stats_ = stats
        _check_folds(stats, False)
        self._check_selection(self._spec.scheme, None if classes is None else len(classes), stats.n_features)
        self.__dict__.pop("_pass_source", None)
        return self._fit_stats(stats, PassReport())

    def _fit_stats(self, stats: FoldStats, report: PassReport) -> Any:
        try:
            with solve_stage_limits(stats.n_features):
                return self._select_and_fit(stats, report)
        finally:
            self.__dict__.pop("_pass_source", None)  # the metric pass's handle on the rows is never kept

    def _select_and_fit(self, stats: FoldStats, report: PassReport) -> Any:
        t0 = time.perf_counter()
        if self._spec.scheme.kind == "splits":  # statistics of explicit splits (fit_stats)
            for on, what, name in (
                (getattr(self, "nested", False), "nested=True", "nested"),
                (self._row_scoring(), "scoring=", "scoring"),
            ):
                if on:
                    raise ParameterError(_NOT_WITH_SPLITS.format(what, name))
        if stats.n_rows > 0 and stats.weight.sum() <= 0:
            raise InputError("sample_weight is zero for every row; give some rows a positive weight")
        if self._classifier and int((stats.weight.sum(axis=0) > 0).sum()) < 2:
            raise InputError(
                "only one class has rows with positive sample weight; a classifier needs at least two classes"
            )
        scheme = self._spec.scheme
        config = config_of(self, self.alphas, self._balanced(), n_features=stats.n_features)
        forms, full = selection_forms(
            stats, config, train_only=scheme.train_only, forward=scheme.forward, whole=self._row_scoring()
        )
        if self.alpha_rule == "1se" and forms.n_folds < 2:
            raise ParameterError(
                "alpha_rule='1se' needs at least 2 validated folds (for its standard error); these cv splits validate 1"
            )
        choice = model_choice.choose_model(forms, full, config)
        if choice.banded is not None:
            choice = dataclasses.replace(choice, band_r2=cv_split_r2(forms, choice))
        metric: dict[str, Any] = {}
        metric_s = 0.0
        if self._row_scoring():
            t1 = time.perf_counter()
            choice, metric = self._choose_by_metric(stats, forms, choice, config)
            metric_s = time.perf_counter() - t1
        coef, intercept = refit(full if isinstance(forms, Forms) else forms, choice)
        self._set_fitted(
            {**choice_attributes(choice, one_output=self._y_1d and not self._classifier), **metric},
            coef,
            intercept,
        )
        self._fit_nested(
            stats, forms if isinstance(forms, Forms) else None, config,
            chosen_cv_error(choice.errors, choice.index, config.per_target),
        )  # fmt: skip
        self.timings_ = {
            "pass_s": report.seconds,
            "rows": report.rows,
            "rows_per_s": report.rows_per_s,
            "solve_s": time.perf_counter() - t0 - metric_s,
            "peak_rss_mb": report.extra.get("peak_rss_mb"),
        }
        if metric_s:
            self.timings_["metric_pass_s"] = metric_s
        return self

    def _choose_by_metric(
        self, stats: FoldStats, forms: Any, choice: Choice, config: SelectionConfig
    ) -> tuple[Choice, dict[str, Any]]:
        """Lambda (and with ``rescore`` the path step) of ``choice`` re-chosen by ``scoring`` from one metric pass.

        Returns the new :class:`Choice` and the metric's fitted attributes
        (``cv_scores_``; ``cv_confusion_`` of a classifier; ``rescore_steps_``,
        ``rescore_scores_`` with ``rescore``); see :mod:`streamridge.model_selection.scoring`.
        """
        from streamridge.model_selection.scoring import (
            best_steps,
            path_supports,
            select_by_metric,
            selected_order,
        )

        src = self.__dict__.pop("_pass_source", None)
        if src is None:
            raise ParameterError(_SCORING_NEEDS_ROWS)
        check_scoring(self.scoring, classifier=self._classifier, n_classes=stats.n_classes)
        supports, steps, path = [choice.support], None, None
        if self.rescore is not None and choice.selection is not None:
            path, N = path_table(choice.selection), stats.n_features
            steps = best_steps(
                path, int(self.rescore), int(config.min_features or 0), int(config.max_features or N)
            )
            every = path_supports(
                path, "backward" if config.selection == "backward" else "forward", N, config.force
            )
            supports = [every[i] for i in steps]
        res = select_by_metric(
            src[0],
            self._spec,
            stats,
            forms,
            choice.alphas,
            supports,
            str(self.scoring),
            per_target=config.per_target,
            one_se=config.one_se,
            row_offset=src[1],
            scheduler=self._scheduler(),
            progress=self.progress,
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

    def _fit_nested(self, stats: FoldStats, forms: Forms | None, config: SelectionConfig, cv_error: float) -> None:
        """With ``nested=True``: nested CV from the same statistics and the same config (:mod:`streamridge.model_selection.nested`)."""
        for attr in ("nested_cv_errors_", "nested_summary_"):
            self.__dict__.pop(attr, None)
        if not getattr(self, "nested", False):
            return
        res = nested_cv(stats, config, outer=forms)
        one = self._y_1d and not self._classifier
        self.nested_cv_errors_ = res.errors[:, 0] if one else res.errors
        self.nested_summary_ = nested_summary(res, cv_error)

    def _set_fitted(self, attrs: dict[str, Any], coef: np.ndarray, intercept: np.ndarray) -> None:
        """Set the fitted attributes of the chosen model (``attrs``) and its coefficients; drop stale ones."""
        for attr in (*CHOICE_ATTRS, *METRIC_ATTRS):
            self.__dict__.pop(attr, None)
        for name, value in attrs.items():
            setattr(self, name, value)
        one = self._y_1d and not self._classifier  # like y: 1-D coef_ and a float intercept_
        b: float | np.ndarray = float(intercept[0]) if one else intercept
        if not self.fit_intercept:
            b = 0.0 if one else np.zeros_like(intercept)
        self.coef_ = coef[0] if one else coef
        self.intercept_ = b

    def _linear(self, X: Any, groups: Any = None) -> Any:
        self._check_fitted()
        if getattr(self, "features_", None) is not None:
            return self._linear_mapped(X, groups)
        if _is_lazy(X) and not isinstance(X, str):
            if X.shape[1] != self.n_features_in_:
                raise InputError(f"X has {X.shape[1]} features, but {self._model_name} is expecting {self.n_features_in_} features as input")
            coef = np.atleast_2d(self.coef_)
            b = np.atleast_1d(self.intercept_)  # the tasks hold these, not the estimator (its statistics)
            return X.map_blocks(lambda a: _affine(a, coef, b), dtype=np.float64, chunks=(X.chunks[0], (coef.shape[0],)))
        return self._linear_rows(self._validate_X(X, reset=False))

    def _features_of(self, X: Any, groups: Any = None) -> Any:
        """The model's features of X (the columns of ``coef_``): checked rows, a dask array, or the map's outputs."""
        self._check_fitted()
        lazy = _is_lazy(X) and not isinstance(X, str)
        if not lazy:
            X = self._validate_X(X, reset=False)
        if getattr(self, "features_", None) is not None:
            from streamridge.estimators.mapped import mapped_input

            return mapped_input(self.features_, X, groups)
        if lazy and X.shape[1] != self.n_features_in_:
            raise InputError(f"X has {X.shape[1]} features, but {self._model_name} is expecting {self.n_features_in_} features as input")
        return X

    def _linear_rows(self, X: np.ndarray) -> np.ndarray:
        """The linear model of rows already checked, without a feature map: (m, outputs) float64."""
        return _affine(X, np.atleast_2d(self.coef_), np.atleast_1d(self.intercept_))

    def _linear_mapped(self, X: Any, groups: Any) -> Any:
        """Raw inputs -> features (``features_``, chunk by chunk for dask X) -> linear model."""
        from streamridge.estimators.mapped import mapped_input

        coef = np.atleast_2d(self.coef_)
        b = np.atleast_1d(self.intercept_)
        if not (_is_lazy(X) and not isinstance(X, str)):
            X = self._validate_X(X, reset=False)
        F = mapped_input(self.features_, X, groups)
        if hasattr(F, "dask"):
            return F.map_blocks(lambda a: a @ coef.T + b, dtype=np.float64, chunks=(F.chunks[0], (coef.shape[0],)))
        return F @ coef.T + b
