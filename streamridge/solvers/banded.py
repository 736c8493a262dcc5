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

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from streamridge.errors import ParameterError
from streamridge.forms.build import Forms, FullForm, TargetBatches, each_batch, n_targets_of
from streamridge.solvers.eigen import solve_full
from streamridge.solvers.linalg import Eig, psd_eigh
from streamridge.solvers.quadratics import DEFAULT_MAX_BYTES, ValidationFactor
from streamridge.solvers.target_scores import (
    SCORINGS,
    ValidationMoments,
    check_scoring,
    choose_scores,
    fold_score_set,
    targets_of,
)

__all__ = [
    "DIRICHLET_CONCENTRATION",
    "BandedSearch",
    "banded_search",
    "banded_solve_full",
    "feature_gains",
    "sample_band_weights",
]

#: Dirichlet concentrations the sampled weight vectors alternate between (himalaya's default)
DIRICHLET_CONCENTRATION = (0.1, 1.0)

#: the fold scores of every (weight vector, lambda, fold, target) are kept up to this many bytes
DEFAULT_KEEP_BYTES = 1 << 28

#: weight vectors whose best scores are equal to within this relative distance are tied (the first wins)
TIE_RTOL = 1e-12


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
    errors : array of shape (R, K, T)
        Validation squared error of each target's chosen weight vector, every lambda and fold.
    scores : array of shape (R, K, T)
        Its ``scoring`` (``errors`` itself for ``"sse"``).
    """

    weights: np.ndarray
    alphas: np.ndarray
    scoring: str
    weight_index: np.ndarray
    alpha_index: np.ndarray
    cv_scores: np.ndarray
    alpha_index_of_weights: np.ndarray
    fold_scores: np.ndarray | None
    errors: np.ndarray
    scores: np.ndarray

    @property
    def band_weights(self) -> np.ndarray:
        """The chosen weight vectors, shape (T, n_bands) or (n_bands,)."""
        return self.weights[self.weight_index]

    @property
    def alpha(self) -> np.ndarray:
        """The chosen lambdas, shape (T,) or ()."""
        return self.alphas[self.alpha_index]


def banded_search(
    forms: Forms | TargetBatches,
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
    forms : Forms or TargetBatches
        The per-fold forms, or the statistics' forms built one batch of targets at a time.
    bands : list of arrays of int
        Every feature in exactly one band (:func:`streamridge.model_selection.bands.check_bands`).
    weights : array of shape (S, n_bands)
        Non-negative, no row all zero (:func:`sample_band_weights`).
    alphas : array of shape (R,)
    scoring : {"sse", "r2", "correlation"}
    moments : ValidationMoments or None
        Needed for R² and correlation (:func:`~streamridge.forms.build.validation_moments`);
        None: the forms' own (``with_moments``).
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
    is then the one whose mean score over folds at its lambda is best: in the
    order given, a weight vector replaces the best so far only when it is
    better by more than 1e-12 relative, so ties go to the first (the equal
    weights of :func:`sample_band_weights`).  Without the one-standard-error
    rule this is the best (weight vector, lambda) pair of all.  Every fold is
    decomposed once per weight vector, whatever the target batches; only the
    (S, T) best scores and the (R, K, T) scores of the best weight vector so
    far are kept, unless ``keep_bytes`` allows all of them.
    """
    scoring = check_scoring(scoring)
    alphas = np.asarray(alphas, dtype=np.float64)
    N = int(forms.n_features if isinstance(forms, TargetBatches) else forms.At.shape[1])
    T, K = n_targets_of(forms), forms.n_folds
    S, R = weights.shape[0], alphas.shape[0]
    keep = np.empty((S, R, K, T)) if 8 * S * R * K * T <= keep_bytes else None
    named = ("sse",) if scoring == "sse" else ("sse", scoring)
    higher = SCORINGS[scoring]

    def scored(s: int) -> Iterator[tuple[slice, dict[str, np.ndarray]]]:
        factors: dict[int, ValidationFactor] = {}  # one decomposition per (weight vector, fold)
        gains = feature_gains(bands, weights[s], N)
        for cols, fb in each_batch(forms):
            m = None if moments is None else targets_of(moments, cols)
            found = fold_score_set(
                fb, alphas, named, moments=m, gains=gains, max_bytes=max_bytes, factors=factors
            )
            if keep is not None:
                keep[s, ..., cols] = found[scoring]
            yield cols, found

    if per_target:
        return _search_per_target(scored, weights, alphas, scoring, one_se, keep, (R, K, T), higher)
    return _search_shared(scored, weights, alphas, scoring, one_se, keep, (R, K, T), higher)


