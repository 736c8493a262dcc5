"""Command line: ``streamridge fit | stats | merge | predict | info | report | demo``.

Every error a user can cause prints one line ``streamridge: error: MESSAGE`` on
stderr and exits with code 2 (``--debug`` shows the traceback instead); a
failed ``fit`` or ``predict`` leaves no output file under the final name.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from . import __version__, cli_features
from .errors import ModelFileError, ParameterError, StreamRidgeError
from .outputs import MARKER, Output, Transaction, check_checkpoint, check_outputs, demo_outputs

if TYPE_CHECKING:
    import numpy as np

PROG = "streamridge"
_USER_ERRORS = (StreamRidgeError, FileNotFoundError, KeyError, ValueError, OSError)


# ---------------------------------------------------------------------- parser
class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``streamridge: error: MESSAGE``, exit code 2, no usage block."""

    def error(self, message: str) -> NoReturn:
        text = " ".join(message.split())
        self.exit(2, f"{PROG}: error: {text} (see `{self.prog} --help`)\n")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer; got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer; got {text}")
    return value


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--debug", action="store_true", help="show the traceback of errors")


def _add_overwrite(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--overwrite", action="store_true",
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
        "--storage-options", type=_json_object, metavar="JSON",
        help="fsspec options for URLs as a JSON object, e.g. '{\"anon\": true}' (credentials: prefer the environment)",
    )


def _add_pass_options(p: argparse.ArgumentParser, *, with_stats_input: bool) -> None:
    """Options of the data pass shared by ``fit`` and ``stats``: data, names, folds, scheduler."""
    if with_stats_input:
        src = p.add_mutually_exclusive_group(required=True)
        src.add_argument("--data", metavar="PATH", help="zarr store, HDF5 file, .npy file/directory or URL")
        src.add_argument("--stats", metavar="STATSFILE", help="fit from saved statistics (no pass over rows)")
    else:
        p.add_argument("--data", required=True, metavar="PATH", help="zarr store, HDF5 file, .npy file/directory or URL")
    p.add_argument("--x", default="X", metavar="NAME", help="name of X in the data (default X)")
    p.add_argument("--y", default="y", metavar="NAME", help="name of y (default y)")
    p.add_argument("--groups", metavar="NAME", help="name of the group id array (one id per row)")
    p.add_argument("--weights", metavar="NAME", help="name of the sample weight array")
    cv = p.add_mutually_exclusive_group()
    cv.add_argument("--folds", type=int, default=5, metavar="K", help="K folds (default 5)")
    cv.add_argument("--leave-group-out", action="store_true", help="one fold per group (needs --groups)")
    cv.add_argument("--blocks", type=int, metavar="K", help="K contiguous blocks of rows (time series)")
    p.add_argument("--classify", action="store_true", help="ridge classifier (labels in y)")
    p.add_argument("--seed", type=int, default=0, help="seed of the fold hash")
    p.add_argument("--chunk-rows", type=_positive_int, metavar="N", help="rows per partition (task) of the pass, rounded to whole stored chunks (default: about 64 MB of X)")
    p.add_argument("--scheduler", metavar="S", help="threads, processes, sync, local:N or a scheduler address")
    _add_storage_options(p)
    p.add_argument("--checkpoint", metavar="DIR", help="save progress here; rerunning the same command resumes")
    p.add_argument("--skip-nonfinite", action="store_true", help="drop rows with NaN/inf instead of failing")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument("--quiet", action="store_true", help="no progress bar and no summary")


