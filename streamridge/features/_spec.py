"""The schema of a map description (a features file): the one check every description passes before a map is built.

A description is an object ``{"map": NAME, PARAM: VALUE, ...}`` or
``{"map": NAME, "params": {PARAM: VALUE, ...}}`` (never both: a key beside
``"params"`` is refused, not dropped); composite maps hold ``"maps": [description, ...]``,
nested at most :data:`MAX_DEPTH` deep.  :func:`check_spec` checks the whole tree —
types, nesting depth, known keys, every parameter against its map's declared
constraints (:mod:`streamridge.features._params`) — and :func:`build` turns a checked
description into a map.  Every refusal is one line naming the file, the map (and where
it sits in the tree) and the parameter.

A features file may describe a grid of candidate maps: :func:`expand` turns a list given
to a scalar-valued parameter (anywhere in the tree) into one description per combination
of values, as :meth:`FeatureMap.grid` does; a list given to a list-valued parameter (an
array such as ``basis``, the ``maps`` of a composite) is that parameter's value.
"""

from __future__ import annotations

import copy
import inspect
import itertools
import math
from collections.abc import Iterator
from typing import Any, NamedTuple

from streamridge.errors import ParameterError
from streamridge.features._base import FORMAT_VERSION, FeatureMap
from streamridge.features._params import param_error, shown, takes_list

MAX_DEPTH = 16
"""Maps nested in maps (a pipeline holding a concat holding ...) at most this deep."""

MAX_CANDIDATES = 1000
"""A features file's grid describes at most this many candidate maps."""

_FRAME = ("map", "format_version", "arrays")
"""Keys of a description that are not parameters (``arrays``: only empty, as an unfitted map's ``to_dict`` has)."""

_FITTED = ("n_features_in",)
"""Keys of a fitted map's description (:meth:`FeatureMap.to_dict`), refused with ``arrays`` that are not empty."""


def check_spec(spec: Any, maps: dict[str, type[FeatureMap]], source: str | None = None) -> None:
    """Raise :class:`ParameterError` unless ``spec`` describes a valid unfitted map.

    Parameters
    ----------
    spec : the parsed description (from JSON, TOML or Python)
    maps : the map classes by name
    source : the features file it was read from (named in messages), or None

    Raises
    ------
    ParameterError
        One line: ``features file 'f.json': map 'esn' at maps[1]: washout must be a
        non-negative integer; got washout=2.5``.
    """
    _check_node(spec, maps, source, (), 1)


def build(spec: dict[str, Any], maps: dict[str, type[FeatureMap]]) -> FeatureMap:
    """The map of a description that :func:`check_spec` accepted."""
    cls = maps[spec["map"]]
    params = dict(_params(spec))
    if "maps" in params:
        params["maps"] = [build(m, maps) for m in params["maps"]]
    return cls(**params)


def _params(spec: dict[str, Any]) -> dict[str, Any]:
    if "params" in spec:
        return dict(spec["params"])
    return {k: v for k, v in spec.items() if k not in _FRAME}


def _prefix(source: str | None, name: str, path: tuple[str, ...]) -> str:
    """``features file 'f.json': map 'esn' at maps[1]`` (``feature map 'esn'`` without a file)."""
    head = f"features file {source!r}: map" if source is not None else "feature map"
    return f"{head} {name!r}{_at(path)}"


def _at(path: tuple[str, ...]) -> str:
    return f" at {'.'.join(path)}" if path else ""


def _check_node(
    spec: Any, maps: dict[str, type[FeatureMap]], source: str | None, path: tuple[str, ...], depth: int
) -> None:
    """Check one description and its parts (recursion at most :data:`MAX_DEPTH` deep)."""
    head = f"features file {source!r}: " if source is not None else ""
    if depth > MAX_DEPTH:
        at = ".".join(path) if len(path) <= 4 else f"{path[0]}.{path[1]}...{path[-1]}"
        raise ParameterError(
            f"{head}maps are nested more than {MAX_DEPTH} deep (the map at {at} is at depth {depth}); nest fewer "
            "maps (a pipeline of pipelines is one pipeline of all their steps)"
        )
    if not isinstance(spec, dict) or "map" not in spec:
        got = shown(spec) if not isinstance(spec, dict) else f"an object without one ({shown(spec)})"
        what = f"{head}{'.'.join(path)}: a" if path else f"{head}a"
        raise ParameterError(
            f"{what} feature map is described by an object with a 'map' key (one of {', '.join(maps)}); got {got}"
        )
    name = spec["map"]
    if not isinstance(name, str):
        raise ParameterError(
            f"{head}the key 'map'{_at(path)} must name a map (a string: one of {', '.join(maps)}); got map={shown(name)}"
        )
    if name not in maps:
        raise ParameterError(f"{head}unknown feature map {name!r}{_at(path)}; maps: {', '.join(maps)}")
    where = _prefix(source, name, path)
    cls = maps[name]
    _check_frame(spec, where)
    given = _params(spec)
    allowed = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    unknown = [k for k in given if k not in allowed]
    if unknown:
        raise ParameterError(f"{where} has no parameter {unknown[0]!r}; its parameters: {', '.join(allowed)}")
    defaults = {k: p.default for k, p in inspect.signature(cls.__init__).parameters.items() if k != "self"}
    msg = param_error(cls, {**defaults, **given}, skip=("maps",))
    if msg is not None:
        raise ParameterError(f"{where}: {msg}")
    if "maps" in allowed:
        parts = given.get("maps")
        if not isinstance(parts, list) or not parts:
            raise ParameterError(
                f"{where}: maps must be a non-empty list of map objects; got maps={shown(parts)}"
            )
        for i, part in enumerate(parts):
            _check_node(part, maps, source, (*path, f"maps[{i}]"), depth + 1)


