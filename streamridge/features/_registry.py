"""Maps by name, JSON descriptions without pickle, and maps from a features file (JSON or TOML)."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from streamridge.errors import InputError, ModelFileError, ParameterError
from streamridge.features._base import FORMAT_VERSION, FeatureMap
from streamridge.features._candidates import Candidates
from streamridge.features._compose import Concat, Pipeline
from streamridge.features._delays import Delays
from streamridge.features._describe import describe_map_spec
from streamridge.features._kernel import Distances, Nystroem
from streamridge.features._random import RandomHidden
from streamridge.features._reservoir import EchoStateNetwork
from streamridge.features._spec import MAX_DEPTH, build, check_spec, expand

MAPS: dict[str, type[FeatureMap]] = {
    c.name: c for c in (RandomHidden, EchoStateNetwork, Nystroem, Distances, Delays, Concat, Pipeline)
}
"""Feature map classes by their ``name`` (the ``"map"`` key of a description)."""


def map_class(name: Any) -> type[FeatureMap]:
    """The class of a map name; ParameterError listing the maps for an unknown one."""
    if name not in MAPS:
        raise ParameterError(f"unknown feature map {name!r}; maps: {', '.join(MAPS)}")
    return MAPS[name]


def make_map(spec: dict[str, Any]) -> FeatureMap:
    """An unfitted map from ``{"map": name, **params}`` or ``{"map": name, "params": {...}}``.

    Composite maps take ``"maps": [spec, ...]``.  The whole description is checked first
    (:func:`~streamridge.features._spec.check_spec`).

    Raises
    ------
    ParameterError
        One line naming the map and the parameter.
    """
    check_spec(spec, MAPS)
    return build(spec, MAPS)


def from_dict(d: dict[str, Any]) -> FeatureMap:
    """Rebuild a map (fitted if the description holds arrays) from :meth:`FeatureMap.to_dict`."""
    version = d.get("format_version", 1)
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise ModelFileError(
            f"feature map format {version!r} is newer than this streamridge reads ({FORMAT_VERSION}); upgrade streamridge"
        )
    cls = map_class(d["map"])
    params = dict(d["params"])
    if "maps" in params:
        params["maps"] = [from_dict(m) for m in params["maps"]]
    fmap = cls(**params)
    if "n_features_in" in d:
        fmap._set_fitted(int(d["n_features_in"]), d.get("arrays", {}))
    return fmap


def encode(fmap: FeatureMap, prefix: str = "fmap") -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """A pure-JSON description and the arrays it refers to (``{"__array__": key}``).

    An array that appears twice (a given matrix that is also the fitted one, as an echo state
    network's ``W`` and ``w_res_``) is stored once, both places referring to its key.
    """
    arrays: dict[str, np.ndarray] = {}
    keys: dict[int, str] = {}

    def walk(v: Any, path: str) -> Any:
        if isinstance(v, FeatureMap):
            return walk(v.to_dict(), path)
        if isinstance(v, np.ndarray):
            key = keys.setdefault(id(v), path)
            arrays[key] = v
            return {"__array__": key}
        if isinstance(v, dict):
            return {k: walk(x, f"{path}.{k}") for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [walk(x, f"{path}.{i}") for i, x in enumerate(v)]
        if isinstance(v, np.generic):
            return v.item()
        return v

    return walk(fmap, prefix), arrays


def decode(obj: dict[str, Any], arrays: dict[str, np.ndarray]) -> FeatureMap:
    """Inverse of :func:`encode`."""

    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            if set(v) == {"__array__"}:
                return np.asarray(arrays[v["__array__"]])
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return from_dict(walk(obj))


def to_json(fmap: FeatureMap) -> dict[str, Any]:
    """A fitted map as one JSON object, its arrays inline (little-endian bytes, base64): for statistics files.

    Exact: :func:`from_json` returns arrays equal bit for bit.
    """
    import base64

    obj, arrays = encode(fmap)
    inline = {
        k: {
            "dtype": a.dtype.newbyteorder("<").str,
            "shape": list(a.shape),
            "b64": base64.b64encode(
                np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<")).tobytes()
            ).decode(),
        }
        for k, a in arrays.items()
    }
    return {"map": obj, "arrays": inline}


def from_json(d: Any) -> FeatureMap:
    """Inverse of :func:`to_json`.

    Raises
    ------
    ModelFileError
        One line when the object is not such a description.
    """
    import base64
    import binascii

    try:
        arrays = {
            k: np.frombuffer(base64.b64decode(v["b64"], validate=True), dtype=np.dtype(v["dtype"]))
            .reshape(v["shape"])
            .copy()
            for k, v in d["arrays"].items()
        }
        return decode(d["map"], arrays)
    except (KeyError, TypeError, ValueError, AttributeError, binascii.Error) as exc:
        if isinstance(exc, (ModelFileError, ParameterError)):
            raise
        raise ModelFileError(
            f"the feature map of these statistics is unreadable ({type(exc).__name__}: {exc})"
        ) from None


class _DuplicateKey(ValueError):
    """A JSON object with a key twice (JSON parsers keep the last one silently)."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``'s ``object_pairs_hook``: the object, or :class:`_DuplicateKey` for a key seen twice."""
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(k)
        out[k] = v
    return out


def _parse(name: str, raw: bytes) -> Any:
    """The object of a JSON or TOML file (``.toml``: TOML)."""
    kind = "TOML" if name.endswith(".toml") else "JSON"
    try:
        if kind == "TOML":
            import tomllib

            return tomllib.loads(raw.decode())
        return json.loads(raw.decode(), object_pairs_hook=_no_duplicates)
    except _DuplicateKey as exc:
        raise InputError(
            f"features file {name!r}: the key {str(exc)!r} appears twice in one object; keep one"
        ) from None
    except RecursionError:
        raise InputError(
            f"features file {name!r} is nested too deeply to read; maps nest at most {MAX_DEPTH} deep"
        ) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"features file {name!r} is not valid {kind}: {str(exc).splitlines()[0]}") from exc


