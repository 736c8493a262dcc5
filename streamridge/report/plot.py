"""matplotlib figures of a fitted model: CV curve, selection path, prefix curve, classes, coefficients.

Needs the optional extra ``pip install "streamridge[plot]"``.  Every function
takes a fitted estimator (or one loaded with :func:`streamridge.load_model`) and
an optional matplotlib ``Axes`` and returns the Axes it drew on.  The plotted
numbers are the model's own: e.g. the first line of :func:`cv_curve` is
``cv_errors_`` (summed over targets) against ``alphas_``.

Examples
--------
>>> import streamridge as sr
>>> from streamridge.report import plot
>>> model = sr.load_model("model.npz")          # doctest: +SKIP
>>> ax = plot.cv_curve(model)                   # doctest: +SKIP
>>> ax.figure.savefig("cv.png")                 # doctest: +SKIP
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from streamridge.errors import StreamRidgeError
from streamridge.report import plot_data

__all__ = [
    "MissingDependencyError",
    "band_r2",
    "band_weights",
    "class_errors",
    "coefficients",
    "cv_curve",
    "prefix_curve",
    "selection_path",
    "target_alphas",
]

#: at most this many step labels are written on a selection path
MAX_PATH_LABELS = 25
#: at most this many classes are drawn as columns (more: horizontal bars, one label per line)
MAX_COLUMNS = 12
#: columns need about this many characters of the widest label line, times the number of classes
MAX_COLUMN_CHARS = 96


class MissingDependencyError(StreamRidgeError, ImportError):
    """An optional dependency (matplotlib) is not installed."""


def require_matplotlib() -> None:
    """Raise :class:`MissingDependencyError` with the install command when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise MissingDependencyError(
            'plots need matplotlib, which is not installed; install it with pip install "streamridge[plot]"'
        ) from None


def _axes(ax: Any) -> Any:
    require_matplotlib()
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(7, 4.2))[1]


class NothingToPlotError(StreamRidgeError, ValueError):
    """The model does not hold what the plot needs (no selection path, no prefixes, not a classifier)."""


# ---------------------------------------------------------------------- lambda
def cv_curve(model: Any, ax: Any = None, *, folds: bool = True) -> Any:
    """CV error against lambda: total, every fold, the chosen lambda and the 1-SE band.

    Parameters
    ----------
    model : fitted StreamRidgeCV or StreamRidgeClassifierCV
    ax : matplotlib Axes or None
        Draw here (default: a new figure).
    folds : bool
        Also draw each fold's validation error (thin lines).

    Returns
    -------
    matplotlib Axes
        ``ax.lines[0]`` is the total CV error (label "total CV error"): x =
        sorted ``alphas_``, y = ``cv_errors_`` summed over targets; with
        ``folds`` the next K lines are the folds (labels "fold k").  Both axes
        are logarithmic.
    """
    ax = _axes(ax)
    c = plot_data.lambda_curve(model)
    ax.plot(c.alphas, c.total, "o-", color="C0", lw=2, ms=3, label="total CV error", zorder=3)
    if folds:
        for k in range(c.folds.shape[1]):
            ax.plot(c.alphas, c.folds[:, k], "-", color="0.6", lw=0.7, alpha=0.7, label=f"fold {k}", zorder=2)
    ax.axhspan(c.total[c.best], c.threshold, color="C1", alpha=0.15, label="1-SE band of the minimum")
    chosen = np.unique(c.chosen)
    for i, j in enumerate(chosen[:50]):
        ax.axvline(c.alphas[j], color="C3", ls="--", lw=1.2, label="chosen lambda" if i == 0 else None)
    if c.edge is not None:
        ax.set_title(
            f"warning: the minimum is at the {c.edge} edge of the grid; widen it", color="C3", fontsize=10
        )
    ax.set_xscale("log")
    ax.set_yscale("log" if np.all(c.total > 0) and (not folds or np.all(c.folds > 0)) else "linear")
    ax.set_xlabel("lambda")
    ax.set_ylabel("validation squared error")
    _legend(ax, keep=("total CV error", "fold 0", "1-SE band of the minimum", "chosen lambda"))
    return ax


