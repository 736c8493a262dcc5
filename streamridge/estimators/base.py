"""The shared machinery of the estimators: the pass, partial fits and shards, model selection, prediction.

:class:`StreamRidgeBase` checks its parameters (:mod:`streamridge.estimators.params`)
and input (:mod:`streamridge.estimators.validation`), fixes folds and classes on the
first call, runs the data pass (:mod:`streamridge.datapass.driver`), builds the forms
(:mod:`streamridge.forms.build`), hands them to the one model selection
(:func:`streamridge.model_selection.choose.choose_model`, which nested CV calls too),
refits the choice (:mod:`streamridge.estimators.selecting`) and sets the fitted
attributes of its choice (:mod:`streamridge.model_selection.attributes`).
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

from streamridge.datapass.driver import PassReport, accumulate, single_total
from streamridge.datapass.scheduling import pass_session
from streamridge.datapass.spec import PassSpec
from streamridge.errors import FoldError, InputError, ParameterError
from streamridge.estimators import validation
from streamridge.estimators.params import (
    SCORING_NEEDS_ROWS,
    EstimatorParams,
    check_candidates,
    check_selection,
    row_scoring,
)
from streamridge.estimators.predicting import LinearOutputs
from streamridge.estimators.selecting import NESTED_ATTRS, select_model
from streamridge.estimators.stats_meta import pass_meta, read_stats_meta
from streamridge.estimators.validation import check_distinct_labels as _check_distinct_labels
from streamridge.estimators.validation import is_lazy as _is_lazy
from streamridge.folds.schemes import FoldScheme
from streamridge.folds.splits import with_folds
from streamridge.model_selection.attributes import CHOICE_ATTRS, METRIC_ATTRS
from streamridge.model_selection.choose import config_of
from streamridge.parallel import solve_stage_limits
from streamridge.stats.foldstats import FoldStats, merge
from streamridge.stats.memory import check_stats_memory


def _check_folds(stats: FoldStats, partial: bool) -> None:
    """Refuse, when the model is selected, statistics whose folds cannot be cross-validated yet.

    Leave-one-group-out statistics need 2 groups; after ``partial_fit`` every fold needs rows.
    Batches and shards are not checked: one of them may hold a single series.
    """
    scheme = stats.meta.get("scheme") or {}
    fix = (
        "call partial_fit with more rows before predicting" if partial else "merge statistics of more groups"
    )
    if scheme.get("kind") == "logo" and stats.n_folds < 2:
        raise FoldError(f"cv='groups' needs at least 2 distinct groups; got {stats.n_folds} so far; {fix}")
    if partial and stats.count.sum(axis=1).min() == 0:
        raise FoldError(
            f"after {stats.n_rows} sample(s) some of the {stats.n_folds} folds are still empty; {fix}"
        )


def _slice_rows(src: Any, start: int, stop: int) -> Any:
    """The same source restricted to rows [start, stop)."""

    if hasattr(src, "select_rows"):
        return src.select_rows(start, stop)
    sl = {
        n: None if getattr(src, n) is None else getattr(src, n)[start:stop]
        for n in ("X", "y", "groups", "sample_weight")
    }
    desc = f"{getattr(src, 'description', 'data')} rows {start}:{stop}"
    if dataclasses.is_dataclass(src):
        return dataclasses.replace(src, description=desc, **sl)  # type: ignore[type-var]
    return type(src)(**{**vars(src), **sl})


def _candidate_maps(spec: PassSpec) -> list[Any] | None:
    """The candidate maps of a pass (None: one map or none)."""
    from streamridge.datapass.candidates import is_candidates

    return list(spec.features.candidates) if is_candidates(spec.features) else None


def _model_width(features: Any) -> int:
    """Features of a model of the map: for candidate maps, the narrowest candidate's (prefixes must fit every one)."""
    fmaps = getattr(features, "candidates", None)
    if fmaps is None:
        return int(features.n_features_out_)
    return min(int(m.n_features_out_) for m in fmaps)


def _stateful(spec: PassSpec) -> bool:
    """Whether the pass runs a stateful feature map (its statistics record their series' rows)."""
    return spec.features is not None and bool(spec.features.stateful)


