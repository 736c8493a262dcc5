"""The chosen model fitted on all rows: coefficients and intercepts of a :class:`~streamridge.model_selection.choose.Choice`.

.. code-block:: text

    plain ridge:   W = (A[S,S] + lambda I)^-1 B[S]            on the chosen set S, zero elsewhere
    banded ridge:  W = G (G A G + lambda I)^-1 G B            G = diag(sqrt(gamma)) of each target's weight vector

(:func:`streamridge.solvers.eigen.solve_full`, :func:`streamridge.solvers.banded.banded_solve_full`),
from the full form of all rows, or batch by batch of targets
(:class:`~streamridge.forms.build.TargetBatches`): then ``A`` (scaled by each
weight vector) is decomposed once and every batch solved through it.
"""

from __future__ import annotations

import numpy as np

from streamridge.forms.build import FullForm, TargetBatches
from streamridge.model_selection.choose import Choice
from streamridge.parallel import all_cores
from streamridge.solvers.banded import banded_solve_full
from streamridge.solvers.eigen import solve_full
from streamridge.solvers.linalg import Eig, psd_eigh
from streamridge.stats.magnitudes import check_finite

__all__ = ["refit"]


def refit(full: FullForm | TargetBatches, choice: Choice) -> tuple[np.ndarray, np.ndarray]:
    """The chosen model fitted on all rows.

    Parameters
    ----------
    full : FullForm or TargetBatches
        The training form of all rows, or the statistics' forms by batches of targets.
    choice : Choice

    Returns
    -------
    coef : array of shape (T, N)
        Zero off the chosen set and on the bands of weight 0.
    intercept : array of shape (T,)
    """
    if isinstance(full, FullForm):
        coef, intercept = _solve(full, choice, slice(None), {})
    else:
        T, N = full.n_targets, full.n_features
        coef, intercept = np.zeros((T, N)), np.empty(T)
        eigs: dict[int, Eig] = {}  # one decomposition for all batches (per weight vector)
        for cols in full.slices():
            with all_cores():  # a batch of many targets: products wide enough for every core
                coef[cols], intercept[cols] = _solve(full.full(cols), choice, cols, eigs)
    check_finite(coef, "coefficients")
    return coef, intercept


def _solve(
    full: FullForm, choice: Choice, cols: slice, eigs: dict[int, Eig] | None
) -> tuple[np.ndarray, np.ndarray]:
    """Coefficients of the targets ``cols`` from their full form (``eigs``: decompositions shared by batches)."""
    N, T = full.B.shape
    alpha = np.asarray(choice.alphas[choice.index])
    a = alpha if alpha.ndim == 0 else alpha[cols]
    if choice.banded is not None and choice.bands is not None:
        w = np.asarray(choice.banded.weight_index)
        return banded_solve_full(
            full, list(choice.bands.columns), choice.bands.weights, w if w.ndim == 0 else w[cols], a,
            eigs=eigs if cols != slice(None) else None,
        )  # fmt: skip
    coef = np.zeros((T, N))
    if not choice.support.any():
        return coef, full.y_offset.copy()
    sub = np.flatnonzero(choice.support)
    if sub.shape[0] < N:
        full = FullForm(
            full.A[np.ix_(sub, sub)], full.B[sub], full.x_offset[sub], full.y_offset, full.scale[sub], full.n
        )
    eig = None
    if eigs is not None and cols != slice(None):
        eig = eigs[0] = eigs[0] if 0 in eigs else psd_eigh(full.A)
    c, intercept = solve_full(full, a, eig=eig)
    coef[:, sub] = c
    return coef, intercept