def _add_fit(sub: Any) -> None:
    p = sub.add_parser("fit", help="fit a ridge model with K-fold lambda search in one pass over the rows")
    _add_pass_options(p, with_stats_input=True)
    p.add_argument("--alphas", type=float, nargs="+", metavar="A", help="lambda grid (default: 50 log-spaced)")
    p.add_argument("--alpha-per-target", action="store_true", help="one lambda per target")
    p.add_argument("--standardize", action="store_true", help="scale features to unit variance per fold")
    p.add_argument("--no-intercept", action="store_true", help="fit no intercept")
    p.add_argument("--balanced", action="store_true", help="class-balanced weights (with --classify)")
    p.add_argument("--select", choices=("forward", "backward", "op-rr"), help="feature selection")
    p.add_argument("--max-features", type=_positive_int, metavar="N")
    p.add_argument("--min-features", type=_positive_int, metavar="N")
    p.add_argument("--force", type=int, nargs="+", metavar="J", help="feature indices that must stay in")
    p.add_argument("--patience", type=_positive_int, metavar="N", help="stop selection after N steps without gain")
    p.add_argument("--one-se", action="store_true", help="largest lambda within one standard error")
    p.add_argument("--solver", choices=("eigen", "covariance"), default="eigen")
    p.add_argument("--nested", action="store_true", help="also nested CV from the same statistics (>= 3 folds)")
    p.add_argument("--scoring", metavar="NAME", help="choose lambda by this metric (scikit-learn names; one extra pass)")
    p.add_argument("--rescore", type=_positive_int, metavar="K", help="with --select and --scoring: re-score the K best steps")
    p.add_argument("--save-stats", metavar="STATSFILE", help="also save the statistics for later re-fits")
    p.add_argument("--include-stats", action="store_true", help="embed the statistics in the model file")
    p.add_argument("--out", required=True, metavar="MODEL", help="model file to write (.npz)")
    _add_overwrite(p)
    cli_features.add_fit_options(p)
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
    p.add_argument("--chunk-rows", type=_positive_int, metavar="N", help="rows per chunk")
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
    p = sub.add_parser("report", help="write an HTML report (CV curve, selection path, classes, coefficients)")
    p.add_argument("model", metavar="MODEL")
    p.add_argument("--out", metavar="HTML", help="HTML file to write (default: MODEL with suffix .html)")
    p.add_argument("--png", metavar="DIR", help="also save every figure as a PNG file in this directory")
    _add_overwrite(p)
    _common(p)


def _add_demo(sub: Any) -> None:
    p = sub.add_parser("demo", help="generate an echo state network / NARMA-10 data set and fit it")
    p.add_argument("--out", default="streamridge-demo", metavar="DIR", help="output directory")
    _add_overwrite(p)
    p.add_argument("--series", type=_positive_int, metavar="N", help="time series (default 20; --quick 5)")
    p.add_argument("--rows-per-series", type=_positive_int, metavar="N", help="default 5000; --quick 1000")
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
    for add in (_add_fit, _add_stats, _add_merge, _add_predict, _add_info, _add_report, _add_demo,
                cli_features.add_features_command):
        add(sub)
    return parser


# ---------------------------------------------------------------------- helpers
def _emit(obj: dict[str, Any] | str, *, as_json: bool) -> None:
    from .model_io import json_safe

    print(json.dumps(json_safe(obj, str), allow_nan=False) if as_json else obj)


def _estimator(args: argparse.Namespace) -> Any:
    from .estimators import StreamRidgeClassifierCV, StreamRidgeCV

    if args.leave_group_out:
        cv: Any = "groups"
    elif args.blocks is not None:
        cv = "blocks"
    else:
        cv = args.folds
    params: dict[str, Any] = {
        "alphas": getattr(args, "alphas", None),
        "cv": cv,
        "n_blocks": args.blocks if args.blocks is not None else 5,
        "fit_intercept": not getattr(args, "no_intercept", False),
        "standardize": getattr(args, "standardize", False),
        "alpha_per_target": getattr(args, "alpha_per_target", False),
        "random_state": args.seed,
        "solver": getattr(args, "solver", "eigen"),
        "alpha_rule": "1se" if getattr(args, "one_se", False) else "min",
        "selection": getattr(args, "select", None),
        "max_features": getattr(args, "max_features", None),
        "min_features": getattr(args, "min_features", None),
        "force_features": getattr(args, "force", None),
        "patience": getattr(args, "patience", None),
        "chunk_rows": args.chunk_rows,
        "scheduler": args.scheduler,
        "checkpoint": args.checkpoint,
        "progress": not (args.quiet or args.json),
        "skip_nonfinite": args.skip_nonfinite,
        **cli_features.estimator_params(args),
        "nested": getattr(args, "nested", False),
        "scoring": getattr(args, "scoring", None),
        "rescore": getattr(args, "rescore", None),
    }
    if args.classify:
        balanced = getattr(args, "balanced", False)
        return StreamRidgeClassifierCV(class_weight="balanced" if balanced else None, **params)
    return StreamRidgeCV(**params)


