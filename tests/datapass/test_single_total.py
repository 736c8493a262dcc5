"""Large statistics as one running total: the statistics of the partition tree, one copy in memory."""

from __future__ import annotations

import tracemalloc
from typing import Any

import numpy as np
import pytest

import streamridge as sr
import streamridge.datapass.single_total as single_total_module
from streamridge.datapass.driver import PassReport, accumulate, single_total
from streamridge.datapass.partitions import task_plan
from streamridge.datapass.scheduling import Scheduler
from streamridge.datapass.single_total import plan_statistics
from streamridge.datapass.spec import PassSpec
from streamridge.errors import InputError
from streamridge.folds.schemes import FoldScheme
from streamridge.sources import open_source, write_zarr
from streamridge.stats import memory

M, N, T = 3000, 24, 40


def one_total(monkeypatch: pytest.MonkeyPatch, on: bool) -> None:
    """Statistics of any size go into one running total (``on``), or none do."""
    limit = 0 if on else 2**62
    monkeypatch.setattr(single_total_module, "SINGLE_TOTAL_BYTES", limit)
    monkeypatch.setattr(memory, "SINGLE_TOTAL_BYTES", limit)


@pytest.fixture(scope="module")
def data() -> dict[str, Any]:
    """Rows of mean 1e6 and standard deviation 1 (float32 X), several targets, labels, weights, groups."""
    rng = np.random.default_rng(11)
    X = (1e6 + rng.standard_normal((M, N))).astype(np.float32)
    Y = 1e6 + (X - 1e6) @ rng.standard_normal((N, T)) + rng.standard_normal((M, T))
    labels = rng.integers(0, 3, M)
    return {"X": X, "Y": Y, "labels": labels, "w": rng.uniform(0.5, 2.0, M), "groups": rng.integers(0, 9, M)}


def case_stats(name: str, d: dict[str, Any], scheduler: str, chunk_rows: int, path: Any) -> Any:
    """The statistics of one case through the public API."""
    if name == "zarr-folds":
        store = write_zarr(path / "d.zarr", d["X"], d["Y"], chunk_rows=chunk_rows)
        return sr.StreamRidgeCV(cv=5, scheduler=scheduler).compute_stats(open_source(store))
    if name == "groups":
        est = sr.StreamRidgeCV(cv=4, chunk_rows=chunk_rows, scheduler=scheduler)
        return est.compute_stats(d["X"], d["Y"], groups=d["groups"])
    est = sr.StreamRidgeClassifierCV(cv=3, chunk_rows=chunk_rows, scheduler=scheduler)
    return est.compute_stats(d["X"], d["labels"], sample_weight=d["w"])


def exact_stats(name: str, d: dict[str, Any], scheme: dict[str, Any]) -> dict[str, np.ndarray]:
    """Per-cell weights, means and centered co-moments by two passes over the rows shifted by 1e6 (exactly)."""
    folds = FoldScheme.from_dict(scheme).assign(0, M, d["groups"] if name == "groups" else None)
    X = d["X"].astype(np.float64) - 1e6
    if name == "classes-weights":
        Y, w = np.where(d["labels"][:, None] == np.arange(3), 1.0, -1.0), d["w"]
        cells, n_cells = folds * 3 + d["labels"], int(folds.max() + 1) * 3
    else:
        Y, w, cells, n_cells = d["Y"] - 1e6, np.ones(M), folds, int(folds.max() + 1)
    out: dict[str, list[np.ndarray]] = {k: [] for k in ("weight", "sxx", "sxy", "syy")}
    for c in range(n_cells):
        x, y, wc = X[cells == c], Y[cells == c], w[cells == c]
        xc = x - (wc @ x) / wc.sum()
        yc = y - (wc @ y) / wc.sum()
        out["weight"].append(np.array(wc.sum()))
        out["sxx"].append(xc.T @ (wc[:, None] * xc))
        out["sxy"].append(xc.T @ (wc[:, None] * yc))
        out["syy"].append(wc @ (yc * yc))
    return {k: np.stack(v) for k, v in out.items()}


