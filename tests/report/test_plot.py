"""streamridge.report.plot: the Axes hold the model's own numbers (CV errors, selection path, classes, coefficients)."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.figure import Figure

from streamridge import StreamRidgeClassifierCV, StreamRidgeCV
from streamridge.io.model_file import load_model, save_model
from streamridge.report import plot
from streamridge.report.plot import NothingToPlotError

ALPHAS = np.logspace(-3, 4, 12)


def _ax():
    return Figure().add_subplot()


@pytest.fixture
def data(rng):
    X = rng.standard_normal((300, 7))
    X[:, 3] += 1e6  # a large offset must not matter
    w = rng.standard_normal((7, 3))
    Y = (X - X.mean(0)) @ w + 0.5 * rng.standard_normal((300, 3))
    return X, Y


def _line(ax, label):
    return next(line for line in ax.lines if line.get_label() == label)


@pytest.mark.parametrize("targets", [1, 3])
def test_cv_curve_lines_are_cv_errors(data, targets):
    X, Y = data
    y = Y[:, 0] if targets == 1 else Y
    # the grid given in decreasing order: the plot sorts it
    m = StreamRidgeCV(cv=4, alphas=ALPHAS[::-1]).fit(X, y)
    ax = plot.cv_curve(m, _ax())
    total = _line(ax, "total CV error")
    assert ax.lines[0] is total
    np.testing.assert_array_equal(total.get_xdata(), ALPHAS)
    expected = np.asarray(m.cv_errors_).reshape(len(ALPHAS), -1).sum(axis=1)[::-1]
    np.testing.assert_allclose(total.get_ydata(), expected, rtol=1e-12)
    for k in range(4):
        fold = _line(ax, f"fold {k}")
        np.testing.assert_allclose(fold.get_ydata(), m.fold_errors_[::-1, k, :].sum(axis=1), rtol=1e-12)
    # the folds add up to the total
    folds = np.array([_line(ax, f"fold {k}").get_ydata() for k in range(4)])
    np.testing.assert_allclose(folds.sum(axis=0), total.get_ydata(), rtol=1e-10)
    chosen = _line(ax, "chosen lambda")
    assert chosen.get_xdata()[0] == pytest.approx(m.alpha_)


def test_cv_curve_one_se_band_matches_the_1se_rule(data):
    """The band's top is the threshold of alpha_rule='1se': that model picks the largest lambda under it."""
    X, Y = data
    alphas = np.logspace(-2, 3, 30)
    m = StreamRidgeCV(cv=5, alphas=alphas).fit(X, Y[:, 0])
    m1 = StreamRidgeCV(cv=5, alphas=alphas, alpha_rule="1se").fit(X, Y[:, 0])
    ax = plot.cv_curve(m, _ax())
    band = next(p for p in ax.patches if p.get_label() == "1-SE band of the minimum")
    lo, hi = band.get_y(), band.get_y() + band.get_height()
    total = m.cv_errors_
    best = int(np.argmin(total))
    se = np.sqrt(5) * np.std(m.fold_errors_[best, :, 0], ddof=1)
    assert lo == pytest.approx(total[best], rel=1e-12)
    assert hi == pytest.approx(total[best] + se, rel=1e-12)
    under = alphas[total <= hi * (1 + 1e-12)]
    assert m1.alpha_ == pytest.approx(under.max(), rel=1e-12)


def test_cv_curve_warns_at_the_grid_edge(data):
    X, Y = data
    m = StreamRidgeCV(cv=3, alphas=[1e3, 1e4, 1e5]).fit(
        X, Y[:, 0]
    )  # all far too large: minimum at the low edge
    ax = plot.cv_curve(m, _ax())
    assert "low edge" in ax.get_title()
    m2 = StreamRidgeCV(cv=3, alphas=ALPHAS).fit(X, Y[:, 0])
    assert plot.cv_curve(m2, _ax()).get_title() == ""


def test_loaded_model_plots_the_same_numbers(data, tmp_path):
    X, Y = data
    m = StreamRidgeCV(cv=4, alphas=ALPHAS, selection="forward").fit(X, Y[:, 0])
    save_model(m, tmp_path / "m.npz")
    loaded = load_model(tmp_path / "m.npz")
    for fn in (plot.cv_curve, plot.selection_path):
        a, b = fn(m, _ax()), fn(loaded, _ax())
        np.testing.assert_array_equal(a.lines[0].get_ydata(), b.lines[0].get_ydata())
        np.testing.assert_array_equal(a.lines[0].get_xdata(), b.lines[0].get_xdata())


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_selection_path_lines_are_the_path(data, direction):
    X, Y = data
    m = StreamRidgeCV(cv=4, alphas=ALPHAS, selection=direction).fit(X, Y[:, 0])
    ax = plot.selection_path(m, _ax())
    line = ax.lines[0]
    np.testing.assert_array_equal(line.get_xdata(), m.selection_path_["n_features"])
    np.testing.assert_array_equal(line.get_ydata(), m.selection_path_["cv_error"])
    star = _line(ax, "chosen set")
    b = m.selection_best_step_
    assert star.get_xdata()[0] == m.selection_path_["n_features"][b] == m.support_.sum()
    assert star.get_ydata()[0] == m.selection_path_["cv_error"][b]
    thr = _line(ax, "1-SE threshold").get_ydata()[0]
    i = int(np.argmin(m.selection_path_["cv_error"]))
    assert thr == pytest.approx(
        m.selection_path_["cv_error"][i] + m.selection_path_["std_error"][i], rel=1e-12
    )
    # every step after the start is labelled with the feature that entered (+) or left (-)
    sign = "-" if direction == "backward" else "+"
    texts = {t.get_text() for t in ax.texts}
    assert texts == {f"{sign}x{f}" for f in m.selection_path_["feature"][1:]}


