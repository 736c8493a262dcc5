"""Validation R² and Pearson correlation per lambda, fold and target from the statistics, without rows.

For fold k, the fitted model predicts ``yhat = b + W' x`` with ``b`` from the
training means; with ``W`` as the forms see it (:mod:`streamridge.forms.build`) and
the validation fold's own weighted moments (``n``, means, centered ``syy``):

.. code-block:: text

    SSE  = q - 2 c + cv                                  (the eigen method's error)
    R²   = 1 - SSE / syy
    corr = (c - n m dy) / sqrt((q - n m²) syy)

with ``q = diag(W' Av W)``, ``c = diag(W' Bv)``, ``m = W' dx``
(:mod:`streamridge.solvers.quadratics`), ``dx`` and ``dy`` the validation
means less the training means (in the forms' units), as R² and Pearson's r of
scikit-learn's ``r2_score(y, yhat, sample_weight=w)`` and ``np.corrcoef``
(weighted by w) on that fold's rows.  Lambda is chosen as the squared error
is (:func:`streamridge.solvers.grid.choose`), by the mean over folds of the per-fold
score, greater is better.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streamridge.errors import ParameterError
from streamridge.forms.build import Forms, ValidationMoments, validation_moments
from streamridge.parallel import column_parts, map_folds, n_cpus
from streamridge.solvers.grid import choose
from streamridge.solvers.quadratics import (
    DEFAULT_MAX_BYTES,
    FoldQuadratics,
    ValidationFactor,
    fold_factor,
    fold_quadratics,
)

__all__ = [
    "SCORINGS",
    "FoldTargets",
    "ValidationMoments",
    "check_scoring",
    "choose_scores",
    "fold_score_set",
    "fold_scores",
    "fold_targets",
    "scores_from_quadratics",
    "targets_of",
    "validation_moments",
]

#: scores computed from the statistics, and whether greater is better
SCORINGS = {"sse": False, "r2": True, "correlation": True}


@dataclass
class FoldTargets:
    """What one fold's scores need besides the quadratics: ``cv``, ``n``, ``dy`` and ``syy`` (see module docstring).

    Attributes
    ----------
    cv : array of shape (T,)
    n : float
    dy : array of shape (T,)
    syy : array of shape (T,)
    """

    cv: np.ndarray
    n: float
    dy: np.ndarray
    syy: np.ndarray


def check_scoring(scoring: object) -> str:
    """``scoring`` if it is one of :data:`SCORINGS`, else a one-line :class:`ParameterError`."""
    if not isinstance(scoring, str) or scoring not in SCORINGS:
        raise ParameterError(f"scoring must be one of {sorted(SCORINGS)}; got scoring={scoring!r}")
    return scoring


def fold_offsets(forms: Forms, moments: ValidationMoments) -> tuple[np.ndarray, np.ndarray]:
    """``dx`` (K, N) and ``dy`` (K, T): validation means less the training means, ``dx`` in the forms' units."""
    dx = (moments.mean_x - forms.x_offset) / forms.scale
    dy = moments.mean_y - forms.y_offset
    return dx, dy


def fold_targets(
    forms: Forms, moments: ValidationMoments | None, k: int, dy: np.ndarray | None
) -> FoldTargets:
    """The :class:`FoldTargets` of fold k (``moments`` and ``dy`` may be None for the squared error)."""
    T = forms.cv.shape[1]
    if moments is None or dy is None:
        return FoldTargets(forms.cv[k], float(forms.n_val[k]), np.zeros(T), np.zeros(T))
    return FoldTargets(forms.cv[k], float(moments.n[k]), dy[k], moments.syy[k])


def scores_from_quadratics(scoring: str, fq: FoldQuadratics, ft: FoldTargets) -> np.ndarray:
    """Squared error, R² or correlation of shape (R, T) of one fold (module docstring).

    R² is 0 for a target constant on the fold (``syy = 0``), as himalaya's
    ``r2_score``; the correlation is 0 where the target or the prediction is
    constant on the fold.

    Parameters
    ----------
    scoring : {"sse", "r2", "correlation"}
    fq : FoldQuadratics
        ``q``, ``c`` (and ``m`` for the correlation), each of shape (R, T).
    ft : FoldTargets

    Returns
    -------
    array of shape (R, T)

    Notes
    -----
    In the forms' units let ``e_i = x_i - xbar_t`` and ``f_i = y_i - ybar_t``
    (training means; zero without intercept).  The prediction is
    ``yhat_i = ybar_t + W' e_i``, and on the validation rows (weights w_i,
    sum n, means ``xbar_t + dx`` and ``ybar_t + dy``)

    .. code-block:: text

        sum w (y - yhat)²                     = cv - 2 c + q
        sum w (yhat - mean yhat)(y - mean y)  = c - n (W' dx) dy  = c - n m dy
        sum w (yhat - mean yhat)²             = q - n m²
        sum w (y - mean y)²                   = syy  (from the statistics)

    with ``cv = sum w f²``, ``c = W' sum w e f`` and ``q = W' (sum w e e') W``.

    R² divides the first by the last; Pearson's r divides the second by the
    root of the product of the last two.

    ``q - n m²`` is the prediction's centered sum of squares, a difference:
    where the prediction's mean on the fold is large against its spread (no
    intercept and features far from zero) it loses ``log10(n m² / (q - n m²))``
    digits; with an intercept ``m`` is a difference of fold means and small.
    """
    sse = fq.q - 2.0 * fq.c + ft.cv[None, :]
    if scoring == "sse":
        return sse
    has = ft.syy > 0
    syy = np.where(has, ft.syy, 1.0)[None, :]
    if scoring == "r2":
        return np.where(has[None, :], 1.0 - sse / syy, 0.0)
    if fq.m is None:
        raise ParameterError("scoring='correlation' needs the validation moments; pass moments=")
    var = fq.q - ft.n * fq.m * fq.m
    cov = fq.c - ft.n * fq.m * ft.dy[None, :]
    ok = has[None, :] & (var > 0)
    return np.where(ok, cov / np.sqrt(np.where(ok, var, 1.0) * syy), 0.0)