class StreamRidgeBase(LinearOutputs, EstimatorParams):
    """Shared fit/partial_fit/solve logic of the regressor and the classifier.

    ``get_params`` / ``set_params`` are those of the scikit-learn-free classes
    (:mod:`streamridge.estimators.core`); the public estimators put ``BaseEstimator`` first
    in their bases, so scikit-learn's own (deep parameters, validation) serve them.
    Every constructor parameter has a constraint in ``_parameter_constraints``
    (:class:`~streamridge.estimators.params.EstimatorParams`), checked when a fit starts.
    """

    stats_: FoldStats
    coef_: np.ndarray
    intercept_: float | np.ndarray
    _spec: PassSpec

    def _balanced(self) -> bool | np.ndarray:
        """Class weights of the forms: False (none), True (balanced) or a factor per class."""
        return False

    def _validate_X(self, X: Any, *, reset: bool, **kw: Any) -> Any:
        """In-memory X checked as scikit-learn does; see :func:`streamridge.estimators.validation.validate_X`."""
        return validation.validate_X(self, X, reset=reset, **kw)

    def _check_fitted(self) -> None:
        if not hasattr(self, "coef_"):
            from sklearn.utils.validation import check_is_fitted

            check_is_fitted(self, "coef_")  # scikit-learn's NotFittedError

    def _fit_features(self, src: Any) -> Any:
        """The fitted feature map of this fit (None without ``features``); sets ``features_``, ``feature_names_``."""
        self.__dict__.pop("features_", None)  # a stale map of an earlier fit
        if self.features is None:
            return None
        from streamridge.estimators.mapped import fit_map

        self.features_ = fit_map(self.features, src.X, src.groups)
        self.feature_names_ = self.features_.get_feature_names_out()
        return self.features_

    def _source(
        self, X: Any, y: Any, groups: Any, sample_weight: Any, *, reset: bool, labels: Any = None
    ) -> Any:
        """The data of a fit as a Source, checked (in-memory arrays as scikit-learn does).

        With ``reset`` (the first call) sets ``n_features_in_``, ``feature_names_`` of a
        source that has them, and a classifier's ``_labels`` (of y or of ``labels``);
        later calls are checked against them.
        """
        from streamridge.sources import open_source

        if _is_lazy(X):
            y = y if y is not None else "y"
            src = open_source(X, y=y, groups=groups, sample_weight=sample_weight, chunk_rows=self.chunk_rows)
            if reset:
                self.n_features_in_ = src.n_features()
                if src.feature_names:
                    self.feature_names_ = np.asarray(src.feature_names, dtype=object)
            else:
                validation.check_n_features(src.n_features(), self.n_features_in_, self._model_name)
            return src
        # finiteness is checked chunk by chunk in the pass (errors name the rows; skip_nonfinite drops them)
        X = self._validate_X(X, reset=reset, ensure_all_finite=False)
        y = validation.check_targets(X, y, classifier=self._classifier, model_name=self._model_name)
        if self._classifier:
            if reset:
                self._labels = validation.class_labels(y if labels is None else labels)
            y = validation.encode_labels(y, self._labels)
        n = X.shape[0]
        groups, sample_weight = (
            validation.check_groups(groups, n),
            validation.check_sample_weight(sample_weight, n),
        )
        return open_source(X, y=y, groups=groups, sample_weight=sample_weight, chunk_rows=self.chunk_rows)

    def _scheme(
        self, src: Any, *, partial: bool, shard: bool = False
    ) -> tuple[FoldScheme, np.ndarray | None]:
        """The fold scheme and, for explicit splits, the fold id of every row (:func:`.validation.fold_scheme`)."""
        seed = int(self.random_state or 0)
        return validation.fold_scheme(
            self.cv, src, seed=seed, n_blocks=self.n_blocks, partial=partial, shard=shard
        )

    def _rule_scheme(self, src: Any, *, partial: bool, batch: bool) -> FoldScheme:
        """The fold scheme of ``cv=K``, "groups" or "blocks" for ``src`` (:func:`.validation.rule_scheme`)."""
        seed = int(self.random_state or 0)
        return validation.rule_scheme(
            self.cv, src, seed=seed, n_blocks=self.n_blocks, partial=partial, batch=batch
        )

    def _classes(self, src: Any, classes: Any = None) -> tuple[Any, ...] | None:
        """A classifier's labels of a source's y (or ``classes``); None for a regressor."""
        if not self._classifier:
            return None
        if classes is None:  # the distinct values of y, checked as scikit-learn checks labels
            shape = src.shape("y")
            if len(shape) == 2 and shape[1] != 1:
                raise InputError(f"a classifier needs 1-D class labels y; got y of shape {shape}")
            labels = src.distinct("y")
            _check_distinct_labels(labels)
        else:
            labels = classes
        return tuple(validation.class_labels(labels).tolist())

    # ------------------------------------------------------------------ public API
    def _fit(
        self, X: Any, y: Any, groups: Any, sample_weight: Any, classes: Any = None, *, partial: bool
    ) -> Any:
        report = PassReport()
        self._check_params()
        if partial and row_scoring(self.scoring, classifier=self._classifier):
            raise ParameterError(
                "scoring= needs all rows in one pass; use fit, not partial_fit (or drop scoring)"
            )
        with self._pass_session() as scheduler:
            return self._fit_pass(
                X, y, groups, sample_weight, classes, partial=partial, report=report, scheduler=scheduler
            )

    # fmt: off
    @contextlib.contextmanager
    def _pass_session(self) -> Iterator[Any]:
        """The scheduler every pass of one fit (statistics, metric) runs on, opened once; ``local:N`` starts now.

        Its worker processes start while the data is opened and the pass planned; an address is
        connected once, at the first pass (:func:`streamridge.datapass.scheduling.pass_session`).
        The session is handed to the passes as an argument, never kept on the estimator.
        """
        with pass_session(self.scheduler) as scheduler:
            yield scheduler

    def _fit_pass(self, X: Any, y: Any, groups: Any, sample_weight: Any, classes: Any, *, partial: bool, report: PassReport, scheduler: Any) -> Any:
        stats, rows = self._run_pass(X, y, groups, sample_weight, classes, partial=partial, report=report, scheduler=scheduler)
        self.__dict__.pop("candidates_", None)  # of an earlier fit
        if isinstance(stats, list):  # candidate feature maps: one chosen with lambda
            stats = self._choose_candidate(stats)
        self._features_state = report.extra.get("features_state")  # a series continued by the next partial_fit
        if partial and hasattr(self, "stats_"):
            # leave-one-group-out: new series add folds; a stateful map ran on from the last call's state
            stats = merge(self.stats_, stats, continues=_stateful(self._spec))
            self._spec = dataclasses.replace(self._spec, scheme=FoldScheme.from_dict(stats.meta["scheme"]))
        self.stats_ = stats
        _check_folds(stats, partial)
        return self._fit_stats(stats, report, rows=None if partial else rows, scheduler=scheduler)

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
        with self._pass_session() as scheduler:
            stats, _ = self._run_pass(
                X, y, groups, sample_weight, None, partial=False, report=report, scheduler=scheduler, rows=rows, shard=True
            )
        self.timings_ = {
            "pass_s": report.seconds, "rows": report.rows, "rows_per_s": report.rows_per_s, "solve_s": 0.0,
            "peak_rss_mb": report.extra.get("peak_rss_mb"),
        }
        return stats

    def _run_pass(
        self, X: Any, y: Any, groups: Any, sample_weight: Any, classes: Any, *, partial: bool, report: PassReport,
        scheduler: Any, rows: tuple[int, int] | None = None, shard: bool = False,
    ) -> tuple[FoldStats, tuple[Any, int]]:
        """Validate the input, fix folds/classes on the first call and accumulate statistics.

        Returns the statistics and the rows they came from (source, first row): a metric
        pass (``scoring``) reads those rows again.
        """
        self._check_params()
        check_candidates(self.features, partial=partial, shard=shard, nested=self.nested, scoring=self.scoring, checkpoint=self.checkpoint, bands=self.bands)
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
            one_total = single_total(scheduler, None if partial else self.checkpoint)
            check_stats_memory(
                scheme.n_folds, 1 if labels is None else len(labels), n_model, n_targets, len(src.row_chunks()),
                mapped_by=mapped_by, single_total=one_total and not getattr(self.features, "stateful", False),
            )
            features = self._fit_features(src)  # before explicit fold ids can take the groups column
            if fold_ids is not None:
                src = with_folds(src, scheme, fold_ids, series=features is not None and features.stateful)
            n_model = src.n_features() if features is None else _model_width(features)
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
        meta: dict[str, Any] = {"row_ranges": [[offset, offset + src.n_rows()]]}
        if _stateful(self._spec):
            from streamridge.estimators.mapped import series_spans

            meta["series_spans"] = series_spans(src, offset) if spans is None else spans
        candidates = _candidate_maps(self._spec)
        with warnings.catch_warnings():
            # float64 overflow of the co-moments is reported by the solve stage as one ScaleError line
            warnings.filterwarnings("ignore", r"(overflow|invalid value|underflow) encountered", RuntimeWarning)
            result = accumulate(
                src, self._spec, row_offset=offset, scheduler=scheduler, progress=self.progress,
                meta=meta if candidates else {**self._meta(src), **meta}, report=report,
                checkpoint=None if partial else self.checkpoint, partition_rows=self.chunk_rows,
            )
        for stats, fmap in zip(result if candidates else (), candidates or ()):  # each names its own map
            spec = dataclasses.replace(self._spec, features=fmap)
            stats.meta.update(self._meta(src, spec))
        return result, (src, offset)

    # fmt: on
    def _check_selection(self, scheme: FoldScheme | None, n_classes: int | None, n_features: int) -> None:
        """Refuse, before any pass, what the folds, classes or features rule out (:func:`.params.check_selection`)."""
        names = (
            "nested",
            "scoring",
            "feature_prefixes",
            "bands",
            "band_weights",
            "random_state",
            "selection",
        )
        params = {name: getattr(self, name) for name in names}
        check_selection(
            params, scheme, n_classes, n_features, classifier=self._classifier,
            feature_map=self.__dict__.get("features_"),
        )  # fmt: skip

    def _continued_spans(self, src: Any, offset: int) -> list[list[Any]] | None:
        """The series spans of a ``partial_fit`` call with a stateful map (None without one); see
        :func:`.validation.continued_spans`."""
        if not _stateful(self._spec):
            return None
        return validation.continued_spans(src, offset, self.stats_.meta.get("series_spans") or [])

    def _n_targets(self, src: Any, labels: Any) -> int:
        if labels is not None:
            return 1 if len(labels) == 2 else len(labels)
        shape = src.shape("y")
        return 1 if len(shape) == 1 else int(shape[1])

    def _meta(self, src: Any, spec: PassSpec | None = None) -> dict[str, Any]:
        """Metadata of the pass's statistics (:func:`.stats_meta.pass_meta`) of ``spec`` (default: this fit's)."""
        spec = self._spec if spec is None else spec
        labels = self._labels if spec.classes is not None else None
        return pass_meta(spec, src, labels=labels, classifier=self._classifier, y_1d=self._y_1d)

    def _choose_candidate(self, stats: list[FoldStats]) -> FoldStats:
        """The chosen candidate's statistics; sets ``features_``, ``feature_names_``, ``candidates_`` and the spec."""
        from streamridge.estimators.selecting import select_candidate

        best, table = select_candidate(
            stats, self._spec, config_of(self, self.alphas, self._balanced()), classifier=self._classifier
        )
        self.features_ = self._spec.features.candidates[best]
        self.feature_names_ = self.features_.get_feature_names_out()
        self._spec = dataclasses.replace(self._spec, features=self.features_)
        self.candidates_ = table
        return stats[best]

    def fit_stats(self, stats: FoldStats) -> Any:
        """Model selection and final fit from precomputed statistics (no pass over rows).

        Parameters
        ----------
        stats : FoldStats
            E.g. from :func:`streamridge.stats.foldstats.load_stats` or a merge of shards.
        """
        self._check_params()
        if row_scoring(self.scoring, classifier=self._classifier):
            raise ParameterError(SCORING_NEEDS_ROWS)
        model = read_stats_meta(stats, classifier=self._classifier)
        if model.labels is not None:
            self._labels = model.labels
        self._spec, self._y_1d, self.n_features_in_ = model.spec, model.y_1d, model.n_features_in
        if model.feature_names is not None:
            self.feature_names_ = model.feature_names
        self.__dict__.pop("features_", None)  # a stale map of an earlier fit
        if model.features is not None:
            self.features_ = model.features
        self.stats_ = stats
        _check_folds(stats, False)
        n_classes = None if model.labels is None else len(model.labels)
        self._check_selection(model.spec.scheme, n_classes, stats.n_features)
        with solve_stage_limits(stats.n_features):
            return self._select_and_fit(stats, PassReport(), rows=None, scheduler=self.scheduler)

    def _fit_stats(
        self, stats: FoldStats, report: PassReport, *, rows: tuple[Any, int] | None, scheduler: Any
    ) -> Any:
        """The model of the statistics of this fit's pass; its rows serve a metric pass (``scoring``)."""
        with solve_stage_limits(stats.n_features):
            return self._select_and_fit(stats, report, rows=rows, scheduler=scheduler)

    def _select_and_fit(
        self, stats: FoldStats, report: PassReport, *, rows: tuple[Any, int] | None, scheduler: Any
    ) -> Any:
        """Choose the model from ``stats``, refit it and set the fitted attributes (:func:`.selecting.select_model`).

        ``rows`` (source, first row): the rows of the pass, for the metric pass of ``scoring``.
        """
        t0 = time.perf_counter()
        fitted = select_model(
            stats, self._spec, config_of(self, self.alphas, self._balanced(), n_features=stats.n_features),
            classifier=self._classifier, y_1d=self._y_1d, fit_intercept=self.fit_intercept, scoring=self.scoring, rescore=self.rescore,
            nested=self.nested, rows=rows, scheduler=scheduler, progress=self.progress,
            partition_rows=self.chunk_rows,
        )  # fmt: skip
        for name in (*CHOICE_ATTRS, *METRIC_ATTRS, *NESTED_ATTRS):
            self.__dict__.pop(name, None)  # of an earlier fit
        for name, value in fitted.attrs.items():
            setattr(self, name, value)
        solve_s = time.perf_counter() - t0 - fitted.metric_s
        self.timings_ = {
            "pass_s": report.seconds,
            "rows": report.rows,
            "rows_per_s": report.rows_per_s,
            "solve_s": solve_s,
            "peak_rss_mb": report.extra.get("peak_rss_mb"),
        }
        if fitted.metric_s:
            self.timings_["metric_pass_s"] = fitted.metric_s
        return self
