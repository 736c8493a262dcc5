"""Composition of feature maps: side by side (:class:`Concat`) and in sequence (:class:`Pipeline`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
from sklearn.base import clone
from sklearn.utils.validation import check_is_fitted

from streamridge.errors import InputError
from streamridge.features._base import FeatureMap, Footprint, check_features
from streamridge.features._params import Constraints, MapList

_MAPS: Constraints = {"maps": (MapList(),)}


def _check_maps(obj: Any) -> list[FeatureMap]:
    """The parts, after checking the parameters of the map and of every part."""
    obj._check_params()
    return list(obj.maps)


def _check_parts(obj: Any) -> None:
    """:meth:`FeatureMap._check_params` of a composite map: ``maps`` itself, then every part's parameters."""
    FeatureMap._check_params(obj)
    for m in obj.maps:
        m._check_params()


def _combined(parts: list[Footprint], width: int) -> Footprint:
    """Footprint of parts fitted one after the other, each keeping its arrays; named by the largest part."""
    held = peak = 0
    for fp in parts:
        peak = max(peak, held + fp.peak)
        held += fp.held
    big = max(parts, key=lambda fp: fp.peak)
    return Footprint(width, held, peak, big.what, big.label, big.param)


def _parts(obj: Any) -> list[FeatureMap]:
    """The fitted parts when fitted, else the given ones."""
    return list(getattr(obj, "maps_", None) or obj.maps or [])


def _fitted(obj: Any) -> list[FeatureMap]:
    """The fitted parts (``maps_``: fitted copies; the ``maps`` parameter is left as given)."""
    check_is_fitted(obj, "maps_")
    return list(obj.maps_)


def _fresh(obj: Any) -> list[FeatureMap]:
    return [clone(m) for m in _check_maps(obj)]


class Concat(FeatureMap):
    """Features of several maps of the same input, side by side (in the given order).

    Parameters
    ----------
    maps : list of FeatureMap
    """

    name = "concat"
    _param_constraints: ClassVar[Constraints] = _MAPS

    def __init__(self, maps: list[FeatureMap] | None = None) -> None:
        self.maps = maps

    def _check_params(self) -> None:
        _check_parts(self)

    def footprint(self, n_features_in: int) -> Footprint:
        """The parts' arrays together; the parts' widths summed."""
        parts = [m.footprint(n_features_in) for m in self.maps or []]
        return _combined(parts, sum(fp.width for fp in parts))

    def rows_left_out(self) -> int:
        """The longest washout of the parts."""
        return max(m.rows_left_out() for m in _parts(self))

    @property
    def stateful(self) -> bool:  # type: ignore[override]
        """True if any part is stateful."""
        return any(m.stateful for m in self.maps or [])

    def fit(self, X: Any, y: Any = None, groups: Any = None) -> Concat:
        """Fit a copy of every part on X (``maps_``)."""
        maps = _fresh(self)
        X, n_in = self._fit_input(X)
        self.check_memory(n_in)
        self.maps_ = [m.fit(X, y, groups) for m in maps]
        self.n_features_in_ = n_in
        return self

    def fit_width(self, n_features_in: int) -> Concat:
        """Fit a copy of every part from the input width."""
        maps = _fresh(self)
        self.check_memory(int(n_features_in))
        self.maps_ = [m.fit_width(n_features_in) for m in maps]
        self.n_features_in_ = int(n_features_in)
        return self

    @property
    def n_sample(self) -> int:
        """Largest sample any part needs."""
        return max(m.n_sample for m in _check_maps(self))

    def _n_out(self) -> int:
        return sum(m.n_features_out_ for m in _fitted(self))

    def _fitted_parts(self) -> Iterator[tuple[FeatureMap, int]]:
        """Every part takes the same inputs."""
        for m in _fitted(self):
            yield m, self.n_features_in_

    def init_state(self) -> Any:
        """One state per part."""
        return tuple(m.init_state() for m in _fitted(self))

    def apply_chunk(self, X: np.ndarray, row_start: int, groups: Any, state: Any) -> tuple[np.ndarray, Any]:
        """Features of every part, concatenated."""
        outs = [m.apply_chunk(X, row_start, groups, s) for m, s in zip(_fitted(self), state)]
        return np.concatenate([f for f, _ in outs], axis=1), tuple(s for _, s in outs)

    def keep_mask(self, m: int, groups: Any, state: Any) -> np.ndarray | None:
        """Rows kept by every part."""
        return _all_keep([p.keep_mask(m, groups, s) for p, s in zip(_fitted(self), state)])

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """``<part index>_<part's name>``."""
        return np.asarray(
            [f"{i}_{n}" for i, m in enumerate(_fitted(self)) for n in m.get_feature_names_out()], dtype=object
        )

    def _set_fitted(self, n_in: int, arrays: dict[str, np.ndarray]) -> None:
        self.n_features_in_ = int(n_in)
        self.maps_ = list(self.maps or [])  # from_dict passes the fitted parts as maps


