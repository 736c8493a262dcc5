"""The argument parser of the ``streamridge`` command: every subcommand's options and their types.

Only the parser: the commands live in :mod:`streamridge.cli.fit`, :mod:`streamridge.cli.predict`,
:mod:`streamridge.cli.model` and :mod:`streamridge.cli.features`; the entry point in
:mod:`streamridge.cli`.  Importing this module imports no numerical package.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, NoReturn

from streamridge._version import __version__
from streamridge.cli import bands as cli_bands
from streamridge.cli import features as cli_features
from streamridge.cli.argtypes import positive_int

PROG = "streamridge"


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``streamridge: error: MESSAGE``, exit code 2, no usage block."""

    def error(self, message: str) -> NoReturn:
        text = " ".join(message.split())
        self.exit(2, f"{PROG}: error: {text} (see `{self.prog} --help`)\n")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--debug", action="store_true", help="show the traceback of errors")


def _add_overwrite(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace existing outputs written by streamridge (other files and directories are never replaced)",
    )


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"must be a JSON object, e.g. '{{\"anon\": true}}'; {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object, e.g. '{{\"anon\": true}}'; got {text}")
    return value


def _add_storage_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--storage-options",
        type=_json_object,
        metavar="JSON",
        help="fsspec options for URLs as a JSON object, e.g. '{\"anon\": true}' (credentials: prefer the environment)",
    )


#: defaults of the pass options that the parser leaves None, so that a command can tell which the user gave
PASS_DEFAULTS: dict[str, Any] = {"x": "X", "y": "y", "folds": 5, "seed": 0}


def fill_pass_defaults(args: argparse.Namespace) -> frozenset[str]:
    """Put :data:`PASS_DEFAULTS` into the options the user left out; return the names of those given.

    ``fit --stats`` refuses a given option that it cannot honour (:func:`streamridge.cli.fit.cmd_fit`).
    """
    given = frozenset(name for name in PASS_DEFAULTS if getattr(args, name, None) is not None)
    for name, value in PASS_DEFAULTS.items():
        if name not in given:
            setattr(args, name, value)
    return given


def _add_pass_options(p: argparse.ArgumentParser, *, with_stats_input: bool) -> None:
    """Options of the data pass shared by ``fit`` and ``stats``: data, names, folds, scheduler."""
    if with_stats_input:
        src = p.add_mutually_exclusive_group(required=True)
        src.add_argument("--data", metavar="PATH", help="zarr store, HDF5 file, .npy file/directory or URL")
        src.add_argument("--stats", metavar="STATSFILE", help="fit from saved statistics (no pass over rows)")
    else:
        p.add_argument(
            "--data", required=True, metavar="PATH", help="zarr store, HDF5 file, .npy file/directory or URL"
        )
    # --x, --y, --folds, --seed default to None: fill_pass_defaults tells what the user gave
    p.add_argument("--x", metavar="NAME", help="name of X in the data (default X)")
    p.add_argument("--y", metavar="NAME", help="name of y (default y)")
    p.add_argument("--groups", metavar="NAME", help="name of the group id array (one id per row)")
    p.add_argument("--weights", metavar="NAME", help="name of the sample weight array")
    cv = p.add_mutually_exclusive_group()
    cv.add_argument("--folds", type=int, metavar="K", help="K folds (default 5)")
    cv.add_argument("--leave-group-out", action="store_true", help="one fold per group (needs --groups)")
    cv.add_argument("--blocks", type=int, metavar="K", help="K contiguous blocks of rows (time series)")
    p.add_argument("--classify", action="store_true", help="ridge classifier (labels in y)")
    p.add_argument("--seed", type=int, help="seed of the fold hash (default 0)")
    p.add_argument(
        "--chunk-rows",
        type=positive_int,
        metavar="N",
        help="rows per partition (task) of the pass, rounded to whole stored chunks (default: about 64 MB of X)",
    )
    p.add_argument(
        "--scheduler", metavar="S", help="threads, processes, sync, local:N or a scheduler address"
    )
    _add_storage_options(p)
    p.add_argument(
        "--checkpoint", metavar="DIR", help="save progress here; rerunning the same command resumes"
    )
    p.add_argument("--skip-nonfinite", action="store_true", help="drop rows with NaN/inf instead of failing")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument("--quiet", action="store_true", help="no progress bar and no summary")


