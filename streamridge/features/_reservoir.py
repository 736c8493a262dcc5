"""Echo state networks: a leaky-integrator reservoir, drawn or given, run over each series."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from streamridge.errors import InputError
from streamridge.features._base import FeatureMap, Footprint, uniform
from streamridge.features._lockstep import ACTIVATIONS, run_series
from streamridge.features._params import (
    COUNT,
    SEED,
    Choice,
    Constraints,
    Integer,
    NoneValue,
    Real,
    Rows,
    Vector,
)
from streamridge.features._series import NO_SERIES, run_heads

DEFAULT_UNITS = 100
"""Units of a reservoir drawn with ``n_units=None`` and no matrix given."""

_DRAWS = {"W": ("spectral_radius", "sparsity"), "W_in": ("input_scaling",), "bias": ("bias_scaling",)}
"""The parameters that draw each matrix (unused when the matrix is given)."""


class EchoStateNetwork(FeatureMap):
    """Reservoir states of a leaky-integrator echo state network (rows = time steps).

    .. code-block:: text

        x(t) = (1 - a) x(t-1) + a f(W_in u(t) + b + W x(t-1)),   x(start of series) = 0

    with ``a`` the leak rate and ``f`` the activation (tanh unless ``activation`` says otherwise).
    The matrices are given (``W``, ``W_in``, ``bias``: a reservoir of your own, e.g.
    :meth:`from_reservoirpy`) or drawn from ``seed``: ``W_in ~ U(-input_scaling, input_scaling)``,
    ``b ~ U(-bias_scaling, bias_scaling)``, ``W`` normal with a fraction ``sparsity`` of its
    entries zero, rescaled to the spectral radius ``spectral_radius``.  A given matrix is used as it
    is: the parameters that draw it (``spectral_radius`` and ``sparsity`` for ``W``,
    ``input_scaling`` for ``W_in``, ``bias_scaling`` for ``bias``) are then refused unless left at
    their defaults.  The features of a row are its state x(t).

    Stateful: the state is carried from one chunk to the next in row order within
    each series (``groups`` = series id; each series contiguous).  In the pass the
    chunks of one series run one after the other and different series run in
    parallel; with ``warmup=W`` every chunk runs on its own, starting from rest W
    rows before its first row (an approximation; see the tests for the deviation).

    Parameters
    ----------
    n_units : int or None
        None: the size of the given matrices, or 100 units when none is given.
    spectral_radius : float
    input_scaling : float
    leak_rate : float in (0, 1]
    sparsity : float in [0, 1)
        Fraction of zero recurrent weights.
    bias_scaling : float
    activation : {"tanh", "sigmoid", "relu", "identity"}
    W : array of shape (n_units, n_units) or None
        The recurrent matrix (None: drawn).
    W_in : array of shape (n_units, n_features_in) or None
        The input matrix (None: drawn).
    bias : array of shape (n_units,) or None
        The bias of the units (None: drawn).
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
    _array_params = ("W", "W_in", "bias")
    _param_constraints: ClassVar[Constraints] = {
        "n_units": (COUNT, NoneValue()),
        "spectral_radius": (Real(0, low_open=True),),
        "input_scaling": (Real(0, low_open=True),),
        "leak_rate": (Real(0, 1, low_open=True),),
        "sparsity": (Real(0, 1, high_open=True),),
        "bias_scaling": (Real(0),),
        "activation": (Choice(tuple(ACTIVATIONS)),),
        "W": (Rows("(n_units, n_units)", square=True), NoneValue()),
        "W_in": (Rows("(n_units, n_features_in)"), NoneValue()),
        "bias": (Vector("(n_units,)"), NoneValue()),
        "washout": (Integer(0),),
        "warmup": (COUNT, NoneValue()),
        "seed": (SEED,),
    }

    def __init__(
        self,
        n_units: int | None = None,
        *,
        spectral_radius: float = 0.9,
        input_scaling: float = 1.0,
        leak_rate: float = 1.0,
        sparsity: float = 0.9,
        bias_scaling: float = 0.0,
        activation: str = "tanh",
        W: Any = None,
        W_in: Any = None,
        bias: Any = None,
        washout: int = 0,
        warmup: int | None = None,
        seed: int = 0,
    ) -> None:
        self.n_units = n_units
        self.spectral_radius = spectral_radius
        self.input_scaling = input_scaling
        self.leak_rate = leak_rate
        self.sparsity = sparsity
        self.bias_scaling = bias_scaling
        self.activation = activation
        self.W = W
        self.W_in = W_in
        self.bias = bias
        self.washout = washout
        self.warmup = warmup
        self.seed = seed

    @classmethod
    def from_reservoirpy(
        cls, reservoir: Any, *, washout: int = 0, warmup: int | None = None
    ) -> EchoStateNetwork:
        """The map of an initialized reservoirpy ``Reservoir`` node: its matrices, leak rate and activation.

        Fitted for the reservoir's input width, so ``transform`` runs at once; its states equal
        those of ``reservoir.run`` on each series from rest (see docs/guide/reservoirs.md).
        Needs reservoirpy (imported here only).

        Parameters
        ----------
        reservoir : reservoirpy.nodes.Reservoir
            Initialized (run once, or ``reservoir.initialize(u)``), with one leak rate for all units.
        washout : int
            As reservoirpy's ``warmup`` of ``fit``: rows at the start of every series left out of the statistics.
        warmup : int or None
            See the class parameters.

        Raises
        ------
        ParameterError
            A reservoir that is not initialized, or that this map cannot express (one line naming what).
        """
        from streamridge.features._reservoirpy import reservoir_params

        esn = cls(**reservoir_params(reservoir), washout=washout, warmup=warmup)
        return esn.fit_width(int(np.shape(esn.W_in)[1]))

    @classmethod
    def _conflict(cls, params: Mapping[str, Any]) -> str | None:
        """A warm-up shorter than the washout, given matrices of different sizes, or a parameter that draws
        a matrix that is given."""
        warmup, washout = params.get("warmup"), params.get("washout", 0)
        if warmup is not None and warmup < washout:
            return f"warmup must be >= washout; got warmup={warmup}, washout={washout}"
        return _size_conflict(params) or _unused_draw(cls, params)

    def _units(self) -> int:
        """The number of units: ``n_units``, else the size of a given matrix, else 100."""
        return _units({"n_units": self.n_units, "W": self.W, "W_in": self.W_in, "bias": self.bias})

    def footprint(self, n_features_in: int) -> Footprint:
        """The ``n_units x n_units`` reservoir and its transpose; drawing it needs 9 bytes per entry and 256
        bytes per unit more.

        The fitted map keeps W and W' (the step loop's GEMM operand, C-contiguous).  Drawing W holds a
        uniform draw and a boolean mask of its size (8 + 1 bytes per entry); its spectral radius
        (``eigvals``: a copy, and a workspace of a few dozen floats per unit) and the rescaling one copy
        each, one after the other, before W' is made.  A given ``W`` is taken as it is.
        """
        n, m = self._units(), int(n_features_in)
        inputs = 8 * (n * m + n)
        held = inputs + 16 * n * n
        peak = held if self.W is not None else max(held, inputs + 17 * n * n + 256 * n)
        label = f"esn(n_units={n})" if self.W is None else f"esn(W of {n} x {n})"
        what = f"a {n} x {n} reservoir and its transpose"
        return Footprint(n, held, peak, what, label, "n_units" if self.W is None else "W")

    def rows_left_out(self) -> int:
        """The washout."""
        return int(self.washout)

    def _fit_arrays(self, n_in: int, sample: np.ndarray | None) -> None:
        n = self._units()
        rng = np.random.default_rng(int(self.seed))
        self.w_in_ = (
            _given(self.W_in) if self.W_in is not None else uniform(rng, (n, n_in), self.input_scaling)
        )
        if self.w_in_.shape[1] != n_in:
            raise InputError(
                f"EchoStateNetwork: W_in has {self.w_in_.shape[1]} columns for inputs of {n_in} columns; "
                f"give W_in of shape ({n}, {n_in}) or inputs of {self.w_in_.shape[1]} columns"
            )
        self.bias_ = _given(self.bias) if self.bias is not None else uniform(rng, (n,), self.bias_scaling)
        self.w_res_ = (
            _given(self.W)
            if self.W is not None
            else _draw_reservoir(rng, n, self.sparsity, self.spectral_radius)
        )
        self._keep_transposed()

    def _n_out(self) -> int:
        return self._units()

    def _fitted_shape(self, name: str) -> tuple[int, ...]:
        n = self._units()
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
        n = self._units()
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
            weights = (self.w_in_, self.bias_, self._transposed())
            finals = run_series(
                inputs,
                np.concatenate(pos),
                np.concatenate(ends),
                weights,
                float(self.leak_rate),
                np.asarray(x0),
                F,
                str(self.activation),
            )
        mapped = []
        for k, (lst, (series, t)) in enumerate(zip(last, t_end)):
            x = items[k][3][2] if lst is None else finals[lst]
            mapped.append(
                (F[offsets[k] : offsets[k + 1]], (series, t, x) if lst is not None else items[k][3])
            )
        return mapped

    def _transposed(self) -> np.ndarray:
        """W' (C-contiguous) for the step loop: the one kept since the fit, unless ``w_res_`` was replaced since."""
        kept = self.__dict__.get("_w_res_t")
        if kept is not None and kept[0] is self.w_res_:
            return kept[1]
        return np.ascontiguousarray(self.w_res_.T)

    def _keep_transposed(self) -> None:
        """Keep W' with the fitted map (a forecast calls the map once per step: no copy of W per call)."""
        self._w_res_t = (self.w_res_, np.ascontiguousarray(self.w_res_.T))

    def _set_fitted(self, n_in: int, arrays: dict[str, np.ndarray]) -> None:
        super()._set_fitted(n_in, arrays)
        self._keep_transposed()

    def __getstate__(self) -> dict[str, Any]:
        """The map without the kept W' (pickles stay the size of the map; it is made again when unpickled)."""
        state = dict(super().__getstate__())
        state.pop("_w_res_t", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        if "w_res_" in self.__dict__:
            self._keep_transposed()

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
    fits = (
        out is not None
        and out.dtype == np.float64
        and out.ndim == 2
        and out.shape[0] >= rows
        and out.shape[1] == n
    )
    if fits and out is not None and out.flags.c_contiguous:
        return out[:rows]
    return np.empty((rows, n))


def _given(v: Any) -> np.ndarray:
    """A given matrix as float64 (the same array when it is one already: a model file then stores it once)."""
    return np.asarray(v, dtype=np.float64)


def _draw_reservoir(rng: np.random.Generator, n: int, sparsity: float, radius: float) -> np.ndarray:
    """A normal ``n x n`` matrix, a fraction ``sparsity`` of it zero, rescaled to spectral radius ``radius``."""
    W = rng.standard_normal((n, n))
    W[rng.random((n, n)) < float(sparsity)] = 0.0
    largest = float(np.max(np.abs(np.linalg.eigvals(W)))) if n > 0 else 0.0
    return W * (float(radius) / largest) if largest > 0 else W


def _sizes(params: Mapping[str, Any]) -> dict[str, int]:
    """The number of units each given matrix implies (rows of W and W_in, entries of bias)."""
    return {k: len(params[k]) for k in ("W", "W_in", "bias") if params.get(k) is not None}


def _units(params: Mapping[str, Any]) -> int:
    n = params.get("n_units")
    if n is not None:
        return int(n)
    sizes = _sizes(params)
    return next(iter(sizes.values())) if sizes else DEFAULT_UNITS


def _size_conflict(params: Mapping[str, Any]) -> str | None:
    """Given matrices (and ``n_units``) that disagree on the number of units."""
    sizes = _sizes(params)
    if params.get("n_units") is not None:
        sizes = {"n_units": int(params["n_units"]), **sizes}
    if len(set(sizes.values())) <= 1:
        return None
    what = {"n_units": "n_units={}", "W": "W has {} rows", "W_in": "W_in {} rows", "bias": "bias {} entries"}
    said = ", ".join(what[k].format(v) for k, v in sizes.items())
    return (
        f"the reservoir's sizes disagree: {said}; give matrices of one number of units "
        "(W: (n_units, n_units), W_in: (n_units, n_features_in), bias: (n_units,)), or leave n_units out"
    )


def _unused_draw(cls: type, params: Mapping[str, Any]) -> str | None:
    """A parameter that draws a matrix, set to other than its default while that matrix is given."""
    defaults = {k: p.default for k, p in inspect.signature(cls).parameters.items()}
    for matrix, drawers in _DRAWS.items():
        if params.get(matrix) is None:
            continue
        for p in drawers:
            if p in params and params[p] != defaults[p]:
                return (
                    f"{p}={params[p]!r} draws {matrix}, but {matrix} is given (used as it is); "
                    f"leave {p} out, or scale {matrix} before giving it"
                )
    return None