def fold_scores(
    forms: Forms,
    alphas: np.ndarray,
    *,
    scoring: str = "r2",
    moments: ValidationMoments | None = None,
    gains: np.ndarray | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    factors: dict[int, ValidationFactor] | None = None,
) -> np.ndarray:
    """Validation score of every lambda, fold and target of ridge, from the forms alone.

    Parameters
    ----------
    forms : Forms
    alphas : array of shape (R,)
    scoring : {"sse", "r2", "correlation"}
    moments : ValidationMoments or None
        The folds' own moments (:func:`validation_moments`); needed for R² and correlation.
        None: the forms' own (built ``with_moments``), if any.
    gains : array of shape (N,) or None
        Ridge of the features scaled by these non-negative factors (features
        of gain 0 left out), see :func:`~streamridge.solvers.quadratics.fold_quadratics`.
    max_bytes : int
        Working memory of one fold's batch of targets.
    factors : dict or None
        Factors of the folds by fold index (:func:`~streamridge.solvers.quadratics.fold_factor`
        of these forms and gains), filled in where missing: pass the same dict
        with the forms of another batch of the same targets' folds to decompose
        each fold once.

    Returns
    -------
    array of shape (R, K, T)
    """
    return fold_score_set(
        forms, alphas, (scoring,), moments=moments, gains=gains, max_bytes=max_bytes, factors=factors
    )[scoring]


def fold_score_set(
    forms: Forms,
    alphas: np.ndarray,
    scorings: tuple[str, ...],
    *,
    moments: ValidationMoments | None = None,
    gains: np.ndarray | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    factors: dict[int, ValidationFactor] | None = None,
) -> dict[str, np.ndarray]:
    """:func:`fold_scores` of several scorings from the same quadratics, by name, each of shape (R, K, T)."""
    moments = forms.moments if moments is None else moments
    for scoring in scorings:
        check_scoring(scoring)
        if scoring != "sse" and moments is None:
            raise ParameterError(
                f"scoring={scoring!r} needs the validation folds' moments; pass moments=validation_moments(stats) "
                "or build the forms with_moments=True"
            )
    dx, dy = fold_offsets(forms, moments) if moments is not None else (None, None)
    alphas = np.asarray(alphas, dtype=np.float64)
    cache: dict[int, ValidationFactor] = {} if factors is None else factors
    want_m = "correlation" in scorings

    K, T = forms.n_folds, forms.cv.shape[1]
    missing = [k for k in range(K) if k not in cache]
    for k, fac in zip(
        missing,
        map_folds(lambda i: fold_factor(forms.At[missing[i]], forms.Av[missing[i]], gains), len(missing)),
    ):
        cache[k] = fac
    # folds side by side on the cores; where their number is not a multiple of the cores (5 folds on 2
    # cores leave one idle a third of the time), each fold's targets in one part per core
    workers = n_cpus()
    parts = column_parts(T, workers, when=K % workers != 0)
    tasks = [(k, cols) for k in range(K) for cols in parts]

    def one(i: int) -> list[np.ndarray]:
        k, cols = tasks[i]
        fq = fold_quadratics(
            forms.At[k], forms.Bt[k][:, cols], forms.Av[k], forms.Bv[k][:, cols], alphas,
            dx=None if dx is None or not want_m else dx[k], gains=gains, max_bytes=max_bytes, factor=cache[k],
        )  # fmt: skip
        ft = _columns(fold_targets(forms, moments, k, dy), cols)
        return [scores_from_quadratics(scoring, fq, ft) for scoring in scorings]

    out = {name: np.empty((alphas.shape[0], K, T)) for name in scorings}
    for (k, cols), scores in zip(tasks, map_folds(one, len(tasks))):
        for name, sc in zip(scorings, scores):
            out[name][:, k, cols] = sc
    return out


def _columns(ft: FoldTargets, cols: slice) -> FoldTargets:
    """The :class:`FoldTargets` of the targets ``cols`` only (views)."""
    return FoldTargets(ft.cv[cols], ft.n, ft.dy[cols], ft.syy[cols])


def targets_of(moments: ValidationMoments, cols: slice) -> ValidationMoments:
    """The moments of the targets ``cols`` only (views)."""
    return ValidationMoments(moments.n, moments.mean_x, moments.mean_y[:, cols], moments.syy[:, cols])


def choose_scores(
    scores: np.ndarray, alphas: np.ndarray, *, scoring: str, per_target: bool, one_se: bool = False
) -> np.ndarray:
    """Index of the chosen lambda from per-fold scores, by :func:`streamridge.solvers.grid.choose`.

    Parameters
    ----------
    scores : array of shape (R, K, T)
    alphas : array of shape (R,)
    scoring : {"sse", "r2", "correlation"}
        Greater is better but for ``"sse"``.
    per_target : bool
        One lambda per target; else one for the score summed over targets.
    one_se : bool
        Largest lambda whose mean score over folds is within one standard
        error (over folds) of the best.

    Returns
    -------
    array of int of shape (T,) if per_target else shape ()
        Ties (equal to within 1e-12 relative) go to the larger lambda.
    """
    loss = scores if not SCORINGS[check_scoring(scoring)] else -scores
    return choose(loss, alphas, per_target=per_target, one_se=one_se)