def _legend(ax: Any, keep: tuple[str, ...]) -> None:
    handles, labels = ax.get_legend_handles_labels()
    pairs = [(h, "folds" if lab == "fold 0" else lab) for h, lab in zip(handles, labels) if lab in keep]
    if pairs:
        ax.legend(*zip(*pairs), fontsize=8, loc="best")


def target_alphas(model: Any, ax: Any = None, *, bins: int = 20) -> Any:
    """Histogram of the lambda chosen for each target (``alpha_per_target=True``).

    Returns
    -------
    matplotlib Axes
        Bars over log10(lambda); their heights sum to the number of targets.

    Raises
    ------
    NothingToPlotError
        If the model has one lambda for all targets.
    """
    data = plot_data.target_alphas(model)
    if data is None:
        raise NothingToPlotError("the model has one lambda for all targets (fit with alpha_per_target=True)")
    ax = _axes(ax)
    alphas, _ = data
    grid = np.log10(np.asarray(model.alphas_, dtype=np.float64))
    lo, hi = float(grid.min()), float(grid.max())
    edges = np.linspace(lo - 0.5, hi + 0.5, bins + 1) if hi > lo else np.array([lo - 0.5, lo + 0.5])
    ax.hist(np.log10(alphas), bins=edges, color="C0")
    ax.set_xlabel("log10(lambda) chosen per target")
    ax.set_ylabel("targets")
    return ax


# ---------------------------------------------------------------------- bands
def _band_data(model: Any) -> plot_data.BandWeights:
    data = plot_data.band_weights(model)
    if data is None:
        raise NothingToPlotError("the model has no bands (fit with bands=)")
    return data


def band_weights(model: Any, ax: Any = None, *, bins: int = 20) -> Any:
    """The chosen weight of every band per target: a simplex for three bands, else one histogram per band.

    Returns
    -------
    matplotlib Axes
        Three bands: one point per target in the triangle whose corners are the
        bands alone (``ax.collections[0]``).  Otherwise one step histogram per band
        of its weight over the targets (``ax.patches``), heights summing to the targets.

    Raises
    ------
    NothingToPlotError
        If the model was fitted without bands.
    """
    data = _band_data(model)
    ax = _axes(ax)
    W = data.weights / np.maximum(data.weights.sum(axis=1, keepdims=True), np.finfo(float).tiny)
    if W.shape[1] == 3:
        corners = np.array([[0.0, 0.0], [1.0, 0.0], [0.5, np.sqrt(3) / 2]])
        xy = W @ corners
        ax.plot(*np.vstack([corners, corners[:1]]).T, color="0.5", lw=0.8)
        ax.scatter(xy[:, 0], xy[:, 1], s=8, alpha=0.5, color="C0")
        for (x, y), name, dy in zip(corners, data.names, (-0.06, -0.06, 0.03)):
            ax.text(x, y + dy, name, ha="center", fontsize=9)
        ax.set_aspect("equal")
        ax.set_axis_off()
        ax.set_title("band weights per target (a corner: that band alone)", fontsize=10)
        return ax
    edges = np.linspace(0.0, 1.0, bins + 1)
    for b, name in enumerate(data.names):
        ax.hist(W[:, b], bins=edges, histtype="step", lw=1.5, label=name)
    ax.set_xlabel("weight of the band (the weights of a target sum to 1)")
    ax.set_ylabel("targets")
    ax.legend(fontsize=8, loc="best")
    return ax


def band_r2(model: Any, ax: Any = None, *, bins: int = 30) -> Any:
    """Histogram over targets of every band's cross-validated R² (``band_cv_r2_``).

    Raises
    ------
    NothingToPlotError
        If the model was fitted without bands or holds no per-band R².
    """
    data = _band_data(model)
    if data.r2 is None:
        raise NothingToPlotError("the model holds no per-band R² (band_cv_r2_)")
    ax = _axes(ax)
    lo, hi = float(np.min(data.r2)), float(np.max(data.r2))
    edges = np.linspace(lo, hi if hi > lo else lo + 1.0, bins + 1)
    for b, name in enumerate(data.names):
        ax.hist(data.r2[b], bins=edges, histtype="step", lw=1.5, label=name)
    ax.axvline(0.0, color="0.5", lw=0.8)
    ax.set_xlabel("cross-validated R² of the band (split of the model's R²)")
    ax.set_ylabel("targets")
    ax.legend(fontsize=8, loc="best")
    return ax


