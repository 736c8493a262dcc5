"""Candidate maps of one input, run side by side in one pass, each its own model: :class:`Candidates`, :func:`grid`.

A pass over :class:`Candidates` reads and decodes every chunk once and maps it by every
candidate, each into its own block (:class:`CandidateFeatures`; ``np.asarray`` of it puts them side
by side, candidate g's columns ``offsets[g]:offsets[g + 1]``), and the pass keeps one set of
statistics per candidate
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

    def apply_chunk(self, X: np.ndarray, row_start: int, groups: Any, state: Any) -> tuple[Any, Any]:
        """Every candidate's features of one chunk, as :class:`CandidateFeatures`, and the new states."""
        return self.apply_chunks([(X, row_start, groups, state)])[0]

    def apply_chunks(
        self, items: list[tuple[np.ndarray, int, np.ndarray | None, Any]], *, out: np.ndarray | None = None
    ) -> list[tuple[Any, Any]]:
        """Every candidate's ``apply_chunks`` of the items (an echo state network steps their series together),
        candidate after candidate, each into its own C-contiguous block.

        The features of an item are a :class:`CandidateFeatures`: candidate g's own array, not
        the columns of one wide array, so the pass hands each to its candidate's kernel as it
        is.  ``out`` (C-contiguous float64, at least rows x ``n_features_out_``) is the memory
        the candidates' blocks are cut from.
        """
        maps = _fitted(self)
        n = sum(int(np.shape(X)[0]) for X, *_ in items)
        offsets = self.offsets
        flat = _flat(out, n * offsets[-1])
        per_map = [
            m.apply_chunks(
                [(X, r, g, s[i]) for X, r, g, s in items], out=flat[lo * n : hi * n].reshape(n, hi - lo)
            )
            for i, (m, lo, hi) in enumerate(zip(maps, offsets[:-1], offsets[1:]))
        ]
        return [
            (
                CandidateFeatures([np.ascontiguousarray(outs[j][0]) for outs in per_map]),
                tuple(outs[j][1] for outs in per_map),
            )
            for j in range(len(items))
        ]

    def subset(self, members: Sequence[int]) -> Candidates:
        """The fitted candidates ``members`` (in that order) as a set of their own."""
        maps = _fitted(self)
        return fitted_candidates([maps[int(g)] for g in members], int(self.n_features_in_))

    def only(self, g: int, F: np.ndarray) -> CandidateFeatures:
        """Candidate g's features ``F`` as the candidates' features whose other parts are None (not mapped)."""
        parts: list[np.ndarray | None] = [None] * len(self.offsets[:-1])
        parts[g] = F
        return CandidateFeatures(parts)

    def transform(self, X: Any, groups: Any = None) -> np.ndarray:
        """Every candidate's features side by side (candidate g's columns ``offsets[g]:offsets[g + 1]``)."""
        return np.asarray(super().transform(X, groups))

    @property
    def candidates(self) -> list[FeatureMap]:
        """The candidate maps (fitted when this is)."""
        return _parts(self)


class CandidateFeatures:
    """The features of candidate maps for the same rows: candidate g's own array ``parts[g]``.

    What :meth:`Candidates.apply_chunks` returns for an item (every part given;
    ``np.asarray`` of it is the candidates' features side by side), or
    :meth:`Candidates.only` (one part given, the others None: a pass maps and
    consumes the candidates one after the other).

    Parameters
    ----------
    parts : list of arrays of shape (rows, width_g), or None
    """

    def __init__(self, parts: list[np.ndarray | None]) -> None:
        self.parts = parts

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, the given parts' widths together)."""
        given = [p for p in self.parts if p is not None]
        return int(given[0].shape[0]), sum(int(p.shape[1]) for p in given)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = np.concatenate([p for p in self.parts if p is not None], axis=1)
        return out if dtype is None else out.astype(dtype)


def _flat(out: np.ndarray | None, size: int) -> np.ndarray:
    """``size`` floats of ``out``'s memory when it is C-contiguous float64 and large enough, else new."""
    if out is not None and out.dtype == np.float64 and out.flags.c_contiguous and out.size >= size:
        return out.reshape(-1)[:size]
    return np.empty(size)


def fitted_candidates(maps: Sequence[FeatureMap], n_features_in: int) -> Candidates:
    """:class:`Candidates` of maps fitted already (each for ``n_features_in`` inputs)."""
    out = Candidates(list(maps))
    out.maps_ = list(maps)
    out.n_features_in_ = int(n_features_in)
    return out