def fit_summary(estimator: Any, *, data: str, model: str) -> dict[str, Any]:
    """JSON-safe facts about a fit (printed by ``fit`` and ``demo``)."""
    from .report import estimator_summary, scheme_text
    from .scoring import score_summary

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
    }


# ---------------------------------------------------------------------- commands
def cmd_fit(args: argparse.Namespace) -> int:
    """``streamridge fit``: one pass, lambda search, save the model, print a summary."""
    from .model_io import save_model
    from .stats import save_stats

    if args.balanced and not args.classify:
        raise ParameterError("--balanced needs --classify")
    if args.leave_group_out and args.groups is None and args.data is not None:
        raise ParameterError("--leave-group-out needs --groups NAME (the array of group ids)")
    outputs = [Output(args.out, "model")]
    if args.save_stats:
        outputs.append(Output(args.save_stats, "stats", "--save-stats"))
    inputs = [args.data, args.stats, args.checkpoint]
    targets = check_outputs(outputs, inputs, overwrite=args.overwrite)
    check_checkpoint(args.checkpoint)
    out = targets[0]
    est = _estimator(args)
    if args.stats is not None:
        stats = _read_stats(args.stats)
        scheme = stats.meta.get("scheme") or {}
        cv = {"logo": "groups", "blocks": "blocks"}.get(str(scheme.get("kind")), stats.n_folds)
        est.set_params(cv=cv, n_blocks=stats.n_folds)
        est.fit_stats(stats)
        description = f"statistics file {args.stats}"
    else:
        source = _open(args)
        est.fit(source)
        description = source.description
    with Transaction() as tx:  # the model and the statistics: both or neither
        with tx.writing(out) as tmp:
            save_model(est, tmp, include_stats=args.include_stats)
        if args.save_stats:
            with tx.writing(targets[1], "--save-stats") as tmp:
                save_stats(est.stats_, tmp)
    if not args.quiet or args.json:
        summary = fit_summary(est, data=description, model=out)
        _emit(summary if args.json else _format_fit(summary), as_json=args.json)
    return 0


def _read_stats(path: str) -> Any:
    """Statistics from a file of :func:`save_stats`, or embedded in a model file (``--include-stats``)."""
    from .model_io import load_model, read_model
    from .outputs import written_by_streamridge
    from .stats import load_stats

    try:
        return load_stats(path)
    except ModelFileError as exc:
        if not written_by_streamridge(path, "model"):
            raise exc from None
        header, _ = read_model(path)  # a model file: its own errors (schema) are the ones to show
        if not header.get("has_stats"):
            raise ModelFileError(
                f"{path!r} is a model file without statistics; write it with --include-stats "
                "(or save them with --save-stats FILE) to re-fit from statistics"
            ) from None
    return load_model(path).stats_


def _format_fit(summary: dict[str, Any]) -> str:
    from .report import format_fit

    return format_fit(summary)


