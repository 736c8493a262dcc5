"""Predictions and R² split by band of features, as himalaya's ``predict(split=True)`` and ``r2_score_split``.

A linear model's prediction is a sum over bands plus the intercept:

.. code-block:: text

    yhat = b + sum_b X_b W_b'            split[b] = X_b W_b'

The split has no intercept part, as himalaya's ``predict(split=True)`` (which
refuses models with an intercept): ``split.sum(0) + intercept`` is the
prediction.  The R² split is himalaya's product measure, for ``y`` of zero
mean over the scored rows:

.. code-block:: text

    R²_b = sum_i (2 y_i yhat_bi - yhat_bi yhat_i) / sum_i y_i²
    sum_b R²_b = 1 - sum_i (y_i - yhat_i)² / sum_i y_i²

which is the R² of the summed prediction when ``y`` has zero mean (otherwise
its denominator is ``y``'s raw sum of squares, not its centered one).
Both need only ``X'X``, ``X'y`` and ``y'y`` of the scored rows
(:func:`r2_score_split_from_moments`), no rows.

An estimator's ``score(X, y, split=True)`` takes the product measure of the
target and the band predictions centered over the scored rows
(:class:`SplitTally`, mergeable over chunks of rows):

.. code-block:: text

    R²_b = (2 S(y, yhat_b) - S(yhat_b, yhat)) / S(y, y)        S: centered sums of products
    sum_b R²_b = 1 - S(y - yhat, y - yhat) / S(y, y)

which is ``r2_score_split`` when y and the predictions have zero mean over the
rows (the setting it assumes), and sums to the R² of the prediction but for
``n (mean yhat - mean y)² / S(y, y)`` otherwise (zero on rows whose mean the
intercept fits).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from streamridge.forms.build import Forms, TargetBatches, each_batch, n_targets_of
from streamridge.solvers.banded import feature_gains
from streamridge.solvers.linalg import Eig, psd_eigh, spectral_solve
from streamridge.solvers.target_scores import fold_offsets

if TYPE_CHECKING:
    from streamridge.model_selection.bands import Bands
    from streamridge.model_selection.choose import Choice

__all__ = ["SplitTally", "cv_split_r2", "r2_score_split", "r2_score_split_from_moments", "split_predictions"]


def split_predictions(X: np.ndarray, coef: np.ndarray, bands: list[np.ndarray]) -> np.ndarray:
    """Each band's part of the prediction, without the intercept.

    Parameters
    ----------
    X : array of shape (n_rows, n_features)
    coef : array of shape (n_targets, n_features) or (n_features,)
    bands : list of arrays of int
        Every feature in exactly one band (:func:`~streamridge.solvers.banded.check_bands`).

    Returns
    -------
    array of shape (n_bands, n_rows, n_targets), or (n_bands, n_rows) for 1-D coef
        ``X[:, band] @ coef[:, band].T``; the sum over bands plus the intercept is the prediction.
    """
    W = np.atleast_2d(np.asarray(coef, dtype=np.float64))
    X = np.asarray(X, dtype=np.float64)
    out = np.empty((len(bands), X.shape[0], W.shape[0]))
    for i, cols in enumerate(bands):
        np.matmul(X[:, cols], W[:, cols].T, out=out[i])
    return out[:, :, 0] if np.ndim(coef) == 1 else out


def r2_score_split(y_true: np.ndarray, y_pred: np.ndarray, *, include_correlation: bool = True) -> np.ndarray:
    """R² of each band's prediction by the product measure (himalaya's ``r2_score_split``).

    Parameters
    ----------
    y_true : array of shape (n_rows, n_targets)
        Observed targets, of zero mean over the rows for the split to sum to the R².
    y_pred : array of shape (n_bands, n_rows, n_targets) or (n_rows, n_targets)
        :func:`split_predictions`.
    include_correlation : bool
        Count the products of different bands' predictions (then the parts
        sum to the summed prediction's R²); else only each band's own square.

    Returns
    -------
    array of shape (n_bands, n_targets), or (n_targets,) for 2-D y_pred
    """
    Y = np.asarray(y_true, dtype=np.float64)
    P = np.asarray(y_pred, dtype=np.float64)
    single = P.ndim == 2
    if single:
        P = P[None]
    sst = np.einsum("it,it->t", Y, Y)
    total = P.sum(axis=0)
    r2 = np.empty((P.shape[0], Y.shape[1]))
    for b in range(P.shape[0]):
        other = total if include_correlation else P[b]
        r2[b] = np.einsum("it,it->t", P[b], 2.0 * Y - other) / sst
    return r2[0] if single else r2


def r2_score_split_from_moments(
    xx: np.ndarray,
    xy: np.ndarray,
    yy: np.ndarray,
    coef: np.ndarray,
    bands: list[np.ndarray],
    *,
    include_correlation: bool = True,
) -> np.ndarray:
    """:func:`r2_score_split` of :func:`split_predictions` from the scored rows' raw moments.

    Parameters
    ----------
    xx : array of shape (n_features, n_features)
        ``X'X`` of the scored rows (not centered).
    xy : array of shape (n_features, n_targets)
        ``X'Y``.
    yy : array of shape (n_targets,)
        ``diag(Y'Y)``.
    coef : array of shape (n_targets, n_features)
    bands : list of arrays of int
    include_correlation : bool

    Returns
    -------
    array of shape (n_bands, n_targets)

    Notes
    -----
    With ``yhat_b = X_b W_b``: ``sum_i y yhat_b = diag(W_b' (X_b'Y))`` and
    ``sum_i yhat_b yhat = diag(W_b' X_b'X W)`` (``X_b'X_b`` alone without the
    correlations): O(N² T) for all bands together.
    """
    W = np.asarray(coef, dtype=np.float64).T  # (N, T)
    r2 = np.empty((len(bands), W.shape[1]))
    for i, cols in enumerate(bands):
        Wb = W[cols]
        cross = np.einsum("nt,nt->t", Wb, xy[cols])
        G = xx[cols] @ W if include_correlation else xx[np.ix_(cols, cols)] @ Wb
        r2[i] = (2.0 * cross - np.einsum("nt,nt->t", Wb, G)) / yy
    return r2


@dataclass
class SplitTally:
    """Centered moments of a target and its band predictions over rows, mergeable (Chan et al.).

    Attributes
    ----------
    n : float
        Rows.
    mean_y : array of shape (T,)
    mean_p : array of shape (n_bands, T)
    syy : array of shape (T,)
        ``sum (y - mean y)²``.
    syp : array of shape (n_bands, T)
        ``sum (y - mean y)(yhat_b - mean yhat_b)``.
    spt : array of shape (n_bands, T)
        ``sum (yhat_b - mean yhat_b)(yhat - mean yhat)``, ``yhat`` the sum over bands.
    """

    n: float
    mean_y: np.ndarray
    mean_p: np.ndarray
    syy: np.ndarray
    syp: np.ndarray
    spt: np.ndarray

    @classmethod
    def of_rows(cls, y: np.ndarray, split: np.ndarray) -> SplitTally:
        """The tally of rows: ``y`` of shape (m, T), ``split`` of shape (n_bands, m, T)."""
        Y = np.asarray(y, dtype=np.float64)
        P = np.asarray(split, dtype=np.float64)
        my, mp = Y.mean(axis=0), P.mean(axis=1)
        Yc, Pc = Y - my, P - mp[:, None, :]
        Tc = Pc.sum(axis=0)
        return cls(
            float(Y.shape[0]),
            my,
            mp,
            np.einsum("it,it->t", Yc, Yc),
            np.einsum("it,bit->bt", Yc, Pc),
            np.einsum("bit,it->bt", Pc, Tc),
        )

    def merge(self, other: SplitTally) -> SplitTally:
        """The tally of both sets of rows (the pairwise update of centered co-moments)."""
        n = self.n + other.n
        if self.n == 0 or other.n == 0:
            return other if self.n == 0 else self
        f = self.n * other.n / n
        dy, dp = other.mean_y - self.mean_y, other.mean_p - self.mean_p
        dt = dp.sum(axis=0)
        return SplitTally(
            n,
            self.mean_y + dy * (other.n / n),
            self.mean_p + dp * (other.n / n),
            self.syy + other.syy + f * dy * dy,
            self.syp + other.syp + f * dp * dy[None, :],
            self.spt + other.spt + f * dp * dt[None, :],
        )

    def r2(self) -> np.ndarray:
        """R² per band and target, shape (n_bands, T); 0 for a target constant over the rows."""
        has = self.syy > 0
        return np.where(
            has[None, :], (2.0 * self.syp - self.spt) / np.where(has, self.syy, 1.0)[None, :], 0.0
        )


def cv_split_r2(forms: Forms | TargetBatches, choice: Choice) -> np.ndarray:
    """Cross-validated R² of each band of a banded model, per target, from the forms alone.

    On every fold k the model of each target's chosen weight vector and
    lambda, fitted on the training part, is split by band and scored by the
    centered product measure on the validation rows (:class:`SplitTally`),
    from the validation fold's centered moments
    ``Sxx = Av - n dx dx'``, ``Sxy = Bv - n dx dy'`` and ``syy``:

    .. code-block:: text

        R²_b = sum_k (2 W_kb' Sxy_kb - W_kb' Sxx_k[b, :] W_k) / sum_k syy_k

    (the numerators and denominators pooled over folds).  Summed over bands it
    is ``1 - sum_k SSE_k / sum_k syy_k`` less the folds' mean offsets.

    Parameters
    ----------
    forms : Forms or TargetBatches
        Built ``with_moments``.
    choice : Choice
        Of banded ridge (``choice.banded``).

    Returns
    -------
    array of shape (n_bands, T)
    """
    res, bands = choice.banded, choice.bands
    assert res is not None and bands is not None
    T = n_targets_of(forms)
    w_idx = np.broadcast_to(np.asarray(res.weight_index), (T,))
    alpha = np.broadcast_to(np.asarray(choice.alphas[choice.index], dtype=np.float64), (T,))
    num, den = np.zeros((len(bands.columns), T)), np.zeros(T)
    eigs: dict[tuple[int, int], Eig] = {}  # one decomposition per (fold, weight vector), whatever the batches
    for cols, fb in each_batch(forms):
        assert fb.moments is not None
        dx, dy = fold_offsets(fb, fb.moments)
        den[cols] += fb.moments.syy.sum(axis=0)
        for k in range(fb.n_folds):
            n = float(fb.moments.n[k])
            Sxx = fb.Av[k] - n * np.outer(dx[k], dx[k])
            Sxy = fb.Bv[k] - n * np.outer(dx[k], dy[k])
            for s in np.unique(w_idx[cols]):
                t = np.flatnonzero(w_idx[cols] == s)
                W = _fold_coefficients(fb, k, bands, int(s), t, alpha[cols][t], eigs)
                SW = Sxx @ W
                for b, bc in enumerate(bands.columns):
                    cross = np.einsum("nt,nt->t", W[bc], Sxy[np.ix_(bc, t)])
                    num[b, cols.start + t] += 2.0 * cross - np.einsum("nt,nt->t", W[bc], SW[bc])
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)


def _fold_coefficients(
    forms: Forms,
    k: int,
    bands: Bands,
    s: int,
    t: np.ndarray,
    alpha: np.ndarray,
    eigs: dict[tuple[int, int], Eig],
) -> np.ndarray:
    """Coefficients (N, len(t)) on the forms' features of fold k's banded model of weight vector s."""
    N = int(forms.At.shape[1])
    g = feature_gains(list(bands.columns), bands.weights[s], N)
    act = np.flatnonzero(g > 0)
    ga = g[act]
    if (k, s) not in eigs:
        eigs[k, s] = psd_eigh(forms.At[k][np.ix_(act, act)] * np.outer(ga, ga))
    W = np.zeros((N, t.shape[0]))
    W[act] = ga[:, None] * spectral_solve(eigs[k, s], forms.Bt[k][np.ix_(act, t)] * ga[:, None], alpha)
    return W
