"""Predictions and R² split by band of a fitted model (``predict(X, split=True)``, ``score(X, y, split=True)``).

The numbers are those of :mod:`streamridge.model_selection.band_split`; this
module takes the model's features of X (in memory, a dask array, or a feature
map's outputs, :meth:`~streamridge.estimators.predicting.LinearOutputs._features_of`)
and runs them chunk by chunk of rows for dask input: the split predictions as a
lazy dask array, the split R² as a merge of the chunks' tallies (one chunk of
rows in memory at a time).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamridge.errors import InputError, ParameterError
from streamridge.model_selection.band_split import SplitTally, split_predictions

__all__ = ["predict_split", "score_split"]


def _bands(model: Any) -> list[np.ndarray]:
    """The bands of a model fitted with ``bands``; a one-line refusal otherwise."""
    bands = getattr(model, "bands_", None)
    if bands is None:
        raise ParameterError(
            f"split=True splits the prediction by the bands of a banded model; this {model._model_name} was fitted "
            "without bands; fit it with bands= (the feature columns of every band)"
        )
    return [np.asarray(b, dtype=np.intp) for b in bands]


def predict_split(model: Any, X: Any, groups: Any = None) -> Any:
    """Each band's part of the prediction, without the intercept.

    Returns
    -------
    array of shape (n_bands, n_samples, n_targets), or (n_bands, n_samples) for 1-D y
        A dask array for dask X.  ``split.sum(0) + intercept_`` is ``predict(X)``.
    """
    bands = _bands(model)
    model._check_fitted()
    coef = np.atleast_2d(np.asarray(model.coef_, dtype=np.float64))
    F = model._features_of(X, groups)
    one = np.ndim(model.coef_) == 1
    if hasattr(F, "dask"):
        F = F.rechunk({1: -1})
        out = F.map_blocks(
            lambda a: split_predictions(a, coef, bands),
            new_axis=[0],
            chunks=((len(bands),), F.chunks[0], (coef.shape[0],)),
            dtype=np.float64,
        )
        return out[:, :, 0] if one else out
    P = split_predictions(F, coef, bands)
    return P[:, :, 0] if one else P


def score_split(model: Any, X: Any, y: Any, groups: Any = None) -> np.ndarray:
    """R² of each band's prediction per target (the centered product measure of :mod:`~streamridge.model_selection.band_split`).

    Returns
    -------
    array of shape (n_bands, n_targets), or (n_bands,) for 1-D y
        The sum over bands is the R² of ``predict(X)`` when its mean over the
        rows equals y's.
    """
    bands = _bands(model)
    model._check_fitted()
    coef = np.atleast_2d(np.asarray(model.coef_, dtype=np.float64))
    F = model._features_of(X, groups)
    if hasattr(F, "dask"):
        tally = _streamed_tally(F.rechunk({1: -1}), y, coef, bands)
    else:
        Y = _targets(y, F.shape[0], coef.shape[0])
        tally = SplitTally.of_rows(Y, split_predictions(F, coef, bands))
    r2 = tally.r2()
    return r2[:, 0] if np.ndim(model.coef_) == 1 else r2


def _targets(y: Any, n_rows: int, n_targets: int) -> np.ndarray:
    """y as an (n_rows, n_targets) float64 array, checked against the rows and the model's targets."""
    Y = np.asarray(y, dtype=np.float64)
    Y = Y.reshape(-1, 1) if Y.ndim == 1 else Y
    if Y.ndim != 2 or Y.shape != (n_rows, n_targets):
        raise InputError(
            f"y has shape {np.shape(y)}; expected {n_rows} rows of {n_targets} target(s), as X and the model"
        )
    return Y


def _streamed_tally(F: Any, y: Any, coef: np.ndarray, bands: list[np.ndarray]) -> SplitTally:
    """The tally of dask features and targets, one chunk of rows at a time."""
    bounds = np.cumsum((0, *F.chunks[0]))
    if tuple(np.shape(y))[:1] != (int(bounds[-1]),):
        raise InputError(f"y has {np.shape(y)[0] if np.ndim(y) else 0} rows; X has {int(bounds[-1])}")
    tally: SplitTally | None = None
    for i in range(F.numblocks[0]):
        rows = slice(int(bounds[i]), int(bounds[i + 1]))
        yb = y[rows]
        yb = np.asarray(yb.compute() if hasattr(yb, "dask") else yb)
        part = SplitTally.of_rows(
            _targets(yb, rows.stop - rows.start, coef.shape[0]),
            split_predictions(np.asarray(F.blocks[i].compute()), coef, bands),
        )
        tally = part if tally is None else tally.merge(part)
    assert tally is not None
    return tally
