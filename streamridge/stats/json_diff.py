"""What differs between two JSON descriptions (a fold scheme, a feature map), named by path.

Used where two statistics cannot be merged: ``"seed 1 vs 2"`` or, inside a pipeline,
``"maps[1].washout 0 vs 5"`` says what to change, where printing both descriptions
(hundreds of characters of parameters and encoded arrays) would not.
"""

from __future__ import annotations

from typing import Any

_ABSENT = object()
#: levels of a feature map's description that a parameter's path leaves out
_PATH_SKIPPED = ("params", "arrays")


def describe_difference(a: Any, b: Any, *, limit: int = 3) -> str:
    """What differs between two JSON values, by path: ``"seed 1 vs 2"``, ``"maps[1].washout 0 vs 5"``.

    A feature map's description (:func:`streamridge.features.to_json`) is read as its
    parameters (the ``params`` level left out of paths) and its fitted arrays, which are
    named only where no parameter differs (a parameter such as ``seed`` changes them too).
    Maps of two kinds are named by their kind only.

    Parameters
    ----------
    a, b : JSON values (dict, list, str, number, bool, None)
    limit : int
        Differences named at most; the rest are counted.

    Returns
    -------
    str
        Empty when ``a == b``.
    """
    if _is_map_json(a) and _is_map_json(b):
        a, b = _inline_arrays(a["map"], a["arrays"]), _inline_arrays(b["map"], b["arrays"])
    found = _differences(a, b, "")
    shown = [d for d in found if not d[3]] or found
    parts = [_render(path, x, y, is_array) for path, x, y, is_array in shown[:limit]]
    more = f" and {len(shown) - limit} more" if len(shown) > limit else ""
    return ", ".join(parts) + more


def _is_map_json(v: Any) -> bool:
    """Whether ``v`` is a fitted map's description of :func:`streamridge.features.to_json`."""
    return isinstance(v, dict) and set(v) == {"map", "arrays"} and isinstance(v["arrays"], dict)


def _inline_arrays(node: Any, arrays: dict[str, Any]) -> Any:
    """A map description with each ``{"__array__": key}`` reference replaced by the encoded array itself."""
    if isinstance(node, dict):
        if set(node) == {"__array__"} and node["__array__"] in arrays:
            return {"__array__": arrays[node["__array__"]]}
        return {k: _inline_arrays(v, arrays) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline_arrays(v, arrays) for v in node]
    return node


def _differences(a: Any, b: Any, path: str) -> list[tuple[str, Any, Any, bool]]:
    """``(path, value in a, value in b, is a fitted array)`` of every leaf that differs, in document order."""
    array = (isinstance(a, dict) and "__array__" in a) or (isinstance(b, dict) and "__array__" in b)
    if isinstance(a, dict) and isinstance(b, dict) and not array:
        if "map" in a and "map" in b and a["map"] != b["map"]:  # maps of two kinds: their parameters are moot
            return [(f"{path}.map" if path else "map", a["map"], b["map"], False)]
        out = []
        for key in [*a, *(k for k in b if k not in a)]:
            sub = path if key in _PATH_SKIPPED else f"{path}.{key}" if path else str(key)
            out += _differences(a.get(key, _ABSENT), b.get(key, _ABSENT), sub)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [(path, a, b, array)]


def _render(path: str, a: Any, b: Any, is_array: bool) -> str:
    name = f"{path} " if path else ""
    if is_array:
        return f"{name}(a fitted array) differs"
    if isinstance(a, list) and isinstance(b, list):
        return f"{name}has {len(a)} entries vs {len(b)}"
    return f"{name}{_short(a)} vs {_short(b)}"


def _short(v: Any) -> str:
    if v is _ABSENT:
        return "(absent)"
    text = repr(v)
    return text if len(text) <= 80 else text[:60] + " ..."
