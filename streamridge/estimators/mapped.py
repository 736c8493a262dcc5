"""What the estimators need of a feature map: fit it on a source, map inputs for predict."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
from sklearn.base import clone

from streamridge.errors import ParameterError
from streamridge.features._base import FeatureMap


def check_map(features: Any) -> None:
    """Raise ParameterError unless ``features`` is None, a FeatureMap or a non-empty list of candidate maps,
    with valid parameters."""
    if features is None:
        return
    if isinstance(features, (list, tuple)):
        if not features or not all(isinstance(m, FeatureMap) for m in features):
            raise ParameterError(
                "features as a list must hold candidate feature maps from streamridge.features "
                f"(e.g. EchoStateNetwork.grid(spectral_radius=[0.8, 0.9])); got features={features!r}"
            )
        from streamridge.features._candidates import Candidates

        Candidates(list(features))._check_params()
        return
    if not isinstance(features, FeatureMap):
        raise ParameterError(
            "features must be a feature map from streamridge.features (e.g. EchoStateNetwork(500)); "
            f"got features={features!r}"
        )
    features._check_params()


def declared_width(features: Any, n_features_in: int) -> tuple[int | list[int], str]:
    """Output width of ``features`` for ``n_features_in`` inputs and a label naming the map, before it is fitted.

    The width comes from the parameters alone (:meth:`FeatureMap.footprint`): nothing is drawn or built,
    so the statistics' memory check can run on it first.  A list of candidate maps: every candidate's width.
    """
    if isinstance(features, (list, tuple)):
        widths = [declared_width(m, n_features_in)[0] for m in features]
        return [int(w) for w in widths], f"{len(features)} candidate maps"  # type: ignore[arg-type]
    if hasattr(features, "n_features_in_"):
        return int(features.n_features_out_), features.name
    features._check_params()
    fp = features.footprint(int(n_features_in))
    return fp.width, fp.label


def fit_map(features: Any, X: Any, groups: Any = None) -> FeatureMap:
    """A fitted copy of ``features`` for the (dask) input X; a fitted map is copied as is.

    Maps that sample basis rows read X once (a light pass over the rows).  A list of
    candidate maps gives their fitted copies as one :class:`~streamridge.features._candidates.Candidates`.
    """
    if isinstance(features, (list, tuple)):
        from streamridge.features._candidates import fitted_candidates

        return fitted_candidates([fit_map(m, X, groups) for m in features], int(X.shape[1]))
    if hasattr(features, "n_features_in_"):
        fmap = copy.deepcopy(features)
        fmap.check_width(int(X.shape[1]))
        return fmap
    fmap = clone(features)
    if fmap.n_sample or _needs_data(fmap):
        return fmap.fit(X, None, groups)
    return fmap.fit_width(int(X.shape[1]))


def _needs_data(fmap: FeatureMap) -> bool:
    from streamridge.features._compose import Concat, Pipeline

    if isinstance(fmap, (Concat, Pipeline)):
        return any(m.n_sample or _needs_data(m) for m in fmap.maps or [])
    return False


def check_shard_start(fmap: FeatureMap, groups: Any, start: int) -> None:
    """Raise unless a shard starting at row ``start`` starts a series (a stateful map would restart it from rest)."""
    if not fmap.stateful or start == 0:
        return
    if groups is not None:
        pair = np.asarray(groups[start - 1 : start + 1]).reshape(-1)
        if pair[0] != pair[1]:
            return
    raise ParameterError(
        f"rows {start}: cuts a series at row {start}; with a stateful feature map a shard must start where a series "
        "starts (give groups and cut between series)"
    )


def series_spans(source: Any, row_offset: int = 0) -> list[list[Any]]:
    """``[series id, first row, end row]`` of every series of a source's rows, in row order.

    Rows are global (``row_offset`` is the source's first row); without groups the rows
    are one series, id 0, as the maps read them.  Reads the group column once, in pieces.
    Recorded in the statistics of a stateful map (:mod:`streamridge.stats.series_spans`).

    Raises
    ------
    InputError
        A series comes back after another (the refusal of the pass itself).
    """
    from streamridge.datapass import plan

    n = int(source.n_rows())
    if n == 0:
        return []
    if source.shape("groups") is None:
        return [[0, row_offset, row_offset + n]]
    starts = np.arange(0, n, plan.RUN_READ_ROWS, dtype=np.int64) + row_offset
    if hasattr(source, "pass_readers"):
        readers, lo = source.pass_readers()
        heads, ids = plan.stored_series_runs(readers["groups"], lo, starts, n)
    else:
        heads, ids = plan.series_runs(np.asarray(source.groups), starts)
    ends = [*heads[1:].tolist(), row_offset + n]
    return [[v, int(a), int(b)] for v, a, b in zip(np.asarray(ids).tolist(), heads.tolist(), ends)]


def mapped_input(fmap: FeatureMap, X: Any, groups: Any = None) -> Any:
    """Features of raw input rows: a NumPy array for in-memory X, a lazy dask array for dask X."""
    if hasattr(X, "dask"):
        from streamridge.features._dask import map_dask

        fmap.check_width(int(X.shape[1]))
        return map_dask(fmap, X, groups)
    return fmap.transform(np.asarray(X, dtype=np.float64), groups=groups)
