"""The banded-ridge options of ``fit``: ``--bands``, ``--band-weights``, ``--solve-memory``.

``--bands`` is one of

* ``concat``: one band per part of a ``concat`` map of ``--features``;
* ranges of feature columns, ``START:STOP`` separated by commas, each optionally
  named: ``0:256,256:512`` or ``words=0:300,phonemes=300:340``;
* a JSON file: a list of bands or an object name -> band, a band being a list of
  column indices or a ``"START:STOP"`` string.

The columns are checked, with the weight vectors, by
:func:`streamridge.model_selection.bands.check_bands` when the fit starts.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from streamridge.cli.argtypes import positive_int
from streamridge.errors import ParameterError

_FORM = (
    "--bands must be 'concat', ranges START:STOP separated by commas (e.g. 0:256,256:512, optionally "
    "named: words=0:256), or a JSON file of a list or an object of bands"
)


def add_fit_options(p: argparse.ArgumentParser) -> None:
    """The options of ``fit`` for banded ridge and many targets."""
    p.add_argument(
        "--bands", metavar="SPEC",
        help="banded ridge: feature bands as START:STOP ranges (0:256,256:512; name=START:STOP), a JSON file, "
        "or 'concat' (the parts of a concat map of --features)",
    )  # fmt: skip
    p.add_argument(
        "--band-weights", type=positive_int, metavar="N",
        help="with --bands: weight vectors searched (the equal weights, each band alone, then Dirichlet samples "
        "seeded by --seed; default 20)",
    )  # fmt: skip
    p.add_argument(
        "--solve-memory", metavar="SIZE",
        help="memory of one batch of targets in the lambda search and the final solve, e.g. 2GB (default 1 GiB)",
    )  # fmt: skip


def estimator_params(args: argparse.Namespace) -> dict[str, Any]:
    """``bands``, ``band_weights`` and ``solve_memory`` estimator parameters from the parsed options."""
    return {
        "bands": parse_bands(args.bands) if getattr(args, "bands", None) is not None else None,
        "band_weights": getattr(args, "band_weights", None),
        "solve_memory": getattr(args, "solve_memory", None),
    }


def parse_bands(text: str) -> Any:
    """The ``bands`` parameter of a ``--bands`` value (see the module docstring).

    Raises
    ------
    ParameterError
        A value that is none of the three forms, or a JSON file that is not a list or object of bands.
    """
    if text == "concat":
        return "concat"
    if os.path.isfile(text):
        return _read_file(text)
    items = [part.strip() for part in text.split(",")]
    if not items or any(not part for part in items):
        raise ParameterError(f"{_FORM}; got --bands {text!r}")
    named = [part.partition("=") for part in items]
    if any(sep for _, sep, _ in named):
        if not all(sep and name for name, sep, _ in named):
            raise ParameterError(f"{_FORM}; name every range or none; got --bands {text!r}")
        return {name.strip(): _range(rng, text) for name, _, rng in named}
    return [_range(part, text) for part in items]


def _range(part: str, text: str) -> slice:
    start, sep, stop = part.strip().partition(":")
    try:
        lo, hi = int(start), int(stop)
    except ValueError:
        raise ParameterError(f"{_FORM}; got --bands {text!r}") from None
    if not sep or lo < 0 or hi <= lo:
        raise ParameterError(f"{_FORM}: each range START:STOP with 0 <= START < STOP; got {part.strip()!r}")
    return slice(lo, hi)


def _read_file(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ParameterError(
            f"--bands {path}: not a readable JSON file ({' '.join(str(exc).split())}); {_FORM}"
        ) from None
    if isinstance(doc, dict):
        return {str(k): _band(v, path) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_band(v, path) for v in doc]
    raise ParameterError(
        f"--bands {path}: a JSON {type(doc).__name__}, not a list or object of bands; {_FORM}"
    )


def _band(value: Any, path: str) -> Any:
    """A band of a JSON file: a list of column indices, or a "START:STOP" string."""
    if isinstance(value, str):
        return _range(value, path)
    return value