def _check_frame(spec: dict[str, Any], where: str) -> None:
    """``format_version`` and ``params``: an object, and no parameter beside it."""
    version = spec.get("format_version", FORMAT_VERSION)
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= FORMAT_VERSION:
        raise ParameterError(
            f"{where}: format_version must be an integer from 1 to {FORMAT_VERSION} (this streamridge's); "
            f"got format_version={shown(version)}"
        )
    fitted = [k for k in _FITTED if k in spec] + (["arrays"] if spec.get("arrays", {}) != {} else [])
    if fitted:
        raise ParameterError(
            f"{where}: {', '.join(repr(k) for k in fitted)} hold the fitted state of a saved map, which a description "
            "of a map to fit does not take (it would be drawn again, not used); keep 'map' and its parameters only"
        )
    if "params" not in spec:
        return
    if not isinstance(spec["params"], dict):
        raise ParameterError(
            f"{where}: params must be an object of parameters; got params={shown(spec['params'])}"
        )
    beside = [k for k in spec if k not in (*_FRAME, "params")]
    if beside:
        keys = ", ".join(repr(k) for k in beside)
        raise ParameterError(
            f"{where}: {keys} beside 'params' would be ignored; put every parameter inside 'params', "
            "or write them all beside 'map' without 'params'"
        )


class _Axis(NamedTuple):
    """One parameter of a grid: the map it belongs to (its indices in the ``maps`` of the tree), its values."""

    node: tuple[int, ...]
    map_name: str
    param: str
    values: list[Any]


def expand(spec: Any, maps: dict[str, type[FeatureMap]], source: str | None = None) -> list[Any]:
    """The descriptions of a features file: ``[spec]``, or one per combination of its grid's values.

    A list given to a scalar-valued parameter of any map in the tree is that parameter's
    values; combinations run in the order the parameters are written (depth first), the
    last one's values varying fastest, as :meth:`FeatureMap.grid`.  The descriptions it
    returns are not checked yet: :func:`check_spec` checks each.

    Raises
    ------
    ParameterError
        A parameter with no values (an empty list), or a grid of more than
        :data:`MAX_CANDIDATES` candidate maps: one line naming the file, the map and the parameter.
    """
    axes = list(_grid_axes(spec, maps, (), 1))
    if not axes:
        return [spec]
    for axis in axes:
        if not axis.values:
            raise ParameterError(
                f"{_prefix(source, axis.map_name, _path(axis.node))}: {axis.param} has no values (an empty list is "
                f"an empty grid); give at least one value, or leave {axis.param} out"
            )
    count = math.prod(len(a.values) for a in axes)
    if count > MAX_CANDIDATES:
        sizes = " x ".join(f"{a.param}{_at(_path(a.node))} ({len(a.values)} values)" for a in axes)
        head = f"features file {source!r}: " if source is not None else ""
        raise ParameterError(
            f"{head}the grid of map {axes[0].map_name!r} over {sizes} describes {count} candidate maps, more than "
            f"{MAX_CANDIDATES}; give fewer values"
        )
    return [_substitute(spec, axes, combo) for combo in itertools.product(*(a.values for a in axes))]


def _path(node: tuple[int, ...]) -> tuple[str, ...]:
    return tuple(f"maps[{i}]" for i in node)


def _grid_axes(
    spec: Any, maps: dict[str, type[FeatureMap]], node: tuple[int, ...], depth: int
) -> Iterator[_Axis]:
    """The grid's parameters of a description and its parts; a malformed node is left to :func:`check_spec`."""
    if depth > MAX_DEPTH or not isinstance(spec, dict) or not isinstance(spec.get("map"), str):
        return
    if spec["map"] not in maps:
        return
    if "params" in spec and not isinstance(spec["params"], dict):
        return
    cls = maps[spec["map"]]
    for key, value in _params(spec).items():
        constraints = cls._param_constraints.get(key)
        if constraints is not None and isinstance(value, list) and not takes_list(constraints):
            yield _Axis(node, spec["map"], key, value)
    parts = _params(spec).get("maps")
    if isinstance(parts, list):
        for i, part in enumerate(parts):
            yield from _grid_axes(part, maps, (*node, i), depth + 1)


def _substitute(spec: dict[str, Any], axes: list[_Axis], values: tuple[Any, ...]) -> dict[str, Any]:
    """A copy of ``spec`` with every grid parameter set to one of its values."""
    out = copy.deepcopy(spec)
    for axis, value in zip(axes, values):
        target = out
        for i in axis.node:
            target = _params(target)["maps"][i]
        (target["params"] if "params" in target else target)[axis.param] = value
    return out
