"""One kernel per candidate feature map, all fed by one pass over the rows.

The pass maps every block by all candidates together (a
:class:`~streamridge.features._candidates.Candidates` map: the partitions'
:class:`~streamridge.datapass.mapped.MappedKernel`, or the lanes of a stateful map carrying
every candidate's state); :class:`CandidatesKernel` hands each candidate's columns of the
features to that candidate's own kernel.  Each stored chunk is read and decoded once for all
candidates, and each candidate's accumulator sees exactly the rows and features a pass with
that candidate alone would give it.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from streamridge.datapass.spec import PassSpec
from streamridge.datapass.stats_kernel import StatsKernel


class CandidatesKernel:
    """Kernels of candidate maps side by side: candidate g takes the feature columns ``offsets[g]:offsets[g+1]``.

    Follows the pass's kernel protocol (:mod:`streamridge.datapass.driver`); its
    accumulators and results are lists, one entry per candidate.

    Parameters
    ----------
    kernels : sequence of kernels
        One per candidate, each taking its candidate's features.
    offsets : sequence of int
        First column of every candidate's features, and one past the last column.
    """

    def __init__(self, kernels: Sequence[Any], offsets: Sequence[int]) -> None:
        if len(offsets) != len(kernels) + 1:
            raise ValueError("offsets must have one entry more than kernels")
        self.kernels, self.offsets = list(kernels), [int(o) for o in offsets]

    @property
    def width(self) -> int:
        """Features per row: every candidate's side by side."""
        return self.offsets[-1]

    @property
    def n_cells(self) -> int:
        """Cells the rows go to (the same for every candidate)."""
        return max(int(k.n_cells) for k in self.kernels)

    def result_bytes(self) -> int:
        """Bytes of one task's results, all candidates'."""
        return sum(int(k.result_bytes()) for k in self.kernels)

    def describe(self) -> dict[str, Any]:
        """Every candidate kernel's description."""
        return {"candidates": [k.describe() for k in self.kernels]}

    def start(self) -> list[Any]:
        """One empty accumulator per candidate."""
        return [k.start() for k in self.kernels]

    def add(
        self,
        acc: list[Any],
        F: np.ndarray,
        y: Any,
        groups: Any,
        weights: Any,
        row_start: int,
        drop: Any = None,
    ) -> None:
        """Candidate g's features of rows ``row_start ..`` into its accumulator.

        ``F`` is the candidates' :class:`~streamridge.features._candidates.CandidateFeatures` (each
        candidate's own array, taken as it is; a part that is None is skipped) or one array of
        their columns side by side (each candidate's columns copied C-contiguous).
        """
        parts = getattr(F, "parts", None)
        for g, (kernel, a) in enumerate(zip(self.kernels, acc)):
            Fg = F[:, self.offsets[g] : self.offsets[g + 1]] if parts is None else parts[g]
            if Fg is not None:  # a lane's pieces come candidate after candidate, each with its part only
                kernel.add(a, np.ascontiguousarray(Fg), y, groups, weights, row_start, drop)

    def finish(self, acc: list[Any]) -> list[Any]:
        """Every candidate's task result."""
        return [k.finish(a) for k, a in zip(self.kernels, acc)]

    def merge(self, a: list[Any], b: list[Any]) -> list[Any]:
        """Candidate by candidate (``a``'s rows before ``b``'s); a candidate a task did not run is None there."""
        return [y if x is None else x if y is None else k.merge(x, y) for k, x, y in zip(self.kernels, a, b)]

    def result(self, total: list[Any] | None) -> list[Any]:
        """Every candidate's result of the pass."""
        parts = [None] * len(self.kernels) if total is None else total
        return [k.result(t) for k, t in zip(self.kernels, parts)]

    def narrowed(self, group_values: tuple[Any, ...] | None) -> CandidatesKernel:
        """The candidates' kernels of a lane group holding the series ``group_values``."""
        return CandidatesKernel([_narrowed(k, group_values) for k in self.kernels], self.offsets)

    def finish_lane(self, out: list[Any], rows_seen: int, state: Any) -> list[Any] | None:
        """Every candidate's lane result, each with its own state after the lane (None: the lanes held no row)."""
        if not rows_seen:
            return None
        return [
            _finish_lane(k, o, rows_seen, s)
            for k, o, s in zip(self.kernels, out, state or (None,) * len(self.kernels))
        ]