def assert_close(got: dict[str, np.ndarray], want: dict[str, np.ndarray], rtol: float) -> None:
    """Equal to ``rtol`` of each array's scale: its largest entry, and for the targets' arrays at least what
    rows of unit targets give (a class cell's coded targets are constant: its exact sxy and syy are 0)."""
    weight = float(np.abs(want["weight"]).max())
    floor = {"sxy": np.sqrt(float(np.abs(want["sxx"]).max()) * weight), "syy": weight}
    for key, w in want.items():
        scale = max(float(np.abs(w).max()), floor.get(key, 0.0))
        err = float(np.abs(got[key].reshape(w.shape) - w).max())
        assert err <= rtol * scale, f"{key}: {err:.3g} > {rtol:g} x {scale:.3g}"


def arrays(stats: Any) -> dict[str, np.ndarray]:
    return {k: getattr(stats, k) for k in ("weight", "mean_x", "mean_y", "sxx", "sxy", "syy")}


@pytest.mark.parametrize("name", ["zarr-folds", "groups", "classes-weights"])
@pytest.mark.parametrize("scheduler", ["sync", "threads"])
@pytest.mark.parametrize("chunk_rows", [128, 500, 1100])
def test_one_total_equals_the_partition_tree(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Any,
    data: dict[str, Any],
    name: str,
    scheduler: str,
    chunk_rows: int,
) -> None:
    """Both equal the exact statistics; the tree's merges of means near 1e6 cost it ~1e-11 of sxx, the
    one total (tiles centered, their means folded per cell) stays within 1e-13."""
    one_total(monkeypatch, False)
    tree = case_stats(name, data, scheduler, chunk_rows, tmp_path / "tree")
    one_total(monkeypatch, True)
    total = case_stats(name, data, scheduler, chunk_rows, tmp_path / "total")
    assert total.count.sum() == M and total.sxy.shape == tree.sxy.shape
    assert float(np.abs(total.mean_x).max()) > 9.99e5  # the offset is in the data
    np.testing.assert_array_equal(total.count, tree.count)
    assert_close(arrays(total), arrays(tree), rtol=1e-10)
    exact = exact_stats(name, data, total.meta["scheme"])
    assert_close(arrays(total), exact, rtol=1e-13)


def test_one_total_is_one_partition_with_the_same_bits_on_every_scheduler(
    monkeypatch: pytest.MonkeyPatch, data: dict[str, Any]
) -> None:
    one_total(monkeypatch, True)
    spec = PassSpec(FoldScheme("hash", 5, seed=0), None, T)
    out = {}
    for scheduler in ("sync", "threads", "processes"):
        report = PassReport()
        source = open_source(data["X"], y=data["Y"], chunk_rows=250)
        out[scheduler] = accumulate(source, spec, scheduler=scheduler, report=report, partition_rows=250)
        assert report.extra["partitions"] == 1
    for scheduler in ("threads", "processes"):
        for name in ("weight", "count", "mean_x", "mean_y", "sxx", "sxy", "syy"):
            np.testing.assert_array_equal(getattr(out[scheduler], name), getattr(out["sync"], name))


