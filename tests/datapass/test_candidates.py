"""Candidate feature maps in one pass: each candidate's statistics are those of a pass with it alone."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import streamridge as sr
from streamridge.datapass.driver import accumulate
from streamridge.estimators.mapped import fit_map
from streamridge.features import EchoStateNetwork, Nystroem, RandomHidden
from streamridge.features._candidates import fitted_candidates
from streamridge.sources import open_source
from streamridge.sources._memory import NumpyReader

STATS = ("weight", "count", "mean_x", "mean_y", "sxx", "sxy", "syy")
CHUNK = 53


@pytest.fixture
def data(rng):
    """Six series of unequal length, one target."""
    lengths = [70, 130, 45, 200, 90, 65]
    X = rng.standard_normal((sum(lengths), 3))
    g = np.repeat([11, 3, 8, 5, 20, 1], lengths)
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.standard_normal(len(g))
    return X, y, g


def grids():
    return {
        "esn": EchoStateNetwork.grid(n_units=12, spectral_radius=[0.5, 0.9], leak_rate=[0.3, 1.0], washout=5),
        "random_hidden": RandomHidden.grid(n_units=[8, 15], activation=["tanh", "relu"]),
        "nystroem": Nystroem.grid(n_components=10, gamma=[0.1, 0.5, 2.0]),
    }


def single_passes(maps, X, y, g, scheduler):
    """Every candidate's statistics from a pass of its own, and the spec of the first."""
    out, spec = [], None
    for fmap in maps:
        est = sr.StreamRidgeCV(cv="groups", features=fmap, chunk_rows=CHUNK, scheduler=scheduler)
        out.append(est.compute_stats(X, y, groups=g))
        spec = spec or est._spec
    return out, spec


def candidates_pass(maps, spec, X, y, g, scheduler):
    fitted = [fit_map(m, X, g) for m in maps]
    both = dataclasses.replace(spec, features=fitted_candidates(fitted, X.shape[1]))
    return accumulate(open_source(X, y=y, groups=g, chunk_rows=CHUNK), both, scheduler=scheduler)


@pytest.mark.parametrize("scheduler", ["threads", "processes"])
@pytest.mark.parametrize("kind", ["esn", "random_hidden", "nystroem"])
def test_every_candidate_equals_its_own_pass(kind, scheduler, data):
    """Lanes (a stateful map): bit for bit.  Partitions (stateless maps) are planned by the size of all
    candidates' statistics and features, so their blocks are cut otherwise: equal to 1e-12 relative."""
    X, y, g = data
    maps = grids()[kind]
    ref, spec = single_passes(maps, X, y, g, scheduler)
    got = candidates_pass(maps, spec, X, y, g, scheduler)
    assert len(got) == len(maps)
    for a, b in zip(got, ref):
        assert a.n_features == b.n_features
        np.testing.assert_array_equal(a.count, b.count)
        for name in STATS:
            x, z = getattr(a, name), getattr(b, name)
            if kind == "esn":
                np.testing.assert_array_equal(x, z, err_msg=name)
            else:
                assert np.abs(x - z).max() <= 1e-12 * np.abs(z).max(), name


def test_each_stored_chunk_read_once_for_all_candidates(data, monkeypatch):
    X, y, g = data
    maps = grids()["esn"]
    _, spec = single_passes(maps[:1], X, y, g, "sync")
    fitted = [fit_map(m, X, g) for m in maps]
    reads = []
    original = NumpyReader.read

    def counting(self, start, stop):
        if self.shape == X.shape:
            reads.append((start, stop))
        return original(self, start, stop)

    monkeypatch.setattr(NumpyReader, "read", counting)

    def pass_reads(features):
        reads.clear()
        src = open_source(X, y=y, groups=g, chunk_rows=CHUNK)
        accumulate(src, dataclasses.replace(spec, features=features), scheduler="sync")
        return sorted(reads)

    one = pass_reads(fitted[0])
    many = pass_reads(fitted_candidates(fitted, X.shape[1]))
    assert many == one  # the same reads for 4 candidates as for 1
    assert len(many) == 16  # the 16 chunks of 53 rows cut at the 6 series
    assert sum(b - a for a, b in many) == X.shape[0]  # every row read once


