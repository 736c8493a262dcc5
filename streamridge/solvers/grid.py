"""The lambda grid and the rule that picks lambda from cross-validation errors."""

from __future__ import annotations

import numpy as np

from streamridge.errors import ParameterError, ScaleError

DEFAULT_N_ALPHAS = 50
DEFAULT_SPAN = (1e-6, 1e3)


def check_alphas(alphas: object) -> np.ndarray:
    """Validate a user lambda grid: 1-D, real numbers, finite, strictly positive.

    Returns
    -------
    array of float64 of shape (R,), in the order given

    Raises
    ------
    ParameterError
        Naming the first element that is not a real number and its type
        (``alphas[2] is of type str, not int or float``), or the
        values that are not positive and finite.
    """
    a = _numeric(alphas)
    if a.ndim != 1 or a.size == 0:
        raise ParameterError(
            f"alphas must be a non-empty 1-D list of positive numbers; got alphas={alphas!r}"
        )
    bad = a[~np.isfinite(a) | (a <= 0)]
    if bad.size:
        raise ParameterError(f"alphas must be positive and finite; got alphas={bad.tolist()}")
    return a


def _is_real(value: object) -> bool:
    """A real number: a Python or NumPy int or float, not a bool."""
    real = isinstance(value, (int, float, np.integer, np.floating))
    return real and not isinstance(value, (bool, np.bool_))


def _numeric(alphas: object) -> np.ndarray:
    """``alphas`` as a float64 array (a number becomes a grid of one).

    Raises
    ------
    ParameterError
        If ``alphas`` is a string, a mapping or a set, or holds anything but
        real numbers (strings, None, complex numbers, nested lists): the message
        names the first such element, its index and its type.
    """
    if isinstance(alphas, (str, bytes, dict, set, frozenset)):
        raise ParameterError(
            f"alphas must be a number or a 1-D list of positive numbers, not {type(alphas).__name__}; got alphas={alphas!r}"
        )
    try:
        raw = np.asarray(alphas)
    except (TypeError, ValueError):  # ragged nesting: name its first list
        raw = np.empty(0, dtype=object)
    if raw.dtype.kind in "iuf":
        return np.atleast_1d(raw.astype(np.float64))
    items = list(alphas) if isinstance(alphas, (list, tuple)) else list(np.atleast_1d(raw).reshape(-1))
    for i, value in enumerate(items):
        if not _is_real(value):
            raise ParameterError(
                f"alphas must be real numbers: alphas[{i}] is of type {type(value).__name__}, not int or float; "
                f"got alphas={alphas!r}"
            )
    return np.atleast_1d(np.asarray(items, dtype=np.float64))


def default_alphas(
    A: np.ndarray, n_alphas: int = DEFAULT_N_ALPHAS, span: tuple[float, float] = DEFAULT_SPAN
) -> np.ndarray:
    """Log-spaced grid scaled to the spectrum of the full training form ``A``.

    The grid runs from ``span[0]`` to ``span[1]`` times the mean eigenvalue
    ``trace(A) / N`` of X'X (centered, scaled as the model sees it, rounded to
    3 significant digits), so it adapts to the units of the data.
    """
    N = A.shape[0]
    scale = float(np.trace(A)) / max(N, 1)
    if not np.isfinite(scale) or scale <= 0:
        scale = 1.0
    # 3 significant digits: the grid must not change with rounding-level differences of
    # the statistics (chunking, merge order, shards), or chosen lambdas would differ in the last bit
    scale = float(f"{scale:.3g}")
    return scale * np.logspace(np.log10(span[0]), np.log10(span[1]), n_alphas)


def choose(
    fold_errors: np.ndarray, alphas: np.ndarray, *, per_target: bool, one_se: bool = False
) -> np.ndarray:
    """Index of the chosen lambda.

    Parameters
    ----------
    fold_errors : array of shape (R, K, T)
        Validation squared error per lambda, fold and target.
    alphas : array of shape (R,)
    per_target : bool
        Choose one lambda per target (else one for the summed error).
    one_se : bool
        One-standard-error rule: the largest lambda whose error is within one
        standard error (over folds) of the minimum.

    Returns
    -------
    array of int of shape (T,) if per_target else shape ()
        Ties (errors equal to within 1e-12 relative) go to the larger lambda.
    """
    E = fold_errors if per_target else fold_errors.sum(axis=2, keepdims=True)
    total = E.sum(axis=1)  # (R, T')
    bad = ~np.isfinite(total).all(axis=1)
    if bad.any():
        raise ScaleError(
            f"the cross-validation errors of {int(bad.sum())} of {bad.size} lambdas (first: {float(alphas[np.argmax(bad)]):.3g}) "
            "are not finite (float64 overflow); no lambda can be chosen from them: divide X and y by constants and refit"
        )
    best = np.argmin(total, axis=0)
    cols = np.arange(total.shape[1])
    bound = total[best, cols]
    if one_se:
        K = E.shape[1]
        se = np.sqrt(K) * np.std(E[best, :, cols], axis=1, ddof=1)  # SE of the fold-summed error
        bound = bound + se
    bound = bound + 1e-12 * np.abs(bound)
    ok = total <= bound[None, :]
    order = np.argsort(alphas, kind="stable")
    # largest alpha among acceptable ones
    ranked = ok[order]
    last = ranked.shape[0] - 1 - np.argmax(ranked[::-1], axis=0)
    idx = order[last]
    return idx if per_target else idx[0]