# ---------------------------------------------------------------------- selection and prefixes
def selection_path(model: Any, ax: Any = None, *, labels: bool = True) -> Any:
    """CV error against the number of features along the selection path.

    Returns
    -------
    matplotlib Axes
        ``ax.lines[0]`` has x = ``selection_path_["n_features"]`` and y =
        ``selection_path_["cv_error"]``; the chosen step is marked, the 1-SE
        threshold drawn, and each step labelled with the feature that entered
        (+) or left (-).

    Raises
    ------
    NothingToPlotError
        If no feature selection ran.
    """
    s = plot_data.selection_steps(model)
    if s is None:
        raise NothingToPlotError(
            "the model has no selection path (fit with selection='forward' or 'backward')"
        )
    ax = _axes(ax)
    ax.plot(s.n_features, s.cv_error, "o-", color="C0", ms=4, label="CV error", zorder=3)
    if np.isfinite(s.std_error).any():
        ax.fill_between(
            s.n_features,
            s.cv_error - s.std_error,
            s.cv_error + s.std_error,
            color="C0",
            alpha=0.12,
            label="± 1 SE",
        )
    ax.axhline(s.threshold, color="C1", ls=":", lw=1.2, label="1-SE threshold")
    if s.best is not None:
        ax.plot(
            [s.n_features[s.best]], [s.cv_error[s.best]], "*", color="C3", ms=14, label="chosen set", zorder=4
        )
    if labels:
        _step_labels(ax, s, plot_data.feature_names(model))
    ax.set_xlabel("number of features")
    ax.set_ylabel("CV squared error (lambda re-chosen per set)")
    if s.direction:
        ax.set_title(f"{s.direction} selection", fontsize=10)
    ax.legend(fontsize=8, loc="best")
    return ax


def _step_labels(ax: Any, s: plot_data.SelectionSteps, names: list[str]) -> None:
    sign = "-" if s.direction == "backward" else "+"
    steps = range(1, len(s.feature))
    if len(s.feature) - 1 > MAX_PATH_LABELS:
        steps = (
            range(1, MAX_PATH_LABELS + 1)
            if s.direction != "backward"
            else range(len(s.feature) - MAX_PATH_LABELS, len(s.feature))
        )
    for i in steps:
        f = int(s.feature[i])
        if f < 0:
            continue
        name = names[f] if f < len(names) else str(f)
        ax.annotate(
            f"{sign}{name}",
            (s.n_features[i], s.cv_error[i]),
            textcoords="offset points",
            xytext=(2, 4),
            fontsize=7,
            rotation=45,
            color="0.25",
        )


def prefix_curve(model: Any, ax: Any = None) -> Any:
    """CV error against the number of leading features (units) when feature prefixes were searched.

    Returns
    -------
    matplotlib Axes
        ``ax.lines[0]``: x = prefix sizes, y = CV error of each prefix (best lambda).

    Raises
    ------
    NothingToPlotError
        If the model was fitted without prefixes.
    """
    data = plot_data.prefix_curve(model)
    if data is None:
        raise NothingToPlotError("the model has no prefix curve (fit with feature_prefixes)")
    ax = _axes(ax)
    sizes, errors = data
    ax.plot(sizes, errors, "o-", color="C0", label="CV error")
    chosen = getattr(model, "n_features_selected_", None)
    i = (
        int(np.flatnonzero(sizes == chosen)[0])
        if chosen is not None and np.any(sizes == chosen)
        else int(np.argmin(errors))
    )
    ax.plot([sizes[i]], [errors[i]], "*", color="C3", ms=14, label="chosen size")
    ax.set_xlabel("number of leading features (units)")
    ax.set_ylabel("CV squared error")
    ax.legend(fontsize=8)
    return ax


