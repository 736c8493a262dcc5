"""Bands of features and their weight vectors (``bands=``, ``band_weights=``), checked once.

:func:`check_bands` is the one check of the two parameters: a fit calls it where
its :class:`~streamridge.model_selection.choose.SelectionConfig` is built
(:func:`~streamridge.model_selection.choose.config_of`) and, with the same
arguments, before the pass, so that a wrong band is refused before a row is
read.  It returns the :class:`Bands` that banded ridge
(:func:`streamridge.solvers.banded.banded_search`) takes: the sorted columns of
every band, their names and the weight vectors.

``bands`` is a list of index arrays or slices, a mapping name -> columns, or
``"concat"``: the parts of a :class:`~streamridge.features.Concat` feature map,
one band per part, in order.  ``band_weights`` is an int (that many weight
vectors: the equal weights, each band alone, then Dirichlet samples seeded by
``random_state``, :func:`~streamridge.solvers.banded.sample_band_weights`), an
array of shape (n_samples, n_bands), or None for :func:`default_n_weights`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from streamridge.errors import ParameterError
from streamridge.solvers.banded import sample_band_weights

__all__ = ["DEFAULT_BAND_WEIGHTS", "STATS_SCORINGS", "Bands", "check_bands", "default_n_weights"]

#: weight vectors sampled when ``band_weights`` is None (at least one more than the bands)
DEFAULT_BAND_WEIGHTS = 20

#: the scorings computed from the statistics, without a pass over the rows
STATS_SCORINGS = ("r2", "correlation")

_FORM = "a list of feature index arrays or slices, a dict name -> columns, or 'concat'"


@dataclass(frozen=True)
class Bands:
    """Checked bands of features and weight vectors.

    Attributes
    ----------
    columns : tuple of arrays of int
        The sorted columns of every band; every feature in exactly one band.
    names : tuple of str
        One name per band (the mapping's keys, the parts' map names, or ``band0``, ``band1``, ...).
    weights : array of shape (S, n_bands)
        The weight vectors searched.
    """

    columns: tuple[np.ndarray, ...]
    names: tuple[str, ...]
    weights: np.ndarray

    @property
    def n_bands(self) -> int:
        """Number of bands."""
        return len(self.columns)


def default_n_weights(n_bands: int) -> int:
    """Weight vectors searched without ``band_weights``: :data:`DEFAULT_BAND_WEIGHTS`, at least ``n_bands + 1``."""
    return max(DEFAULT_BAND_WEIGHTS, n_bands + 1)


def check_bands(
    bands: Any,
    band_weights: Any,
    n_features: int,
    *,
    seed: int = 0,
    feature_map: Any = None,
    selection: str | None = None,
    prefixes: Any = None,
    scoring: str | None = None,
) -> Bands | None:
    """Validate ``bands`` and ``band_weights`` of an estimator, and the options they combine with.

    Parameters
    ----------
    bands : list, mapping, "concat" or None
        See the module docstring.
    band_weights : int, array of shape (n_samples, n_bands) or None
    n_features : int
        The model's features (a feature map's outputs).
    seed : int
        Seed of the sampled weight vectors (``random_state``).
    feature_map : FeatureMap or None
        The fitted feature map, for ``bands="concat"``.
    selection, prefixes, scoring
        The estimator's ``selection``, ``feature_prefixes`` and ``scoring``: banded
        ridge selects no features, and scores from the statistics only.

    Returns
    -------
    Bands or None
        None without ``bands``.

    Raises
    ------
    ParameterError
        One line naming the problem and the fix.
    """
    if bands is None:
        if band_weights is not None:
            raise ParameterError(
                "band_weights needs bands (the feature columns of every band); set bands= or drop band_weights"
            )
        return None
    _check_combination(selection, prefixes, scoring)
    names, items = _band_items(bands, feature_map)
    columns = tuple(_band_columns(b, i, n_features) for i, b in enumerate(items))
    _check_partition(columns, n_features)
    return Bands(columns, names, _weights(band_weights, len(columns), seed))


def _check_combination(selection: str | None, prefixes: Any, scoring: str | None) -> None:
    """Refuse the options that banded ridge does not combine with."""
    if selection is not None:
        raise ParameterError(
            f"bands= chooses band weights, selection={selection!r} chooses features; they cannot be combined: drop one"
        )
    if prefixes is not None:
        raise ParameterError("bands= and feature_prefixes cannot be combined; drop one")
    if scoring is not None and scoring not in STATS_SCORINGS:
        raise ParameterError(
            f"bands= scores from the statistics: scoring must be None (squared error), 'r2' or 'correlation'; "
            f"got scoring={scoring!r}"
        )


def _band_items(bands: Any, feature_map: Any) -> tuple[tuple[str, ...], list[Any]]:
    """Names and column specifications of the bands."""
    if isinstance(bands, str):
        if bands != "concat":
            raise ParameterError(f"bands must be {_FORM}; got bands={bands!r}")
        return _concat_bands(feature_map)
    if isinstance(bands, Mapping):
        names, items = tuple(str(k) for k in bands), list(bands.values())
    else:
        try:
            items = list(bands)
        except TypeError:
            raise ParameterError(f"bands must be {_FORM}; got bands={bands!r}") from None
        names = tuple(f"band{i}" for i in range(len(items)))
    if not items:
        raise ParameterError(
            f"bands must be a non-empty list of feature index arrays or slices; got bands={bands!r}"
        )
    return names, items


def _concat_bands(feature_map: Any) -> tuple[tuple[str, ...], list[Any]]:
    """One band per part of a fitted ``Concat`` map, named by the parts' maps."""
    parts = getattr(feature_map, "maps_", None)
    if getattr(feature_map, "name", None) != "concat" or parts is None:
        what = (
            "no feature map"
            if feature_map is None
            else f"the feature map {getattr(feature_map, 'name', feature_map)!r}"
        )
        raise ParameterError(
            f"bands='concat' takes one band per part of a Concat feature map; got {what}; "
            "use features=Concat([...]) or give the bands' columns"
        )
    names, items, start = [], [], 0
    for i, m in enumerate(parts):
        width = int(m.n_features_out_)
        names.append(f"{i}:{m.name}")
        items.append(slice(start, start + width))
        start += width
    return tuple(names), items


