"""Conformance of the pass kernels: one set of tests that every partition kernel passes.

A kernel turns the rows of a task into a result (the protocol of
:mod:`streamridge.datapass.driver`): ``start()`` an empty accumulator,
``add(acc, X, y, groups, weights, row_start)`` the rows of one sub-block into it in
place, ``finish(acc)`` the task's result, ``merge(a, b)`` two results (``a``'s rows
before ``b``'s), and ``width``, ``n_cells``, ``result_bytes()`` for the planner.  The
pass driver relies on:

- an empty partition being the identity of ``merge`` and an empty sub-block changing nothing;
- rows cut into sub-blocks, or into partitions merged, anywhere, giving the result of
  the whole (up to rounding; bit for bit where the kernel's merge is exact);
- ``merge`` being associative and commutative up to rounding, and leaving its arguments as
  they are (the driver keeps them for checkpoints);
- ``add`` leaving its rows as they are (they may be views of a cache);
- the result of a pass, for given partitions, bit for bit the same on every scheduler;
- ``width``, ``n_cells`` and ``result_bytes()`` telling the rows it takes, the cells they go
  to and the size of a result.

:class:`KernelTests` holds the tests; each kernel has a subclass below (as
zarr's ``StoreTests``).  A new kernel gets a subclass.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import pickle
from typing import Any, ClassVar

import numpy as np
import pytest

from streamridge.datapass.driver import PassReport, run_pass
from streamridge.datapass.layouts import Partitions
from streamridge.datapass.mapped import MappedKernel
from streamridge.datapass.spec import PassSpec
from streamridge.datapass.stats_kernel import StatsKernel, chunk_task
from streamridge.features import RandomHidden
from streamridge.folds.schemes import FoldScheme
from streamridge.forms.build import build_forms
from streamridge.model_selection.metric_pass import MetricKernel, make_plan
from streamridge.sources import open_source
from streamridge.stats.foldstats import FoldStats

M, N = 600, 5
PARTITION_ROWS = 100  # the pass tests' partitions (6 of them)
STATS_ARRAYS = ("weight", "count", "mean_x", "mean_y", "sxx", "sxy", "syy")

Rows = tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]


def arrays_of(result: Any) -> dict[str, np.ndarray]:
    """The numeric arrays of a kernel's result (statistics or a metric tally), by name."""
    if isinstance(result, FoldStats):
        return {name: getattr(result, name) for name in STATS_ARRAYS}
    return {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}


def assert_identical(a: Any, b: Any, what: str = "") -> None:
    """Every array bit for bit equal."""
    x, y = arrays_of(a), arrays_of(b)
    assert x.keys() == y.keys()
    for name in x:
        assert x[name].shape == y[name].shape, (what, name)
        np.testing.assert_array_equal(x[name], y[name], err_msg=f"{what} {name}")


def assert_close(a: Any, b: Any, rtol: float, what: str = "") -> None:
    """Every array equal to ``rtol`` relative to its largest entry or 1 (integer arrays exactly).

    The floor of 1 (the data are of unit scale) keeps an array that is zero but for rounding
    (a class cell's co-moments of its constant +1/-1 targets) from counting its noise as relative.
    """
    x, y = arrays_of(a), arrays_of(b)
    assert x.keys() == y.keys()
    for name in x:
        assert x[name].shape == y[name].shape, (what, name)
        if x[name].dtype.kind in "iu":
            np.testing.assert_array_equal(x[name], y[name], err_msg=f"{what} {name}")
            continue
        scale = max(float(np.abs(y[name]).max(initial=0.0)), 1.0)
        err = float(np.abs(x[name] - y[name]).max(initial=0.0)) / scale
        assert err <= rtol, f"{what} {name}: relative difference {err:.3g} > {rtol:g}"


def regression_rows(rng: np.random.Generator, T: int = 2, weighted: bool = True) -> Rows:
    """Rows with an offset (centering matters), several targets, group ids and weights."""
    X = rng.standard_normal((M, N)) + 3.0
    Y = X @ rng.standard_normal((N, T)) + 0.5 * rng.standard_normal((M, T)) + 1.0
    groups = rng.integers(0, 9, M)
    w = rng.uniform(0.2, 2.0, M) if weighted else None
    return X, Y, groups, w