# ---------------------------------------------------------------------- classes and coefficients
def class_errors(model: Any, ax: Any = None) -> Any:
    """Per-class sizes and the validation error of each one-vs-rest (+1/-1) target.

    Few classes with short labels are drawn as columns, labelled ``label`` over
    ``(n=weight)``; more are drawn as horizontal bars (first class on top), labelled
    ``label (n=weight)``, so that every label has a line of its own.  Labels that still
    would overlap at the size of ``ax`` are thinned (:func:`thin_tick_labels`).

    Returns
    -------
    matplotlib Axes
        ``ax.containers[0]`` are the bars of the validation squared error of each
        target at the chosen lambda (summed over folds), one per class (one
        "b vs a" bar for two classes), in class order; the class weights (row counts
        when unweighted) are written beside the labels.

    Raises
    ------
    NothingToPlotError
        If the model is not a classifier.
    """
    t = plot_data.class_table(model)
    if t is None:
        raise NothingToPlotError("the model is not a classifier")
    ax = _axes(ax)
    sizes = dict(zip(t.labels, t.weight))
    counted = [lab in sizes and np.isfinite(sizes[lab]) for lab in t.target_labels]
    ticks = [f"{lab}\n(n={sizes[lab]:,.0f})" if c else lab for lab, c in zip(t.target_labels, counted)]
    what = "validation squared error of the ±1 target"
    if not class_bars_horizontal(ticks):
        x = np.arange(len(ticks))
        ax.bar(x, t.target_error, color="C0", label=what)
        ax.set_xticks(x, ticks, fontsize=8)
        ax.set_ylabel("CV squared error at the chosen lambda")
        ax.legend(fontsize=8)
        thin_tick_labels(ax, "x")
        return ax
    y = np.arange(len(ticks))[::-1]
    ax.barh(y, t.target_error, color="C0", label=what)
    ax.set_yticks(y, [tick.replace("\n", " ") for tick in ticks], fontsize=7)
    ax.set_ylim(-0.6, len(y) - 0.4)
    ax.set_xlabel("CV squared error at the chosen lambda")
    ax.set_title(what, fontsize=9)
    thin_tick_labels(ax, "y")
    return ax


def class_bars_horizontal(ticks: list[str]) -> bool:
    """Whether :func:`class_errors` draws horizontal bars for these column labels (lines split by newlines).

    True for more than :data:`MAX_COLUMNS` targets, or labels too wide to stand side by
    side: the longest line plus two characters of space, times the number of targets,
    over :data:`MAX_COLUMN_CHARS`.
    """
    longest = max((len(line) for tick in ticks for line in tick.split("\n")), default=0)
    return len(ticks) > MAX_COLUMNS or len(ticks) * (longest + 2) > MAX_COLUMN_CHARS


def thin_tick_labels(ax: Any, axis: str) -> int:
    """Keep every k-th tick label of ``axis`` ("x" or "y"), k the smallest with no two kept labels overlapping.

    The labels are measured as the figure lays them out now (draw again after
    changing its size or layout); the others are blanked.

    Returns
    -------
    int
        k (1 when every label fits).
    """
    getter = ax.get_xticklabels if axis == "x" else ax.get_yticklabels
    ticks = ax.get_xticks() if axis == "x" else ax.get_yticks()
    ax.figure.draw_without_rendering()  # places the labels
    labels = getter()
    texts = [lab.get_text() for lab in labels]
    boxes = [lab.get_window_extent() for lab in labels]
    k = next((k for k in range(1, len(boxes) + 1) if not _overlapping(boxes[::k])), 1)
    if k > 1:
        setter = ax.set_xticks if axis == "x" else ax.set_yticks
        setter(
            ticks,
            [text if i % k == 0 else "" for i, text in enumerate(texts)],
            fontsize=labels[0].get_fontsize(),
        )
    return k


def _overlapping(boxes: list[Any]) -> bool:
    """Whether any two neighbouring boxes (display coordinates) overlap."""
    return any(a.overlaps(b) for a, b in itertools.pairwise(boxes))


def coefficients(model: Any, ax: Any = None, *, top: int = 20, target: int = 0) -> Any:
    """Horizontal bars of the ``top`` coefficients of one target by absolute value, with names.

    Returns
    -------
    matplotlib Axes
        ``ax.containers[0]`` holds one bar per coefficient, largest |coef| on top;
        bar widths are the signed coefficients (original units).
    """
    ax = _axes(ax)
    names, values = plot_data.top_coefficients(model, top=top, target=target)
    y = np.arange(len(names))[::-1]
    ax.barh(y, values, color=["C0" if v >= 0 else "C3" for v in values])
    ax.set_yticks(y, names, fontsize=7)
    ax.axvline(0.0, color="0.3", lw=0.8)
    ax.set_xlabel("coefficient (original units)")
    return ax
