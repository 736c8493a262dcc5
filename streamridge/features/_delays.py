"""Time-delay embedding: each row with the rows before it in its series."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from streamridge.features._base import FeatureMap, Footprint
from streamridge.features._params import COUNT, Constraints
from streamridge.features._series import NO_SERIES, run_heads


class Delays(FeatureMap):
    """Time-delay embedding ``[u(t), u(t-1), ..., u(t-n_delays)]`` (rows = time steps).

    Lags before the start of a series are zero.  Stateful: the last ``n_delays``
    rows of the current series are carried from one chunk to the next.

    Parameters
    ----------
    n_delays : int
    """

    name = "delays"
    stateful = True
    _param_constraints: ClassVar[Constraints] = {"n_delays": (COUNT,)}

    def __init__(self, n_delays: int = 5) -> None:
        self.n_delays = n_delays

    def footprint(self, n_features_in: int) -> Footprint:
        """No arrays; width ``n_features_in x (n_delays + 1)``."""
        d = int(self.n_delays)
        return Footprint(int(n_features_in) * (d + 1), 0, 0, "no arrays", f"delays(n_delays={d})", "n_delays")

    def _fit_arrays(self, n_in: int, sample: np.ndarray | None) -> None:
        pass

    def _n_out(self) -> int:
        return self.n_features_in_ * (int(self.n_delays) + 1)

    def init_state(self) -> Any:
        """``(series id, last n_delays rows of it, zero-padded)``."""
        return (NO_SERIES, None)

    def apply_chunk(self, X: np.ndarray, row_start: int, groups: Any, state: Any) -> tuple[np.ndarray, Any]:
        """See :meth:`FeatureMap.apply_chunk`; the state is ``(series, history)``."""
        X = np.asarray(X, dtype=np.float64)
        m, n_in, d = X.shape[0], X.shape[1], int(self.n_delays)
        F = np.empty((m, n_in * (d + 1)))
        series, hist = state
        pos, ids = run_heads(groups, m)
        ends = np.append(pos[1:], m)
        for p, e, gid in zip(pos, ends, ids):
            if p > 0 or series is NO_SERIES or gid != series:
                series, hist = gid, np.zeros((d, n_in))
            ext = np.concatenate([hist, X[p:e]], axis=0)  # rows t-d .. e-1
            for k in range(d + 1):
                F[p:e, k * n_in : (k + 1) * n_in] = ext[d - k : d - k + (e - p)]
            hist = ext[-d:]
        return F, (series, hist)

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """``x{j}_lag{k}``."""
        return np.asarray(
            [f"x{j}_lag{k}" for k in range(int(self.n_delays) + 1) for j in range(self.n_features_in_)],
            dtype=object,
        )