@pytest.mark.parametrize("scheduler", ["sync", "processes"])
@pytest.mark.parametrize("group_bytes", [None, 8 * 20 * 6 * 30])
def test_candidates_of_unequal_widths_in_slices_equal_their_own_passes(
    data, scheduler, group_bytes, monkeypatch
):
    """Reservoirs of 8, 12 and 20 units, and a round's rows cut into slices of 30 rows (set by the widest
    candidate, 20 features x 6 lanes): every candidate, mapped and added slice by slice one candidate
    after the other, has the statistics of its own pass (whose slices are cut by its own width: 1e-12)."""
    from streamridge.datapass import lane_task

    if group_bytes is not None:
        monkeypatch.setattr(lane_task, "GROUP_BYTES", group_bytes)
    X, y, g = data
    maps = EchoStateNetwork.grid(n_units=[8, 12, 20], leak_rate=[0.3, 1.0], washout=5, seed=3)
    ref, spec = single_passes(maps, X, y, g, scheduler)
    got = candidates_pass(maps, spec, X, y, g, scheduler)
    for a, b in zip(got, ref):
        assert a.n_features == b.n_features
        np.testing.assert_array_equal(a.count, b.count)
        for name in STATS:
            x, z = getattr(a, name), getattr(b, name)
            assert np.abs(x - z).max() <= 1e-12 * np.abs(z).max(), name


def test_lane_slices_are_sized_by_the_widest_candidate_not_all_together(data, monkeypatch):
    """With 4 candidates of 12 units the slices of a round are those of one candidate of 12 units: the
    pass's feature buffer holds one candidate's features, never the 4 side by side."""
    from streamridge.datapass import lane_task

    X, y, g = data
    maps = grids()["esn"]
    _, spec = single_passes(maps[:1], X, y, g, "sync")
    fitted = [fit_map(m, X, g) for m in maps]
    monkeypatch.setattr(lane_task, "GROUP_BYTES", 8 * 12 * 6 * 10)  # 10 rows of 6 lanes of 12 features
    widths = []
    original = EchoStateNetwork.apply_chunks

    def recording(self, items, *, out=None):
        widths.append(sum(int(X.shape[0]) for X, *_ in items))
        return original(self, items, out=out)

    monkeypatch.setattr(EchoStateNetwork, "apply_chunks", recording)
    src = open_source(X, y=y, groups=g, chunk_rows=CHUNK)
    accumulate(
        src, dataclasses.replace(spec, features=fitted_candidates(fitted, X.shape[1])), scheduler="sync"
    )
    assert max(widths) == 60  # 10 rows of each of 6 lanes, per candidate (not 10 / 4 rows)
    assert len(widths) % 4 == 0


def test_candidate_subsets_depend_on_the_counts_only():
    from streamridge.datapass.candidates import candidate_subsets

    assert [len(s) for s in candidate_subsets(27, 1, 8)] == [4, 4, 4, 3, 3, 3, 3, 3]
    assert candidate_subsets(27, 1, 8)[1] == [4, 5, 6, 7]
    assert candidate_subsets(27, 4, 8) == [list(range(14)), list(range(14, 27))]
    assert candidate_subsets(27, 8, 8) == [list(range(27))]
    assert candidate_subsets(3, 1, 8) == [[0], [1], [2]]


@pytest.mark.parametrize("scheduler", ["threads", "processes"])
def test_one_series_spreads_the_candidates_over_tasks(scheduler, rng, monkeypatch):
    """One long series is one lane: its 5 candidates become 5 tasks (one each), which the workers share;
    every candidate's statistics are those of its own pass, bit for bit, and each candidate maps the
    series once."""
    from streamridge.datapass.layouts import Lanes, LaneTasks

    X = rng.standard_normal((400, 2))
    y = X[:, 0] * X[:, 1] + 0.1 * rng.standard_normal(400)
    g = np.zeros(400, dtype=int)
    maps = EchoStateNetwork.grid(
        n_units=10, spectral_radius=[0.5, 0.9], leak_rate=[0.3, 0.6, 1.0], washout=5
    )[:5]
    ref, spec = single_passes(maps, X, y, g, scheduler)
    fitted = [fit_map(m, X, g) for m in maps]
    both = dataclasses.replace(spec, features=fitted_candidates(fitted, X.shape[1]))
    src = open_source(X, y=y, groups=g, chunk_rows=CHUNK)
    from streamridge.datapass.candidates import candidate_stats_kernel

    tasks = LaneTasks(src, candidate_stats_kernel(both), Lanes(both, statistics=True), 0)
    assert len(tasks) == 5 and sum(tasks.size(i) for i in range(5)) == 400
    assert [len(tasks.args(i, first=0, sched=None)[1].features.candidates) for i in range(5)] == [1] * 5
    rows = {}
    original = EchoStateNetwork.apply_chunks

    def counting(self, items, *, out=None):
        rows[id(self)] = rows.get(id(self), 0) + sum(int(X.shape[0]) for X, *_ in items)
        return original(self, items, out=out)

    if scheduler == "threads":
        monkeypatch.setattr(EchoStateNetwork, "apply_chunks", counting)
    got = candidates_pass(fitted, spec, X, y, g, scheduler)
    if scheduler == "threads":
        assert sorted(rows.values()) == [400] * 5  # each candidate over the series once
    for a, b in zip(got, ref):
        for name in STATS:
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
