"""The sections of ``streamridge report``: each a title, a figure and HTML text, or the reason it is left out.

Data and pass summary; CV error against lambda; lambda per target; band weights
and per-band R² of a banded model; nested CV and scores; selection path; prefix curve; classes; coefficients.  Each is built from a
loaded model and its header only when the model holds what it needs; figures come
from :mod:`streamridge.report.plot` (as PNG bytes), their numbers from
:mod:`streamridge.report.plot_data`.  :mod:`streamridge.report.html` puts them in one document.
"""

from __future__ import annotations

import html
import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from streamridge.io.output_kinds import REPORT_GENERATOR as GENERATOR
from streamridge.report import plot_data
from streamridge.report.summary import estimator_summary, scheme_text

MAX_TABLE_ROWS = 40
#: height in inches of a figure with one bar (or label) per line, per line, and at most
LINE_INCHES, MAX_FIGURE_INCHES = 0.2, 24.0
#: the sections that can have a figure (``--png DIR`` writes ``DIR/<key>.png``)
FIGURE_KEYS = ("lambda", "targets", "bands", "bands_r2", "selection", "prefix", "classes", "coefficients")


@dataclass
class Section:
    """One part of the report: a title, an optional figure (PNG bytes) and HTML text."""

    key: str
    title: str
    body: str = ""
    png: bytes | None = None
    omitted: str | None = None  # the reason, when the section does not apply


# ---------------------------------------------------------------------- helpers
def _figure(draw: Callable[[Any], Any], *, size: tuple[float, float] = (7.5, 4.2)) -> bytes:
    """Render ``draw(ax)`` on a fresh Agg figure (no pyplot state) and return PNG bytes.

    The figure is laid out tight at every draw, so a plot that measures its labels
    (:func:`streamridge.report.plot.thin_tick_labels`) measures them where they are saved.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, dpi=110, layout="tight")
    FigureCanvasAgg(fig)
    draw(fig.add_subplot())
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": GENERATOR})
    return buf.getvalue()


def _g(x: Any, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "n/a"
    return f"{float(x):.{digits}g}"


def _table(header: list[str], rows: list[list[Any]], *, limit: int = MAX_TABLE_ROWS) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = [
        "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>" for row in rows[:limit]
    ]
    more = f"<p class='note'>… {len(rows) - limit} more rows not shown.</p>" if len(rows) > limit else ""
    return f"<table><tr>{head}</tr>{''.join(body)}</table>{more}"


def _p(text: str, cls: str = "") -> str:
    return f"<p{f' class={cls!r}' if cls else ''}>{html.escape(text)}</p>"


# ---------------------------------------------------------------------- sections
def summary_section(model: Any, header: dict[str, Any], path: str) -> Section:
    """Data and pass summary: rows, features, folds and their sizes, timings, source."""
    t = dict(getattr(model, "timings_", {}) or {})
    W = plot_data.fold_weight(model)
    rows = [
        ["model file", path],
        [
            "estimator",
            f"{header.get('estimator')} ({header.get('task')}), streamridge {header.get('streamridge_version')}",
        ],
        ["source", header.get("source") or "not recorded in this model file"],
        ["rows", "n/a" if header.get("n_rows") is None else f"{int(header['n_rows']):,}"],
        ["features", _features_text(model, header)],
        ["targets", int(header.get("n_targets") or 1)],
        ["folds", f"{model.n_folds_} ({scheme_text(header.get('scheme') or {})})"],
        [
            "pass time",
            "no pass (fit from statistics)" if not t.get("rows") else f"{_g(t.get('pass_s'), 3)} s",
        ],
        ["rows/s", "n/a" if not t.get("rows") else f"{t.get('rows_per_s', float('nan')):,.0f}"],
        ["solve time", f"{_g(t.get('solve_s'), 3)} s"],
        [
            "peak memory",
            "n/a"
            if not t.get("peak_rss_mb") or not np.isfinite(t["peak_rss_mb"])
            else f"{t['peak_rss_mb']:,.0f} MB",
        ],
    ]
    body = _table(["", ""], [[k, v] for k, v in rows])
    counts = _fold_counts(header, int(model.n_folds_))
    if W is not None:
        fold_rows = [[k, f"{w:,.6g}"] for k, w in enumerate(W.sum(axis=1))]
        if counts is not None:
            fold_rows = [[*r, f"{c:,.0f}"] for r, c in zip(fold_rows, counts)]
        body += "<h3>Fold sizes</h3>" + _p("Validation weight of every fold (its row count when unweighted).")
        body += _table(["fold", "weight", *(["rows"] if counts is not None else [])], fold_rows)
    else:
        body += _p("Fold sizes are not stored in this model file.", "note")
    return Section("summary", "Data and pass", body)


def _features_text(model: Any, header: dict[str, Any]) -> str:
    width = int(np.atleast_2d(np.asarray(model.coef_)).shape[1])
    if width == int(model.n_features_in_):
        return str(width)
    fmap = header.get("features")
    name = fmap.get("map") if isinstance(fmap, dict) else None
    return f"{model.n_features_in_} inputs, mapped to {width} features" + (f" ({name})" if name else "")


def _fold_counts(header: dict[str, Any], n_folds: int) -> np.ndarray | None:
    """Rows per fold from the header's ``fold_count`` (absent in older model files)."""
    try:
        counts = np.asarray(header.get("fold_count"), dtype=np.float64)
    except (TypeError, ValueError):
        return None
    return (
        counts.reshape(n_folds, -1).sum(axis=1) if counts.ndim == 2 and counts.shape[0] == n_folds else None
    )