def class_rows(rng: np.random.Generator, C: int, weighted: bool) -> Rows:
    """Labels 0 .. C-1 that depend on X, group ids, optional weights."""
    X = rng.standard_normal((M, N))
    score = X @ rng.standard_normal((N, C)) + rng.standard_normal((M, C))
    y = np.argmax(score, axis=1)
    groups = rng.integers(0, 9, M)
    w = rng.uniform(0.2, 2.0, M) if weighted else None
    return X, y, groups, w


def metric_kernel(spec: PassSpec, rows: Rows, *, n_classes: int, auc: bool) -> Any:
    """The metric kernel of the fold models (two feature sets x three lambdas) fitted on ``rows``
    (after the stateless map of ``spec``, if any, which maps every block first)."""
    X, y, groups, w = rows
    fmap = spec.features
    F = X if fmap is None else fmap.apply_chunk(X, 0, None, None)[0]
    stats = chunk_task(F, y, groups, w, 0, dataclasses.replace(spec, features=None))
    forms = build_forms(stats, fit_intercept=True, balanced=False)
    supports = [np.ones(F.shape[1], bool), np.arange(F.shape[1]) % 2 == 0]
    plan = make_plan(stats, forms, np.array([0.1, 3.0, 100.0]), supports, n_classes=n_classes, auc=auc)
    kernel = MetricKernel(spec, plan)
    return kernel if fmap is None else MappedKernel(kernel, fmap, skip_nonfinite=spec.skip_nonfinite)


