"""The numbers behind the plots and the HTML report, read from a fitted (or loaded) estimator.

Pure NumPy: every function takes a fitted :class:`~streamridge.StreamRidgeCV` or
:class:`~streamridge.StreamRidgeClassifierCV` (fitted in Python or rebuilt by
:func:`~streamridge.io.model_file.load_model`) and returns arrays; :mod:`streamridge.report.plot`
draws them and :mod:`streamridge.report.html` lays them out.  A function returns
None when the model does not hold what it needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from streamridge.report.summary import alpha_indices


@dataclass
class LambdaCurve:
    """CV error against lambda, in increasing lambda order.

    Attributes
    ----------
    alphas : array of shape (R,)
        The grid, sorted increasingly.
    total : array of shape (R,)
        Validation squared error summed over folds and targets (``cv_errors_``
        summed over targets).
    folds : array of shape (R, K)
        Validation squared error of every fold, summed over targets.
    best : int
        Index (into the sorted grid) of the smallest ``total``.
    std_error : float
        Standard error of ``total[best]`` over folds, ``sqrt(K) * std(folds[best], ddof=1)``
        (the quantity of the 1-SE rule, :func:`streamridge.solvers.grid.choose`).
    chosen : array of int
        Index (into the sorted grid) of the chosen lambda; one per target with
        ``alpha_per_target``.
    edge : {None, "low", "high"}
        Whether the smallest total error sits at an end of the grid.
    """

    alphas: np.ndarray
    total: np.ndarray
    folds: np.ndarray
    best: int
    std_error: float
    chosen: np.ndarray
    edge: str | None

    @property
    def threshold(self) -> float:
        """Upper edge of the 1-SE band: ``total[best] + std_error``."""
        return float(self.total[self.best] + self.std_error)


def lambda_curve(model: Any) -> LambdaCurve:
    """The CV curve of a fitted model (``alphas_``, ``cv_errors_``, ``fold_errors_``, ``alpha_``)."""
    alphas = np.asarray(model.alphas_, dtype=np.float64)
    order = np.argsort(alphas, kind="stable")
    R = alphas.shape[0]
    total = np.asarray(model.cv_errors_, dtype=np.float64).reshape(R, -1).sum(axis=1)[order]
    folds = np.asarray(model.fold_errors_, dtype=np.float64).sum(axis=2)[order]
    best = int(np.argmin(total))
    K = folds.shape[1]
    se = float(np.sqrt(K) * np.std(folds[best], ddof=1)) if K > 1 else 0.0
    chosen = alpha_indices(alphas[order], model.alpha_)
    edge = None if R < 2 else ("low" if best == 0 else "high" if best == R - 1 else None)
    return LambdaCurve(alphas[order], total, folds, best, se, chosen, edge)


def feature_names(model: Any) -> list[str]:
    """Names of the model's features (the columns of ``coef_``), or ``x0, x1, ...``.

    With a feature map these are the map's output features (``feature_names_``),
    not the raw inputs counted by ``n_features_in_``.
    """
    n = int(np.atleast_2d(np.asarray(model.coef_)).shape[1])
    for attr in ("feature_names_", "feature_names_in_"):
        names = getattr(model, attr, None)
        if names is not None and len(names) == n:
            return [str(v) for v in names]
    return [f"x{j}" for j in range(n)]


def target_names(model: Any, n_targets: int) -> list[str]:
    """Names of the targets: class labels (one-vs-rest), stored names, or ``y0, y1, ...``."""
    if hasattr(model, "classes_"):
        labels = [str(c) for c in model.classes_]
        return labels if len(labels) == n_targets else [f"{labels[-1]} vs {labels[0]}"]
    header = getattr(model, "_model_header", {}) or {}
    names = header.get("target_names")
    if names is None and getattr(model, "stats_", None) is not None:
        names = model.stats_.meta.get("target_names")
    if names is not None and len(names) == n_targets:
        return [str(v) for v in names]
    return [f"y{t}" for t in range(n_targets)]


def target_alphas(model: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """Per-target chosen lambda and CV error at it (shapes (T,)), or None without ``alpha_per_target``."""
    if np.ndim(model.alpha_) == 0:
        return None
    alphas = np.asarray(model.alphas_, dtype=np.float64)
    E = np.asarray(model.fold_errors_, dtype=np.float64)
    idx = alpha_indices(alphas, model.alpha_)
    T = E.shape[2]
    errors = E[np.broadcast_to(idx, (T,)), :, np.arange(T)].sum(axis=1)
    return np.asarray(model.alpha_, dtype=np.float64).reshape(-1), errors


@dataclass
class BandWeights:
    """The chosen weight vector of every target of a banded model, and each band's CV R² where known.

    Attributes
    ----------
    names : list of str
        One per band.
    weights : array of shape (T, n_bands)
        Rows on the simplex for sampled weight vectors (they sum to 1).
    r2 : array of shape (n_bands, T) or None
        ``band_cv_r2_``: the cross-validated R² of every band and target.
    """

    names: list[str]
    weights: np.ndarray
    r2: np.ndarray | None


def band_weights(model: Any) -> BandWeights | None:
    """The chosen band weights per target (and the per-band CV R²), or None for a model fitted without bands."""
    if getattr(model, "bands_", None) is None:
        return None
    W = np.atleast_2d(np.asarray(model.band_weights_, dtype=np.float64))
    r2 = getattr(model, "band_cv_r2_", None)
    r2 = None if r2 is None else np.asarray(r2, dtype=np.float64).reshape(W.shape[1], -1)
    return BandWeights([str(n) for n in model.band_names_], W, r2)


@dataclass
class SelectionSteps:
    """A selection path as columns (step 0 is the starting set).

    Attributes
    ----------
    feature : array of int of shape (S,)
        Feature added or removed at each step (-1 at step 0).
    n_features : array of int of shape (S,)
    cv_error : array of shape (S,)
    std_error : array of shape (S,)
        Standard error over folds (NaN when the path does not record it).
    alpha : array of shape (S,)
        Lambda of each set (NaN with one lambda per target).
    best : int or None
        The chosen step.
    direction : str or None
        "forward", "backward" or "op-rr".
    """

    feature: np.ndarray
    n_features: np.ndarray
    cv_error: np.ndarray
    std_error: np.ndarray
    alpha: np.ndarray
    best: int | None
    direction: str | None

    @property
    def threshold(self) -> float:
        """CV error of the best step plus its standard error (the 1-SE threshold)."""
        i = int(np.nanargmin(self.cv_error))
        se = self.std_error[i]
        return float(self.cv_error[i] + (se if np.isfinite(se) else 0.0))


def _column(path: np.ndarray, name: str, dtype: Any) -> np.ndarray:
    if name in (path.dtype.names or ()):
        return np.asarray(path[name], dtype=dtype)
    return np.full(path.shape[0], np.nan if dtype is np.float64 else -1, dtype=dtype)


def selection_steps(model: Any) -> SelectionSteps | None:
    """The selection path of a model (``selection_path_``), or None when no selection ran."""
    path = getattr(model, "selection_path_", None)
    if path is None:
        return None
    if not (isinstance(path, np.ndarray) and path.dtype.names):
        steps = getattr(path, "steps", path)
        if not isinstance(steps, (list, tuple)) or not steps:
            return None
        rows = [
            (s.feature, s.n_features, s.alpha if np.ndim(s.alpha) == 0 else np.nan, s.cv_error, s.std_error)
            for s in steps
        ]
        dt = [
            ("feature", "i8"),
            ("n_features", "i8"),
            ("alpha", "f8"),
            ("cv_error", "f8"),
            ("std_error", "f8"),
        ]
        path = np.array(rows, dtype=dt)
    best = getattr(model, "selection_best_step_", None)
    direction = getattr(model, "selection", None)
    return SelectionSteps(
        feature=_column(path, "feature", np.int64),
        n_features=_column(path, "n_features", np.int64),
        cv_error=_column(path, "cv_error", np.float64),
        std_error=_column(path, "std_error", np.float64),
        alpha=_column(path, "alpha", np.float64),
        best=None if best is None else int(best),
        direction=None if direction is None else str(direction),
    )


def prefix_curve(model: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """Number of leading features (units) and the CV error of each prefix, or None without prefixes.

    Reads ``prefix_errors_`` (shape (P,), or (P, R) minimised over lambdas) with
    the sizes in ``prefix_sizes_`` / ``feature_prefixes_`` / ``prefixes_`` (or the
    ``feature_prefixes`` parameter).
    """
    errors = getattr(model, "prefix_errors_", None)
    if errors is None:
        return None
    sizes = None
    for name in ("prefix_sizes_", "feature_prefixes_", "prefixes_"):
        if getattr(model, name, None) is not None:
            sizes = getattr(model, name)
            break
    if sizes is None:
        sizes = getattr(model, "feature_prefixes", None)
    E = np.asarray(errors, dtype=np.float64)
    if E.ndim > 1:
        E = E.reshape(E.shape[0], -1).min(axis=1)
    if sizes is None or len(sizes) != E.shape[0]:
        return None
    return np.asarray(sizes, dtype=np.int64), E


@dataclass
class ClassTable:
    """Per-class facts of a classifier.

    Attributes
    ----------
    labels : list of str
    weight : array of shape (C,)
        Sum of sample weights of each class over all folds (rows when unweighted).
    factor : array of shape (C,)
        Class weight factor applied in training: ``n / (C n_c)`` for
        ``class_weight="balanced"`` (CRRR), the given dict values, or ones.
    target_labels : list of str
        The one-vs-rest targets (one per class; one for two classes).
    target_error : array of shape (T,)
        Validation squared error of each +1/-1 target at the chosen lambda, summed over folds.
    """

    labels: list[str]
    weight: np.ndarray
    factor: np.ndarray
    target_labels: list[str]
    target_error: np.ndarray


def fold_weight(model: Any) -> np.ndarray | None:
    """Weight of every (fold, class) cell, shape (K, C), from ``stats_`` or the model file."""
    stats = getattr(model, "stats_", None)
    w = stats.weight if stats is not None else getattr(model, "_fold_weight", None)
    return None if w is None else np.asarray(w, dtype=np.float64).reshape(int(model.n_folds_), -1)


def class_table(model: Any) -> ClassTable | None:
    """Per-class sizes, weights and validation errors, or None for a regressor."""
    if not hasattr(model, "classes_"):
        return None
    labels = [str(c) for c in model.classes_]
    W = fold_weight(model)
    weight = np.full(len(labels), np.nan) if W is None or W.shape[1] != len(labels) else W.sum(axis=0)
    cw = getattr(model, "class_weight", None)
    if cw == "balanced":
        factor = weight.sum() / (len(labels) * np.where(weight > 0, weight, np.nan))
    elif isinstance(cw, dict):
        factor = np.array([float(cw.get(c, cw.get(str(c), 1.0)) or 1.0) for c in model.classes_.tolist()])
    else:
        factor = np.ones(len(labels))
    E = np.asarray(model.fold_errors_, dtype=np.float64)
    idx = alpha_indices(np.asarray(model.alphas_), model.alpha_)
    T = E.shape[2]
    errors = E[np.broadcast_to(idx, (T,)), :, np.arange(T)].sum(axis=1)
    return ClassTable(labels, weight, factor, target_names(model, T), errors)


def confusion_counts(model: Any) -> np.ndarray | None:
    """Confusion counts [true, predicted] summed over folds, shape (C, C), when the model carries ``cv_confusion_``.

    ``cv_confusion_`` (per fold, from a scoring pass over the rows) exists only
    when the model was fitted with a classification metric; the statistics alone
    cannot give it.
    """
    cm = getattr(model, "cv_confusion_", None)
    if cm is None:
        return None
    cm = np.asarray(cm, dtype=np.float64)
    return cm.reshape(-1, cm.shape[-2], cm.shape[-1]).sum(axis=0)


def top_coefficients(model: Any, *, top: int = 20, target: int = 0) -> tuple[list[str], np.ndarray]:
    """Names and values of the ``top`` coefficients of one target by absolute value, largest first."""
    coef = np.atleast_2d(np.asarray(model.coef_, dtype=np.float64))[target]
    names = feature_names(model)
    order = np.argsort(-np.abs(coef), kind="stable")[: max(1, int(top))]
    return [names[j] for j in order], coef[order]


def class_validation_mse(model: Any) -> np.ndarray | None:
    """Validation mean squared error of the ±1 targets on the rows of each true class, shape (C,).

    For every fold k the model of the other folds (at the chosen lambda, on the
    selected features, with the model's centering, scaling and class weights) is
    scored on each (fold k, class c) cell of the statistics: with ``W`` and ``b``
    its coefficients and intercept,
    ``SSE_kc = syy + w (ybar - b - W'xbar)^2 - 2 W'Sxy + W'Sxx W`` (sample
    weights, no class factors).  Needs the statistics (``stats_``: a fitted model,
    or a model file written with ``include_stats``); None otherwise or for a regressor.
    """
    from streamridge.forms.build import build_forms

    stats = getattr(model, "stats_", None)
    if stats is None or not hasattr(model, "classes_") or stats.n_classes != len(model.classes_):
        return None
    forms = build_forms(
        stats,
        fit_intercept=bool(model.fit_intercept),
        standardize=bool(model.standardize),
        balanced=model._balanced(),
    )
    sub = np.flatnonzero(np.asarray(model.support_, dtype=bool))
    T = stats.n_targets
    a = np.broadcast_to(np.asarray(model.alpha_, dtype=np.float64), (T,))
    sse = np.zeros((stats.n_folds, stats.n_classes))
    for k in range(stats.n_folds):
        coef, b = _fold_model(forms, k, sub, a)
        mx, my = stats.mean_x[k][:, sub], stats.mean_y[k]  # (C, n), (C, T)
        sxx, sxy = stats.sxx[k][:, sub][:, :, sub], stats.sxy[k][:, sub]
        resid = my - b[None, :] - mx @ coef  # (C, T)
        quad = np.einsum("it,cij,jt->ct", coef, sxx, coef)
        cross = np.einsum("it,cit->ct", coef, sxy)
        sse[k] = (stats.syy[k] + stats.weight[k][:, None] * resid**2 - 2 * cross + quad).sum(axis=1)
    w = stats.weight.sum(axis=0) * T
    return np.where(w > 0, sse.sum(axis=0) / np.where(w > 0, w, 1.0), np.nan)


def _fold_model(forms: Any, k: int, sub: np.ndarray, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Coefficients (n_sub, T) in original units and intercept (T,) of training part k at ``alpha``."""
    T = alpha.shape[0]
    if sub.size == 0:
        return np.zeros((0, T)), forms.y_offset[k].copy()
    A = forms.At[k][np.ix_(sub, sub)]
    d, C = np.linalg.eigh(A)
    np.maximum(d, 0.0, out=d)
    W = C @ ((C.T @ forms.Bt[k][sub]) / (d[:, None] + alpha[None, :]))
    coef = W / forms.scale[k][sub][:, None]
    return coef, forms.y_offset[k] - forms.x_offset[k][sub] @ coef