def lambda_section(model: Any) -> Section:
    """CV error against lambda, per fold, chosen lambda, 1-SE band and edge warning."""
    from streamridge.report import plot

    c = plot_data.lambda_curve(model)
    cv = estimator_summary(model)
    alpha = model.alpha_
    chosen = (
        f"{_g(alpha)}"
        if np.ndim(alpha) == 0
        else f"one per target, {_g(np.min(alpha))} .. {_g(np.max(alpha))}"
    )
    rule = getattr(model, "alpha_rule", "min")
    lines = [
        f"Chosen lambda: {chosen} (rule: {'one standard error' if rule == '1se' else 'smallest CV error'}).",
        f"Grid: {c.alphas.shape[0]} values from {_g(c.alphas[0])} to {_g(c.alphas[-1])}.",
        f"Smallest total CV error {_g(c.total[c.best])} at lambda {_g(c.alphas[c.best])}; "
        f"one standard error over folds {_g(c.std_error)} (band up to {_g(c.threshold)}).",
    ]
    if cv.get("cv_rmse") is not None:
        lines.append(
            f"CV RMSE at the chosen lambda {_g(cv['cv_rmse'])}"
            + (f", CV R² {cv['cv_r2']:.4f}." if cv.get("cv_r2") is not None else ".")
        )
    body = "".join(_p(s) for s in lines)
    if c.edge is not None:
        body += _p(
            f"Warning: the smallest CV error is at the {c.edge} edge of the lambda grid; "
            f"extend the grid ({'smaller' if c.edge == 'low' else 'larger'} values) with --alphas.",
            "warn",
        )
    png = _figure(lambda ax: plot.cv_curve(model, ax))
    return Section("lambda", "CV error against lambda", body, png)


def targets_section(model: Any) -> Section:
    """Per-target lambda and CV error (histogram of lambdas)."""
    from streamridge.report import plot

    data = plot_data.target_alphas(model)
    if data is None:
        return Section(
            "targets",
            "Lambda per target",
            omitted="the model has one lambda for all targets (alpha_per_target was off).",
        )
    alphas, errors = data
    names = plot_data.target_names(model, alphas.shape[0])
    rows = [[names[t], _g(alphas[t]), _g(errors[t])] for t in range(alphas.shape[0])]
    body = _p(f"{alphas.shape[0]} targets, lambdas from {_g(alphas.min())} to {_g(alphas.max())}.")
    grid = np.asarray(model.alphas_, dtype=np.float64)
    edge = (
        int(np.sum(np.isclose(alphas, grid.min()) | np.isclose(alphas, grid.max()))) if grid.size > 1 else 0
    )
    if edge:
        body += _p(f"Warning: {edge} target(s) chose a lambda at an end of the grid; widen --alphas.", "warn")
    body += _table(["target", "lambda", "CV squared error"], rows)
    return Section("targets", "Lambda per target", body, _figure(lambda ax: plot.target_alphas(model, ax)))