def _add_fit(sub: Any) -> None:
    p = sub.add_parser("fit", help="fit a ridge model with K-fold lambda search in one pass over the rows")
    _add_pass_options(p, with_stats_input=True)
    p.add_argument(
        "--alphas", type=float, nargs="+", metavar="A", help="lambda grid (default: 50 log-spaced)"
    )
    p.add_argument("--alpha-per-target", action="store_true", help="one lambda per target")
    p.add_argument("--standardize", action="store_true", help="scale features to unit variance per fold")
    p.add_argument("--no-intercept", action="store_true", help="fit no intercept")
    p.add_argument("--balanced", action="store_true", help="class-balanced weights (with --classify)")
    p.add_argument("--select", choices=("forward", "backward", "op-rr"), help="feature selection")
    p.add_argument("--max-features", type=positive_int, metavar="N")
    p.add_argument("--min-features", type=positive_int, metavar="N")
    p.add_argument("--force", type=int, nargs="+", metavar="J", help="feature indices that must stay in")
    p.add_argument(
        "--patience", type=positive_int, metavar="N", help="stop selection after N steps without gain"
    )
    p.add_argument("--one-se", action="store_true", help="largest lambda within one standard error")
    p.add_argument("--solver", choices=("eigen", "covariance"), default="eigen")
    p.add_argument(
        "--nested", action="store_true", help="also nested CV from the same statistics (>= 3 folds)"
    )
    p.add_argument(
        "--scoring", metavar="NAME",
        help="choose lambda by this metric (scikit-learn names): r2 and correlation from the statistics, "
        "others by one extra pass over the rows",
    )  # fmt: skip
    p.add_argument(
        "--rescore",
        type=positive_int,
        metavar="K",
        help="with --select and --scoring: re-score the K best steps",
    )
    p.add_argument("--save-stats", metavar="STATSFILE", help="also save the statistics for later re-fits")
    p.add_argument("--include-stats", action="store_true", help="embed the statistics in the model file")
    p.add_argument("--out", required=True, metavar="MODEL", help="model file to write (.npz)")
    _add_overwrite(p)
    cli_features.add_fit_options(p)
    cli_bands.add_fit_options(p)
    _common(p)


def _rows_range(text: str) -> tuple[int, int]:
    start, sep, stop = text.partition(":")
    try:
        lo, hi = int(start or 0), int(stop) if stop else 2**62
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be START:STOP (row numbers); got {text}") from None
    if not sep or lo < 0 or hi <= lo:
        raise argparse.ArgumentTypeError(f"must be START:STOP with 0 <= START < STOP; got {text}")
    return lo, hi


def _add_stats(sub: Any) -> None:
    p = sub.add_parser("stats", help="run only the data pass and save the statistics (a shard with --rows)")
    _add_pass_options(p, with_stats_input=False)
    p.add_argument("--rows", type=_rows_range, metavar="START:STOP", help="only these rows (global fold ids)")
    p.add_argument("--out", required=True, metavar="STATSFILE", help="statistics file to write (.npz)")
    _add_overwrite(p)
    cli_features.add_stats_options(p)
    _common(p)


def _add_merge(sub: Any) -> None:
    p = sub.add_parser("merge", help="merge statistics of disjoint shards into one file")
    p.add_argument("inputs", nargs="+", metavar="STATSFILE")
    p.add_argument("--out", required=True, metavar="STATSFILE")
    _add_overwrite(p)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument("--quiet", action="store_true", help="no summary")
    _common(p)


def _add_predict(sub: Any) -> None:
    p = sub.add_parser("predict", help="stream rows through a model and write the predictions")
    p.add_argument("--model", required=True, metavar="MODEL")
    p.add_argument("--data", required=True, metavar="PATH")
    p.add_argument("--groups", metavar="NAME", help="series id array (models with a stateful feature map)")
    p.add_argument("--x", default="X", metavar="NAME", help="name of X in the data (default X)")
    p.add_argument("--out", required=True, metavar="PATH", help="zarr store, or HDF5 if it ends in .h5/.hdf5")
    _add_overwrite(p)
    p.add_argument("--chunk-rows", type=positive_int, metavar="N", help="rows per chunk")
    p.add_argument("--scores", action="store_true", help="classifiers: also write decision scores")
    _add_storage_options(p)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument("--quiet", action="store_true", help="no progress bar and no summary")
    _common(p)


def _add_info(sub: Any) -> None:
    p = sub.add_parser("info", help="show what a model file holds")
    p.add_argument("model", metavar="MODEL")
    p.add_argument("--json", action="store_true", help="print the header as JSON")
    _common(p)


def _add_report(sub: Any) -> None:
    p = sub.add_parser(
        "report", help="write an HTML report (CV curve, selection path, classes, coefficients)"
    )
    p.add_argument("model", metavar="MODEL")
    p.add_argument("--out", metavar="HTML", help="HTML file to write (default: MODEL with suffix .html)")
    p.add_argument("--png", metavar="DIR", help="also save every figure as a PNG file in this directory")
    _add_overwrite(p)
    _common(p)


def _add_demo(sub: Any) -> None:
    p = sub.add_parser("demo", help="generate an echo state network / NARMA-10 data set and fit it")
    p.add_argument("--out", default="streamridge-demo", metavar="DIR", help="output directory")
    _add_overwrite(p)
    p.add_argument("--series", type=positive_int, metavar="N", help="time series (default 20; --quick 5)")
    p.add_argument("--rows-per-series", type=positive_int, metavar="N", help="default 5000; --quick 1000")
    p.add_argument("--folds", type=int, metavar="K", help="K folds instead of leave-one-series-out")
    p.add_argument("--quick", action="store_true", help="a small data set (a few seconds)")
    p.add_argument("--seed", type=int, default=0, help="seed of the training inputs")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument("--quiet", action="store_true", help="no progress bar and no summary")
    _common(p)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``streamridge`` command."""
    parser = _Parser(
        prog=PROG, description="Exact K-fold ridge regression from one streamed pass over the rows."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (
        _add_fit,
        _add_stats,
        _add_merge,
        _add_predict,
        _add_info,
        _add_report,
        _add_demo,
        cli_features.add_features_command,
    ):
        add(sub)
    return parser
