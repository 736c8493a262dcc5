"""Declared parameter constraints of the feature maps, and the one function that checks them.

Every map lists, in ``_param_constraints``, the values each parameter of its
``__init__`` accepts (one or more constraints; a value must satisfy one of them),
as scikit-learn's ``_parameter_constraints`` do, and may add a ``_conflict`` check
between parameters.  :func:`param_error` checks a map's parameters against them and
returns the first violation as text: the maps call it in ``fit`` (Python), the
features-file check calls it on the file's values before a map is built.

Booleans are ``bool`` only (a string ``"false"`` is not a boolean); integers are
integers, never a float such as 2.5 nor a boolean; numbers are finite.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

INT64_MAX = 2**63 - 1


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _is_number(v: Any) -> bool:
    if _is_int(v):
        return True
    return isinstance(v, (float, np.floating)) and bool(np.isfinite(v))


@dataclass(frozen=True)
class Integer:
    """An integer (not a bool, not a float) in ``[low, high]``."""

    low: int
    high: int = INT64_MAX

    def accepts(self, v: Any) -> bool:
        """True if ``v`` satisfies the constraint."""
        return _is_int(v) and self.low <= int(v) <= self.high

    def text(self) -> str:
        """What the constraint asks for, after "must be"."""
        if self.high == INT64_MAX:
            return "a non-negative integer" if self.low == 0 else f"an integer >= {self.low}"
        return f"an integer from {self.low} to {self.high}"


@dataclass(frozen=True)
class Real:
    """A finite number (int or float, not a bool) in an interval; ``None`` bounds are open to infinity."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def accepts(self, v: Any) -> bool:
        """True if ``v`` satisfies the constraint."""
        if not _is_number(v):
            return False
        x = int(v) if _is_int(v) else float(v)  # a huge integer compared exactly, never overflowing a float
        above = self.low is None or (x > self.low if self.low_open else x >= self.low)
        below = self.high is None or (x < self.high if self.high_open else x <= self.high)
        return above and below

    def text(self) -> str:
        """What the constraint asks for, after "must be"."""
        if self.low is None and self.high is None:
            return "a finite number"
        if self.high is None:
            return f"a finite number {'>' if self.low_open else '>='} {self.low:g}"
        lo = "(" if self.low_open else "["
        hi = ")" if self.high_open else "]"
        return f"a number in {lo}{self.low:g}, {self.high:g}{hi}"


@dataclass(frozen=True)
class Boolean:
    """``True`` or ``False`` (JSON/TOML ``true``/``false``); strings and numbers are refused."""

    def accepts(self, v: Any) -> bool:
        """True if ``v`` satisfies the constraint."""
        return isinstance(v, (bool, np.bool_))

    def text(self) -> str:
        """What the constraint asks for, after "must be"."""
        return "a boolean, true or false (not a string or a number)"


@dataclass(frozen=True)
class Choice:
    """One of a fixed set of strings."""

    options: tuple[str, ...]

    def accepts(self, v: Any) -> bool:
        """True if ``v`` satisfies the constraint."""
        return isinstance(v, str) and v in self.options

    def text(self) -> str:
        """What the constraint asks for, after "must be"."""
        return "one of " + ", ".join(f'"{o}"' for o in self.options)


@dataclass(frozen=True)
class NoneValue:
    """``None`` (JSON ``null``; TOML has none: leave the key out)."""

    def accepts(self, v: Any) -> bool:
        """True if ``v`` is None."""
        return v is None

    def text(self) -> str:
        """What the constraint asks for, after "must be"."""
        return "null (None)"


@dataclass(frozen=True)
class Rows:
    """A 2-D array of finite numbers with at least one row (a list of rows of numbers in a file).

    ``shape`` names the shape expected, for the message; ``square``: as many rows as columns.
    """

    shape: str = "(n, n_features_in)"
    square: bool = False

    def accepts(self, v: Any) -> bool:
        """True if ``v`` satisfies the constraint."""
        v = _as_numpy(v)
        if isinstance(v, np.ndarray):
            ok = v.dtype.kind in "iuf" and v.ndim == 2 and v.shape[0] >= 1 and v.shape[1] >= 1
            return ok and (not self.square or v.shape[0] == v.shape[1]) and bool(np.isfinite(v).all())
        if not isinstance(v, (list, tuple)) or not v or not all(isinstance(r, (list, tuple)) for r in v):
            return False
        width = len(v[0])
        if width < 1 or (self.square and width != len(v)):
            return False
        return all(len(r) == width and all(_is_number(x) for x in r) for r in v)

    def text(self) -> str:
        """What the constraint asks for, after "must be"."""
        what = (
            "a square list of rows of finite numbers, as many rows as columns"
            if self.square
            else ("a list of rows of finite numbers, all rows of the same length")
        )
        return f"{what} (an array of shape {self.shape})"