def bands_section(model: Any) -> list[Section]:
    """A banded model's weights per target (simplex or histograms) and its per-band CV R²."""
    from streamridge.report import plot

    data = plot_data.band_weights(model)
    if data is None:
        return [Section("bands", "Band weights", omitted="the model was fitted without bands.")]
    W, T = data.weights, data.weights.shape[0]
    lead = np.bincount(W.argmax(axis=1), minlength=W.shape[1])
    r2 = [None] * len(data.names) if data.r2 is None else data.r2.mean(axis=1)
    rows = [
        [name, len(model.bands_[b]), _g(W[:, b].mean()), int(lead[b]), _g(r2[b])]
        for b, name in enumerate(data.names)
    ]
    body = _p(
        f"{len(data.names)} bands, {np.asarray(model.band_weight_candidates_).shape[0]} weight vectors searched, "
        f"{T} target(s).  A weight scales its band's kernel: the band's penalty is lambda / weight."
    )
    body += _table(["band", "features", "mean weight", "leads targets", "mean CV R²"], rows)
    out = [Section("bands", "Band weights", body, _figure(lambda ax: plot.band_weights(model, ax)))]
    if data.r2 is not None:
        text = _p(
            "Cross-validated R² of every band per target: the fold models split by band, each band's part "
            "scored on the validation rows (product measure); the bands' R² sum to the model's."
        )
        out.append(Section("bands_r2", "R² per band", text, _figure(lambda ax: plot.band_r2(model, ax))))
    return out


def nested_section(model: Any) -> Section:
    """Nested CV errors and CV scores when the model carries them."""
    nested = getattr(model, "nested_cv_errors_", None)
    scores = getattr(model, "cv_scores_", None)
    if nested is None and scores is None:
        return Section(
            "nested",
            "Nested CV and scores",
            omitted="the model carries no nested_cv_errors_ or cv_scores_ (fitted without nested CV or metrics).",
        )
    body = ""
    if nested is not None:
        v = np.asarray(nested, dtype=np.float64)
        v = v.reshape(v.shape[0], -1).sum(axis=1)
        body += _p(
            f"Nested CV error per outer fold (summed over targets): mean {_g(np.mean(v))}, "
            f"spread (std) {_g(np.std(v))}."
        )
        summary = getattr(model, "nested_summary_", None)
        if isinstance(summary, dict):
            body += _table(
                ["nested summary", ""],
                [[k, _g(x) if isinstance(x, float) else x] for k, x in summary.items()],
            )
        body += _table(["outer fold", "error"], [[k, _g(e)] for k, e in enumerate(v)])
    if scores is not None:
        s = np.asarray(scores, dtype=np.float64)
        body += _p(f"cv_scores_ has shape {s.shape}; mean over all entries {_g(np.nanmean(s))}.")
    return Section("nested", "Nested CV and scores", body)


def candidates_section(model: Any) -> Section:
    """The candidate feature maps: CV error per candidate, and the best per parameter value."""
    table = getattr(model, "candidates_", None)
    if not table:
        return Section("candidates", "Candidate feature maps", "", omitted="fitted with one feature map")
    from streamridge.model_selection.candidates import per_parameter, varied_params

    names = varied_params([row["params"] for row in table])
    rows = [
        [*(row["params"].get(n) for n in names), row["alpha"], _g(row["cv_error"]), _g(row["std_error"]),
         "yes" if row["within_1se"] else "no", "chosen" if row["chosen"] else ""]
        for row in table
    ]  # fmt: skip
    body = _table([*names, "lambda", "CV error", "std error", "within 1 SE", ""], rows)
    for name, values in per_parameter(table).items():
        body += _table([name, "best CV error"], [[v, _g(e)] for v, e in values])
    return Section("candidates", "Candidate feature maps", body)


def selection_section(model: Any) -> Section:
    """Selection path with the feature entering or leaving at every step."""
    from streamridge.report import plot

    s = plot_data.selection_steps(model)
    if s is None:
        return Section(
            "selection",
            "Selection path",
            omitted="no feature selection ran (fit with --select forward|backward|op-rr).",
        )
    names = plot_data.feature_names(model)
    verb = "left" if s.direction == "backward" else "entered"
    rows = []
    for i in range(len(s.feature)):
        f = int(s.feature[i])
        what = "(starting set)" if f < 0 else f"{names[f] if f < len(names) else f} {verb}"
        mark = "chosen" if i == s.best else ""
        rows.append(
            [i, what, int(s.n_features[i]), _g(s.cv_error[i]), _g(s.std_error[i]), _g(s.alpha[i]), mark]
        )
    body = _p(
        f"{s.direction or 'selection'} path of {len(s.feature)} steps; chosen step {s.best} "
        f"with {int(s.n_features[s.best]) if s.best is not None else 'n/a'} features; 1-SE threshold {_g(s.threshold)}."
    )
    body += _p("Only the direction that was run is stored in the model file.", "note")
    body += _table(["step", "feature", "features", "CV error", "std error", "lambda", ""], rows)
    return Section(
        "selection",
        "Selection path",
        body,
        _figure(lambda ax: plot.selection_path(model, ax), size=(7.5, 4.8)),
    )


