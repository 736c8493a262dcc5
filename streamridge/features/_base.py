"""The feature-map protocol: scikit-learn transformer + a pure per-chunk function.

A :class:`FeatureMap` turns raw input rows into feature rows.  It is

* a scikit-learn transformer (``fit`` / ``transform`` on in-memory arrays, usable
  in a :class:`sklearn.pipeline.Pipeline`);
* fully described by JSON-able parameters plus NumPy arrays (:meth:`FeatureMap.to_dict`,
  :func:`streamridge.features.from_dict`; no pickle), deterministic from its seed;
* applied inside the data pass by the pure function
  ``apply_chunk(X, row_start, groups, state) -> (features, new_state)``: stateless
  maps ignore ``state`` (None); stateful maps carry it from one chunk to the next
  in row order within each series (``groups`` = series id).
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from streamridge.errors import InputError, NonFiniteError, ParameterError
from streamridge.features._params import Constraints, param_error
from streamridge.features._series import check_contiguous, run_heads
from streamridge.folds.schemes import splitmix64
from streamridge.stats.memory import check_map_memory

FORMAT_VERSION = 1


@dataclass(frozen=True)
class Footprint:
    """Size of a map fitted for a given input width, known from its parameters before anything is drawn.

    Attributes
    ----------
    width : int
        Output features (``n_features_out_``).
    held : int
        Bytes of the fitted arrays the map keeps.
    peak : int
        Bytes at the peak of fitting: the kept arrays and the work arrays of the fit.
    what : str
        The largest arrays, e.g. ``"a 30000 x 30000 reservoir"``.
    label : str
        The map and the parameter that sizes it, e.g. ``"esn(n_units=30000)"``.
    param : str
        That parameter's name, e.g. ``"n_units"``.
    """

    width: int
    held: int
    peak: int
    what: str
    label: str
    param: str


class FeatureMap(TransformerMixin, BaseEstimator):  # type: ignore[misc]
    """Base class of the feature maps (see the module docstring).

    Subclasses set ``name``, implement :meth:`_fit_arrays` (draw weights / take a basis,
    given the input width and, if :attr:`n_sample` > 0, a seeded sample of input rows),
    :meth:`_n_out` and :meth:`apply_chunk`, list their fitted arrays in ``_arrays`` and
    declare each one's shape in :meth:`_fitted_shape` (checked by :func:`fitted_problem`
    when a map is read from a file).
    """

    name: ClassVar[str] = "map"
    stateful: ClassVar[bool] = False
    _arrays: ClassVar[tuple[str, ...]] = ()
    _array_params: ClassVar[tuple[str, ...]] = ()
    _param_constraints: ClassVar[Constraints] = {}
    """The values each ``__init__`` parameter accepts (:mod:`streamridge.features._params`).

    Not scikit-learn's ``_parameter_constraints``: the constraints are this package's own
    (booleans are ``bool`` only, integers never a float), checked by :func:`param_error`.
    """

    @classmethod
    def grid(cls, **lists: Any) -> list[FeatureMap]:
        """Candidate maps, one per combination of the values given as lists (``features=`` of a fit).

        ``EchoStateNetwork.grid(spectral_radius=[0.7, 0.9], leak_rate=[0.1, 0.3], n_units=200)``
        is four maps of 200 units; a value that is not a list is every candidate's; the last
        parameter varies fastest; parameters not given (the seed included) keep their defaults.
        """
        return grid(cls, lists)

    # ---------------------------------------------------------------- fitting
    @property
    def n_sample(self) -> int:
        """Rows of input the map needs to fit (a seeded sample; 0: only the input width)."""
        return 0

    def fit(self, X: Any, y: Any = None, groups: Any = None) -> FeatureMap:
        """Draw the map's weights (and sample its basis rows) for inputs like ``X``.

        Parameters
        ----------
        X : array of shape (n_samples, n_features_in) or dask array
        y, groups : ignored
        """
        self._check_params()
        X, n_in = self._fit_input(X)
        self.check_memory(n_in)
        sample = sample_rows(X, self.n_sample, int(self.seed)) if self.n_sample else None
        self.n_features_in_ = n_in
        self._fit_arrays(n_in, sample)
        return self

    def _fit_input(self, X: Any) -> tuple[Any, int]:
        """X validated as scikit-learn does (in-memory) or checked 2-D (dask), and its width."""
        if hasattr(X, "dask"):
            if X.ndim != 2 or X.shape[1] < 1:
                raise InputError(
                    f"{type(self).__name__} needs X of shape (n_samples, n_features); got shape {X.shape}"
                )
            return X, int(X.shape[1])
        X = validate_data(self, X, reset=True, dtype=np.float64)
        return X, int(X.shape[1])

    def fit_width(self, n_features_in: int) -> FeatureMap:
        """Fit a map that needs no data sample from the input width alone."""
        if self.n_sample:
            raise ParameterError(f"{type(self).__name__} samples rows of the data; fit it with fit(X)")
        self._check_params()
        self.check_memory(int(n_features_in))
        self.n_features_in_ = int(n_features_in)
        self._fit_arrays(int(n_features_in), None)
        return self

    def _check_params(self) -> None:
        """Raise :class:`ParameterError` for a parameter its constraints do not accept (one line)."""
        msg = param_error(type(self), self.get_params(deep=False), python=True)
        if msg is not None:
            raise ParameterError(f"{type(self).__name__}: {msg}")

    @classmethod
    def _conflict(cls, params: Mapping[str, Any]) -> str | None:
        """Parameters that are valid alone but not together, as text (None: none); see :func:`param_error`."""
        return None

    def footprint(self, n_features_in: int) -> Footprint:
        """Output width and bytes of this map fitted for ``n_features_in`` inputs, from the parameters alone."""
        raise NotImplementedError

    def check_memory(self, n_features_in: int) -> None:
        """Raise :class:`InputError` before anything is drawn if fitting the map cannot fit in memory."""
        fp = self.footprint(int(n_features_in))
        check_map_memory(fp.label, fp.held, fp.peak, fp.what, fp.param)

    def rows_left_out(self) -> int:
        """Rows at the start of every series left out of the statistics (the washout; 0 for most maps)."""
        return 0

    def _fit_arrays(self, n_in: int, sample: np.ndarray | None) -> None:
        raise NotImplementedError

    def _n_out(self) -> int:
        raise NotImplementedError

    def _fitted_shape(self, name: str) -> tuple[int, ...]:
        """The shape the fitted array ``name`` (one of ``_arrays``) has, from the parameters and input width.

        The arrays are checked in the order of ``_arrays``, so a shape may depend on the
        arrays listed before it (checked already).
        """
        raise NotImplementedError

    def _fitted_parts(self) -> Iterator[tuple[FeatureMap, int]]:
        """The fitted maps inside this one, each with the input width it must have (none: not composite).

        Yielded one at a time: a part is checked before the width of the next is asked for.
        """
        return iter(())

    @property
    def n_features_out_(self) -> int:
        """Width of the features."""
        check_is_fitted(self, "n_features_in_")
        return self._n_out()

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """Names ``<name>0, <name>1, ...`` of the output features."""
        return np.asarray([f"{self.name}{i}" for i in range(self.n_features_out_)], dtype=object)

    # ---------------------------------------------------------------- applying
    def init_state(self) -> Any:
        """State before the first row (None for stateless maps)."""
        return None

    def apply_chunk(
        self, X: np.ndarray, row_start: int, groups: np.ndarray | None, state: Any
    ) -> tuple[np.ndarray, Any]:
        """Features of one chunk of rows (pure function).

        Parameters
        ----------
        X : array of shape (m, n_features_in)
        row_start : int
            Global index of the chunk's first row (for messages).
        groups : array of shape (m,) or None
            Series id of every row (stateful maps); None: one series.
        state : the state returned for the previous chunk, or :meth:`init_state`

        Returns
        -------
        features : array of float64 of shape (m, n_features_out)
        state : the state after the chunk's last row
        """
        raise NotImplementedError

    def apply_chunks(
        self, items: list[tuple[np.ndarray, int, np.ndarray | None, Any]], *, out: np.ndarray | None = None
    ) -> list[tuple[np.ndarray, Any]]:
        """:meth:`apply_chunk` of several chunks of independent series (each with its own state).

        The result equals one :meth:`apply_chunk` call per item; a map may run them
        together (the echo state network steps all their series in lockstep).
        ``out`` (float64, C-contiguous, at least as many rows as the items together,
        ``n_features_out_`` columns) is a buffer the map may write the features into, so
        that a caller mapping round after round reuses memory instead of touching new
        pages every round; the features returned may then be views of it.
        """
        return [self.apply_chunk(X, row_start, g, state) for X, row_start, g, state in items]

    def keep_mask(self, m: int, groups: np.ndarray | None, state: Any) -> np.ndarray | None:
        """Rows of a chunk used for training (None: all); ``state`` is the state before the chunk."""
        return None

    def transform(self, X: Any, groups: Any = None) -> np.ndarray:
        """Features of in-memory rows (one call; stateful maps start every series from rest).

        Parameters
        ----------
        X : array of shape (n_samples, n_features_in)
        groups : array of shape (n_samples,) or None
            Series id of every row (stateful maps); None: one series.

        Returns
        -------
        array of float64 of shape (n_samples, n_features_out)
        """
        check_is_fitted(self, "n_features_in_")
        X = check_array(X, dtype=np.float64, ensure_min_samples=0)  # rejects NaN/inf, sparse, complex
        self.check_width(X.shape[1])
        g = None if groups is None else np.asarray(groups).reshape(-1)
        if g is not None and g.shape[0] != X.shape[0]:
            raise InputError(f"groups has {g.shape[0]} entries for {X.shape[0]} rows of X")
        if self.stateful and g is not None:
            check_contiguous(*run_heads(g, X.shape[0]))
        with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported by check_features
            F, _ = self.apply_chunk(X, 0, g, self.init_state())
        check_features(F, 0, self)
        return F

    def check_width(self, n: int) -> None:
        """Raise :class:`InputError` unless the input has the width the map was fitted for."""
        if int(n) != self.n_features_in_:
            raise InputError(
                f"X has {n} features, but {type(self).__name__} is expecting {self.n_features_in_} features as input "
                "(the width it was fitted for); fit the map on this data or give data of the same width"
            )

    # ---------------------------------------------------------------- description
    def to_dict(self) -> dict[str, Any]:
        """JSON-able parameters plus arrays: ``{"map", "params", "arrays", "n_features_in"}``.

        Nested maps (:class:`Concat`, :class:`Pipeline`) appear as nested dicts in
        ``params``; arrays are NumPy arrays (see :func:`streamridge.features.encode`
        for a pure-JSON form with the arrays split off).
        """
        params = {}
        for k in inspect.signature(type(self)).parameters:  # declaration order (readable descriptions)
            v = getattr(self, k)
            if k in self._array_params and v is not None:
                v = np.asarray(v, dtype=np.float64)
            elif isinstance(v, (list, tuple)) and v and all(isinstance(m, FeatureMap) for m in v):
                v = [m.to_dict() for m in getattr(self, k + "_", v)]  # the fitted parts when fitted
            params[k] = v
        out: dict[str, Any] = {
            "map": self.name,
            "format_version": FORMAT_VERSION,
            "params": params,
            "arrays": {},
        }
        if hasattr(self, "n_features_in_"):
            out["n_features_in"] = int(self.n_features_in_)
            out["arrays"] = {a: np.asarray(getattr(self, a)) for a in self._arrays}
        return out

    def _set_fitted(self, n_in: int, arrays: dict[str, np.ndarray]) -> None:
        self.n_features_in_ = int(n_in)
        for a in self._arrays:
            setattr(self, a, np.asarray(arrays[a]))


def fitted_problem(fmap: FeatureMap, where: str = "") -> str | None:
    """What is wrong with a fitted map read from a file, or None when nothing is.

    Checks the parameters (as :meth:`FeatureMap.fit` does), the input width, every fitted
    array's dtype and shape (:meth:`FeatureMap._fitted_shape`) and finiteness, and the parts
    of a composite map with the input width each must have.

    Parameters
    ----------
    fmap : FeatureMap
        As rebuilt by :func:`streamridge.features.from_dict`.
    where : str
        Where the map sits in an enclosing map, for the message (e.g. ``"pipeline part 1: "``).

    Returns
    -------
    str or None
        One line naming the map (and its place), e.g. ``feature map esn: array w_res_ has
        shape (3, 3), expected (20, 20)``.
    """
    label = f"feature map {where}{fmap.name}"
    try:
        fmap._check_params()
    except (ParameterError, TypeError, ValueError) as exc:
        return f"{label}: {exc}"
    n_in = getattr(fmap, "n_features_in_", None)
    if isinstance(n_in, bool) or not isinstance(n_in, int) or n_in < 1:
        return f"{label} is not fitted (n_features_in is {n_in!r}, expected an integer >= 1)"
    for name in fmap._arrays:
        a = getattr(fmap, name, None)
        if not isinstance(a, np.ndarray) or a.dtype.kind != "f":
            return f"{label}: array {name} is {'missing' if a is None else f'of dtype {a.dtype}'}, expected float"
        expected = fmap._fitted_shape(name)
        if a.shape != expected:
            return f"{label}: array {name} has shape {a.shape}, expected {expected}"
        if not np.isfinite(a).all():
            return f"{label}: array {name} holds NaN or inf"
    for i, (part, width) in enumerate(fmap._fitted_parts()):
        if getattr(part, "n_features_in_", None) != width:
            return f"{label}: part {i} ({part.name}) takes {getattr(part, 'n_features_in_', None)} inputs, expected {width}"
        problem = fitted_problem(part, f"{where}{fmap.name} part {i}: ")
        if problem:
            return problem
    return None


def check_features(F: np.ndarray, row_start: int, fmap: Any) -> None:
    """Raise :class:`NonFiniteError` if a map produced NaN/inf (one line naming the rows)."""
    ok = np.isfinite(F)
    if ok.all():
        return
    bad = ~ok.all(axis=1)
    rows = (np.flatnonzero(bad)[:5] + row_start).tolist()
    raise NonFiniteError(
        f"feature map {type(fmap).__name__} produced NaN or inf in {int(bad.sum())} row(s), first at rows {rows}; "
        "scale the inputs down (input_scaling) or standardize the raw data"
    )


def sample_rows(X: Any, n: int, seed: int) -> np.ndarray:
    """A seeded sample of ``min(n, n_rows)`` rows of X, the same for every chunking.

    Row i gets the key ``splitmix64(i, seed)``; the rows with the ``n`` smallest keys
    are kept, in key order (a reservoir sample computed chunk by chunk for dask arrays,
    one light pass).

    Returns
    -------
    array of float64 of shape (min(n, n_rows), n_features)
    """
    M = int(X.shape[0])
    if not hasattr(X, "dask"):
        A = np.asarray(X, dtype=np.float64)
        keys = splitmix64(np.arange(M, dtype=np.uint64), seed)
        idx = np.argsort(keys, kind="stable")[:n]
        return A[idx]
    import dask
    from dask.threaded import get as threads  # a callable: dask imports distributed to resolve a name

    starts = np.concatenate([[0], np.cumsum(X.chunks[0])[:-1]]).astype(np.int64)
    parts = [
        dask.delayed(_block_sample)(b, int(s), n, seed) for b, s in zip(X.to_delayed().reshape(-1), starts)
    ]
    got = dask.compute(*parts, scheduler=threads)
    keys = np.concatenate([k for k, _ in got])
    rows = np.concatenate([r for _, r in got], axis=0)
    idx = np.argsort(keys, kind="stable")[:n]
    return rows[idx]


def _block_sample(block: np.ndarray, start: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    keys = splitmix64(np.arange(start, start + block.shape[0], dtype=np.uint64), seed)
    idx = np.argsort(keys, kind="stable")[:n]
    return keys[idx], np.asarray(block, dtype=np.float64)[idx]


def uniform(rng: np.random.Generator, shape: tuple[int, ...], scale: float) -> np.ndarray:
    """Uniform(-scale, scale) weights."""
    return rng.uniform(-1.0, 1.0, size=shape) * float(scale)


def grid(cls: type[FeatureMap], lists: Mapping[str, Any]) -> list[FeatureMap]:
    """Maps of class ``cls``, one per combination of the parameter values in ``lists``.

    A list (or tuple) is a parameter's values; any other value is used as it is.
    Combinations run in the order given, the last parameter's values varying fastest
    (:func:`itertools.product`).  Parameters not given keep their defaults in every
    candidate (the seed included: candidates differ only where asked).

    Raises
    ------
    ParameterError
        An unknown parameter, an empty list, or a value its constraints refuse.
    """
    known = set(cls().get_params(deep=False))
    for name, values in lists.items():
        if name not in known:
            raise ParameterError(
                f"{cls.__name__}.grid: unknown parameter {name!r}; valid: {', '.join(sorted(known))}"
            )
        if isinstance(values, (list, tuple)) and not values:
            raise ParameterError(f"{cls.__name__}.grid: {name} has no values; give at least one")
    names = list(lists)
    options = [v if isinstance(v, (list, tuple)) else [v] for v in lists.values()]
    maps = [cls(**dict(zip(names, combo))) for combo in itertools.product(*options)]
    for m in maps:
        m._check_params()
    return maps