class _RowBatches:
    """Array-like view of a dask array whose row slices are computed a batch of chunks at a time.

    The writer (``write_zarr`` / ``write_hdf5``) asks for consecutive row slices
    in the calling thread; each miss computes the next ``batch_chunks`` chunks in
    parallel and keeps them until they are consumed.  Workers only compute, so a
    failure never races with writes into the output.
    """

    def __init__(self, array: Any, *, batch_chunks: int, tick: Any = None) -> None:
        import numpy as np

        self._array = array
        self.shape = tuple(int(n) for n in array.shape)
        self.dtype = np.dtype(array.dtype)
        self.ndim = len(self.shape)
        self._bounds = np.cumsum((0, *array.chunks[0]))
        self._batch = max(1, batch_chunks)
        self._tick = tick
        self._start, self._block = 0, np.empty((0, *self.shape[1:]), dtype=self.dtype)

    def __getitem__(self, key: Any) -> np.ndarray:
        import numpy as np

        if not isinstance(key, slice) or key.step not in (None, 1):
            return np.asarray(self._array[key])
        start, stop, _ = key.indices(self.shape[0])
        if not (self._start <= start and stop <= self._start + self._block.shape[0]):
            first = int(np.searchsorted(self._bounds, start, side="right")) - 1
            last = min(first + self._batch, len(self._bounds) - 1)
            lo, hi = int(self._bounds[first]), max(int(self._bounds[last]), stop)
            self._start, self._block = lo, np.asarray(self._array[lo:hi].compute())
            if self._tick is not None:
                self._tick(hi - lo)
        return self._block[start - self._start : stop - self._start]


def _progress(enabled: bool, total: int) -> Any:
    """A tqdm bar (``update``/``close``) or None."""
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="rows", unit_scale=True, desc="predict")


