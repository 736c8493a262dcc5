"""What the commands print: one JSON object (``--json``) or text, and the summary of a fit."""

from __future__ import annotations

import json
from typing import Any


def emit(obj: dict[str, Any] | str, *, as_json: bool) -> None:
    """Print ``obj`` as one JSON object (NaN/inf and NumPy values made JSON-safe) or as text."""
    from streamridge.io.model_json import json_safe

    print(json.dumps(json_safe(obj, str), allow_nan=False) if as_json else obj)


def fit_summary(estimator: Any, *, data: str, model: str) -> dict[str, Any]:
    """JSON-safe facts about a fit (printed by ``fit`` and ``demo``)."""
    from streamridge.model_selection.scoring import score_summary
    from streamridge.report.summary import band_summary, estimator_summary, scheme_text

    scheme = estimator._spec.scheme.to_dict()
    classes = None if estimator._spec.classes is None else estimator.classes_.tolist()
    selected = getattr(estimator, "selected_features_", None)
    return {
        "data": data,
        "rows": int(estimator.stats_.n_rows),
        "features": int(estimator.n_features_in_),
        "targets": int(estimator._spec.n_targets),
        "classes": classes,
        "folds": int(estimator.n_folds_),
        "fold_scheme": scheme_text(scheme),
        "alpha": estimator.alpha_,
        "cv": estimator_summary(estimator),
        "selected_features": None if selected is None else [int(i) for i in selected],
        "timings": dict(estimator.timings_),
        "model": model,
        "nested": getattr(estimator, "nested_summary_", None),
        "scores": score_summary(estimator),
        "bands": band_summary(estimator),
    }


def format_fit(summary: dict[str, Any]) -> str:
    """The text summary of :func:`fit_summary` (see :func:`streamridge.report.summary.format_fit`)."""
    from streamridge.report.summary import format_fit as _format

    return _format(summary)