def _traced_peak(n_chunks: int, X: np.ndarray, Y: np.ndarray, scheduler: str) -> int:
    source = open_source(X, y=Y, chunk_rows=X.shape[0] // n_chunks)
    spec = PassSpec(FoldScheme("hash", 5, seed=0), None, Y.shape[1])
    tracemalloc.start()
    try:
        accumulate(source, spec, scheduler=scheduler, partition_rows=X.shape[0] // n_chunks)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_one_total_peak_does_not_grow_with_chunks(monkeypatch: pytest.MonkeyPatch, scheduler: str) -> None:
    """Traced peak of a pass of 4 and of 32 chunks: one copy of the statistics and a fixed working set.

    5 folds x 128 features x 2,000 targets: 10.9 MB per copy.  The working set
    is a tile of 256 rows per thread and a read block, each of X and y as float64
    (here 4.4 MB and 8.5 MB per thread); a tree of partitions holds 3 copies or more.
    """
    one_total(monkeypatch, True)
    rng = np.random.default_rng(3)
    X = rng.standard_normal((6400, 128)).astype(np.float32)
    Y = rng.standard_normal((6400, 2000)).astype(np.float32)
    copy = 8 * 5 * (128 * 128 + 128 * 2000 + 128 + 2 * 2000 + 2)
    threads = 1 if scheduler == "sync" else 2
    working = threads * 256 * (128 + 2000) * 8 + 2 * 200 * (128 + 2000) * 8
    _traced_peak(4, X[:800], Y[:800], scheduler)  # imports and caches
    few, many = _traced_peak(4, X, Y, scheduler), _traced_peak(32, X, Y, scheduler)
    assert many <= 1.5 * copy + working, (few, many, copy, working)
    assert few <= 1.5 * copy + working, (few, many, copy, working)


def test_memory_check_of_one_total_counts_one_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """100,000 targets x 1,024 features x 5 folds (4.1 GB per copy) fit in 4.2 GB; 3 GB are refused."""
    assert memory.pass_copies(1000, 2**30, single_total=True) == 1
    assert memory.pass_copies(1000, 2**20, single_total=True) == 12  # small statistics: the partition tree
    assert memory.pass_copies(1000, 2**30) == 12
    monkeypatch.setattr(memory, "available_memory", lambda: 4.2e9)
    memory.check_stats_memory(5, 1, 1024, 100_000, 40, single_total=True)
    monkeypatch.setattr(memory, "available_memory", lambda: 3 * 10**9)
    with pytest.raises(InputError) as info:
        memory.check_stats_memory(5, 1, 1024, 100_000, 40, single_total=True)
    assert str(info.value) == (
        "the statistics of 5 folds x 1024 features x 100000 targets take 4.1 GB per copy (X'Y alone: 5 x 1024 x "
        "100000 = 4.1 GB) and a pass over 40 chunk(s) holds at least one copy, more than the 3.0 GB of memory "
        "available; use fewer features or folds, or fit the targets in groups of columns (each is fitted alone "
        "with alpha_per_target)"
    )


def test_one_total_plan_shares_the_cells_among_the_cores() -> None:
    """One partition; the cores of this machine share its cells, a cluster elsewhere keeps its partitions."""
    X = np.zeros((20_000, 1024), dtype=np.float32)
    Y = np.zeros((20_000, 25_000), dtype=np.float32)
    from streamridge.sources import ArrayReader  # noqa: F401  (the readers of in-memory arrays)

    src = open_source(X, y=Y, chunk_rows=500)
    readers, lo = src.pass_readers()
    stats = 8 * 5 * (1024 * 1024 + 1024 * 25_000 + 1024 + 2 * 25_000 + 2)
    plan = plan_statistics(
        readers, lo, lo + 20_000, n_cells=5, stats_bytes=stats, memory_budget=2**33, single_total=True
    )
    assert (len(plan), plan.rows(0), plan.single_total, plan.share_cells) == (1, (0, 20_000), True, 5)
    assert plan.read_rows == 500 and plan.sub_rows == 500  # one stored chunk of X and y: 104 MB as float64
    threads = task_plan(plan, 0, 0, 1, 4, local=True)
    assert threads.cell_threads == 4
    assert task_plan(plan, 0, 0, 1, 1).cell_threads == 1
    tree = plan_statistics(
        readers, lo, lo + 20_000, n_cells=5, stats_bytes=10**6, memory_budget=2**33, single_total=True
    )
    assert not tree.single_total
    assert single_total("threads", None) and single_total("sync", None) and single_total("local:2", None)
    assert not single_total("threads", "ckpt") and not single_total("tcp://10.0.0.1:8786", None)
    assert single_total(Scheduler("processes", "processes", 2, local=True), None)