def cmd_predict(args: argparse.Namespace) -> int:
    """``streamridge predict``: stream X through the model, write predictions atomically."""
    from .model_io import load_model
    from .sources import open_source, write_hdf5, write_zarr

    (out,) = check_outputs([Output(args.out, "predictions")], [args.data, args.model], overwrite=args.overwrite)
    model = load_model(args.model)
    source = open_source(
        args.data, x=args.x, y=None, chunk_rows=args.chunk_rows, require_y=False, storage_options=args.storage_options
    )
    X = source.X
    if int(X.shape[1]) != model.n_features_in_:  # raw inputs, before a feature map
        raise ParameterError(
            f"X in {args.data} has {X.shape[1]} features but the model {args.model} was fitted on "
            f"{model.n_features_in_}; use the same features (--x NAME)"
        )
    classifier = hasattr(model, "decision_function")
    groups = None if args.groups is None else open_source(
        args.data, x=args.x, y=None, groups=args.groups, chunk_rows=args.chunk_rows, require_y=False, storage_options=args.storage_options
    ).groups
    extra = () if groups is None else (groups,)  # series ids only for a stateful feature map
    pred = model.predict(X, *extra)
    scores = model.decision_function(X, *extra) if classifier and args.scores else None
    n = int(X.shape[0])
    bar = _progress(not (args.quiet or args.json), n * (1 if scores is None else 2))
    tick = None if bar is None else bar.update
    batch = 4 * (os.cpu_count() or 1)
    values = [None if a is None else _RowBatches(a, batch_chunks=batch, tick=tick) for a in (pred, scores)]
    write = write_hdf5 if out.lower().endswith((".h5", ".hdf5")) else write_zarr
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings(), Transaction() as tx, tx.writing(out) as tmp:
            warnings.simplefilter("ignore")  # zarr: fixed-length strings have no v3 spec yet
            rows = int(X.chunks[0][0])
            names = {"X": "predictions", "y": "scores"}
            write(tmp, values[0], values[1], chunk_rows=rows, names=names, root_attrs={MARKER: "predictions"})
    finally:
        if bar is not None:
            bar.close()
    seconds = time.perf_counter() - t0
    facts = {
        "model": os.path.abspath(args.model),
        "data": source.description,
        "rows": n,
        "shape": list(pred.shape),
        "arrays": ["predictions"] + (["scores"] if scores is not None else []),
        "out": out,
        "seconds": seconds,
        "rows_per_s": n / seconds if seconds > 0 else None,
    }
    if args.json:
        _emit(facts, as_json=True)
    elif not args.quiet:
        arrays = " and ".join(facts["arrays"])
        print(
            f"wrote {arrays} of shape {tuple(pred.shape)} for {n:,} rows to {out} "
            f"in {seconds:.3g} s ({n / max(seconds, 1e-9):,.0f} rows/s)"
        )
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    """``streamridge info``: print the header of a model file."""
    from .model_io import read_model
    from .report import format_info

    header, _ = read_model(args.model)
    lines = [] if args.json else [format_info(header, os.path.abspath(args.model)), *cli_features.info_lines(header)]
    _emit(header if args.json else "\n".join(lines), as_json=args.json)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """``streamridge report``: a self-contained HTML report of a model file (matplotlib imported lazily)."""
    from .html_report import check_report_outputs, write_report

    out = check_report_outputs(args.model, args.out, args.png, overwrite=args.overwrite)
    sections = write_report(args.model, out, png_dir=args.png)
    shown = [s.key for s in sections if s.omitted is None]
    print(f"wrote {out} ({len(shown)} sections: {', '.join(shown)})")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """``streamridge demo``: write the ESN/NARMA-10 data, fit it, test on a held-out series."""
    import numpy as np

    from .demo import DEMO_ALPHAS, make_esn_narma, nrmse, write_demo
    from .estimators import StreamRidgeCV
    from .model_io import save_model
    from .sources import open_source

    n_series = args.series or (5 if args.quick else 20)
    length = args.rows_per_series or (1000 if args.quick else 5000)
    talk = not (args.quiet or args.json)
    store, model_path = demo_outputs(args.out, overwrite=args.overwrite)
    t0 = time.perf_counter()
    with Transaction() as tx, tx.writing(store) as tmp:
        write_demo(tmp, n_series=n_series, series_length=length, seed=args.seed)
    gen_s = time.perf_counter() - t0
    if talk:
        print(f"wrote {n_series} series x {length} rows of 200 reservoir states to {store} ({gen_s:.2g} s)")
    cv: Any = "groups" if args.folds is None else args.folds
    est = StreamRidgeCV(alphas=DEMO_ALPHAS, cv=cv, progress=talk)
    source = open_source(store, groups="groups")
    est.fit(source)
    with Transaction() as tx, tx.writing(model_path) as tmp:
        save_model(est, tmp)
    summary = fit_summary(est, data=source.description, model=model_path)
    X_test, y_test, _ = make_esn_narma(n_series=1, series_length=length, seed=args.seed + 1000)
    test = open_source(X_test, y=None, require_y=False)
    summary["test_nrmse"] = nrmse(y_test, est.predict(test.X).compute())
    summary["cv_nrmse"] = (
        None if summary["cv"]["cv_r2"] is None else float(np.sqrt(1 - summary["cv"]["cv_r2"]))
    )
    summary["generate_s"] = gen_s
    if args.json:
        _emit(summary, as_json=True)
    elif not args.quiet:
        print(_format_fit(summary))
        print(
            f"test NRMSE  {summary['test_nrmse']:.4f} on a held-out series (another input seed); "
            f"CV NRMSE {summary['cv_nrmse']:.4f}"
        )
    return 0


def _open(args: argparse.Namespace) -> Any:
    from .sources import open_source

    return open_source(
        args.data, x=args.x, y=args.y, groups=args.groups, sample_weight=args.weights, chunk_rows=args.chunk_rows,
        storage_options=args.storage_options,
    )


