"""Float64 range checks of the statistics and of what the solvers compute from them.

Co-moments hold products of two values: data of magnitude above about 1e154
overflows them (squares beyond 1.8e308, stored as inf), data below about 1e-146
underflows them (products below 1e-292 lose relative precision and reach zero
at 1e-324).  Neither can be repaired once the statistics are accumulated, so
the solve stage refuses them with one line naming the array, the feature or
target and the constant to divide or multiply by.  A lambda is never chosen
from non-finite cross-validation errors.
"""

from __future__ import annotations

import numpy as np

from streamridge.errors import ScaleError
from streamridge.stats.foldstats import FoldStats

#: values of smaller magnitude have products below tiny / eps: relative precision is lost
SMALLEST = float(np.sqrt(np.finfo(np.float64).tiny / np.finfo(np.float64).eps))


def _power_of_ten(v: float) -> str:
    return f"1e{int(np.round(np.log10(v))):+d}" if np.isfinite(v) and v > 0 else "1e+154"


def _magnitude(mean: np.ndarray, comoment_diag: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Typical magnitude per column: max over cells of |mean| and the standard deviation (cells with weight)."""
    w = weight.reshape(-1)
    ok = w > 0
    with np.errstate(all="ignore"):
        m = np.abs(mean.reshape(w.shape[0], -1)[ok])
        sd = np.sqrt(np.maximum(comoment_diag.reshape(w.shape[0], -1)[ok], 0.0) / w[ok, None])
        both = np.where(
            np.isfinite(sd), np.maximum(m, sd), m
        )  # an overflowed co-moment: the mean tells the size
        return np.max(np.where(np.isfinite(both), both, 0.0), axis=0, initial=0.0)


def _first_bad(*arrays: np.ndarray) -> int | None:
    """Index of the first column (last axis) with a non-finite entry in any array, or None."""
    for a in arrays:
        bad = ~np.isfinite(a.reshape(-1, a.shape[-1])).all(axis=0)
        if bad.any():
            return int(np.flatnonzero(bad)[0])
    return None


def check_stats_range(stats: FoldStats) -> None:
    """Raise a one-line :class:`ScaleError` if the statistics overflowed or underflowed float64.

    Raises
    ------
    ScaleError
        Non-finite weights, means or co-moments (overflow), or a feature or
        target whose values are all of magnitude below :data:`SMALLEST`.
    """
    if not np.isfinite(stats.weight).all():
        raise ScaleError(
            "the sample weights sum beyond float64's range (1.8e308); divide sample_weight by a constant"
        )
    xdiag = np.diagonal(stats.sxx, axis1=-2, axis2=-1)
    # co-moments are PSD: |sxx_ij| <= sqrt(sxx_ii sxx_jj), so the diagonal tells whether any entry overflowed
    j = _first_bad(stats.mean_x, xdiag)
    if j is not None:
        mag = _magnitude(stats.mean_x, xdiag, stats.weight)[j]
        raise ScaleError(
            f"X is too large for float64 statistics: the co-moments of feature {j} overflowed (values around "
            f"{_power_of_ten(mag)}; their squares exceed 1.8e308); divide X by a constant such as {_power_of_ten(mag)} and refit"
        )
    t = _first_bad(stats.mean_y, stats.syy)
    if t is not None:
        mag = _magnitude(stats.mean_y, stats.syy, stats.weight)[t]
        raise ScaleError(
            f"y is too large for float64 statistics: the sum of squares of target {t} overflowed (values around "
            f"{_power_of_ten(mag)}); divide y by a constant such as {_power_of_ten(mag)}, refit and multiply predictions back"
        )
    if _first_bad(stats.sxy) is not None:
        raise ScaleError(
            "the cross-products of X and y overflowed float64 (above 1.8e308); divide X or y by a constant and refit"
        )
    _check_underflow(stats, xdiag)


def _check_underflow(stats: FoldStats, xdiag: np.ndarray) -> None:
    for name, mag, what in (
        ("X", _magnitude(stats.mean_x, xdiag, stats.weight), "feature"),
        ("y", _magnitude(stats.mean_y, stats.syy, stats.weight), "target"),
    ):
        tiny = np.flatnonzero((mag > 0) & (mag < SMALLEST))
        if tiny.size:
            j = int(tiny[0])
            raise ScaleError(
                f"{name} is too small for float64 statistics: {what} {j} has values around {_power_of_ten(mag[j])}, "
                f"whose products underflow (below {SMALLEST:.0e}); multiply {name} by a constant such as "
                f"{_power_of_ten(1.0 / mag[j])} and refit"
            )


def check_finite(values: np.ndarray, what: str) -> None:
    """Raise :class:`ScaleError` if ``values`` (forms, errors, coefficients) hold inf or NaN."""
    if not np.isfinite(values).all():
        raise ScaleError(
            f"the {what} overflowed float64 (values beyond 1.8e308) although the statistics are finite; "
            "divide X and y by constants (powers of ten) and refit"
        )
