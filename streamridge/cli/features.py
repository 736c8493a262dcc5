"""Command-line parts for feature maps: ``fit --features/--prefixes``, ``predict --groups``, ``features``, ``info``.

Kept apart from :mod:`streamridge.cli` so that the map options stay in one place.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import inspect

FEATURES_EPILOG = """\
A features file is JSON or TOML naming a map and its parameters, e.g.
  {"map": "esn", "n_units": 500, "spectral_radius": 0.9, "washout": 100}
  {"map": "pipeline", "maps": [{"map": "delays", "n_delays": 3}, {"map": "random_hidden", "n_units": 200, "direct": true}]}
TOML:  map = "nystroem"   n_components = 300   kernel = "rbf"
A list given to a parameter of one value is a grid: one candidate map per combination, chosen with lambda, e.g.
  {"map": "esn", "n_units": 200, "spectral_radius": [0.7, 0.9, 1.1], "leak_rate": [0.1, 0.3, 1.0]}
"""


def _prefix_list(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"prefix sizes must be integers >= 1; got {text!r}")
    return n


def add_fit_options(p: argparse.ArgumentParser) -> None:
    """``--features FILE`` and ``--prefixes N ...`` of ``fit`` and ``stats``."""
    p.add_argument(
        "--features",
        metavar="FILE",
        help="feature map applied inside the pass, or a grid of candidate maps (JSON/TOML; see `streamridge features`)",
    )
    p.add_argument(
        "--prefixes",
        type=_prefix_list,
        nargs="+",
        metavar="N",
        help="choose the number of leading features too (with --features)",
    )


def add_stats_options(p: argparse.ArgumentParser) -> None:
    """``--features FILE`` of ``stats``: the statistics (and any model fitted from them) carry the fitted map."""
    p.add_argument(
        "--features",
        metavar="FILE",
        help="feature map applied inside the pass (JSON/TOML; see `streamridge features`); saved with the statistics",
    )


def estimator_params(args: argparse.Namespace) -> dict[str, Any]:
    """``features`` and ``feature_prefixes`` estimator parameters from the parsed options.

    A grid file's candidate maps are a fit's ``features`` (a list); ``stats`` refuses them.
    The maps (scikit-learn transformers) are imported only with ``--features``.
    """
    path = getattr(args, "features", None)
    features = None
    if path is not None:
        from streamridge.features import read_features_file

        features = read_features_file(path)
    if isinstance(features, list) and getattr(args, "command", None) == "stats":
        from streamridge.errors import ParameterError

        raise ParameterError(
            f"stats --features {path}: the file describes a grid of {len(features)} candidate maps; statistics are "
            "those of one map: give each parameter one value, or fit the grid (fit --data ... --features FILE)"
        )
    return {"features": features, "feature_prefixes": getattr(args, "prefixes", None)}


def add_features_command(sub: Any) -> None:
    """``streamridge features``: list the maps and their parameters (``--help`` prints the same list).

    The list is built when the command runs, not with the parser: other commands stay light to start.
    """
    p = sub.add_parser("features", help="list the feature maps usable with fit --features", add_help=False)
    p.add_argument("-h", "--help", action="store_true", help="show the maps and their parameters")
    p.add_argument("--json", action="store_true", help="print the maps and their defaults as JSON")
    p.add_argument("--debug", action="store_true", help="show the traceback of errors")


def describe_maps() -> str:
    """One paragraph per map: name, class, summary, parameters with defaults."""
    from streamridge.features import MAPS

    lines = ['Feature maps (the "map" key of a features file):', ""]
    for name, cls in MAPS.items():
        doc = (cls.__doc__ or "").strip().splitlines()[0]
        params = ", ".join(f"{k}={v.default!r}" for k, v in _params(cls).items())
        lines += [f"  {name:<14} {cls.__name__}: {doc}", f"  {'':<14} {params}", ""]
    return "\n".join(lines)


def _params(cls: type) -> dict[str, inspect.Parameter]:
    import inspect  # only `streamridge features` lists parameters: not imported by the other commands

    return dict(inspect.signature(cls).parameters)


def cmd_features(args: argparse.Namespace) -> int:
    """Print the maps (text or JSON)."""
    import json

    from streamridge.features import MAPS

    if args.help:
        print("usage: streamridge features [-h] [--json] [--debug]\n")
    if args.json:
        print(
            json.dumps(
                {
                    n: {"class": c.__name__, "params": {k: v.default for k, v in _params(c).items()}}
                    for n, c in MAPS.items()
                }
            )
        )
    else:
        print(describe_maps() + "\n" + FEATURES_EPILOG, end="")
    return 0


def info_lines(header: dict[str, Any]) -> list[str]:
    """Lines of ``streamridge info`` about the model's feature map and prefix curve."""
    from streamridge.features._describe import describe_map_spec

    out = []
    if header.get("features"):
        out.append(f"feature map {describe_map_spec(header['features'])}")
    p = header.get("prefixes")
    if p:
        curve = ", ".join(f"{n}: {e:.6g}" for n, e in zip(p["sizes"], p["errors"]))
        out.append(f"prefixes    chosen {p['n_features_selected']} of CV error by size {{{curve}}}")
    return out
