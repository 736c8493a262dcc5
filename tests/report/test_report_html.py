"""``streamridge report``: the HTML parses, has one image per applicable section, names the chosen lambda;
sections without the statistics they need are left out with a reason; bad input is one line, exit 2."""

from __future__ import annotations

import base64
import json
import os
import sys
import zipfile
from html.parser import HTMLParser

import numpy as np
import pytest

from streamridge import StreamRidgeClassifierCV, StreamRidgeCV
from streamridge.cli import main
from streamridge.io.model_file import load_model, save_model
from streamridge.report.html import build_sections, render, write_report
from streamridge.stats.foldstats import save_stats

ALPHAS = np.logspace(-3, 4, 12)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class _Doc(HTMLParser):
    """Sections (id -> list of image payloads), the omitted list and all text."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: dict[str, list[bytes]] = {}
        self.current: str | None = None
        self.text: list[str] = []
        self.omitted: list[str] = []
        self._in_li = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section":
            self.current = a.get("id")
            self.sections.setdefault(self.current, [])
        elif tag == "img":
            src = a["src"]
            assert src.startswith("data:image/png;base64,"), src[:40]  # embedded: opens offline
            self.sections[self.current].append(base64.b64decode(src.split(",", 1)[1]))
        elif tag == "li":
            self._in_li = True
            self.omitted.append("")

    def handle_endtag(self, tag):
        if tag == "li":
            self._in_li = False

    def handle_data(self, data):
        self.text.append(data)
        if self._in_li:
            self.omitted[-1] += data


def _parse(path) -> _Doc:
    doc = _Doc()
    raw = open(path, encoding="utf-8").read()
    assert (
        "http://" not in raw and "https://" not in raw and "<script" not in raw
    )  # nothing to fetch: opens offline
    doc.feed(raw)
    doc.close()
    for images in doc.sections.values():
        for png in images:
            assert png.startswith(PNG_MAGIC) and len(png) > 2000
    return doc


def _images(doc: _Doc) -> dict[str, int]:
    return {k: len(v) for k, v in doc.sections.items() if v}


@pytest.fixture
def data(rng):
    X = rng.standard_normal((300, 6)) + 1e6
    Y = (X - 1e6) @ rng.standard_normal((6, 3)) + 0.4 * rng.standard_normal((300, 3))
    return X, Y


def _report(est, tmp_path, name="m"):
    model = tmp_path / f"{name}.npz"
    save_model(est, model)
    out = tmp_path / f"{name}.html"
    assert main(["report", str(model), "--out", str(out)]) == 0
    doc = _parse(out)
    text = "".join(doc.text)
    a = np.asarray(est.alpha_)
    chosen = f"{float(a):.4g}" if a.ndim == 0 else f"one per target, {a.min():.4g} .. {a.max():.4g}"
    assert (
        f"Chosen lambda: {chosen} (rule: smallest CV error)" in text
    )  # every report names the chosen lambda
    return doc, model


def test_regression_report(data, tmp_path, capsys):
    X, Y = data
    est = StreamRidgeCV(cv=4, alphas=ALPHAS).fit(X, Y[:, 0])
    doc, _ = _report(est, tmp_path)
    assert _images(doc) == {"lambda": 1, "coefficients": 1}
    text = "".join(doc.text)
    assert f"Chosen lambda: {est.alpha_:.4g}" in text
    assert "arrays (X: 300 x 6 float64)" in text  # the source, stored in the model file
    assert f"{300:,}" in text
    counts = est.stats_.count.sum(axis=1)
    assert "foldweightrows" in text and "".join(f"{k}{c:,.6g}{c:,.0f}" for k, c in enumerate(counts)) in text
    reasons = " ".join(doc.omitted)
    assert "Selection path: no feature selection ran" in reasons
    assert "Classes: the model is a regressor" in reasons
    assert "Prefix curve: the model was fitted without feature prefixes" in reasons
    assert "Lambda per target: the model has one lambda" in reasons
    assert "wrote" in capsys.readouterr().out


def test_default_out_is_beside_the_model_and_png_dir(data, tmp_path):
    X, Y = data
    est = StreamRidgeCV(cv=3, alphas=ALPHAS, selection="forward").fit(X, Y[:, 0])
    save_model(est, tmp_path / "sel.npz")
    assert main(["report", str(tmp_path / "sel.npz"), "--png", str(tmp_path / "figs")]) == 0
    doc = _parse(tmp_path / "sel.html")
    pngs = sorted(os.listdir(tmp_path / "figs"))
    assert pngs == ["coefficients.png", "lambda.png", "selection.png"]
    for name in pngs:  # the PNG files are the embedded images
        assert (tmp_path / "figs" / name).read_bytes() in doc.sections[name[:-4]]


def test_multi_target_report(data, tmp_path):
    X, Y = data
    est = StreamRidgeCV(cv=3, alphas=ALPHAS, alpha_per_target=True).fit(X, Y)
    doc, _ = _report(est, tmp_path)
    assert _images(doc) == {"lambda": 1, "targets": 1, "coefficients": 1}
    text = "".join(doc.text)
    for t, a in enumerate(est.alpha_):
        assert f"y{t}{a:.4g}" in text  # table row: target name, its lambda
    n_edge = int(np.isin(est.alpha_, ALPHAS[[0, -1]]).sum())
    assert (f"Warning: {n_edge} target(s) chose a lambda at an end of the grid" in text) == (n_edge > 0)
    # a grid of large lambdas only: every target sits at the low end
    est = StreamRidgeCV(cv=3, alphas=[1e5, 1e6, 1e7], alpha_per_target=True).fit(X, Y)
    doc, _ = _report(est, tmp_path, "edge")
    assert "Warning: 3 target(s) chose a lambda at an end of the grid" in "".join(doc.text)


def test_classifier_report(rng, tmp_path):
    X = rng.standard_normal((360, 5))
    labels = np.array(["cat", "dog", "eel"])[np.argmax(X[:, :3] + rng.standard_normal((360, 3)), 1)]
    labels[:60] = "cat"
    est = StreamRidgeClassifierCV(cv=4, alphas=ALPHAS, class_weight="balanced").fit(X, labels)
    doc, _ = _report(est, tmp_path)
    assert _images(doc) == {"lambda": 1, "classes": 1, "coefficients": 1}
    text = "".join(doc.text)
    counts = {c: int((labels == c).sum()) for c in est.classes_}
    for c in est.classes_:  # class, its rows, its CRRR factor n / (C n_c)
        assert f"{c}{counts[c]:,}{360 / (3 * counts[c]):.4g}" in text
    assert "Confusion counts are not shown" in text
    assert "write it with --include-stats" in text  # the per-class validation error needs the statistics
    save_model(est, tmp_path / "with_stats.npz", include_stats=True)
    assert main(["report", str(tmp_path / "with_stats.npz"), "--out", str(tmp_path / "with_stats.html")]) == 0
    text = "".join(_parse(tmp_path / "with_stats.html").text)
    from streamridge.report.plot_data import class_validation_mse

    for c, e in zip(est.classes_, class_validation_mse(est)):
        assert f"{360 / (3 * counts[c]):.4g}{e:.4g}" in text  # factor, then the class's validation MSE


def test_selection_report_names_features(rng, tmp_path):
    import zarr

    X = rng.standard_normal((240, 5))
    y = 3 * X[:, 1] - 2 * X[:, 4] + 0.3 * rng.standard_normal(240)
    store = str(tmp_path / "d.zarr")
    root = zarr.open_group(store, mode="w")
    root.create_array("X", data=X, attributes={"feature_names": ["a", "b", "c", "d", "e"]})
    root.create_array("y", data=y)
    est = StreamRidgeCV(cv=4, alphas=ALPHAS, selection="backward").fit(store)
    doc, _ = _report(est, tmp_path)
    assert _images(doc) == {"lambda": 1, "selection": 1, "coefficients": 1}
    text = "".join(doc.text)
    names = np.array(["a", "b", "c", "d", "e"])
    for f in est.selection_path_["feature"][1:]:
        assert f"{names[f]} left" in text
    assert "chosen" in text


def test_prefix_and_nested_sections_when_present(data, tmp_path):
    X, Y = data
    est = StreamRidgeCV(cv=3, alphas=ALPHAS).fit(X, Y[:, 0])
    est.feature_prefixes_ = np.array([2, 4, 6])
    est.prefix_errors_ = np.array([9.0, 4.0, 5.0])
    est.nested_cv_errors_ = np.array([1.0, 2.0, 3.0])
    sections = {s.key: s for s in build_sections(est, {}, "m.npz")}
    assert sections["prefix"].png is not None and sections["prefix"].omitted is None
    assert sections["nested"].omitted is None and "mean 2" in sections["nested"].body
    html = render(list(sections.values()), "t")
    assert html.count("<img") == 3


def test_prefix_sizes_and_chosen_size(data):
    """The attribute names of feature-prefix selection: prefix_sizes_, prefix_errors_, n_features_selected_."""
    from matplotlib.figure import Figure

    from streamridge.report import plot

    X, Y = data
    est = StreamRidgeCV(cv=3, alphas=ALPHAS).fit(X, Y[:, 0])
    est.prefix_sizes_ = np.array([1, 3, 6])
    est.prefix_errors_ = np.array([9.0, 4.0, 3.9])
    est.n_features_selected_ = 3  # e.g. the 1-SE rule picked the smaller prefix
    ax = plot.prefix_curve(est, Figure().add_subplot())
    np.testing.assert_array_equal(ax.lines[0].get_xdata(), [1, 3, 6])
    np.testing.assert_array_equal(ax.lines[0].get_ydata(), [9.0, 4.0, 3.9])
    star = next(line for line in ax.lines if line.get_label() == "chosen size")
    assert (star.get_xdata()[0], star.get_ydata()[0]) == (3, 4.0)
    sections = {s.key: s for s in build_sections(est, {}, "m.npz")}
    assert (
        sections["prefix"].png is not None
        and "<td>3</td><td>4</td><td>chosen</td>" in sections["prefix"].body
    )


def test_prefix_model_report(rng, tmp_path):
    X = rng.standard_normal((400, 12))
    y = X[:, :5] @ rng.standard_normal(5) + 0.3 * rng.standard_normal(400)
    est = StreamRidgeCV(cv=4, alphas=ALPHAS, feature_prefixes=[2, 5, 8, 12]).fit(X, y)
    doc, _ = _report(est, tmp_path)
    assert _images(doc) == {"lambda": 1, "prefix": 1, "coefficients": 1}
    text = "".join(doc.text)
    for n, e, a in zip(est.prefix_sizes_, est.prefix_errors_, est.prefix_alphas_):
        assert f"{n}{e:.4g}{a:.4g}" in text
    assert f"chosen size {est.n_features_selected_}" in text


def test_confusion_counts_and_nested_summary_when_present(rng):
    X = rng.standard_normal((300, 4))
    labels = np.array(["a", "b", "c"])[np.argmax(X[:, :3], 1)]
    est = StreamRidgeClassifierCV(cv=3, alphas=ALPHAS).fit(X, labels)
    classes = {s.key: s for s in build_sections(est, {}, "m.npz")}["classes"]
    assert "Confusion counts are not shown" in classes.body
    est.cv_confusion_ = np.arange(27, dtype=float).reshape(3, 3, 3)  # (folds, true, predicted)
    est.nested_cv_errors_ = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])  # (outer folds, targets)
    est.nested_summary_ = {"mean": 7.0, "gap": 0.5}
    sections = {s.key: s for s in build_sections(est, {}, "m.npz")}
    body = sections["classes"].body
    assert "Confusion counts are not shown" not in body
    total = est.cv_confusion_.sum(axis=0)
    for lab, row in zip("abc", total):
        assert f"<tr><td>{lab}</td>" + "".join(f"<td>{v:,.6g}</td>" for v in row) + "</tr>" in body
    nested = sections["nested"].body
    assert "mean 7," in nested and "<td>gap</td><td>0.5</td>" in nested
    assert "<td>2</td><td>11</td>" in nested  # outer fold 2: 5 + 6


def test_old_model_file_without_fold_sizes_or_source(data, tmp_path):
    """A file written before ``source``/``fold_count``/``fold_weight`` existed: sentences say what is missing."""
    X, Y = data
    est = StreamRidgeCV(cv=3, alphas=ALPHAS).fit(X, Y[:, 0])
    path = tmp_path / "old.npz"
    save_model(est, path)
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files if k != "fold_weight"}
    header = json.loads(bytes(arrays["header_json"]).decode())
    for key in ("source", "fold_count"):
        header.pop(key)
    arrays["header_json"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    np.savez(path, **arrays)
    out = tmp_path / "old.html"
    assert main(["report", str(path), "--out", str(out)]) == 0
    text = "".join(_parse(out).text)
    assert "Fold sizes are not stored in this model file." in text
    assert "not recorded in this model file" in text


def test_model_file_records_source_and_fold_counts(data, tmp_path):
    X, Y = data
    est = StreamRidgeCV(cv=3, alphas=ALPHAS).fit(X, Y[:, 0])
    save_model(est, tmp_path / "m.npz")
    header = load_model(tmp_path / "m.npz")._model_header
    assert header["source"] == "arrays (X: 300 x 6 float64)"
    assert np.sum(header["fold_count"]) == 300 and np.shape(header["fold_count"]) == (3, 1)
    np.testing.assert_array_equal(header["fold_count"], est.stats_.count)


# ---------------------------------------------------------------------- bad input
def _fails(argv, capsys, match):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("streamridge: error:") and match in err, err


def test_bad_inputs(data, tmp_path, capsys):
    X, Y = data
    est = StreamRidgeCV(cv=3, alphas=ALPHAS).fit(X, Y[:, 0])
    model = tmp_path / "m.npz"
    save_model(est, model)
    out = tmp_path / "r.html"
    (tmp_path / "notes.txt").write_text("hello")
    _fails(
        ["report", str(tmp_path / "notes.txt"), "--out", str(out)], capsys, "not a readable streamridge model"
    )
    save_stats(est.stats_, tmp_path / "s.npz")
    _fails(["report", str(tmp_path / "s.npz"), "--out", str(out)], capsys, "not a streamridge model")
    _fails(["report", str(tmp_path / "missing.npz"), "--out", str(out)], capsys, "does not exist")
    _fails(["report", str(model), "--out", str(tmp_path / "no" / "r.html")], capsys, "does not exist")
    (tmp_path / "adir").mkdir()
    _fails(["report", str(model), "--out", str(tmp_path / "adir")], capsys, "adir")  # unwritable even as root
    assert os.listdir(tmp_path / "adir") == []
    (tmp_path / "adir").rmdir()
    # a newer format version
    newer = tmp_path / "newer.npz"
    with zipfile.ZipFile(model) as z, np.load(model) as a:
        assert "header_json.npy" in z.namelist()
        arrays = {k: a[k] for k in a.files}
    header = json.loads(bytes(arrays["header_json"]).decode())
    header["format_version"] = 99
    arrays["header_json"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    np.savez(newer, **arrays)
    _fails(["report", str(newer), "--out", str(out)], capsys, "upgrade streamridge")
    assert not out.exists()
    assert sorted(os.listdir(tmp_path)) == ["m.npz", "newer.npz", "notes.txt", "s.npz"]


def test_unwritable_out(data, tmp_path, capsys):
    if os.geteuid() == 0:
        pytest.skip("root can write to read-only directories")
    X, Y = data
    model = tmp_path / "m.npz"
    save_model(StreamRidgeCV(cv=3, alphas=ALPHAS).fit(X, Y[:, 0]), model)
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        _fails(["report", str(model), "--out", str(ro / "r.html")], capsys, "not writable")
    finally:
        ro.chmod(0o700)


def test_missing_matplotlib_writes_nothing(data, tmp_path, capsys, monkeypatch):
    X, Y = data
    model = tmp_path / "m.npz"
    save_model(StreamRidgeCV(cv=3, alphas=ALPHAS).fit(X, Y[:, 0]), model)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    _fails(
        ["report", str(model), "--out", str(tmp_path / "r.html"), "--png", str(tmp_path / "png")],
        capsys,
        'pip install "streamridge[plot]"',
    )
    assert sorted(os.listdir(tmp_path)) == ["m.npz"]


def test_failure_while_writing_leaves_no_partial_file(data, tmp_path, monkeypatch):
    """Disk full while writing the second figure: no figure, no directory, the previous report untouched."""
    import builtins

    import streamridge.report.html as hr
    from streamridge.errors import OutputError

    X, Y = data
    model = tmp_path / "m.npz"
    save_model(StreamRidgeCV(cv=3, alphas=ALPHAS, selection="forward").fit(X, Y[:, 0]), model)
    out = tmp_path / "r.html"
    out.write_text("previous report")
    written = []

    def _png(path):  # staged temporaries are named .tmp-<name>-<random>
        return str(path).split("-")[-2].endswith(".png")

    def full_disk(path, mode="r", *a, **k):
        if "w" in mode and _png(path) and any(_png(p) for p in written):  # the second figure
            raise OSError(28, "No space left on device")
        written.append(path)
        return builtins.open(path, mode, *a, **k)

    monkeypatch.setattr(hr, "open", full_disk, raising=False)
    with pytest.raises(OutputError, match=r"cannot write --png .*selection\.png: No space left on device"):
        write_report(str(model), str(out), png_dir=str(tmp_path / "figs"))
    assert len(written) == 2  # the HTML and the first figure were staged, then removed
    assert out.read_text() == "previous report"
    assert sorted(os.listdir(tmp_path)) == ["m.npz", "r.html"]


def test_existing_outputs_need_overwrite(data, tmp_path, capsys):
    X, Y = data
    model = tmp_path / "m.npz"
    save_model(StreamRidgeCV(cv=3, alphas=ALPHAS).fit(X, Y[:, 0]), model)
    out, figs = tmp_path / "r.html", tmp_path / "figs"
    assert main(["report", str(model), "--out", str(out), "--png", str(figs)]) == 0
    first = out.read_bytes()
    _fails(["report", str(model), "--out", str(out)], capsys, "pass --overwrite to replace it")
    _fails(
        ["report", str(model), "--out", str(tmp_path / "new.html"), "--png", str(figs)],
        capsys,
        "lambda.png exists",
    )
    assert not (tmp_path / "new.html").exists()
    capsys.readouterr()
    assert main(["report", str(model), "--out", str(out), "--png", str(figs), "--overwrite"]) == 0
    assert out.read_bytes() == first  # the same model gives the same report
    (tmp_path / "notes.html").write_text("<html>my notes</html>")
    _fails(
        ["report", str(model), "--out", str(tmp_path / "notes.html"), "--overwrite"],
        capsys,
        "is not a report (HTML) written by streamridge",
    )
    assert (tmp_path / "notes.html").read_text() == "<html>my notes</html>"
    _fails(["report", str(model), "--out", str(model), "--overwrite"], capsys, "is an input of this command")
    _fails(["report", str(model), "--png", str(model)], capsys, "must be a directory")
    _fails(
        ["report", str(model), "--out", str(tmp_path / "x.html"), "--png", str(tmp_path / "no" / "figs")],
        capsys,
        "does not exist",
    )


# ---------------------------------------------------------------------- info
def test_info_prints_options_compactly(data, tmp_path, capsys):
    from streamridge.report.summary import option_text

    assert option_text(np.logspace(-10, 2, 25).tolist()) == "25 values, log-spaced 1e-10 .. 100"
    assert option_text([0.0, 0.5, 1.0, 1.5, 2.0]) == "5 values, evenly spaced 0 .. 2"
    assert option_text([3.0, 1.0, 7.0, 2.0, 5.0]) == "5 values, 1 .. 7"
    assert option_text([1.0, 2.0]) == "[1.0, 2.0]"
    X, Y = data
    est = StreamRidgeCV(cv=3, alphas=np.logspace(-10, 2, 25)).fit(X, Y[:, 0])
    save_model(est, tmp_path / "m.npz")
    assert main(["info", str(tmp_path / "m.npz")]) == 0
    out = capsys.readouterr().out
    assert "alphas=25 values, log-spaced 1e-10 .. 100;" in out
    assert "1e-09" not in out and "checkpoint" not in out  # no grid floats, no unset options
    assert f"streamridge report {tmp_path / 'm.npz'}" in out
    assert max(len(line) for line in out.splitlines() if str(tmp_path) not in line) <= 110


def test_feature_map_model_report_and_info(rng, tmp_path, capsys):
    """Regression: with a feature map coef_ has the map's width, not n_features_in_ (report raised IndexError)."""
    from streamridge.features import RandomHidden
    from streamridge.report.plot_data import feature_names, top_coefficients

    X = rng.standard_normal((300, 4))
    y = np.tanh(X[:, 0]) + X[:, 1] ** 2 + 0.1 * rng.standard_normal(300)
    est = StreamRidgeCV(cv=3, alphas=ALPHAS, features=RandomHidden(24, seed=0), feature_prefixes=[8, 24]).fit(
        X, y
    )
    assert est.n_features_in_ == 4 and est.coef_.shape == (24,)
    doc, model = _report(est, tmp_path)
    assert _images(doc) == {"lambda": 1, "prefix": 1, "coefficients": 1}
    text = "".join(doc.text)
    assert "4 inputs, mapped to 24 features (random_hidden)" in text
    names, values = top_coefficients(load_model(model), top=5)
    assert names == [feature_names(est)[j] for j in np.argsort(-np.abs(est.coef_))[:5]]
    assert "".join(f"{n}{v:.4g}" for n, v in zip(names, values)) in text
    capsys.readouterr()
    assert main(["info", str(model)]) == 0
    assert "features    4 inputs -> 24 mapped: " in capsys.readouterr().out