@dataclass(frozen=True)
class Vector:
    """A 1-D array of finite numbers with at least one entry (a list of numbers in a file).

    ``shape`` names the shape expected, for the message.
    """

    shape: str = "(n,)"

    def accepts(self, v: Any) -> bool:
        """True if ``v`` satisfies the constraint."""
        v = _as_numpy(v)
        if isinstance(v, np.ndarray):
            return v.dtype.kind in "iuf" and v.ndim == 1 and v.shape[0] >= 1 and bool(np.isfinite(v).all())
        return isinstance(v, (list, tuple)) and len(v) >= 1 and all(_is_number(x) for x in v)

    def text(self) -> str:
        """What the constraint asks for, after "must be"."""
        return f"a list of finite numbers (an array of shape {self.shape})"


def _as_numpy(v: Any) -> Any:
    """A DataFrame, a dask array or another array-like as NumPy sees it; lists and other values as they are."""
    if hasattr(v, "__array__") and not isinstance(v, np.ndarray):
        return np.asarray(v)
    return v


@dataclass(frozen=True)
class MapList:
    """A non-empty list of feature maps (the parts of a composite map)."""

    def accepts(self, v: Any) -> bool:
        """True if ``v`` satisfies the constraint."""
        return (
            isinstance(v, (list, tuple))
            and len(v) > 0
            and all(callable(getattr(m, "apply_chunk", None)) for m in v)
        )

    def text(self) -> str:
        """What the constraint asks for, after "must be"."""
        return "a non-empty list of feature maps"


Constraint = Integer | Real | Boolean | Choice | NoneValue | Rows | Vector | MapList

Constraints = dict[str, tuple[Constraint, ...]]
"""A map's ``_param_constraints``: the constraints of every parameter (a value must satisfy one)."""

SEED = Integer(0)
"""Seeds: non-negative integers."""

COUNT = Integer(1)
"""Sizes (units, components, delays): integers >= 1."""


def takes_list(constraints: tuple[Constraint, ...]) -> bool:
    """True for a parameter whose value may itself be a list (an array, the parts of a composite map).

    In a features file a list given to such a parameter is its value; a list given to any
    other (scalar-valued) parameter is a grid of its values.
    """
    return any(isinstance(c, (Rows, Vector, MapList)) for c in constraints)


def shown(v: Any, *, python: bool = False, limit: int = 60) -> str:
    """A value as the user wrote it, cut to ``limit`` characters.

    JSON spelling (``null``, ``true``, ``"text"``) for a file's values; ``repr`` with ``python=True``.
    """
    if isinstance(v, (datetime.date, datetime.time)):
        text = f"{v.isoformat()} (a date or time)"
    elif isinstance(v, np.ndarray):
        text = f"an array of shape {v.shape} and dtype {v.dtype}"
    elif python:
        text = repr(v)
    else:
        try:
            text = json.dumps(v.item() if isinstance(v, np.generic) else v)
        except (TypeError, ValueError):
            text = repr(v)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_constraints(constraints: tuple[Constraint, ...]) -> str:
    """``"an integer >= 1 or null"``."""
    return " or ".join(c.text() for c in constraints)


def param_error(
    cls: Any, params: Mapping[str, Any], *, skip: tuple[str, ...] = (), python: bool = False
) -> str | None:
    """The first parameter of ``params`` that ``cls`` does not accept, as one line (None: all accepted).

    Parameters
    ----------
    cls : FeatureMap subclass
        Its ``_param_constraints`` and ``_conflict``.
    params : mapping of parameter name to value
        Every parameter (given or default): ``_conflict`` compares them.
    skip : names not checked here (the parts of a composite map, checked by the caller)
    python : show values as Python writes them (``None``, ``'text'``), not as JSON (``null``, ``"text"``)

    Returns
    -------
    str or None
        E.g. ``"washout must be a non-negative integer; got washout=2.5"``.
    """
    for name, constraints in cls._param_constraints.items():
        if name in skip or name not in params:
            continue
        v = params[name]
        if not any(c.accepts(v) for c in constraints):
            return f"{name} must be {describe_constraints(constraints)}; got {name}={shown(v, python=python)}"
    return cls._conflict(params)
