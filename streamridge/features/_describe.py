"""One-line text of a feature map's JSON description, without importing the maps (``info`` stays light)."""

from __future__ import annotations

from typing import Any


def describe_map_spec(d: dict[str, Any]) -> str:
    """``esn(n_units=500, ...)`` from a feature map's JSON description (no import of the maps: ``info`` stays light)."""
    parts = []
    for k, v in d["params"].items():
        if k == "maps":
            v = "[" + ", ".join(describe_map_spec(m) for m in v) + "]"
        elif isinstance(v, dict) and "__array__" in v:
            v = "<array>"
        parts.append(f"{k}={v}")
    return f"{d['map']}({', '.join(parts)})"