class KernelTests:
    """The tests every pass kernel passes; a subclass sets :meth:`make` and the class attributes."""

    #: the kernel's merge is exact (sums of integer counts): every result bit for bit, in any order
    exact: ClassVar[bool] = False
    #: relative tolerance where the results may differ by rounding
    rtol: ClassVar[float] = 1e-12
    #: cells (folds x classes) and the width of the rows the kernel works on, as it tells the pass planner
    n_cells: ClassVar[int] = 4
    width: ClassVar[int] = N

    def make(self, rng: np.random.Generator) -> tuple[Any, Rows]:
        """The kernel and the rows it is tested on."""
        raise NotImplementedError

    @pytest.fixture
    def case(self, rng: np.random.Generator) -> tuple[Any, Rows]:
        return self.make(rng)

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def result(kernel: Any, rows: Rows, lo: int = 0, hi: int = M, cuts: tuple[int, ...] = ()) -> Any:
        """``finish`` of rows ``[lo, hi)`` added as sub-blocks cut at ``cuts``."""
        X, y, groups, w = rows
        acc = kernel.start()
        bounds = [lo, *cuts, hi]
        for a, b in itertools.pairwise(bounds):
            kernel.add(
                acc, X[a:b], y[a:b], None if groups is None else groups[a:b], None if w is None else w[a:b], a
            )
        return kernel.finish(acc)

    def check(self, got: Any, want: Any, what: str) -> None:
        """Bit for bit for an exact kernel, else to :attr:`rtol`."""
        if self.exact:
            assert_identical(got, want, what)
        else:
            assert_close(got, want, self.rtol, what)

    def partitions(self, kernel: Any, rows: Rows, bounds: list[int]) -> list[Any]:
        return [self.result(kernel, rows, a, b) for a, b in itertools.pairwise(bounds)]

    def run_pass(self, kernel: Any, rows: Rows, scheduler: str) -> Any:
        """The result of the pass driver with ``kernel`` over partitions of :data:`PARTITION_ROWS` rows."""
        X, y, groups, w = rows
        source = open_source(X, y=y, groups=groups, sample_weight=w)
        report = PassReport()
        total = run_pass(source, kernel, Partitions(rows=PARTITION_ROWS), scheduler=scheduler, report=report)
        assert report.extra["partitions"] == M // PARTITION_ROWS
        return total

    # ------------------------------------------------------------------ the tests
    def test_kernel_tells_the_planner_its_sizes(self, case: tuple[Any, Rows]) -> None:
        kernel, _ = case
        assert (kernel.width, kernel.n_cells) == (self.width, self.n_cells)
        empty_bytes = sum(a.nbytes for a in arrays_of(kernel.finish(kernel.start())).values())
        assert kernel.result_bytes() == empty_bytes

    def test_empty_partition_is_the_identity_of_merge(self, case: tuple[Any, Rows]) -> None:
        kernel, rows = case
        empty = kernel.finish(kernel.start())
        assert all(not np.any(a) for a in arrays_of(empty).values())
        whole = self.result(kernel, rows)
        assert_identical(kernel.merge(empty, whole), whole, "empty + whole")
        assert_identical(kernel.merge(whole, empty), whole, "whole + empty")

    @pytest.mark.parametrize("where", [0, 250, M])
    def test_empty_sub_block_changes_nothing(self, case: tuple[Any, Rows], where: int) -> None:
        kernel, rows = case
        cuts = (250,) if where == 250 else ()
        with_empty = self.result(kernel, rows, cuts=tuple(sorted((*cuts, where))))  # rows [where, where)
        assert_identical(with_empty, self.result(kernel, rows, cuts=cuts), f"empty sub-block at row {where}")

    @pytest.mark.parametrize("cuts", [(1,), (299,), (M - 1,), (7, 8, 250, 251, 599), tuple(range(37, M, 37))])
    def test_sub_blocks_cut_anywhere_equal_the_whole(
        self, case: tuple[Any, Rows], cuts: tuple[int, ...]
    ) -> None:
        kernel, rows = case
        self.check(self.result(kernel, rows, cuts=cuts), self.result(kernel, rows), f"cut at {cuts}")

    @pytest.mark.parametrize("bounds", [[0, 1, M], [0, 299, M], [0, M - 1, M], [0, 13, 14, 400, M]])
    def test_partitions_merged_equal_the_whole(self, case: tuple[Any, Rows], bounds: list[int]) -> None:
        kernel, rows = case
        parts = self.partitions(kernel, rows, bounds)
        merged = parts[0]
        for part in parts[1:]:
            merged = kernel.merge(merged, part)
        self.check(merged, self.result(kernel, rows), f"partitions {bounds}")

    def test_merge_is_associative(self, case: tuple[Any, Rows]) -> None:
        kernel, rows = case
        a, b, c = self.partitions(kernel, rows, [0, 150, 420, M])
        self.check(
            kernel.merge(kernel.merge(a, b), c), kernel.merge(a, kernel.merge(b, c)), "(a b) c vs a (b c)"
        )

    def test_merge_is_commutative(self, case: tuple[Any, Rows]) -> None:
        kernel, rows = case
        a, b = self.partitions(kernel, rows, [0, 230, M])
        self.check(kernel.merge(b, a), kernel.merge(a, b), "b a vs a b")

    def test_merge_leaves_its_arguments_unchanged(self, case: tuple[Any, Rows]) -> None:
        kernel, rows = case
        a, b = self.partitions(kernel, rows, [0, 230, M])
        before = copy.deepcopy((a, b))
        kernel.merge(a, b)
        assert_identical(a, before[0], "a")
        assert_identical(b, before[1], "b")

    def test_add_leaves_its_rows_unchanged(self, case: tuple[Any, Rows]) -> None:
        kernel, rows = case
        before = copy.deepcopy(rows)
        self.result(kernel, rows, cuts=(100, 101))
        for got, want in zip(rows, before):
            np.testing.assert_array_equal(got, want)

    def test_kernel_and_results_survive_pickling(self, case: tuple[Any, Rows]) -> None:
        """What a worker process receives and sends back."""
        kernel, rows = case
        whole = self.result(kernel, rows)
        assert_identical(self.result(pickle.loads(pickle.dumps(kernel)), rows), whole, "unpickled kernel")
        assert_identical(pickle.loads(pickle.dumps(whole)), whole, "unpickled result")

    def test_pass_is_bit_identical_across_schedulers(self, case: tuple[Any, Rows]) -> None:
        kernel, rows = case
        ref = self.run_pass(kernel, rows, "sync")
        assert_identical(self.run_pass(kernel, rows, "threads"), ref, "threads vs sync")
        self.check(ref, self.result(kernel, rows), "pass vs one partition")

    @pytest.mark.slow
    def test_pass_is_bit_identical_on_processes(self, case: tuple[Any, Rows]) -> None:
        kernel, rows = case
        assert_identical(
            self.run_pass(kernel, rows, "processes"), self.run_pass(kernel, rows, "sync"), "processes"
        )