def read_features_file(path: str | os.PathLike[str]) -> FeatureMap | list[FeatureMap]:
    """An unfitted map from a JSON or TOML file (``map = "esn"`` plus parameters), or the candidate maps of a grid.

    A list given to a scalar-valued parameter (``spectral_radius = [0.7, 0.9]``) is a grid
    of its values: the file describes one candidate map per combination
    (:func:`~streamridge.features._spec.expand`), returned as a list (``features=`` of a fit).

    Raises
    ------
    InputError
        Missing, unreadable or unparsable file.
    ParameterError
        A description the schema refuses (:func:`~streamridge.features._spec.check_spec`), an
        empty or too large grid, candidates of different washouts: one line naming the file,
        the map and the parameter.
    """
    name = os.fspath(path)
    if os.path.isdir(name):
        raise InputError(f"features file {name!r} is a directory; name a JSON or TOML file")
    if not os.path.exists(name):
        raise InputError(f"features file {name!r} does not exist")
    try:
        with open(name, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise InputError(f"features file {name!r} cannot be read: {exc.strerror or exc}") from None
    spec = _parse(name, raw)
    specs = expand(spec, MAPS, name)
    for one in specs:
        check_spec(one, MAPS, name)
    if len(specs) == 1 and specs[0] is spec:
        return build(spec, MAPS)
    candidates = [build(one, MAPS) for one in specs]
    try:
        Candidates(candidates)._check_params()
    except ParameterError as exc:
        raise ParameterError(f"features file {name!r}: the grid's {exc}") from None
    return candidates


def describe(fmap: FeatureMap) -> str:
    """One line: ``esn(n_units=500, spectral_radius=0.9, ...) -> 500 features``."""
    obj, _ = encode(fmap)
    return describe_map_spec(obj)