def _band_columns(band: object, i: int, n_features: int) -> np.ndarray:
    """Sorted columns of band i (a slice or integer indices, each once)."""
    if isinstance(band, slice):
        cols = np.arange(n_features)[band]
    else:
        raw = np.atleast_1d(np.asarray(band))
        if raw.size == 0:
            raise ParameterError(f"band {i} is empty; every band needs at least one feature")
        if raw.dtype.kind not in "iu" or raw.ndim != 1:
            raise ParameterError(
                f"band {i} must be a slice or a 1-D array of integer feature indices; got {_short(raw)}"
            )
        cols = raw.astype(np.intp)
    if cols.size == 0:
        raise ParameterError(f"band {i} is empty; every band needs at least one feature")
    bad = cols[(cols < 0) | (cols >= n_features)]
    if bad.size:
        raise ParameterError(
            f"band {i} holds feature {int(bad[0])}, out of range for {n_features} features (0..{n_features - 1})"
        )
    cols = np.sort(cols)
    twice = cols[1:][cols[1:] == cols[:-1]]
    if twice.size:
        raise ParameterError(f"band {i} holds feature {int(twice[0])} twice; list every feature once")
    return cols


def _check_partition(columns: tuple[np.ndarray, ...], n_features: int) -> None:
    """Every feature in exactly one band."""
    owner = np.full(n_features, -1)
    for i, cols in enumerate(columns):
        taken = cols[owner[cols] >= 0]
        if taken.size:
            j = int(taken[0])
            raise ParameterError(
                f"feature {j} is in bands {int(owner[j])} and {i}; put every feature in exactly one band"
            )
        owner[cols] = i
    missing = np.flatnonzero(owner < 0)
    if missing.size:
        raise ParameterError(
            f"features {_short(missing)} ({missing.size} of {n_features}) are in no band; put every feature in exactly one band"
        )


def _weights(spec: Any, n_bands: int, seed: int) -> np.ndarray:
    """Weight vectors from None, an int (:func:`sample_band_weights`) or an explicit array."""
    if spec is None:
        return sample_band_weights(n_bands, default_n_weights(n_bands), seed=seed)
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, (bool, np.bool_)):
        return sample_band_weights(n_bands, int(spec), seed=seed)
    return _explicit_weights(spec, n_bands)


def _explicit_weights(weights: object, n_bands: int) -> np.ndarray:
    """Explicit weight vectors: shape (S, n_bands), finite, non-negative, none all zero."""
    want = f"band_weights must be an int or an array of shape (n_samples, {n_bands})"
    try:
        w = np.asarray(weights, dtype=np.float64)
    except (TypeError, ValueError):
        raise ParameterError(f"{want}; got band_weights={weights!r}") from None
    if w.ndim == 1 and n_bands > 1 and w.shape[0] == n_bands:
        w = w[None, :]
    if w.ndim != 2 or w.shape[0] == 0 or w.shape[1] != n_bands:
        raise ParameterError(f"{want}; got shape {np.shape(w)}")
    bad = np.flatnonzero(~np.isfinite(w).all(axis=1) | (w < 0).any(axis=1) | ~(w > 0).any(axis=1))
    if bad.size:
        raise ParameterError(
            f"band_weights rows must be finite, non-negative and not all zero; row {int(bad[0])} is {w[bad[0]].tolist()}"
        )
    return w


def _short(a: np.ndarray) -> str:
    v = np.asarray(a).ravel().tolist()
    return str(v) if len(v) <= 8 else f"[{', '.join(map(str, v[:8]))}, ...]"
