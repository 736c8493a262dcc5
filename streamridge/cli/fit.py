"""The commands that run the data pass or produce statistics and models: ``fit``, ``stats``, ``merge``, ``demo``.

Each validates every output before the pass and writes its outputs atomically
(:mod:`streamridge.io.outputs`); the numerical packages are imported by the command that runs.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from streamridge.cli import bands as cli_bands
from streamridge.cli import features as cli_features
from streamridge.cli.output import emit, fit_summary, format_fit
from streamridge.cli.parser import fill_pass_defaults
from streamridge.errors import ModelFileError, ParameterError
from streamridge.io.outputs import Output, Transaction, check_checkpoint, check_outputs, demo_outputs


def _estimator(args: argparse.Namespace, **folds: Any) -> Any:
    """The estimator of ``args``, with every option as the model file records it (``--scheduler`` as given).

    The scikit-learn-free classes (:mod:`streamridge.estimators.core`): the command reads sources, never
    in-memory arrays, and its model file loads as the public estimator.  The fit starts the scheduler
    (``local:N`` workers) once and runs every pass of the fit on it.  ``folds`` (``cv``, ``n_blocks``)
    replace the fold options: those of statistics that fixed them.
    """
    from streamridge.estimators.core import RidgeClassifierCVCore, RidgeCVCore

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
        **cli_bands.estimator_params(args),
        "nested": getattr(args, "nested", False),
        "scoring": getattr(args, "scoring", None),
        "rescore": getattr(args, "rescore", None),
        **folds,
    }
    if args.classify:
        balanced = getattr(args, "balanced", False)
        return RidgeClassifierCVCore(class_weight="balanced" if balanced else None, **params)
    return RidgeCVCore(**params)


def _open(args: argparse.Namespace) -> Any:
    from streamridge.sources import open_source

    return open_source(
        args.data,
        x=args.x,
        y=args.y,
        groups=args.groups,
        sample_weight=args.weights,
        chunk_rows=args.chunk_rows,
        storage_options=args.storage_options,
    )


def cmd_fit(args: argparse.Namespace) -> int:
    """``streamridge fit``: one pass, lambda search, save the model, print a summary."""
    from streamridge.io.model_file import save_model
    from streamridge.stats.foldstats import save_stats

    given = fill_pass_defaults(args)
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
    if args.stats is not None:
        est = _fit_from_stats(args, given)
        description = f"statistics file {args.stats}"
    else:
        source = _open(args)
        est = _estimator(args).fit(source)
        description = source.description
    with Transaction(overwrite=args.overwrite) as tx:  # the model and the statistics: both or neither
        with tx.writing(out, "model") as tmp:
            save_model(est, tmp, include_stats=args.include_stats)
        if args.save_stats:
            with tx.writing(targets[1], "stats", "--save-stats") as tmp:
                save_stats(est.stats_, tmp)
    if not args.quiet or args.json:
        summary = fit_summary(est, data=description, model=out)
        emit(summary if args.json else format_fit(summary), as_json=args.json)
    return 0


def _fit_from_stats(args: argparse.Namespace, given: frozenset[str]) -> Any:
    """``fit --stats``: the options checked against the statistics (before a features file is read), then the fit."""
    stats = _read_stats(args.stats)
    check_stats_options(args, given, stats)
    kind = str((stats.meta.get("scheme") or {}).get("kind"))
    if kind == "blocks":
        return _estimator(args, cv="blocks", n_blocks=stats.n_folds).fit_stats(stats)
    return _estimator(args, cv="groups" if kind == "logo" else stats.n_folds).fit_stats(stats)


def check_stats_options(args: argparse.Namespace, given: frozenset[str], stats: Any) -> None:
    """Refuse the options of ``fit --stats`` that would change the model but cannot: the statistics fixed them.

    ``--features`` (the statistics carry their own map, or none), the array names
    ``--x --y --groups --weights`` (no data is read), and fold options that disagree
    with the statistics' folds (``--folds``, ``--blocks``, ``--leave-group-out``,
    ``--seed``) are refused in one line.  Options that shape only the pass
    (``--chunk-rows``, ``--scheduler``, ``--checkpoint``, ``--storage-options``,
    ``--skip-nonfinite``) leave the model as it is and are accepted.

    Parameters
    ----------
    args : the parsed options of ``fit``
    given : names of :data:`streamridge.cli.parser.PASS_DEFAULTS` the user gave
    stats : FoldStats read from ``args.stats``
    """
    if args.features is not None:
        spec = stats.meta.get("features")
        if spec is None:
            held = "without a feature map, so a model fitted from them has none"
        else:
            held = f"with their own map{_map_words(spec)}, which the model uses"
        raise ParameterError(
            f"fit --stats cannot apply --features {args.features}: the statistics in {args.stats} were accumulated "
            f"{held}; drop --features, or compute statistics with it (stats --data ... --features FILE)"
        )
    names = [f"--{n}" for n in ("x", "y") if n in given] + [
        f"--{n}" for n in ("groups", "weights") if getattr(args, n) is not None
    ]
    if names:
        raise ParameterError(
            f"fit --stats reads no data: {', '.join(names)} {'names an array' if len(names) == 1 else 'name arrays'} "
            f"of the data, and the statistics in {args.stats} were accumulated from their own X, y, groups and "
            f"weights; drop {', '.join(names)} (or fit --data with {'it' if len(names) == 1 else 'them'})"
        )
    _check_stats_folds(args, given, stats.meta.get("scheme") or {"kind": "hash", "n_folds": stats.n_folds})


def _map_words(spec: Any) -> str:
    """`` random_hidden(n_units=10, ...)`` from the map of a statistics file's meta (:func:`streamridge.features.to_json`)."""
    from streamridge.features._describe import describe_map_spec

    obj = spec.get("map") if isinstance(spec, dict) else None
    if isinstance(obj, dict) and isinstance(obj.get("params"), dict) and "map" in obj:
        return f" {describe_map_spec(obj)}"
    return ""


