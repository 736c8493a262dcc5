"""The JSON of model files: plain JSON values of NumPy and dataclass values, and the selection path.

:func:`json_safe` turns parameters, summaries and metadata into plain JSON (or marks
them :data:`UNSAFE`); :func:`encode_path` / :func:`decode_path` write and read a
``selection_path_`` of any of its forms (:mod:`streamridge.selection`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np


class _Unsafe:
    def __repr__(self) -> str:
        return "<not JSON-serialisable>"


UNSAFE: Any = _Unsafe()


def json_safe(value: Any, default: Callable[[Any], Any] | None = None) -> Any:
    """Convert ``value`` to plain JSON types.

    NumPy scalars and arrays become numbers and lists, tuples become lists,
    dataclasses become dicts, non-finite floats become None.  Anything else
    becomes ``default(value)``, or makes the whole result :data:`UNSAFE` when
    ``default`` is None.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(float(value)) else None
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist(), default)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        out = {str(k): json_safe(v, default) for k, v in value.items()}
        return UNSAFE if any(v is UNSAFE for v in out.values()) else out
    if isinstance(value, (list, tuple)):
        items = [json_safe(v, default) for v in value]
        return UNSAFE if any(v is UNSAFE for v in items) else items
    return UNSAFE if default is None else default(value)


def encode_path(path: Any) -> dict[str, Any]:
    """JSON form of ``selection_path_``: a structured array, a SelectionResult, a list of Step, or JSON.

    Returns
    -------
    dict
        ``{"kind": "table" | "result" | "steps" | "json", "value": ...}``; a table
        is a list of row dicts (the array itself is stored beside the header).
    """
    from streamridge.selection import SelectionResult, Step

    if isinstance(path, np.ndarray) and path.dtype.names:
        rows = [{name: row[name] for name in path.dtype.names} for row in path]
        return {"kind": "table", "value": json_safe(rows, str)}
    if isinstance(path, SelectionResult):
        return {"kind": "result", "value": json_safe(path, str)}
    if isinstance(path, (list, tuple)) and path and all(isinstance(s, Step) for s in path):
        return {"kind": "steps", "value": json_safe(list(path), str)}
    return {"kind": "json", "value": json_safe(path, str)}


def _step(d: dict[str, Any]) -> Any:
    from streamridge.selection import Step

    alpha = d["alpha"]
    return Step(
        feature=int(d["feature"]),
        n_features=int(d["n_features"]),
        alpha=np.asarray(alpha, dtype=np.float64) if isinstance(alpha, list) else float(alpha),
        cv_error=float("nan") if d["cv_error"] is None else float(d["cv_error"]),
        fold_errors=np.asarray(d["fold_errors"], dtype=np.float64),
    )


def decode_path(obj: Any) -> Any:
    """Inverse of :func:`encode_path` (the path objects of :mod:`streamridge.selection`)."""
    if not isinstance(obj, dict) or "kind" not in obj:
        return obj
    value: Any = obj.get("value")
    if obj["kind"] == "steps":
        return [_step(d) for d in value]
    if obj["kind"] == "result":
        from streamridge.selection import SelectionResult

        return SelectionResult(
            direction=value["direction"],
            steps=[_step(d) for d in value["steps"]],
            best_step=int(value["best_step"]),
            support=np.asarray(value["support"], dtype=bool),
            selected=np.asarray(value["selected"], dtype=np.int64),
            alphas=np.asarray(value["alphas"], dtype=np.float64),
        )
    return value
