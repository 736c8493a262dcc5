"""Candidate maps of one input, run side by side in one pass, each its own model: :class:`Candidates`, :func:`grid`.

A pass over :class:`Candidates` reads and decodes every chunk once and maps it by every
candidate; the features come out side by side (candidate g's columns
``offsets[g]:offsets[g + 1]``) and the pass keeps one set of statistics per candidate
(:mod:`streamridge.datapass.candidates`).  Model selection then chooses the candidate
together with lambda (:mod:`streamridge.model_selection.candidates`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from streamridge.errors import ParameterError
from streamridge.features._base import FeatureMap
from streamridge.features._compose import (  # a set of candidates fits and lists its parts as Concat does
    Concat,
    _fitted,
    _parts,
)


class Candidates(Concat):
    """Candidate maps of the same input: their features side by side, each candidate's columns its own model.

    Unlike :class:`Concat`, the candidates' features are never one model: the pass keeps
    statistics per candidate.  Every candidate must leave out the same rows (washout), so
    that each candidate's statistics are those of a pass with it alone.

    Parameters
    ----------
    maps : list of FeatureMap
    """

    name = "candidates"

    def _check_params(self) -> None:
        super()._check_params()
        washouts = sorted({m.rows_left_out() for m in self.maps or []})
        if len(washouts) > 1:
            raise ParameterError(
                f"candidate feature maps must leave out the same rows; got washouts {washouts}; "
                "give every candidate the same washout"
            )

    @property
    def offsets(self) -> list[int]:
        """First column of every candidate's features, and one past the last column."""
        return [0, *itertools.accumulate(m.n_features_out_ for m in _fitted(self))]

    def apply_chunks(
        self, items: list[tuple[np.ndarray, int, np.ndarray | None, Any]], *, out: np.ndarray | None = None
    ) -> list[tuple[np.ndarray, Any]]:
        """Every candidate's ``apply_chunks`` of the items (an echo state network steps their series together)."""
        per_map = [
            m.apply_chunks([(X, r, g, s[i]) for X, r, g, s in items]) for i, m in enumerate(_fitted(self))
        ]
        rows = [X.shape[0] for X, *_ in items]
        width = self.n_features_out_
        buf = out if out is not None and out.shape[0] >= sum(rows) else np.empty((sum(rows), width))
        result, at = [], 0
        for j, m in enumerate(rows):
            F = buf[at : at + m]
            at += m
            np.concatenate([outs[j][0] for outs in per_map], axis=1, out=F)
            result.append((F, tuple(outs[j][1] for outs in per_map)))
        return result

    @property
    def candidates(self) -> list[FeatureMap]:
        """The candidate maps (fitted when this is)."""
        return _parts(self)


def fitted_candidates(maps: Sequence[FeatureMap], n_features_in: int) -> Candidates:
    """:class:`Candidates` of maps fitted already (each for ``n_features_in`` inputs)."""
    out = Candidates(list(maps))
    out.maps_ = list(maps)
    out.n_features_in_ = int(n_features_in)
    return out