def test_selection_path_needs_a_selection(data):
    X, Y = data
    m = StreamRidgeCV(cv=3, alphas=ALPHAS).fit(X, Y[:, 0])
    with pytest.raises(NothingToPlotError, match="no selection path"):
        plot.selection_path(m, _ax())
    with pytest.raises(NothingToPlotError, match="no prefix curve"):
        plot.prefix_curve(m, _ax())
    with pytest.raises(NothingToPlotError, match="not a classifier"):
        plot.class_errors(m, _ax())
    with pytest.raises(NothingToPlotError, match="one lambda for all targets"):
        plot.target_alphas(m, _ax())


def test_prefix_curve_reads_prefix_attributes(data):
    X, Y = data
    m = StreamRidgeCV(cv=3, alphas=ALPHAS).fit(X, Y[:, 0])
    m.feature_prefixes_ = np.array([2, 4, 7])
    m.prefix_errors_ = np.array([[5.0, 3.0], [2.0, 2.5], [2.2, 4.0]])  # (prefixes, lambdas): min over lambdas
    line = plot.prefix_curve(m, _ax()).lines[0]
    np.testing.assert_array_equal(line.get_xdata(), [2, 4, 7])
    np.testing.assert_array_equal(line.get_ydata(), [3.0, 2.0, 2.2])


@pytest.mark.parametrize("n_classes", [2, 3])
def test_class_errors_bars(rng, n_classes):
    X = rng.standard_normal((360, 5))
    labels = np.array(["a", "b", "c"])[:n_classes][
        np.argmax(X[:, :n_classes] + 0.5 * rng.standard_normal((360, n_classes)), 1)
    ]
    labels[:40] = "a"  # unbalanced
    m = StreamRidgeClassifierCV(cv=4, alphas=ALPHAS, class_weight="balanced").fit(X, labels)
    ax = plot.class_errors(m, _ax())
    heights = [p.get_height() for p in ax.containers[0]]
    T = 1 if n_classes == 2 else n_classes
    j = [int(np.argmin(np.abs(np.log(ALPHAS) - np.log(m.alpha_))))] * T
    expected = [m.fold_errors_[j[t], :, t].sum() for t in range(T)]
    np.testing.assert_allclose(heights, expected, rtol=1e-12)
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    counts = {c: int((labels == c).sum()) for c in m.classes_}
    if n_classes == 3:
        assert ticks == [f"{c}\n(n={counts[c]:,})" for c in m.classes_]
    else:
        assert ticks == ["b vs a"]


def test_target_alphas_histogram(data):
    X, Y = data
    m = StreamRidgeCV(cv=3, alphas=ALPHAS, alpha_per_target=True).fit(X, Y)
    ax = plot.target_alphas(m, _ax())
    heights = np.array([p.get_height() for p in ax.patches])
    assert heights.sum() == 3


def test_coefficients_bars_are_the_largest(data):
    X, Y = data
    m = StreamRidgeCV(cv=3, alphas=ALPHAS).fit(X, Y[:, 0])
    ax = plot.coefficients(m, _ax(), top=4)
    widths = [p.get_width() for p in ax.containers[0]]
    order = np.argsort(-np.abs(m.coef_))[:4]
    np.testing.assert_array_equal(widths, m.coef_[order])
    top_down = sorted(zip(ax.get_yticks(), (t.get_text() for t in ax.get_yticklabels())), reverse=True)
    assert [name for _, name in top_down] == [f"x{j}" for j in order]  # largest |coef| on top


def test_missing_matplotlib_is_one_clear_error(monkeypatch, data):
    import sys

    X, Y = data
    m = StreamRidgeCV(cv=3, alphas=ALPHAS).fit(X, Y[:, 0])
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(plot.MissingDependencyError, match=r'pip install "streamridge\[plot\]"'):
        plot.cv_curve(m)


def test_cv_curve_of_a_perfect_fit_uses_a_linear_error_axis(rng):
    X = rng.standard_normal((90, 3))
    m = StreamRidgeCV(cv=3, alphas=ALPHAS).fit(X, np.zeros(90))  # every validation error is exactly 0
    ax = plot.cv_curve(m, _ax())
    assert ax.get_yscale() == "linear" and ax.get_xscale() == "log"
    np.testing.assert_array_equal(ax.lines[0].get_ydata(), 0.0)
    assert (
        plot.cv_curve(
            StreamRidgeCV(cv=3, alphas=ALPHAS).fit(X, X[:, 0] + rng.standard_normal(90)), _ax()
        ).get_yscale()
        == "log"
    )


def test_prefix_curve_of_a_prefix_model(rng, tmp_path):
    X = rng.standard_normal((400, 12))
    y = X[:, :5] @ rng.standard_normal(5) + 0.3 * rng.standard_normal(400)
    m = StreamRidgeCV(cv=4, alphas=ALPHAS, feature_prefixes=[2, 5, 8, 12]).fit(X, y)
    save_model(m, tmp_path / "p.npz")
    for model in (m, load_model(tmp_path / "p.npz")):
        ax = plot.prefix_curve(model, _ax())
        np.testing.assert_array_equal(ax.lines[0].get_xdata(), m.prefix_sizes_)
        np.testing.assert_array_equal(ax.lines[0].get_ydata(), m.prefix_errors_)
        star = _line(ax, "chosen size")
        assert star.get_xdata()[0] == m.n_features_selected_ == m.support_.sum()
