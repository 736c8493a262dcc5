"""Validation of the selection options; every problem is a one-line :class:`ParameterError`."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from streamridge.errors import ParameterError
from streamridge.forms.build import Forms
from streamridge.solvers.grid import check_alphas

DIRECTIONS = ("forward", "backward")


@dataclass(frozen=True)
class Options:
    """Checked options of one selection path (see :func:`select_features`)."""

    direction: str
    n_features: int
    max_features: int
    min_features: int
    force: tuple[int, ...]
    patience: int | None
    tol: float
    one_se: bool
    per_target: bool
    memory_budget: int


def default_budget() -> int:
    """Bytes of selection state kept between steps: a quarter of available memory, 256 MiB to 4 GiB."""
    try:
        import psutil

        avail = int(psutil.virtual_memory().available)
    except Exception:  # no psutil or no answer: be conservative
        return 2**28
    return int(min(max(avail // 4, 2**28), 2**32))


def _int_in(name: str, value: object, lo: int, hi: int) -> int:
    if (
        isinstance(value, (bool, np.bool_))
        or not isinstance(value, numbers.Integral)
        or not lo <= int(value) <= hi
    ):
        raise ParameterError(f"{name} must be an integer in [{lo}, {hi}]; got {name}={value!r}")
    return int(value)


def check_forms(forms: object) -> Forms:
    """The forms must be a :class:`Forms` with at least two features."""
    if not isinstance(forms, Forms):
        raise ParameterError(f"forms must be a streamridge.forms.build.Forms; got {type(forms).__name__}")
    N = int(forms.At.shape[1])
    if N < 2:
        raise ParameterError(
            f"feature selection needs at least 2 features; got {N} feature; fit without selection instead"
        )
    return forms


def check_force(force: Sequence[int], N: int) -> tuple[int, ...]:
    """Forced feature indices: unique integers in [0, N - 1], returned sorted."""
    try:
        arr = np.asarray(list(force))
    except TypeError:
        raise ParameterError(f"force must be a sequence of feature indices; got force={force!r}") from None
    if arr.size and (arr.dtype.kind not in "iu" or arr.min() < 0 or arr.max() >= N):
        raise ParameterError(f"force must hold feature indices in [0, {N - 1}]; got force={arr.tolist()}")
    if np.unique(arr).size != arr.size:
        raise ParameterError(f"force must not repeat a feature; got force={arr.tolist()}")
    return tuple(sorted(int(f) for f in arr))


def check_options(
    forms: object,
    alphas: object,
    *,
    direction: str,
    max_features: int | None,
    min_features: int | None,
    force: Sequence[int],
    patience: int | None,
    tol: float,
    one_se: bool,
    alpha_per_target: bool,
    memory_budget: int | None,
    directions: tuple[str, ...] = DIRECTIONS,
) -> tuple[Forms, np.ndarray, Options]:
    """Check every argument of :func:`select_features` once; return forms, grid and options.

    ``directions`` lists the accepted directions (OP-RR passes ``("op-rr",)``).
    """
    if direction not in directions:
        raise ParameterError(f"direction must be 'forward' or 'backward'; got direction={direction!r}")
    F = check_forms(forms)
    a = check_alphas(alphas)
    N = int(F.At.shape[1])
    fixed = check_force(force, N)
    hi = N if max_features is None else _int_in("max_features", max_features, 1, N)
    lo_default = 0 if direction != "backward" else 1
    lo = lo_default if min_features is None else _int_in("min_features", min_features, 1, N)
    if lo > hi:
        raise ParameterError(
            f"min_features must be <= max_features; got min_features={lo}, max_features={hi}"
        )
    if len(fixed) > hi:
        raise ParameterError(
            f"max_features must be >= the {len(fixed)} forced features; got max_features={hi}"
        )
    if patience is not None:
        patience = _int_in("patience", patience, 1, 2**31)
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real) or not (np.isfinite(tol) and tol >= 0):
        raise ParameterError(f"tol must be a finite number >= 0; got tol={tol!r}")
    budget = default_budget() if memory_budget is None else _int_in("memory_budget", memory_budget, 1, 2**62)
    opts = Options(
        direction, N, hi, lo, fixed, patience, float(tol), bool(one_se), bool(alpha_per_target), budget
    )
    return F, a, opts