Scored = Callable[[int], Iterator[tuple[slice, dict[str, np.ndarray]]]]


def _search_per_target(
    scored: Scored, weights: np.ndarray, alphas: np.ndarray, scoring: str, one_se: bool,
    keep: np.ndarray | None, shape: tuple[int, int, int], higher: bool,
) -> BandedSearch:  # fmt: skip
    """Per target: each weight vector's lambda, and the best weight vector so far with its fold scores."""
    S, T = weights.shape[0], shape[2]
    best, best_alpha = np.empty((S, T)), np.empty((S, T), dtype=np.intp)
    errors = np.empty(shape)
    scores = errors if scoring == "sse" else np.empty(shape)
    top, w_idx = np.empty(T), np.zeros(T, dtype=np.intp)
    for s in range(S):
        for cols, found in scored(s):
            main = found[scoring]
            idx = np.atleast_1d(choose_scores(main, alphas, scoring=scoring, per_target=True, one_se=one_se))
            val = main.mean(axis=1)[idx, np.arange(idx.shape[0])]
            best[s, cols], best_alpha[s, cols] = val, idx
            wins = np.ones(idx.shape[0], dtype=bool) if s == 0 else _better(val, top[cols], higher)
            top[cols] = np.where(wins, val, top[cols])
            w_idx[cols] = np.where(wins, s, w_idx[cols])
            errors[:, :, cols][:, :, wins] = found["sse"][:, :, wins]
            if scores is not errors:
                scores[:, :, cols][:, :, wins] = main[:, :, wins]
    a_idx = best_alpha[w_idx, np.arange(T)]
    return BandedSearch(weights, alphas, scoring, w_idx, a_idx, best, best_alpha, keep, errors, scores)


def _search_shared(
    scored: Scored, weights: np.ndarray, alphas: np.ndarray, scoring: str, one_se: bool,
    keep: np.ndarray | None, shape: tuple[int, int, int], higher: bool,
) -> BandedSearch:  # fmt: skip
    """One weight vector and lambda for all targets: the scores summed over targets, then the chosen one's again."""
    S, (R, K, _) = weights.shape[0], shape
    totals = np.zeros((S, R, K))
    for s in range(S):
        for _, found in scored(s):
            totals[s] += found[scoring].sum(axis=2)
    best_alpha = np.array(
        [
            int(
                choose_scores(totals[s][:, :, None], alphas, scoring=scoring, per_target=False, one_se=one_se)
            )
            for s in range(S)
        ],
        dtype=np.intp,
    )
    best = totals.mean(axis=2)[np.arange(S), best_alpha]
    w = 0
    for s in range(1, S):
        if _better(best[s : s + 1], best[w : w + 1], higher)[0]:
            w = s
    errors = np.empty(shape)
    scores = errors if scoring == "sse" else np.empty(shape)
    for cols, found in scored(w):
        errors[:, :, cols] = found["sse"]
        scores[:, :, cols] = found[scoring]
    return BandedSearch(
        weights,
        alphas,
        scoring,
        np.asarray(w),
        np.asarray(best_alpha[w]),
        best,
        best_alpha,
        keep,
        errors,
        scores,
    )


def _better(value: np.ndarray, top: np.ndarray, higher: bool) -> np.ndarray:
    """Where ``value`` beats ``top`` by more than :data:`TIE_RTOL` relative (greater or smaller is better)."""
    margin = TIE_RTOL * np.abs(top)
    return value > top + margin if higher else value < top - margin


def banded_solve_full(
    full: FullForm,
    bands: list[np.ndarray],
    weights: np.ndarray,
    weight_index: np.ndarray,
    alpha: float | np.ndarray,
    *,
    eigs: dict[int, Eig] | None = None,
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
    eigs : dict or None
        Eigendecompositions of the scaled forms by weight vector, filled in where
        missing: pass the same dict with the full forms of other batches of the
        targets to decompose each weight vector's form once (then every solve
        is spectral, none by Cholesky).

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
        eig = None
        if eigs is not None:
            eig = eigs[int(s)] = eigs[int(s)] if int(s) in eigs else psd_eigh(sub.A)
        c, b = solve_full(sub, a[tcols], eig=eig)
        coef[np.ix_(tcols, act)] = c
        intercept[tcols] = b
    return coef, intercept
