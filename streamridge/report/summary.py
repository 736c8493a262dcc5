"""Plain-data summaries of a fitted model and their human-readable text.

:func:`cv_summary` turns the fitted attributes into a JSON-safe dict (stored in
the model header and printed by the command line); :func:`format_fit` and
:func:`format_info` render such dicts as short text.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamridge.stats.foldstats import FoldStats, combine

MAX_FOLD_LINES = 30


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def alpha_indices(alphas: np.ndarray, alpha: Any) -> np.ndarray:
    """Index in ``alphas`` of the chosen lambda (one per target when ``alpha`` is an array)."""
    a = np.atleast_1d(np.asarray(alpha, dtype=np.float64))
    grid = np.log(np.asarray(alphas, dtype=np.float64))
    return np.array([int(np.argmin(np.abs(grid - np.log(v)))) for v in a], dtype=np.int64)


def _edge(alphas: np.ndarray, idx: int) -> str | None:
    if alphas.shape[0] < 2:
        return None
    if idx == int(np.argmin(alphas)):
        return "low"
    if idx == int(np.argmax(alphas)):
        return "high"
    return None


def cv_summary(
    alphas: np.ndarray,
    alpha: Any,
    fold_errors: np.ndarray,
    fold_weight: np.ndarray | None,
    *,
    y_sumsq: np.ndarray | None = None,
) -> dict[str, Any]:
    """Cross-validation facts at the chosen lambda.

    Parameters
    ----------
    alphas : array of shape (n_alphas,)
    alpha : float or array of shape (n_targets,)
    fold_errors : array of shape (n_alphas, n_folds, n_targets)
        Validation squared error per lambda, fold and target.
    fold_weight : array of shape (n_folds,) or (n_folds, n_classes), or None
        Validation weight (row count when unweighted) of every fold.
    y_sumsq : array of shape (n_targets,) or None
        Centered sum of squares of y over all rows, for the CV R^2 (regression).

    Returns
    -------
    dict
        ``alpha``, ``alpha_index``, ``alpha_at_edge`` (None, "low" or "high";
        lists with one lambda per target), ``n_alphas``, ``alpha_min``,
        ``alpha_max``, ``fold_sse``, ``fold_rows``, ``fold_rmse``, ``cv_sse``,
        ``cv_mse``, ``cv_rmse`` and ``cv_r2`` (None when unknown).
    """
    alphas = np.asarray(alphas, dtype=np.float64)
    E = np.asarray(fold_errors, dtype=np.float64)
    R, K, T = E.shape
    idx = alpha_indices(alphas, alpha)
    cols = np.broadcast_to(idx, (T,))
    at = E[cols, :, np.arange(T)]  # (T, K)
    fold_sse = at.sum(axis=0)
    per_target = np.ndim(alpha) > 0
    out: dict[str, Any] = {
        "alpha": np.asarray(alpha, dtype=np.float64).tolist(),
        "alpha_index": idx.tolist() if per_target else int(idx[0]),
        "alpha_at_edge": [_edge(alphas, int(i)) for i in idx] if per_target else _edge(alphas, int(idx[0])),
        "n_alphas": int(R),
        "alpha_min": float(alphas.min()),
        "alpha_max": float(alphas.max()),
        "n_folds": int(K),
        "n_targets": int(T),
        "fold_sse": fold_sse.tolist(),
        "cv_sse": float(fold_sse.sum()),
        "fold_rows": None,
        "fold_rmse": None,
        "cv_mse": None,
        "cv_rmse": None,
        "cv_r2": None,
    }
    if fold_weight is not None:
        w = np.asarray(fold_weight, dtype=np.float64).reshape(K, -1).sum(axis=1)
        safe = np.where(w > 0, w, np.nan)
        with np.errstate(invalid="ignore", divide="ignore"):
            out["fold_rows"] = w.tolist()
            out["fold_rmse"] = [_finite(v) for v in np.sqrt(fold_sse / (safe * T))]
            mse = fold_sse.sum() / (w.sum() * T) if w.sum() > 0 else np.nan
        out["cv_mse"] = _finite(mse)
        out["cv_rmse"] = _finite(np.sqrt(mse))
    if y_sumsq is not None:
        ss = float(np.sum(y_sumsq))
        out["cv_r2"] = _finite(1.0 - fold_sse.sum() / ss) if ss > 0 else None
    return out


def estimator_summary(estimator: Any) -> dict[str, Any]:
    """:func:`cv_summary` of a fitted estimator (uses ``stats_`` when present)."""
    stats: FoldStats | None = getattr(estimator, "stats_", None)
    fold_weight = stats.weight if stats is not None else getattr(estimator, "_fold_weight", None)
    spec = getattr(estimator, "_spec", None)
    skip = (
        0 if spec is None else spec.scheme.train_only
    )  # explicit splits: fold 0 may be trained on, never validated
    if fold_weight is not None:
        fold_weight = np.asarray(fold_weight)[skip:]
    y_sumsq = None
    if stats is not None and stats.meta.get("task", "regression") == "regression":
        validated = np.ones(stats.weight.shape, dtype=bool)
        validated[:skip] = False
        y_sumsq = combine(stats, validated).syy[0, 0]
    return cv_summary(
        estimator.alphas_, estimator.alpha_, estimator.fold_errors_, fold_weight, y_sumsq=y_sumsq
    )


def band_summary(estimator: Any) -> dict[str, Any] | None:
    """JSON-safe facts of a banded model: per band its size, the mean chosen weight, the targets it leads, its CV R².

    Returns
    -------
    dict or None
        ``names``, ``sizes``, ``n_candidates``, ``mean_weight`` (over targets),
        ``leading`` (targets whose largest weight is that band's), and
        ``cv_r2`` (mean over targets of ``band_cv_r2_``) where known; None without bands.
    """
    bands = getattr(estimator, "bands_", None)
    if bands is None:
        return None
    W = np.atleast_2d(np.asarray(estimator.band_weights_, dtype=np.float64))
    r2 = getattr(estimator, "band_cv_r2_", None)
    return {
        "names": [str(n) for n in estimator.band_names_],
        "sizes": [len(c) for c in bands],
        "n_candidates": int(np.asarray(estimator.band_weight_candidates_).shape[0]),
        "mean_weight": [float(v) for v in W.mean(axis=0)],
        "leading": [int(v) for v in np.bincount(W.argmax(axis=1), minlength=W.shape[1])],
        "cv_r2": None
        if r2 is None
        else [float(v) for v in np.asarray(r2).reshape(len(bands), -1).mean(axis=1)],
    }


# ---------------------------------------------------------------------- text
def _g(x: Any, digits: int = 4) -> str:
    return "n/a" if x is None else f"{x:.{digits}g}"


def _rate(x: Any) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x:,.0f}"


def _lambda_lines(cv: dict[str, Any]) -> list[str]:
    grid = f"grid of {cv['n_alphas']} from {_g(cv['alpha_min'], 3)} to {_g(cv['alpha_max'], 3)}"
    if isinstance(cv["alpha"], list):
        a = np.asarray(cv["alpha"])
        lines = [f"lambda      one per target: {_g(a.min())} .. {_g(a.max())} ({grid})"]
        edges = [e for e in cv["alpha_at_edge"] if e]
        if edges:
            lines.append(
                f"            warning: {len(edges)} target(s) chose a lambda at the grid edge; widen --alphas"
            )
        return lines
    lines = [f"lambda      {_g(cv['alpha'])} (index {cv['alpha_index']} of {cv['n_alphas']}; {grid})"]
    if cv["alpha_at_edge"] == "low":
        lines.append(
            "            warning: lambda is the smallest in the grid; extend --alphas to smaller values"
        )
    elif cv["alpha_at_edge"] == "high":
        lines.append(
            "            warning: lambda is the largest in the grid; extend --alphas to larger values"
        )
    return lines


def _fold_lines(cv: dict[str, Any]) -> list[str]:
    K = cv["n_folds"]
    rows = cv["fold_rows"] or [None] * K
    rmse = cv["fold_rmse"] or [None] * K
    lines = ["CV error    fold       rows          SSE       RMSE"]
    show = range(K) if K <= MAX_FOLD_LINES else [*range(10), -1, *range(K - 3, K)]
    for k in show:
        if k == -1:
            lines.append(f"            ... ({K - 13} more folds)")
            continue
        n = "n/a" if rows[k] is None else f"{rows[k]:,.0f}"
        lines.append(f"            {k:>4} {n:>10} {_g(cv['fold_sse'][k]):>12} {_g(rmse[k]):>10}")
    r2 = "" if cv.get("cv_r2") is None else f"  R^2 {cv['cv_r2']:.4f}"
    lines.append(f"total CV    SSE {_g(cv['cv_sse'])}  MSE {_g(cv['cv_mse'])}  RMSE {_g(cv['cv_rmse'])}{r2}")
    return lines


def band_lines(bands: dict[str, Any] | None) -> list[str]:
    """Lines of a banded model's summary (:func:`band_summary`); none without bands."""
    if not bands:
        return []
    n = sum(bands["leading"])
    lines = [
        f"bands       {len(bands['names'])} bands, {bands['n_candidates']} weight vectors searched"
        + (f"; {n} targets" if n > 1 else ""),
        "            band                 features  mean weight  leads targets  CV R^2",
    ]
    r2 = bands.get("cv_r2") or [None] * len(bands["names"])
    for name, size, w, lead, r in zip(
        bands["names"], bands["sizes"], bands["mean_weight"], bands["leading"], r2
    ):
        lines.append(f"            {name[:20]:<20} {size:>9} {w:>12.3f} {lead:>14} {_g(r):>7}")
    return lines


def format_fit(summary: dict[str, Any]) -> str:
    """Text of the ``streamridge fit`` summary (see the CLI for the keys)."""
    cv = summary["cv"]
    t = summary.get("timings") or {}
    lines = [
        f"data        {summary['data']}",
        f"rows        {_rate(summary['rows'])}   features {summary['features']}   targets {summary['targets']}",
    ]
    if summary.get("classes") is not None:
        lines.append(f"classes     {summary['classes']}")
    lines.append(f"folds       {summary['folds']} ({summary['fold_scheme']})")
    lines += _lambda_lines(cv)
    if summary.get("selected_features") is not None:
        sel = summary["selected_features"]
        lines.append(f"selected    {len(sel)} feature(s): {_short(sel)}")
    lines += _fold_lines(cv)
    lines += band_lines(summary.get("bands"))
    lines += nested_lines(summary.get("nested"))
    lines += score_lines(summary.get("scores"))
    if t.get("rows"):
        lines.append(
            f"time        pass {_g(t.get('pass_s'), 3)} s ({_rate(t.get('rows_per_s'))} rows/s), "
            f"solve {_g(t.get('solve_s'), 3)} s"
            + (f", peak memory {t['peak_rss_mb']:,.0f} MB" if t.get("peak_rss_mb") else "")
        )
    else:
        lines.append(f"time        solve {_g(t.get('solve_s'), 3)} s (no pass: fit from statistics)")
    lines.append(f"model       {summary['model']}")
    return "\n".join(lines)


def nested_lines(nested: dict[str, Any] | None) -> list[str]:
    """Lines of a nested CV summary (:func:`streamridge.model_selection.nested.nested_summary`); none without one."""
    if not nested:
        return []
    K = len(nested.get("n_features") or [])
    return [
        f"nested CV   SSE {_g(nested['nested_cv_error'])} (std error {_g(nested['std_error'])} over {K} outer folds; "
        f"per fold mean {_g(nested['fold_mean'])}, sd {_g(nested['fold_std'])})",
        f"            plain CV SSE {_g(nested['cv_error'])} of the chosen model is {100 * nested['optimism']:.1f}% "
        "below it (the same folds chose and scored it)",
    ]


def candidate_lines(table: list[dict[str, Any]] | None) -> list[str]:
    """Lines of the candidate feature maps' results (``candidates_``): each candidate's parameters that vary,
    lambda and CV error, then per parameter value the best CV error; none without candidates."""
    if not table:
        return []
    from streamridge.model_selection.candidates import per_parameter, varied_params

    names = varied_params([row["params"] for row in table])
    lines = [f"candidates  {len(table)} feature maps in one pass; * chosen, + within 1 SE of it"]
    for row in table:
        mark = "*" if row["chosen"] else "+" if row["within_1se"] else " "
        params = " ".join(f"{n}={row['params'].get(n)}" for n in names)
        alpha = row["alpha"] if isinstance(row["alpha"], list) else _g(row["alpha"])
        lines.append(f"          {mark} {params}  lambda {alpha}  CV SSE {_g(row['cv_error'])}")
    for name, values in per_parameter(table).items():
        lines.append(f"            {name}: " + ", ".join(f"{v} -> {_g(e)}" for v, e in values))
    return lines


def score_lines(scores: dict[str, Any] | None) -> list[str]:
    """Lines of a metric summary (:func:`streamridge.model_selection.scoring.score_summary`); none without one."""
    if not scores:
        return []
    lines = [
        f"scoring     {scores['scoring']} {_g(scores['score'])} at the chosen lambda (std error "
        f"{_g(scores['std_error'])} over folds; best mean on the grid {_g(scores['best_on_grid'])})"
    ]
    if scores.get("note"):
        lines.append(f"            {scores['note']}")
    if scores.get("per_class_error"):
        lines.append("            per-class error " + ", ".join(_g(e) for e in scores["per_class_error"]))
    if scores.get("rescore_steps"):
        pairs = ", ".join(f"{i}: {_g(v)}" for i, v in zip(scores["rescore_steps"], scores["rescore_scores"]))
        lines.append(f"rescored    path steps {pairs}")
    return lines


def _short(values: list[Any], n: int = 10) -> str:
    text = ", ".join(str(v) for v in values[:n])
    return text + (f", ... ({len(values) - n} more)" if len(values) > n else "")


def scheme_text(scheme: dict[str, Any]) -> str:
    """Words for a fold scheme dict (``FoldScheme.to_dict()``)."""
    kind = scheme.get("kind")
    if kind == "splits":
        form = "forward chaining" if scheme.get("training") == "forward" else "K-fold"
        return f"given splits, {form}" + (", plus rows never validated" if scheme.get("train_only") else "")
    return {
        "hash": "rows hashed to folds",
        "group": "groups hashed to folds",
        "logo": "leave one group out",
        "blocks": "contiguous blocks",
    }.get(str(kind), str(kind))


def format_info(header: dict[str, Any], path: str) -> str:
    """Text of ``streamridge info`` from a model header."""
    params = header.get("params", {})
    names = header.get("feature_names")
    lines = [
        f"model       {path}",
        f"format      {header['format']} v{header['format_version']} (streamridge {header.get('streamridge_version')})",
        f"estimator   {header['estimator']} ({header.get('task')})",
        *_options_lines(params),
        _features_line(header, names),
        f"targets     {header['n_targets']}"
        + (f": {_short(header['target_names'])}" if header.get("target_names") else ""),
    ]
    if header.get("classes") is not None:
        lines.append(f"classes     {header['classes']}")
    rows = header.get("n_rows")
    lines.append(
        f"folds       {header['n_folds']} ({scheme_text(header.get('scheme', {}))})"
        + (f"   rows {rows:,}" if rows is not None else "")
    )
    cv = header.get("cv_summary")
    if cv:
        lines += _lambda_lines(cv)
        lines += _fold_lines(cv)
    lines += candidate_lines(header.get("candidates"))
    lines += band_lines(header.get("band_summary"))
    lines += nested_lines(header.get("nested_summary"))
    lines += score_lines(header.get("score_summary"))
    lines += _path_lines(
        header.get("selection_path"), header.get("feature_names"), header.get("selection_best_step")
    )
    if header.get("selected_features") is not None:
        lines.append(f"selected    {_short(header['selected_features'])}")
    lines.append(f"statistics  {'embedded (re-selectable)' if header.get('has_stats') else 'not embedded'}")
    lines.append(
        "more        CV curve per fold, selection path, classes and coefficients as plots in one HTML file:"
    )
    lines.append(f"            streamridge report {path}")
    return "\n".join(lines)


def _features_line(header: dict[str, Any], names: list[str] | None) -> str:
    """``features`` line: the model's features (the map's outputs when a feature map made them)."""
    width = header.get("n_model_features")
    if width is not None and width != header["n_features_in"]:
        return f"features    {header['n_features_in']} inputs -> {width} mapped" + (
            f": {_short(names)}" if names else ""
        )
    return f"features    {header['n_features_in']}" + (f": {_short(names)}" if names else "")


def _options_lines(params: dict[str, Any], width: int = 100) -> list[str]:
    """``name=value`` of the options that are set (not None), wrapped under an ``options`` label."""
    import textwrap

    items = [f"{k}={option_text(v)}" for k, v in sorted(params.items()) if v is not None]
    text = "; ".join(items) + " (others None)"
    return textwrap.wrap(
        text,
        width=width,
        initial_indent="options     ",
        subsequent_indent=" " * 12,
        break_long_words=False,
        break_on_hyphens=False,
    )


def option_text(value: Any) -> str:
    """Compact text of an estimator option: a long numeric list becomes its size, spacing and range.

    Examples: ``25 values, log-spaced 1e-10 .. 100``; short lists and scalars as
    ``repr`` (floats with 4 significant digits).
    """
    if isinstance(value, float):
        return _g(value)
    if not isinstance(value, (list, tuple)) or len(value) <= 4:
        return repr(value)
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        return f"[{', '.join(repr(v) for v in value[:3])}, ... ({len(value)} values)]"
    a = np.asarray(value, dtype=np.float64)
    lo, hi = _g(float(a[0])), _g(float(a[-1]))
    steps = np.diff(a)
    if np.all(a > 0) and np.allclose(np.diff(np.log(a)), np.log(a[1] / a[0]), rtol=1e-6, atol=0):
        return f"{a.size} values, log-spaced {lo} .. {hi}"
    if np.allclose(steps, steps[0], rtol=1e-6, atol=0):
        return f"{a.size} values, evenly spaced {lo} .. {hi}"
    return f"{a.size} values, {_g(float(a.min()))} .. {_g(float(a.max()))}"


def _path_steps(obj: Any) -> list[dict[str, Any]]:
    """Steps (dicts) of a selection path as stored in a model header (``model_io.encode_path``)."""
    if not isinstance(obj, dict):
        return []
    value = obj.get("value")
    if obj.get("kind") == "result" and isinstance(value, dict):
        return list(value.get("steps") or [])
    if obj.get("kind") in ("steps", "table") and isinstance(value, list):
        return value
    return []


def _path_lines(obj: Any, names: list[str] | None, best: int | None = None) -> list[str]:
    if obj is None:
        return []
    steps = _path_steps(obj)
    if not steps:
        return [f"selection   {obj.get('value') if isinstance(obj, dict) else obj}"]
    if obj.get("kind") == "result":
        best = obj["value"].get("best_step")
    lines = [f"selection   {len(steps)} step(s)       feature  n_features     CV error    lambda"]
    for i, step in enumerate(steps[:MAX_FOLD_LINES]):
        f = int(step.get("feature", -1))
        name = "(start)" if f < 0 else (names[f] if names and f < len(names) else str(f))
        alpha = step.get("alpha")
        a = _g(alpha) if not isinstance(alpha, list) else f"{_g(min(alpha))}..{_g(max(alpha))}"
        mark = " *" if i == best else ""
        lines.append(
            f"            {i:>4} {name:>16} {step.get('n_features'):>11} {_g(step.get('cv_error')):>12} {a:>9}{mark}"
        )
    if len(steps) > MAX_FOLD_LINES:
        lines.append(f"            ... ({len(steps) - MAX_FOLD_LINES} more steps)")
    return lines