# ---------------------------------------------------------------------- the kernels


class TestStatsKernelRegression(KernelTests):
    """The statistics pass: hash folds, two targets, sample weights."""

    def make(self, rng: np.random.Generator) -> tuple[Any, Rows]:
        return StatsKernel(PassSpec(FoldScheme("hash", 4), None, 2), N), regression_rows(rng)


class TestStatsKernelClasses(KernelTests):
    """The statistics pass of a classifier: group folds x three class cells, weights."""

    n_cells = 9

    def make(self, rng: np.random.Generator) -> tuple[Any, Rows]:
        spec = PassSpec(FoldScheme("group", 3), (0, 1, 2), 3)
        return StatsKernel(spec, N), class_rows(rng, 3, weighted=True)


class TestMappedKernel(KernelTests):
    """The statistics pass with a stateless feature map (random hidden units)."""

    width = 8

    def make(self, rng: np.random.Generator) -> tuple[Any, Rows]:
        fmap = RandomHidden(8, seed=1).fit_width(N)
        spec = PassSpec(FoldScheme("hash", 4), None, 2, features=fmap)
        return MappedKernel(StatsKernel(spec, 8), fmap), regression_rows(rng)


class TestMetricKernelRegression(KernelTests):
    """The metric pass of a regression: moments of targets and predictions, weights."""

    def make(self, rng: np.random.Generator) -> tuple[Any, Rows]:
        rows = regression_rows(rng)
        spec = PassSpec(FoldScheme("hash", 4), None, 2)
        return metric_kernel(spec, rows, n_classes=0, auc=False), rows


class TestMetricKernelMapped(KernelTests):
    """The metric pass of a regression through a stateless feature map."""

    width = 8

    def make(self, rng: np.random.Generator) -> tuple[Any, Rows]:
        rows = regression_rows(rng, T=1)
        spec = PassSpec(FoldScheme("hash", 4), None, 1, features=RandomHidden(8, seed=2).fit_width(N))
        return metric_kernel(spec, rows, n_classes=0, auc=False), rows


class TestMetricKernelClassesWeighted(KernelTests):
    """The metric pass of three classes with sample weights: confusion weight sums."""

    n_cells = 3  # the folds

    def make(self, rng: np.random.Generator) -> tuple[Any, Rows]:
        rows = class_rows(rng, 3, weighted=True)
        spec = PassSpec(FoldScheme("group", 3), (0, 1, 2), 3)
        return metric_kernel(spec, rows, n_classes=3, auc=False), rows


class TestMetricKernelBinaryAUC(KernelTests):
    """The metric pass of two classes, unweighted, with ROC AUC bins: counts, so exact in any order."""

    exact = True

    def make(self, rng: np.random.Generator) -> tuple[Any, Rows]:
        rows = class_rows(rng, 2, weighted=False)
        spec = PassSpec(FoldScheme("hash", 4), (0, 1), 1)
        kernel = metric_kernel(spec, rows, n_classes=2, auc=True)
        assert kernel.plan.bins > 0
        return kernel, rows


def with_nonfinite(rows: Rows) -> Rows:
    """``rows`` with NaN or inf in X, y or the weights of a few rows (left out with ``skip_nonfinite``)."""
    X, y, w = (None if a is None else a.astype(np.float64) for a in (rows[0], rows[1], rows[3]))
    assert X is not None and y is not None
    X[[3, 250, 251]] = np.nan
    X[400, 1] = np.inf
    y[[17, 598]] = np.nan
    if w is not None:
        w[[40, 41]] = np.nan
    return X, y, rows[2], w


class TestStatsKernelSkipNonfinite(KernelTests):
    """The statistics pass leaving out rows with NaN or inf (``skip_nonfinite``)."""

    def make(self, rng: np.random.Generator) -> tuple[Any, Rows]:
        spec = PassSpec(FoldScheme("hash", 4), None, 2, skip_nonfinite=True)
        return StatsKernel(spec, N), with_nonfinite(regression_rows(rng))


