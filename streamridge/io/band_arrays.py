"""A banded model's attributes in a model file (:mod:`streamridge.io.model_file`).

.. code-block:: text

    band_index              (n_features,) int   the band of every feature (bands_)
    band_weights            (n_bands,) or (n_targets, n_bands)        band_weights_
    band_weight_candidates  (n_samples, n_bands)                      band_weight_candidates_
    band_scores             (n_samples,) or (n_samples, n_targets)    band_scores_
    band_fold_scores        (n_samples, n_alphas, n_folds, n_targets) band_fold_scores_, when fitted
    band_cv_r2              (n_bands,) or (n_bands, n_targets)        band_cv_r2_, when fitted

and in the header ``band_names`` (``band_names_``) and ``band_summary``
(:func:`streamridge.report.summary.band_summary`: what ``streamridge info`` prints without the arrays).
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: array name in the file -> fitted attribute
BAND_ARRAYS = {
    "band_weights": "band_weights_",
    "band_weight_candidates": "band_weight_candidates_",
    "band_scores": "band_scores_",
    "band_fold_scores": "band_fold_scores_",
    "band_cv_r2": "band_cv_r2_",
}


def band_arrays(estimator: Any) -> dict[str, np.ndarray]:
    """The arrays of a banded model (none for a model fitted without bands)."""
    bands = getattr(estimator, "bands_", None)
    if bands is None:
        return {}
    n = int(np.atleast_2d(np.asarray(estimator.coef_)).shape[1])
    index = np.empty(n, dtype=np.int64)
    for b, cols in enumerate(bands):
        index[np.asarray(cols, dtype=np.intp)] = b
    out = {"band_index": index}
    for name, attr in BAND_ARRAYS.items():
        if hasattr(estimator, attr):
            out[name] = np.asarray(getattr(estimator, attr), dtype=np.float64)
    return out


def load_bands(estimator: Any, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """Set a banded model's attributes from a checked model file (nothing without ``band_index``)."""
    if "band_index" not in arrays:
        return
    index = arrays["band_index"]
    names = header.get("band_names") or []
    estimator.bands_ = [np.flatnonzero(index == b).astype(np.int64) for b in range(len(names))]
    estimator.band_names_ = [str(n) for n in names]
    for name, attr in BAND_ARRAYS.items():
        if name in arrays:
            setattr(estimator, attr, arrays[name])