class CandidateSubset:
    """The kernel of a task running some of the candidates (``members``) over its rows.

    Candidates are independent, so a pass with few lanes spreads them over its tasks as
    well as the rows (:class:`~streamridge.datapass.layouts.LaneTasks`): the task maps
    only its members (its spec's map is :meth:`~streamridge.features.Candidates.subset`)
    and its result is the full list of candidates with None for the others, which
    :meth:`CandidatesKernel.merge` passes over.

    Parameters
    ----------
    full : CandidatesKernel
    members : sequence of int
        The candidates of the task, in order.
    """

    def __init__(self, full: CandidatesKernel, members: Sequence[int]) -> None:
        self.full, self.members = full, [int(g) for g in members]
        widths = [full.offsets[g + 1] - full.offsets[g] for g in self.members]
        offsets = [0, *itertools.accumulate(widths)]
        self.inner = CandidatesKernel([full.kernels[g] for g in self.members], offsets)

    @property
    def n_cells(self) -> int:
        return self.inner.n_cells

    def result_bytes(self) -> int:
        return self.inner.result_bytes()

    def start(self) -> list[Any]:
        return self.inner.start()

    def add(self, acc: list[Any], F: Any, *args: Any) -> None:
        """The members' features into their accumulators."""
        self.inner.add(acc, F, *args)

    def finish(self, acc: list[Any]) -> list[Any]:
        """The members' task results (:meth:`finish_lane` puts them among all the candidates)."""
        return self.inner.finish(acc)

    def narrowed(self, group_values: tuple[Any, ...] | None) -> CandidateSubset:
        """The members' kernels of a lane group holding the series ``group_values``."""
        return CandidateSubset(self.full.narrowed(group_values), self.members)

    def finish_lane(self, out: list[Any], rows_seen: int, state: Any) -> list[Any] | None:
        """The members' lane results in their places among all candidates (None elsewhere)."""
        done = self.inner.finish_lane(out, rows_seen, state)
        if done is None:
            return None
        full: list[Any] = [None] * len(self.full.kernels)
        for g, r in zip(self.members, done):
            full[g] = r
        return full


def candidate_subsets(n_candidates: int, n_tasks: int, min_tasks: int) -> list[list[int]]:
    """The candidates split into consecutive subsets so that ``n_tasks`` tasks become ``min_tasks`` or more.

    One subset (all candidates) when there are tasks enough already; a function of the
    counts only, so the tasks (and the order of merges) do not depend on the scheduler.
    """
    n = max(1, min(int(n_candidates), -(-int(min_tasks) // max(1, int(n_tasks)))))
    return [part.tolist() for part in np.array_split(np.arange(n_candidates), n)]


def _narrowed(kernel: Any, group_values: tuple[Any, ...] | None) -> Any:
    return kernel.narrowed(group_values) if hasattr(kernel, "narrowed") else kernel


def _finish_lane(kernel: Any, out: Any, rows_seen: int, state: Any) -> Any:
    finish = getattr(kernel, "finish_lane", None)
    return out if finish is None else finish(out, rows_seen, state)


def is_candidates(features: Any) -> bool:
    """Whether ``features`` is a set of candidate maps (:class:`~streamridge.features._candidates.Candidates`)."""
    if features is None:
        return False
    from streamridge.features._candidates import Candidates

    return isinstance(features, Candidates)


def candidate_stats_kernel(spec: PassSpec) -> CandidatesKernel:
    """The statistics pass's kernel of ``spec``'s candidate maps: a :class:`StatsKernel` per candidate.

    Candidate g's kernel has the spec of a pass with that candidate alone (its checkpoint
    description and its statistics are that pass's).
    """
    fmap = spec.features
    kernels = [
        StatsKernel(dataclasses.replace(spec, features=m), int(m.n_features_out_)) for m in fmap.candidates
    ]
    return CandidatesKernel(kernels, fmap.offsets)