def _check_stats_folds(args: argparse.Namespace, given: frozenset[str], scheme: dict[str, Any]) -> None:
    """Refuse fold options of ``fit --stats`` that disagree with the statistics' fold scheme ``scheme``."""
    from streamridge.report.summary import scheme_text

    kind, k, seed = scheme.get("kind"), int(scheme["n_folds"]), int(scheme.get("seed", 0))
    hashed = kind in ("hash", "group")
    asked = []
    if "folds" in given and not (hashed and args.folds == k):
        asked.append(f"--folds {args.folds}")
    if args.blocks is not None and not (kind == "blocks" and args.blocks == k):
        asked.append(f"--blocks {args.blocks}")
    if args.leave_group_out and kind != "logo":
        asked.append("--leave-group-out")
    if "seed" in given and hashed and args.seed != seed:
        asked.append(f"--seed {args.seed}")
    if asked:
        held = f"{k} folds ({scheme_text(scheme)}" + (f", seed {seed})" if hashed else ")")
        raise ParameterError(
            f"fit --stats cannot change the folds: the statistics in {args.stats} hold {held}; "
            f"drop {' '.join(asked)}, or compute statistics with {'it' if len(asked) == 1 else 'them'} (stats --data ...)"
        )


def _read_stats(path: str) -> Any:
    """Statistics from a file of :func:`save_stats`, or embedded in a model file (``--include-stats``)."""
    from streamridge.io.model_file import load_model, read_model
    from streamridge.io.outputs import written_by_streamridge
    from streamridge.stats.foldstats import load_stats

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