class TestMappedKernelSkipNonfinite(KernelTests):
    """The statistics pass through a stateless feature map, leaving out rows with NaN or inf."""

    width = 8

    def make(self, rng: np.random.Generator) -> tuple[Any, Rows]:
        fmap = RandomHidden(8, seed=1).fit_width(N)
        spec = PassSpec(FoldScheme("hash", 4), None, 2, skip_nonfinite=True, features=fmap)
        return MappedKernel(StatsKernel(spec, 8), fmap, skip_nonfinite=True), with_nonfinite(
            regression_rows(rng)
        )


class TestMetricKernelSkipNonfinite(KernelTests):
    """The metric pass leaving out rows with NaN or inf."""

    def make(self, rng: np.random.Generator) -> tuple[Any, Rows]:
        rows = with_nonfinite(regression_rows(rng))
        spec = PassSpec(FoldScheme("hash", 4), None, 2, skip_nonfinite=True)
        return metric_kernel(spec, rows, n_classes=0, auc=False), rows


# ---------------------------------------------------------------------- the kernels in lanes


def series_case(rng: np.random.Generator, kind: str) -> tuple[Any, Rows, np.ndarray, PassSpec]:
    """A kernel taking the outputs of a stateful map, raw rows of contiguous series, the map's outputs
    computed in memory, and the pass's spec (with the fitted map)."""
    from streamridge.features import Delays

    rows = regression_rows(rng) if kind == "regression" else class_rows(rng, 3, weighted=True)
    X, y, groups, w = rows
    groups = np.sort(groups)  # contiguous series, in row order
    fmap = Delays(2).fit(X)
    F = fmap.transform(X, groups=groups)
    if kind == "regression":
        spec = PassSpec(FoldScheme("hash", 4), None, 2, features=fmap)
    else:
        spec = PassSpec(FoldScheme("group", 3), (0, 1, 2), 3, features=fmap)
    if kind == "statistics":
        kernel: Any = StatsKernel(spec, F.shape[1])
    else:
        plain = dataclasses.replace(spec, features=None)
        kernel = metric_kernel(
            plain, (F, y, groups, w), n_classes=0 if kind == "regression" else 3, auc=False
        )
    return kernel, (X, y, groups, w), F, spec


class TestKernelsInLanes:
    """The lanes of a stateful map feed the same kernels: the pass over lanes of any chunking equals the
    kernel over the map's outputs computed in memory, bit for bit the same on every scheduler."""

    @pytest.fixture(params=["statistics", "regression", "classes"])
    def case(
        self, request: pytest.FixtureRequest, rng: np.random.Generator
    ) -> tuple[Any, Rows, np.ndarray, PassSpec]:
        return series_case(rng, request.param)

    @staticmethod
    def lanes(case: tuple[Any, Rows, np.ndarray, PassSpec], scheduler: str, chunk_rows: int) -> Any:
        """The pass in lanes of chunks of ``chunk_rows`` rows."""
        from streamridge.datapass.layouts import Lanes

        kernel, (X, y, groups, w), _, spec = case
        source = open_source(X, y=y, groups=groups, sample_weight=w, chunk_rows=chunk_rows)
        report = PassReport()
        total = run_pass(source, kernel, Lanes(spec), scheduler=scheduler, report=report)
        assert report.extra["resumed_chunks"] == 0 and report.rows == M
        return total

    def test_lanes_equal_the_mapped_rows_in_memory(
        self, case: tuple[Any, Rows, np.ndarray, PassSpec]
    ) -> None:
        kernel, rows, F, _ = case
        whole = KernelTests.result(kernel, (F, *rows[1:]))
        for chunk_rows in (37, 100, M):
            assert_close(self.lanes(case, "sync", chunk_rows), whole, 1e-12, f"chunks of {chunk_rows}")

    def test_lanes_are_bit_identical_across_schedulers(
        self, case: tuple[Any, Rows, np.ndarray, PassSpec]
    ) -> None:
        assert_identical(self.lanes(case, "threads", 50), self.lanes(case, "sync", 50), "threads vs sync")

    @pytest.mark.slow
    def test_lanes_are_bit_identical_on_processes(self, case: tuple[Any, Rows, np.ndarray, PassSpec]) -> None:
        assert_identical(self.lanes(case, "processes", 50), self.lanes(case, "sync", 50), "processes")