def prefix_section(model: Any) -> Section:
    """Prefix curve (error against number of leading units) when prefixes were searched."""
    from streamridge.report import plot

    data = plot_data.prefix_curve(model)
    if data is None:
        return Section(
            "prefix",
            "Prefix curve",
            omitted="the model was fitted without feature prefixes (no prefix_errors_).",
        )
    sizes, errors = data
    lam = getattr(model, "prefix_alphas_", None)
    lam = np.asarray(lam, dtype=np.float64) if lam is not None and np.size(lam) == sizes.shape[0] else None
    chosen = getattr(model, "n_features_selected_", None)
    rows = [
        [int(n), _g(e), *([_g(lam[i])] if lam is not None else []), "chosen" if n == chosen else ""]
        for i, (n, e) in enumerate(zip(sizes, errors))
    ]
    body = _p(
        f"Prefix size and lambda chosen jointly by CV; chosen size {chosen if chosen is not None else 'n/a'}."
    )
    body += _table(["leading features", "CV error", *(["lambda"] if lam is not None else []), ""], rows)
    return Section("prefix", "Prefix curve", body, _figure(lambda ax: plot.prefix_curve(model, ax)))


CONFUSION_WHY = (
    "Confusion counts are not shown: they need the sign or arg-max of every validation row's score, "
    "and the statistics (counts, means and second moments per fold and class) do not determine them. "
    "Run `streamridge predict` on labelled held-out data for a confusion matrix."
)


def classes_section(model: Any) -> Section:
    """Per-class sizes, weights and validation error of the one-vs-rest targets."""
    from streamridge.report import plot

    t = plot_data.class_table(model)
    if t is None:
        return Section("classes", "Classes", omitted="the model is a regressor, not a classifier.")
    mse = plot_data.class_validation_mse(model)
    rows = [[lab, f"{w:,.6g}", _g(f)] for lab, w, f in zip(t.labels, t.weight, t.factor)]
    header = ["class", "weight (rows when unweighted)", "class weight factor"]
    if mse is not None:
        header.append("validation MSE on its rows")
        rows = [[*r, _g(e)] for r, e in zip(rows, mse)]
    body = _p(
        f"class_weight={getattr(model, 'class_weight', None)!r}; weight factor n / (C n_c) with balanced (CRRR)."
    )
    body += _table(header, rows)
    if mse is None:
        body += _p(
            "The validation error on each class's rows needs the statistics per fold and class, which this "
            "model file does not hold; write it with --include-stats.",
            "note",
        )
    else:
        body += _p(
            "Validation MSE on its rows: each fold's model (chosen lambda) scored on that fold's rows of the "
            "class, mean squared error of the ±1 targets, from the statistics per fold and class.",
            "note",
        )
    body += _table(
        ["±1 target", "CV squared error"], [[lab, _g(e)] for lab, e in zip(t.target_labels, t.target_error)]
    )
    cm = plot_data.confusion_counts(model)
    if cm is None:
        body += _p(CONFUSION_WHY, "note")
    else:
        body += "<h3>Confusion counts from the CV folds</h3>" + _p(
            "Rows: true class; columns: predicted (weighted counts, all folds)."
        )
        body += _table(
            ["true \\ predicted", *t.labels],
            [[lab, *(f"{v:,.6g}" for v in row)] for lab, row in zip(t.labels, cm)],
        )
    lines = 1.6 + LINE_INCHES * len(t.target_labels)  # when the bars are horizontal, one class per line
    size = (7.5, max(4.2, min(MAX_FIGURE_INCHES, lines)))
    return Section("classes", "Classes", body, _figure(lambda ax: plot.class_errors(model, ax), size=size))


def coefficients_section(model: Any, *, top: int = 20) -> Section:
    """Top coefficients by absolute value, with names, and the intercept."""
    from streamridge.report import plot

    names, values = plot_data.top_coefficients(model, top=top)
    intercept = np.atleast_1d(np.asarray(model.intercept_, dtype=np.float64))
    n_targets = np.atleast_2d(model.coef_).shape[0]
    body = _p(
        f"Intercept: {', '.join(_g(b) for b in intercept[:10])}" + (" …" if intercept.size > 10 else "")
    )
    if n_targets > 1:
        body += _p(f"Showing target 0 of {n_targets}.", "note")
    body += _table(["feature", "coefficient"], [[n, _g(v)] for n, v in zip(names, values)])
    return Section(
        "coefficients",
        f"Top {len(names)} coefficients by |coef|",
        body,
        _figure(lambda ax: plot.coefficients(model, ax, top=top), size=(7.5, 0.25 * len(names) + 1.5)),
    )
