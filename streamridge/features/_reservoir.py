"""Echo state networks: a leaky-integrator tanh reservoir run over each series."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from streamridge.features._base import FeatureMap, Footprint, uniform
from streamridge.features._lockstep import run_series
from streamridge.features._params import COUNT, SEED, Constraints, Integer, NoneValue, Real
from streamridge.features._series import NO_SERIES, run_heads


class EchoStateNetwork(FeatureMap):
    """Reservoir states of a leaky-integrator echo state network (rows = time steps).

    .. code-block:: text

        x(t) = (1 - a) x(t-1) + a tanh(W_in u(t) + b + W x(t-1)),   x(start of series) = 0

    ``W_in ~ U(-input_scaling, input_scaling)``, ``b ~ U(-bias_scaling, bias_scaling)``,
    ``W`` normal with a fraction ``sparsity`` of its entries zero, rescaled to the
    spectral radius ``spectral_radius``; all drawn from ``seed``.  The features of a
    row are its state x(t).

    Stateful: the state is carried from one chunk to the next in row order within
    each series (``groups`` = series id; each series contiguous).  In the pass the
    chunks of one series run one after the other and different series run in
    parallel; with ``warmup=W`` every chunk runs on its own, starting from rest W
    rows before its first row (an approximation; see the tests for the deviation).

    Parameters
    ----------
    n_units : int
    spectral_radius : float
    input_scaling : float
    leak_rate : float in (0, 1]
    sparsity : float in [0, 1)
        Fraction of zero recurrent weights.
    bias_scaling : float
    washout : int
        The first ``washout`` rows of every series are left out of the statistics
        (``transform`` still returns them).
    warmup : int or None
        Rows of restart before each chunk in the pass (None: exact, series sequential).
    seed : int
    """

    name = "esn"
    stateful = True
    _arrays = ("w_in_", "bias_", "w_res_")
    _param_constraints: ClassVar[Constraints] = {
        "n_units": (COUNT,),
        "spectral_radius": (Real(0, low_open=True),),
        "input_scaling": (Real(0, low_open=True),),
        "leak_rate": (Real(0, 1, low_open=True),),
        "sparsity": (Real(0, 1, high_open=True),),
        "bias_scaling": (Real(0),),
        "washout": (Integer(0),),
        "warmup": (COUNT, NoneValue()),
        "seed": (SEED,),
    }

    def __init__(self, n_units: int = 100, *, spectral_radius: float = 0.9, input_scaling: float = 1.0,
                 leak_rate: float = 1.0, sparsity: float = 0.9, bias_scaling: float = 0.0, washout: int = 0,
                 warmup: int | None = None, seed: int = 0) -> None:
        self.n_units = n_units
        self.spectral_radius = spectral_radius
        self.input_scaling = input_scaling
        self.leak_rate = leak_rate
        self.sparsity = sparsity
        self.bias_scaling = bias_scaling
        self.washout = washout
        self.warmup = warmup
        self.seed = seed

    @classmethod
    def _conflict(cls, params: Mapping[str, Any]) -> str | None:
        """A warm-up shorter than the washout (the washout rows would be warm-up rows)."""
        warmup, washout = params.get("warmup"), params.get("washout", 0)
        if warmup is not None and warmup < washout:
            return f"warmup must be >= washout; got warmup={warmup}, washout={washout}"
        return None

    def footprint(self, n_features_in: int) -> Footprint:
        """The ``n_units x n_units`` reservoir; its fit needs 9 bytes per entry and 256 bytes per unit more.

        Drawing it holds a uniform draw and a boolean mask of its size (8 + 1 bytes per entry);
        its spectral radius (``eigvals``: a copy, and a workspace of a few dozen floats per unit) and the
        rescaling one copy each, one after the other.
        """
        n, m = int(self.n_units), int(n_features_in)
        held = 8 * (n * m + n + n * n)
        return Footprint(n, held, held + 9 * n * n + 256 * n, f"a {n} x {n} reservoir", f"esn(n_units={n})", "n_units")

    def rows_left_out(self) -> int:
        """The washout."""
        return int(self.washout)

    def _fit_arrays(self, n_in: int, sample: np.ndarray | None) -> None:
        n = int(self.n_units)
        rng = np.random.default_rng(int(self.seed))
        self.w_in_ = uniform(rng, (n, n_in), self.input_scaling)
        self.bias_ = uniform(rng, (n,), self.bias_scaling)
        W = rng.standard_normal((n, n))
        W[rng.random((n, n)) < float(self.sparsity)] = 0.0
        radius = float(np.max(np.abs(np.linalg.eigvals(W)))) if n > 0 else 0.0
        self.w_res_ = W * (float(self.spectral_radius) / radius) if radius > 0 else W

    def _n_out(self) -> int:
        return int(self.n_units)

    def _fitted_shape(self, name: str) -> tuple[int, ...]:
        n = int(self.n_units)
        return {"w_in_": (n, self.n_features_in_), "bias_": (n,), "w_res_": (n, n)}[name]

    def init_state(self) -> Any:
        """``(series id, steps into the series, state vector)`` before any row."""
        return (NO_SERIES, 0, None)

    def apply_chunk(self, X: np.ndarray, row_start: int, groups: Any, state: Any) -> tuple[np.ndarray, Any]:
        """See :meth:`FeatureMap.apply_chunk`; the state is ``(series, t, x)``."""
        return self.apply_chunks([(X, row_start, groups, state)])[0]

    def apply_chunks(
        self, items: list[tuple[np.ndarray, int, Any, Any]], *, out: np.ndarray | None = None
    ) -> list[tuple[np.ndarray, Any]]:
        """See :meth:`FeatureMap.apply_chunks`: every series of every item in lockstep, one GEMM per step."""
        n = int(self.n_units)
        sizes = [int(np.shape(X)[0]) for X, *_ in items]
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        pos: list[np.ndarray] = []
        ends: list[np.ndarray] = []
        x0: list[np.ndarray] = []
        last: list[int | None] = []
        t_end: list[tuple[Any, int]] = []
        for (_x, _, groups, (series, t, x)), m, off in zip(items, sizes, offsets):
            p, ids = run_heads(groups, m)
            if len(p) == 0:
                last.append(None)
                t_end.append((series, t))
                continue
            cont = series is not NO_SERIES and ids[0] == series
            pos.append(p + off)
            ends.append(np.append(p[1:], m) + off)
            x0.append(x if cont else np.zeros(n))
            x0.extend(np.zeros(n) for _ in range(len(p) - 1))
            last.append(sum(len(q) for q in pos) - 1)  # the chunk's last series
            steps = int(m - p[-1])
            t_end.append((ids[-1], (t if cont and len(p) == 1 else 0) + steps))
        F = _output(out, int(offsets[-1]), n)
        if pos:
            inputs = np.concatenate([np.asarray(X, dtype=np.float64) for X, *_ in items], axis=0)
            weights = (self.w_in_, self.bias_, np.ascontiguousarray(self.w_res_.T))
            finals = run_series(inputs, np.concatenate(pos), np.concatenate(ends), weights, float(self.leak_rate), np.asarray(x0), F)
        mapped = []
        for k, (lst, (series, t)) in enumerate(zip(last, t_end)):
            x = items[k][3][2] if lst is None else finals[lst]
            mapped.append((F[offsets[k] : offsets[k + 1]], (series, t, x) if lst is not None else items[k][3]))
        return mapped

    def keep_mask(self, m: int, groups: Any, state: Any) -> np.ndarray | None:
        """False for the first ``washout`` rows of every series."""
        w = int(self.washout)
        if w == 0:
            return None
        series, t, _ = state
        keep = np.ones(m, dtype=bool)
        pos, ids = run_heads(groups, m)
        ends = np.append(pos[1:], m)
        for p, e, gid in zip(pos, ends, ids):
            t0 = t if (p == 0 and series is not NO_SERIES and gid == series) else 0
            keep[p : min(e, p + max(0, w - t0))] = False
        return keep


def _output(out: np.ndarray | None, rows: int, n: int) -> np.ndarray:
    """The first ``rows`` rows of ``out`` when it fits, else a new array."""
    fits = out is not None and out.dtype == np.float64 and out.ndim == 2 and out.shape[0] >= rows and out.shape[1] == n
    if fits and out is not None and out.flags.c_contiguous:
        return out[:rows]
    return np.empty((rows, n))