class Pipeline(FeatureMap):
    """Maps applied in sequence, e.g. ``Pipeline([Delays(3), RandomHidden(200, direct=True)])``.

    Parameters
    ----------
    maps : list of FeatureMap
    """

    name = "pipeline"
    _param_constraints: ClassVar[Constraints] = _MAPS

    def __init__(self, maps: list[FeatureMap] | None = None) -> None:
        self.maps = maps

    def _check_params(self) -> None:
        _check_parts(self)

    def footprint(self, n_features_in: int) -> Footprint:
        """The steps' arrays together, each step sized by the previous step's width."""
        parts, n = [], int(n_features_in)
        for m in self.maps or []:
            parts.append(m.footprint(n))
            n = parts[-1].width
        return _combined(parts, n)

    def rows_left_out(self) -> int:
        """The longest washout of the steps."""
        return max(m.rows_left_out() for m in _parts(self))

    @property
    def stateful(self) -> bool:  # type: ignore[override]
        """True if any step is stateful."""
        return any(m.stateful for m in self.maps or [])

    @property
    def n_sample(self) -> int:
        """Sample the first step needs (later steps sample the mapped data)."""
        return _check_maps(self)[0].n_sample

    def fit(self, X: Any, y: Any = None, groups: Any = None) -> Pipeline:
        """Fit each step on the output of the steps before it (lazily for dask arrays)."""
        maps = _fresh(self)
        X, n_in = self._fit_input(X)
        self.check_memory(n_in)
        self.n_features_in_ = n_in
        Z = X
        for i, m in enumerate(maps):
            if m.n_sample == 0 and not isinstance(m, (Concat, Pipeline)):
                m.fit_width(int(Z.shape[1]))  # no data needed (Z may be lazy: not computed)
            else:
                m.fit(Z, y, groups)
            if i + 1 < len(maps):
                Z = _mapped(m, Z, groups)
        self.maps_ = maps
        return self

    def fit_width(self, n_features_in: int) -> Pipeline:
        """Fit every step from the input width (no step may need a data sample)."""
        n = int(n_features_in)
        maps = _fresh(self)
        self.check_memory(n)
        self.n_features_in_ = n
        for m in maps:
            m.fit_width(n)
            n = m.n_features_out_
        self.maps_ = maps
        return self

    def _n_out(self) -> int:
        return _fitted(self)[-1].n_features_out_

    def _fitted_parts(self) -> Iterator[tuple[FeatureMap, int]]:
        """Each step takes the features of the step before it."""
        width = self.n_features_in_
        for m in _fitted(self):
            yield m, width
            width = m.n_features_out_

    def init_state(self) -> Any:
        """One state per step."""
        return tuple(m.init_state() for m in _fitted(self))

    def apply_chunk(self, X: np.ndarray, row_start: int, groups: Any, state: Any) -> tuple[np.ndarray, Any]:
        """Each step applied to the previous step's features."""
        Z, new = X, []
        for m, s in zip(_fitted(self), state):
            Z, s2 = m.apply_chunk(Z, row_start, groups, s)
            new.append(s2)
        return Z, tuple(new)

    def keep_mask(self, m: int, groups: Any, state: Any) -> np.ndarray | None:
        """Rows kept by every step."""
        return _all_keep([p.keep_mask(m, groups, s) for p, s in zip(_fitted(self), state)])

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """The last step's names."""
        return _fitted(self)[-1].get_feature_names_out()

    def _set_fitted(self, n_in: int, arrays: dict[str, np.ndarray]) -> None:
        self.n_features_in_ = int(n_in)
        self.maps_ = list(self.maps or [])  # from_dict passes the fitted parts as maps


def _all_keep(masks: list[np.ndarray | None]) -> np.ndarray | None:
    got = [k for k in masks if k is not None]
    if not got:
        return None
    out = got[0].copy()
    for k in got[1:]:
        out &= k
    return out


def _mapped(m: FeatureMap, Z: Any, groups: Any) -> Any:
    """Z mapped by the fitted step m: a dask array for dask input, else in memory."""
    if hasattr(Z, "dask"):
        from streamridge.features._dask import map_dask

        return map_dask(m, Z, groups)
    Z = np.asarray(Z, dtype=np.float64)
    if Z.ndim != 2:
        raise InputError(f"Pipeline needs 2-D input; got shape {Z.shape}")
    with np.errstate(over="ignore", invalid="ignore"):
        F, _ = m.apply_chunk(Z, 0, None if groups is None else np.asarray(groups).reshape(-1), m.init_state())
    check_features(F, 0, m)
    return F