def cmd_stats(args: argparse.Namespace) -> int:
    """``streamridge stats``: the data pass only (optionally a row shard), statistics saved atomically."""
    from streamridge.stats.foldstats import save_stats

    fill_pass_defaults(args)
    if args.leave_group_out and args.groups is None:
        raise ParameterError("--leave-group-out needs --groups NAME (the array of group ids)")
    (out,) = check_outputs(
        [Output(args.out, "stats")], [args.data, args.checkpoint], overwrite=args.overwrite
    )
    check_checkpoint(args.checkpoint)
    source = _open(args)
    est = _estimator(args)
    stats = est.compute_stats(source, rows=args.rows)
    with Transaction(overwrite=args.overwrite) as tx, tx.writing(out, "stats") as tmp:
        save_stats(stats, tmp)
    if not args.quiet or args.json:
        t = est.timings_
        facts = {
            "data": source.description,
            "rows": stats.n_rows,
            "row_ranges": stats.meta.get("row_ranges"),
            "features": stats.n_features,
            "folds": stats.n_folds,
            "classes": stats.meta.get("classes"),
            "pass_s": t["pass_s"],
            "rows_per_s": t["rows_per_s"],
            "stats": out,
        }
        text = (
            f"statistics of {facts['rows']:,} rows {facts['row_ranges']} x {facts['features']} features, "
            f"{facts['folds']} folds, pass {t['pass_s']:.2f} s ({t['rows_per_s']:,.0f} rows/s) -> {out}"
        )
        emit(facts if args.json else text, as_json=args.json)
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    """``streamridge merge``: pairwise (Chan) merge of shard statistics; incompatible shards are refused."""
    from streamridge.stats.foldstats import load_stats, merge_all, save_stats

    (out,) = check_outputs([Output(args.out, "stats")], list(args.inputs), overwrite=args.overwrite)
    merged = merge_all([load_stats(p) for p in args.inputs])
    with Transaction(overwrite=args.overwrite) as tx, tx.writing(out, "stats") as tmp:
        save_stats(merged, tmp)
    if not args.quiet or args.json:
        facts = {
            "inputs": list(args.inputs),
            "rows": merged.n_rows,
            "row_ranges": merged.meta.get("row_ranges"),
            "stats": out,
        }
        text = f"merged {len(args.inputs)} files: {merged.n_rows:,} rows {facts['row_ranges']} -> {out}"
        emit(facts if args.json else text, as_json=args.json)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """``streamridge demo``: write the ESN/NARMA-10 data, fit it, test on a held-out series."""
    import numpy as np

    from streamridge.cli.demo import DEMO_ALPHAS, make_esn_narma, nrmse, write_demo
    from streamridge.estimators.ridge import StreamRidgeCV
    from streamridge.io.model_file import save_model
    from streamridge.sources import open_source

    n_series = args.series or (5 if args.quick else 20)
    length = args.rows_per_series or (1000 if args.quick else 5000)
    talk = not (args.quiet or args.json)
    store, model_path = demo_outputs(args.out, overwrite=args.overwrite)
    t0 = time.perf_counter()
    with Transaction(overwrite=args.overwrite) as tx, tx.writing(store, "demo-data") as tmp:
        write_demo(tmp, n_series=n_series, series_length=length, seed=args.seed)
    gen_s = time.perf_counter() - t0
    if talk:
        print(f"wrote {n_series} series x {length} rows of 200 reservoir states to {store} ({gen_s:.2g} s)")
    cv: Any = "groups" if args.folds is None else args.folds
    est = StreamRidgeCV(alphas=DEMO_ALPHAS, cv=cv, progress=talk)
    source = open_source(store, groups="groups")
    est.fit(source)
    with Transaction(overwrite=args.overwrite) as tx, tx.writing(model_path, "model") as tmp:
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
        emit(summary, as_json=True)
    elif not args.quiet:
        print(format_fit(summary))
        print(
            f"test NRMSE  {summary['test_nrmse']:.4f} on a held-out series (another input seed); "
            f"CV NRMSE {summary['cv_nrmse']:.4f}"
        )
    return 0
