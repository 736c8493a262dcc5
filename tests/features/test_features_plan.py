"""How the pass groups and slices the lanes of a stateful map (streamridge.datapass.plan): any grouping and
any slicing of a round give the statistics of the features computed in memory."""

from __future__ import annotations

import numpy as np
import pytest

import streamridge as sr
import streamridge.datapass.lane_task as lane_task
import streamridge.datapass.plan as plan
import streamridge.datapass.stats_kernel as stats_kernel
from streamridge.features import EchoStateNetwork

STATS = ("weight", "count", "mean_x", "mean_y", "sxx", "sxy", "syy")
LENGTHS = [130, 8, 260, 45, 9, 99, 200, 58]  # rows of each series, in order


@pytest.fixture
def series(rng):
    lengths = LENGTHS
    X = rng.standard_normal((sum(lengths), 2))
    X[3, 1] = np.nan  # a row skipped (skip_nonfinite) is zeroed for the map; stateful maps refuse it
    g = np.repeat(np.arange(len(lengths)) * 3 + 1, lengths)
    y = np.sin(np.cumsum(np.nan_to_num(X[:, 0]))) + 0.1 * rng.standard_normal(len(g))
    return X, y, g


def stats(X, y, g, **kw):
    esn = EchoStateNetwork(12, leak_rate=0.5, washout=6, bias_scaling=0.2, seed=3)
    return sr.StreamRidgeCV(cv="groups", features=esn, chunk_rows=40, **kw).compute_stats(X, y, groups=g)


def reference(X, y, g):
    """The features in memory (one run per series), the washout rows dropped, then the plain pass."""
    esn = EchoStateNetwork(12, leak_rate=0.5, washout=6, bias_scaling=0.2, seed=3).fit(X)
    F = esn.transform(X, groups=g)
    keep = np.concatenate([np.arange(n) >= 6 for n in LENGTHS])
    return sr.StreamRidgeCV(cv="groups", chunk_rows=1000).compute_stats(F[keep], y[keep], groups=g[keep])


def assert_same(a, b):
    for name in STATS:
        A, B = getattr(a, name), getattr(b, name)
        np.testing.assert_allclose(A, B, rtol=1e-12, atol=1e-12 * np.abs(B).max(), err_msg=name)


@pytest.mark.parametrize("group", [1, 3, 32])
@pytest.mark.parametrize("group_bytes", [8 * 12 * 5, 8 * 12 * 3 * 8 * 11, 1 << 27])
def test_any_grouping_and_slicing_gives_the_in_memory_statistics(series, monkeypatch, group, group_bytes):
    """Lanes one per task, in threes, all in one task; rounds mapped in slices of one row up to whole chunks."""
    X, y, g = series
    Xf = np.nan_to_num(X)
    monkeypatch.setattr(plan, "LANE_GROUP", group)
    monkeypatch.setattr(plan, "MAX_LANE_GROUP", group)
    monkeypatch.setattr(lane_task, "GROUP_BYTES", group_bytes)
    assert_same(stats(Xf, y, g), reference(Xf, y, g))


def test_slices_keep_the_row_named_in_errors(series, monkeypatch):
    """A NaN input row is reported with its global row, whatever the slicing."""
    X, y, g = series
    monkeypatch.setattr(lane_task, "GROUP_BYTES", 8 * 12 * 2)
    with pytest.raises(sr.errors.NonFiniteError, match=r"first at rows \[3\]"):
        stats(X, y, g, skip_nonfinite=True)


@pytest.mark.parametrize(
    ("lanes", "size"), [(1, 8), (2, 8), (64, 8), (71, 8), (128, 16), (200, 25), (256, 32), (10_000, 32)]
)
def test_group_size(lanes, size):
    """At least LANE_GROUP lanes a task, more with many lanes (at least MIN_TASKS tasks), at most MAX_LANE_GROUP."""
    assert plan.group_size(lanes) == size
    assert plan.group_size(lanes, 10 * lanes) == size  # lanes of many series each: the same


@pytest.mark.parametrize(
    ("lanes", "series", "size"),
    [(64, 64, 16), (64, 200, 8), (64, 96, 11), (8, 8, 16), (1, 1, 16), (300, 300, 32), (128, 128, 16)],
)
def test_group_size_steps_enough_series_together(lanes, series, size):
    """Lanes of one series each are grouped LOCKSTEP_SERIES (16) at a time, so that a step is not mostly overhead;
    lanes holding a few series each need fewer of them, and no group exceeds MAX_LANE_GROUP."""
    assert plan.group_size(lanes, series) == size


@pytest.mark.parametrize("sched", ["sync", "threads"])
def test_lane_groups_hold_their_own_folds_same_bits(rng, monkeypatch, sched):
    """With cv="groups" a lane group's statistics hold the folds of its own series only; the pass's result
    (aligned to all folds at the end) is bit for bit that of lane groups holding all the folds."""
    lengths = [80, 40, 120, 40, 80, 40, 40, 120]  # every series starts a chunk of 40 rows: 8 lanes
    X = rng.standard_normal((sum(lengths), 2))
    g = np.repeat(np.arange(len(lengths))[::-1] * 3 + 1, lengths)  # ids not in row order
    y = np.sin(np.cumsum(X[:, 0])) + 0.1 * rng.standard_normal(len(g))
    monkeypatch.setattr(plan, "LANE_GROUP", 2)
    monkeypatch.setattr(plan, "MAX_LANE_GROUP", 2)
    seen = []
    real_task = lane_task.lane_task

    def task(lane, *args):
        out = real_task(lane, *args)
        seen.append((lane.group_values, out.n_folds, out.meta["scheme"]["group_values"]))
        return out

    monkeypatch.setattr(lane_task, "lane_task", task)
    new = stats(X, y, g, scheduler=sched)
    assert sorted(len(v) for v, n, _ in seen) == [2, 2, 2, 2]  # 8 series in groups of 2 lanes
    assert all(n == len(v) and list(v) == sv for v, n, sv in seen)
    monkeypatch.setattr(stats_kernel, "lane_scheme", lambda scheme, values: scheme)
    old = stats(X, y, g, scheduler=sched)
    assert new.n_folds == old.n_folds == len(lengths)
    assert new.meta["scheme"] == old.meta["scheme"]
    for name in STATS:
        assert np.array_equal(getattr(new, name), getattr(old, name)), name


def test_all_folds_places_a_subset_of_series_in_the_pass_folds(series):
    """A result over some series only (the scheme names more) is spread over all folds; its meta is kept."""
    from streamridge.folds.schemes import FoldScheme
    from streamridge.stats.foldstats import FoldStats

    full = FoldScheme("logo", 4, group_values=(1, 4, 7, 10))
    part = FoldStats.zeros(
        2, 1, 3, 1, {"scheme": FoldScheme("logo", 2, group_values=(4, 10)).to_dict(), "rows_seen": 9}
    )
    part.weight[:] = part.count[:] = [[2], [5]]
    part.mean_x[:] = np.arange(6).reshape(2, 1, 3)
    part.sxx[:] = 1.5
    spec = type("Spec", (), {"scheme": full})()
    total = stats_kernel.all_folds(part, spec)
    assert total.n_folds == 4 and total.meta["rows_seen"] == 9 and total.meta["scheme"] == full.to_dict()
    assert total.count[:, 0].tolist() == [0, 2, 0, 5]
    assert np.array_equal(total.mean_x[[1, 3]], part.mean_x) and not total.mean_x[[0, 2]].any()
    assert np.array_equal(total.sxx[[1, 3]], part.sxx) and not total.sxx[[0, 2]].any()
