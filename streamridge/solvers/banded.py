"""Banded ridge from the per-fold forms: one weight per band of features, chosen per target with lambda.

The features are split into bands (feature spaces); a weight vector ``gamma``
(one non-negative entry per band) multiplies band b's kernel by ``gamma_b``,
as in himalaya's ``BandedRidgeCV``: band b's features are scaled by
``sqrt(gamma_b)``, so that

.. code-block:: text

    min_W  sum_i w_i ||y_i - b - sum_b W_b' x_ib||²  +  sum_b (lambda / gamma_b) ||W_b||²

(a band of weight 0 is left out: its coefficients are 0).  For every weight
vector the forms are rescaled (``A -> G A G``, ``B -> G B`` with
``G = diag(sqrt(gamma))`` per column), one eigendecomposition per (weight
vector, fold), all lambdas scored at O(N² T) each
(:func:`~streamridge.solvers.target_scores.fold_scores`); no pass over rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from streamridge.errors import ParameterError
from streamridge.forms.build import Forms, FullForm
from streamridge.solvers.eigen import solve_full
from streamridge.solvers.quadratics import DEFAULT_MAX_BYTES
from streamridge.solvers.target_scores import (
    SCORINGS,
    ValidationMoments,
    check_scoring,
    choose_scores,
    fold_scores,
)

__all__ = [
    "DIRICHLET_CONCENTRATION",
    "BandedSearch",
    "band_weights",
    "banded_search",
    "banded_solve_full",
    "check_band_weights",
    "check_bands",
    "feature_gains",
    "sample_band_weights",
]

#: Dirichlet concentrations the sampled weight vectors alternate between (himalaya's default)
DIRICHLET_CONCENTRATION = (0.1, 1.0)

#: the fold scores of every (weight vector, lambda, fold, target) are kept up to this many bytes
DEFAULT_KEEP_BYTES = 1 << 28

#: weight vectors whose best scores are equal to within this relative distance are tied (the first wins)
TIE_RTOL = 1e-12


def check_bands(bands: Sequence[object] | Mapping[str, object], n_features: int) -> list[np.ndarray]:
    """Validate bands: every feature in exactly one band.

    Parameters
    ----------
    bands : sequence or mapping of index arrays or slices
        The columns of each band (a mapping's values, in its order).
    n_features : int

    Returns
    -------
    list of arrays of int, one per band, each sorted
    """
    items = (
        list(bands.values())
        if isinstance(bands, Mapping)
        else list(bands)
        if not isinstance(bands, str)
        else []
    )
    if not items:
        raise ParameterError(
            f"bands must be a non-empty list of feature index arrays or slices; got bands={bands!r}"
        )
    out = [_band_columns(b, i, n_features) for i, b in enumerate(items)]
    owner = np.full(n_features, -1)
    for i, cols in enumerate(out):
        taken = cols[owner[cols] >= 0]
        if taken.size:
            j = int(taken[0])
            raise ParameterError(
                f"feature {j} is in bands {int(owner[j])} and {i}; put every feature in exactly one band"
            )
        owner[cols] = i
    missing = np.flatnonzero(owner < 0)
    if missing.size:
        raise ParameterError(
            f"features {_short(missing)} ({missing.size} of {n_features}) are in no band; put every feature in exactly one band"
        )
    return out


def _band_columns(band: object, i: int, n_features: int) -> np.ndarray:
    """Sorted columns of band i (a slice or integer indices, each once)."""
    if isinstance(band, slice):
        cols = np.arange(n_features)[band]
    else:
        raw = np.atleast_1d(np.asarray(band))
        if raw.size == 0:
            raise ParameterError(f"band {i} is empty; every band needs at least one feature")
        if raw.dtype.kind not in "iu" or raw.ndim != 1:
            raise ParameterError(
                f"band {i} must be a slice or a 1-D array of integer feature indices; got {_short(raw)}"
            )
        cols = raw.astype(np.intp)
    if cols.size == 0:
        raise ParameterError(f"band {i} is empty; every band needs at least one feature")
    bad = cols[(cols < 0) | (cols >= n_features)]
    if bad.size:
        raise ParameterError(
            f"band {i} holds feature {int(bad[0])}, out of range for {n_features} features (0..{n_features - 1})"
        )
    cols = np.sort(cols)
    twice = cols[1:][cols[1:] == cols[:-1]]
    if twice.size:
        raise ParameterError(f"band {i} holds feature {int(twice[0])} twice; list every feature once")
    return cols


def _short(a: np.ndarray) -> str:
    v = np.asarray(a).ravel().tolist()
    return str(v) if len(v) <= 8 else f"[{', '.join(map(str, v[:8]))}, ...]"


def sample_band_weights(
    n_bands: int, n_samples: int, *, seed: int = 0, concentration: Sequence[float] = DIRICHLET_CONCENTRATION
) -> np.ndarray:
    """Weight vectors on the simplex: the equal weights, each band alone, then Dirichlet samples.

    Parameters
    ----------
    n_bands : int
    n_samples : int
        Number of weight vectors S, at least ``n_bands + 1`` (one when ``n_bands == 1``).
    seed : int
        Seed of the Dirichlet samples.
    concentration : sequence of float
        The samples cycle through Dirichlet distributions of these concentrations.

    Returns
    -------
    array of shape (S, n_bands)
        Row 0 the equal weights, rows ``1 .. n_bands`` the unit vectors, the
        rest himalaya's ``generate_dirichlet_samples(S - n_bands - 1, n_bands,
        concentration, random_state=seed)`` (``numpy.random.RandomState``).
        Every row sums to 1.
    """
    if n_bands == 1:
        return np.ones((1, 1))
    fixed = np.vstack([np.full((1, n_bands), 1.0 / n_bands), np.eye(n_bands)])
    if (
        isinstance(n_samples, bool)
        or not isinstance(n_samples, (int, np.integer))
        or n_samples < fixed.shape[0]
    ):
        raise ParameterError(
            f"band_weights must be at least {fixed.shape[0]} for {n_bands} bands (the equal weights and each band "
            f"alone); got band_weights={n_samples!r}"
        )
    return np.vstack([fixed, _dirichlet(int(n_samples) - fixed.shape[0], n_bands, concentration, seed)])


def _dirichlet(n: int, n_bands: int, concentration: Sequence[float], seed: int) -> np.ndarray:
    """``n`` Dirichlet samples alternating between the concentrations (himalaya's order)."""
    conc = np.atleast_1d(np.asarray(concentration, dtype=np.float64))
    per = int(np.ceil(n / len(conc))) if n else 0
    rs = np.random.RandomState(seed)
    draws = [
        rs.dirichlet([a] * n_bands, per) if np.isfinite(a) else np.full((per, n_bands), 1.0 / n_bands)
        for a in conc
    ]
    return np.stack(draws, axis=1).reshape(-1, n_bands)[:n]


def check_band_weights(weights: object, n_bands: int) -> np.ndarray:
    """Validate explicit weight vectors: shape (S, n_bands), finite, non-negative, none all zero.

    Returns
    -------
    array of float64 of shape (S, n_bands)
    """
    try:
        w = np.asarray(weights, dtype=np.float64)
    except (TypeError, ValueError):
        w = np.empty((0, 0))
    if w.ndim == 1 and n_bands > 1 and w.shape[0] == n_bands:
        w = w[None, :]
    if w.ndim != 2 or w.shape[0] == 0 or w.shape[1] != n_bands:
        raise ParameterError(
            f"band_weights must be an int or an array of shape (n_samples, {n_bands}); got shape {np.shape(w)}"
        )
    bad = np.flatnonzero(~np.isfinite(w).all(axis=1) | (w < 0).any(axis=1) | ~(w > 0).any(axis=1))
    if bad.size:
        raise ParameterError(
            f"band_weights rows must be finite, non-negative and not all zero; row {int(bad[0])} is {w[bad[0]].tolist()}"
        )
    return w


def band_weights(spec: object, n_bands: int, *, seed: int = 0) -> np.ndarray:
    """Weight vectors from an int (that many, :func:`sample_band_weights`) or an explicit array."""
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        return sample_band_weights(n_bands, int(spec), seed=seed)
    return check_band_weights(spec, n_bands)


def feature_gains(bands: list[np.ndarray], gamma: np.ndarray, n_features: int) -> np.ndarray:
    """``sqrt(gamma_b)`` at every feature of band b, shape (n_features,)."""
    g = np.empty(n_features)
    for cols, w in zip(bands, gamma):
        g[cols] = np.sqrt(w)
    return g


@dataclass
class BandedSearch:
    """Cross-validation of banded ridge over weight vectors and lambdas.

    Attributes
    ----------
    weights : array of shape (S, n_bands)
    alphas : array of shape (R,)
    scoring : str
    weight_index, alpha_index : arrays of int of shape (T,), or shape () for one choice for all targets
        The chosen weight vector and lambda.
    cv_scores : array of shape (S, T), or (S,) for one choice
        Mean over folds of each weight vector's score at its chosen lambda
        (summed over targets for one choice).
    alpha_index_of_weights : array of int of shape (S, T), or (S,)
        Each weight vector's chosen lambda.
    fold_scores : array of shape (S, R, K, T) or None
        Every score, when it fits ``keep_bytes``.
    """

    weights: np.ndarray
    alphas: np.ndarray
    scoring: str
    weight_index: np.ndarray
    alpha_index: np.ndarray
    cv_scores: np.ndarray
    alpha_index_of_weights: np.ndarray
    fold_scores: np.ndarray | None

    @property
    def band_weights(self) -> np.ndarray:
        """The chosen weight vectors, shape (T, n_bands) or (n_bands,)."""
        return self.weights[self.weight_index]

    @property
    def alpha(self) -> np.ndarray:
        """The chosen lambdas, shape (T,) or ()."""
        return self.alphas[self.alpha_index]


def banded_search(
    forms: Forms,
    bands: list[np.ndarray],
    weights: np.ndarray,
    alphas: np.ndarray,
    *,
    scoring: str = "sse",
    moments: ValidationMoments | None = None,
    per_target: bool = True,
    one_se: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    keep_bytes: int = DEFAULT_KEEP_BYTES,
) -> BandedSearch:
    """Score every (weight vector, lambda, fold, target) and choose a weight vector and lambda.

    Parameters
    ----------
    forms : Forms
    bands : list of arrays of int
        From :func:`check_bands`.
    weights : array of shape (S, n_bands)
        From :func:`band_weights`.
    alphas : array of shape (R,)
    scoring : {"sse", "r2", "correlation"}
    moments : ValidationMoments or None
        Needed for R² and correlation (:func:`~streamridge.solvers.target_scores.validation_moments`).
    per_target : bool
        A weight vector and lambda per target, else one for all.
    one_se : bool
        One-standard-error rule for lambda within each weight vector.
    max_bytes : int
        Working memory of one fold's batch of targets.
    keep_bytes : int
        Keep the (S, R, K, T) fold scores if they fit in this many bytes.

    Returns
    -------
    BandedSearch

    Notes
    -----
    For each weight vector lambda is chosen by
    :func:`~streamridge.solvers.target_scores.choose_scores`; the weight vector
    is then the one whose mean score over folds at its lambda is best, ties
    (within 1e-12 relative) going to the first (the equal weights of
    :func:`sample_band_weights`).  Without the one-standard-error rule this is
    the best (weight vector, lambda) pair of all.  Only the (S, T) best scores
    and lambdas are kept while the weight vectors are scored, so the memory is
    the forms plus one weight vector's (R, K, T) scores unless ``keep_bytes``
    allows all of them.
    """
    scoring = check_scoring(scoring)
    alphas = np.asarray(alphas, dtype=np.float64)
    N, T = forms.At.shape[1], forms.Bt.shape[2]
    S, R, K = weights.shape[0], alphas.shape[0], forms.n_folds
    keep = np.empty((S, R, K, T)) if 8 * S * R * K * T <= keep_bytes else None
    cols = T if per_target else 1
    best, best_alpha = np.empty((S, cols)), np.empty((S, cols), dtype=np.intp)
    for s in range(S):
        gains = feature_gains(bands, weights[s], N)
        scores = fold_scores(
            forms, alphas, scoring=scoring, moments=moments, gains=gains, max_bytes=max_bytes
        )
        if keep is not None:
            keep[s] = scores
        idx = np.atleast_1d(
            choose_scores(scores, alphas, scoring=scoring, per_target=per_target, one_se=one_se)
        )
        mean = (
            scores.mean(axis=1) if per_target else scores.mean(axis=1).sum(axis=1, keepdims=True)
        )  # (R, cols)
        best[s], best_alpha[s] = mean[idx, np.arange(cols)], idx
    w_idx = _first_best(best, higher=SCORINGS[scoring])
    a_idx = best_alpha[w_idx, np.arange(cols)]
    if not per_target:
        return BandedSearch(weights, alphas, scoring, w_idx[0], a_idx[0], best[:, 0], best_alpha[:, 0], keep)
    return BandedSearch(weights, alphas, scoring, w_idx, a_idx, best, best_alpha, keep)


def _first_best(values: np.ndarray, *, higher: bool) -> np.ndarray:
    """Row index of the best value of each column of (S, T'); ties within TIE_RTOL relative go to the first row."""
    loss = -values if higher else values
    top = loss.min(axis=0)
    ok = loss <= (top + TIE_RTOL * np.abs(top))[None, :]
    return np.argmax(ok, axis=0)


def banded_solve_full(
    full: FullForm,
    bands: list[np.ndarray],
    weights: np.ndarray,
    weight_index: np.ndarray,
    alpha: float | np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Final coefficients of banded ridge in original units, one weight vector and lambda per target.

    Parameters
    ----------
    full : FullForm
    bands : list of arrays of int
    weights : array of shape (S, n_bands)
    weight_index : array of int of shape (T,) or ()
        Each target's weight vector (one for all if a scalar).
    alpha : float or array of shape (T,)

    Returns
    -------
    coef : array of shape (T, N)
        Zero on the bands of weight 0.
    intercept : array of shape (T,)

    Notes
    -----
    The scaled problem's coefficients ``V`` of the features ``g_j x_j / s_j``
    are ``g_j V_j / s_j`` on ``x_j``: the form of the active features with
    scale ``s / g`` is solved by :func:`~streamridge.solvers.eigen.solve_full`.
    """
    N, T = full.A.shape[0], full.B.shape[1]
    w_idx = np.broadcast_to(np.asarray(weight_index, dtype=np.intp), (T,))
    a = np.broadcast_to(np.asarray(alpha, dtype=np.float64), (T,))
    coef, intercept = np.zeros((T, N)), np.empty(T)
    for s in np.unique(w_idx):
        tcols = np.flatnonzero(w_idx == s)
        g = feature_gains(bands, weights[s], N)
        act = np.flatnonzero(g > 0)
        ga = g[act]
        sub = FullForm(
            full.A[np.ix_(act, act)] * np.outer(ga, ga),
            full.B[np.ix_(act, tcols)] * ga[:, None],
            full.x_offset[act],
            full.y_offset[tcols],
            full.scale[act] / ga,
            full.n,
        )
        c, b = solve_full(sub, a[tcols])
        coef[np.ix_(tcols, act)] = c
        intercept[tcols] = b
    return coef, intercept