def cmd_stats(args: argparse.Namespace) -> int:
    """``streamridge stats``: the data pass only (optionally a row shard), statistics saved atomically."""
    from .stats import save_stats

    if args.leave_group_out and args.groups is None:
        raise ParameterError("--leave-group-out needs --groups NAME (the array of group ids)")
    (out,) = check_outputs([Output(args.out, "stats")], [args.data, args.checkpoint], overwrite=args.overwrite)
    check_checkpoint(args.checkpoint)
    est = _estimator(args)
    source = _open(args)
    stats = est.compute_stats(source, rows=args.rows)
    with Transaction() as tx, tx.writing(out) as tmp:
        save_stats(stats, tmp)
    if not args.quiet or args.json:
        t = est.timings_
        facts = {
            "data": source.description, "rows": stats.n_rows, "row_ranges": stats.meta.get("row_ranges"),
            "features": stats.n_features, "folds": stats.n_folds, "classes": stats.meta.get("classes"),
            "pass_s": t["pass_s"], "rows_per_s": t["rows_per_s"], "stats": out,
        }
        text = (
            f"statistics of {facts['rows']:,} rows {facts['row_ranges']} x {facts['features']} features, "
            f"{facts['folds']} folds, pass {t['pass_s']:.2f} s ({t['rows_per_s']:,.0f} rows/s) -> {out}"
        )
        _emit(facts if args.json else text, as_json=args.json)
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    """``streamridge merge``: pairwise (Chan) merge of shard statistics; incompatible shards are refused."""
    from .stats import load_stats, merge_all, save_stats

    (out,) = check_outputs([Output(args.out, "stats")], list(args.inputs), overwrite=args.overwrite)
    merged = merge_all([load_stats(p) for p in args.inputs])
    with Transaction() as tx, tx.writing(out) as tmp:
        save_stats(merged, tmp)
    if not args.quiet or args.json:
        facts = {"inputs": list(args.inputs), "rows": merged.n_rows, "row_ranges": merged.meta.get("row_ranges"), "stats": out}
        text = f"merged {len(args.inputs)} files: {merged.n_rows:,} rows {facts['row_ranges']} -> {out}"
        _emit(facts if args.json else text, as_json=args.json)
    return 0


_COMMANDS = {
    "fit": cmd_fit, "stats": cmd_stats, "merge": cmd_merge, "predict": cmd_predict, "info": cmd_info, "report": cmd_report,
    "demo": cmd_demo, "features": cli_features.cmd_features,
}


# ---------------------------------------------------------------------- entry point
def _message(exc: BaseException) -> str:
    text = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
    text = " ".join(str(text).split()) or type(exc).__name__
    return text


def _limit_malloc_arenas(arenas: int = 2) -> None:
    """Cap glibc's per-thread malloc arenas (like ``MALLOC_ARENA_MAX=2``) unless the user set it.

    Decompression threads each grow an arena of their own; without a cap peak RSS
    creeps up with the length of the pass instead of staying flat.
    """
    if "MALLOC_ARENA_MAX" in os.environ or not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").mallopt(-8, arenas)  # M_ARENA_MAX
    except (OSError, AttributeError):  # not glibc
        pass


def _show_one_line(message: Warning | str, category: type[Warning], *args: object, **kwargs: object) -> None:
    """Print a warning as one line ``streamridge: warning: ...`` (no source line)."""
    sys.stderr.write(f"streamridge: warning: {message}\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code (0 success, 2 user error, 130 interrupted).

    Warnings (e.g. a stored chunk larger than the memory budget) print as one line.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments without the program name (default ``sys.argv[1:]``).
    """
    with warnings.catch_warnings():  # restores warnings.showwarning on return
        warnings.showwarning = _show_one_line
        return _main(argv)


def _main(argv: Sequence[str] | None = None) -> int:
    """The command line behind :func:`main`."""
    _limit_malloc_arenas()
    parser = build_parser()
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
    except SystemExit as exc:  # usage errors (2), --help and --version (0)
        return int(exc.code) if isinstance(exc.code, int) else 2
    try:
        return _COMMANDS[args.command](args)
    except BrokenPipeError:  # e.g. `streamridge info MODEL | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except _USER_ERRORS as exc:
        if args.debug:
            traceback.print_exc()
        print(f"{PROG}: error: {_message(exc)}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
