"""Outputs: only what streamridge wrote is ever replaced (recognised by what only it writes), a name
taken while a command runs is never replaced, paths under a file are named as such; model files
whose feature map's arrays are malformed are refused when read; a 50-class report is readable."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from streamridge import StreamRidgeClassifierCV, StreamRidgeCV
from streamridge.errors import ModelFileError, OutputError
from streamridge.io.model_file import load_model, save_model
from streamridge.io.outputs import MARKER, Transaction, written_by_streamridge
from streamridge.sources import write_hdf5, write_zarr
from streamridge.stats.foldstats import load_stats, save_stats
from tests.io.test_hardening_files import error, ok, snapshot

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(tmp_path, rng):
    X = rng.standard_normal((300, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.standard_normal(300)
    return write_zarr(tmp_path / "d.zarr", X, y, np.arange(300) % 3, chunk_rows=100)


@pytest.fixture
def model(tmp_path, store, capsys):
    path = tmp_path / "m.npz"
    ok(capsys, "fit", "--data", store, "--out", path, "--quiet")
    return path


def _png_chunk(kind: bytes, data: bytes, *, crc: int | None = None) -> bytes:
    crc = zlib.crc32(kind + data) if crc is None else crc
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def _png(*chunks: bytes) -> bytes:
    ihdr = _png_chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
    return (
        b"\x89PNG\r\n\x1a\n" + ihdr + b"".join(chunks) + _png_chunk(b"IDAT", b"x") + _png_chunk(b"IEND", b"")
    )


# ---------------------------------------------------------------------- recognised by what only we write
LOOK_ALIKE_HTML = {
    "notes": b"# my notes\nrun `streamridge report m.npz --out notes.md` after each fit\n",
    "script": b"#!/bin/sh\nstreamridge report m.npz --out report.html --overwrite\n",
    "meta in the body": b"<!DOCTYPE html><html><head><title>x</title></head><body>"
    b"<meta name='generator' content='streamridge report'></body></html>",
    "text before the document": b"draft\n<!DOCTYPE html><html><head>"
    b"<meta name='generator' content='streamridge report'></head></html>",
    "no head": b"<meta name='generator' content='streamridge report'>\n",
    "another generator": b"<!DOCTYPE html><html><head><meta name='generator' content='streamridge reports'></head>",
}


@pytest.mark.parametrize("content", LOOK_ALIKE_HTML.values(), ids=LOOK_ALIKE_HTML.keys())
def test_report_never_replaces_a_file_that_mentions_streamridge_report(tmp_path, model, capsys, content):
    notes = tmp_path / "notes.md"
    notes.write_bytes(content)
    for extra in (["--overwrite"], []):
        line = error(capsys, "report", model, "--out", notes, *extra)
        assert (
            f"--out {notes} exists and is not a report (HTML) written by streamridge; it is never replaced"
            in line
        )
        assert "pass --overwrite" not in line  # never invites the flag for a file that is not ours
    assert notes.read_bytes() == content


def test_report_recognises_its_own_html_and_figures(tmp_path, model, capsys):
    from streamridge.io.output_kinds import is_report_html

    out, figs = tmp_path / "r.html", tmp_path / "figs"
    ok(capsys, "report", model, "--out", out, "--png", figs)
    assert is_report_html(out.read_bytes()) and is_report_html(out.read_bytes()[:200])
    for png in figs.iterdir():
        assert written_by_streamridge(str(png), "figure") and not written_by_streamridge(str(png), "report")
    assert "pass --overwrite to replace it" in error(capsys, "report", model, "--out", out, "--png", figs)
    ok(capsys, "report", model, "--out", out, "--png", figs, "--overwrite")


LOOK_ALIKE_PNG = {
    "text naming the tag": b"a figure made by streamridge report",
    "signature then the tag": b"\x89PNG\r\n\x1a\n" + b"Software\x00streamridge report",
    "another Software": _png(_png_chunk(b"tEXt", b"Software\x00matplotlib version3.11")),
    "tag after the image data": _png()[:-12]
    + _png_chunk(b"tEXt", b"Software\x00streamridge report")
    + _png_chunk(b"IEND", b""),
    "bad CRC": _png(_png_chunk(b"tEXt", b"Software\x00streamridge report", crc=1)),
    "no IHDR first": b"\x89PNG\r\n\x1a\n" + _png_chunk(b"tEXt", b"Software\x00streamridge report"),
}


@pytest.mark.parametrize("content", LOOK_ALIKE_PNG.values(), ids=LOOK_ALIKE_PNG.keys())
def test_report_never_replaces_a_figure_it_did_not_write(tmp_path, model, capsys, content):
    figs = tmp_path / "figs"
    figs.mkdir()
    (figs / "lambda.png").write_bytes(content)
    line = error(capsys, "report", model, "--out", tmp_path / "r.html", "--png", figs, "--overwrite")
    assert "lambda.png exists and is not a report figure (PNG) written by streamridge" in line
    assert (figs / "lambda.png").read_bytes() == content and not (tmp_path / "r.html").exists()
    from streamridge.io.output_kinds import is_report_png

    assert is_report_png(_png(_png_chunk(b"tEXt", b"Software\x00streamridge report")))


def test_model_and_statistics_look_alikes_are_never_replaced(tmp_path, store, model, capsys):
    """A model or statistics file is recognised by the format field of its JSON header, nothing else."""
    header = np.frombuffer(
        json.dumps({"format": "other-model", "note": "streamridge-model"}).encode(), np.uint8
    )
    np.savez(tmp_path / "zip-alike.npz", header_json=header, meta_json=header)
    (tmp_path / "text-alike.npz").write_text(
        '{"format": "streamridge-model"} header_json meta_json streamridge-stats'
    )
    stats = tmp_path / "s.npz"
    ok(capsys, "stats", "--data", store, "--out", stats, "--quiet")
    for target in (tmp_path / "zip-alike.npz", tmp_path / "text-alike.npz"):
        before = target.read_bytes()
        for argv in (
            ["fit", "--data", store, "--out", target],
            ["stats", "--data", store, "--out", target],
            ["merge", stats, "--out", target],
            ["fit", "--data", store, "--out", tmp_path / "n.npz", "--save-stats", target],
        ):
            line = error(capsys, *argv, "--overwrite", "--quiet")
            assert (
                f"{target} exists and is not a" in line
                and "written by streamridge; it is never replaced" in line
            )
        assert target.read_bytes() == before
    assert written_by_streamridge(str(model), "model") and not written_by_streamridge(str(model), "stats")
    assert written_by_streamridge(str(stats), "stats") and not written_by_streamridge(str(stats), "model")


def test_prediction_store_with_files_of_the_user_is_never_replaced(tmp_path, store, model, capsys):
    """The marker attribute alone does not make a store ours: its top level holds only zarr entries."""
    preds = tmp_path / "p.zarr"
    ok(capsys, "predict", "--model", model, "--data", store, "--out", preds, "--quiet")
    assert written_by_streamridge(str(preds), "predictions")
    (preds / "notes.txt").write_text("results of a week")
    before = snapshot(preds)
    line = error(capsys, "predict", "--model", model, "--data", store, "--out", preds, "--overwrite")
    assert "is not a prediction store written by streamridge; it is never replaced" in line
    assert snapshot(preds) == before


@pytest.mark.parametrize("kind", ["predictions", "demo-data"])
def test_marker_look_alikes(tmp_path, rng, kind):
    text = tmp_path / "p.h5"
    text.write_text(f'{{"{MARKER}": "{kind}"}}')
    fake = tmp_path / "fake.zarr"
    fake.mkdir()
    (fake / ".zattrs").write_text(f"{MARKER} = {kind}")
    other = write_hdf5(tmp_path / "o.h5", rng.standard_normal((3, 2)), root_attrs={MARKER: "something"})
    ours = write_hdf5(tmp_path / "ours.h5", rng.standard_normal((3, 2)), root_attrs={MARKER: kind})
    found = [written_by_streamridge(str(p), kind) for p in (text, fake, other, ours)]
    assert found == [False, False, False, True]


def test_prediction_and_demo_look_alikes_are_never_replaced(tmp_path, rng, store, model, capsys, monkeypatch):
    import streamridge.cli.demo

    text = tmp_path / "p.h5"
    text.write_text(f'{{"{MARKER}": "predictions"}} written by streamridge predict')
    line = error(capsys, "predict", "--model", model, "--data", store, "--out", text, "--overwrite")
    assert "is not a prediction store written by streamridge; it is never replaced" in line
    monkeypatch.setattr(
        streamridge.cli.demo, "write_demo", lambda *a, **k: pytest.fail("demo data was written")
    )
    demo = tmp_path / "demo"
    write_zarr(demo / "narma10.zarr", rng.standard_normal((4, 2)), root_attrs={MARKER: "demo-data"})
    (demo / "narma10.zarr" / "my-notes.txt").write_text("notes")
    before = snapshot(tmp_path)
    line = error(capsys, "demo", "--quick", "--out", demo, "--overwrite")
    assert (
        "narma10.zarr exists and is not a demo data set written by streamridge; it is never replaced" in line
    )
    assert snapshot(tmp_path) == before


# ---------------------------------------------------------------------- a name taken while the command ran
def _other_model(rng, path):
    X = rng.standard_normal((60, 3))
    save_model(StreamRidgeCV(cv=3).fit(X, X @ np.array([9.0, 9.0, 9.0])), path)
    return Path(path).read_bytes()


def _race(monkeypatch, make_other):
    """``save_model`` writes the command's model, then another run's output appears at the target."""
    import streamridge.io.model_file as model_io

    real = model_io.save_model

    def save(est, path, **kwargs):
        real(est, path, **kwargs)
        target = os.path.join(os.path.dirname(path), os.path.basename(path)[len(".tmp-") :].rsplit("-", 1)[0])
        make_other(target)

    monkeypatch.setattr(model_io, "save_model", save)


def test_fit_never_replaces_a_model_written_while_it_ran(tmp_path, store, rng, capsys, monkeypatch):
    out = tmp_path / "m.npz"
    other: dict[str, bytes] = {}
    _race(monkeypatch, lambda target: other.update(bytes=_other_model(rng, target)))
    line = error(capsys, "fit", "--data", store, "--out", out, "--save-stats", tmp_path / "s.npz", "--quiet")
    assert line == (
        f"streamridge: error: --out {out} exists now (a model file written by another run); it was kept and "
        "nothing was written; choose another path"
    )
    assert out.read_bytes() == other["bytes"]
    assert sorted(os.listdir(tmp_path)) == ["d.zarr", "m.npz"]  # no statistics, no temporaries


def test_fit_with_overwrite_replaces_only_a_model(tmp_path, store, rng, capsys, monkeypatch):
    out = tmp_path / "m.npz"
    _race(monkeypatch, lambda target: _other_model(rng, target))
    ok(capsys, "fit", "--data", store, "--out", out, "--quiet", "--overwrite")
    np.testing.assert_allclose(load_model(out).coef_, [1.0, -2.0, 0.5], atol=0.05)  # this run's model
    _race(monkeypatch, lambda target: Path(target).write_text("a file of the user"))
    line = error(capsys, "fit", "--data", store, "--out", out, "--quiet", "--overwrite")
    assert "exists now (not a model file written by streamridge); it was kept" in line
    assert out.read_text() == "a file of the user"


def test_predict_never_replaces_a_store_written_while_it_ran(
    tmp_path, store, model, rng, capsys, monkeypatch
):
    import streamridge.sources

    preds = tmp_path / "p.zarr"
    real = streamridge.sources.write_zarr

    def write(tmp, *args, **kwargs):
        real(tmp, *args, **kwargs)
        real(preds, rng.standard_normal((4, 1)), root_attrs={MARKER: "predictions"})

    monkeypatch.setattr(streamridge.sources, "write_zarr", write)
    line = error(capsys, "predict", "--model", model, "--data", store, "--out", preds, "--quiet")
    assert "exists now (a prediction store written by another run); it was kept" in line
    from streamridge.sources import open_source

    assert open_source(str(preds), require_y=False).n_rows() == 4
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]


def test_transaction_publishes_all_or_none(tmp_path):
    """The second output's name is taken: the first, already in place, is removed again."""
    first, second = tmp_path / "a.npz", tmp_path / "b"
    with pytest.raises(OutputError, match=r"b exists now \(not a prediction store"):
        with Transaction() as tx:
            with tx.writing(str(first), "model") as tmp:
                Path(tmp).write_text("model")
            with tx.writing(str(second), "predictions") as tmp:
                os.mkdir(tmp)
                Path(tmp, "zarr.json").write_text("{}")
            second.mkdir()
            (second / "mine.txt").write_text("mine")
    assert sorted(os.listdir(tmp_path)) == ["b"] and os.listdir(second) == ["mine.txt"]


def test_a_failed_move_restores_every_replaced_output(tmp_path, rng, monkeypatch):
    """With --overwrite: the model is replaced, then moving the store in fails; both are as before."""
    import errno

    model, store = tmp_path / "m.npz", tmp_path / "p.zarr"
    _other_model(rng, model)
    write_zarr(store, rng.standard_normal((5, 2)), root_attrs={MARKER: "predictions"})
    before = snapshot(tmp_path)
    real = os.replace

    def replace(src, dst):
        if os.path.basename(src).startswith(".tmp-p.zarr-"):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OutputError, match=r"^cannot write --png .*p\.zarr: Input/output error$"):
        with Transaction(overwrite=True) as tx:
            with tx.writing(str(model), "model") as tmp:
                _other_model(rng, tmp)
            with tx.writing(str(store), "predictions", "--png") as tmp:
                write_zarr(tmp, rng.standard_normal((7, 2)), root_attrs={MARKER: "predictions"})
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("theirs_dir", [False, True], ids=["their-file", "their-dir"])
@pytest.mark.parametrize("ours_dir", [False, True], ids=["our-file", "our-dir"])
def test_publish_new_never_replaces_an_existing_name(tmp_path, theirs_dir, ours_dir):
    from streamridge.io.outputs import publish_new

    target, tmp = tmp_path / "target", tmp_path / "tmp"
    for path, is_dir, text in ((target, theirs_dir, "theirs"), (tmp, ours_dir, "ours")):
        if is_dir:
            path.mkdir()
            (path / "x").write_text(text)
        else:
            path.write_text(text)
    before = snapshot(tmp_path)
    with pytest.raises(OSError):
        publish_new(str(tmp), str(target))
    assert snapshot(tmp_path) == before


def test_two_fits_started_together_keep_one_model(tmp_path, rng):
    """Two processes write the same new name: one exits 0, the other exits 2, the model is the one of the first."""
    stores = []
    for k, w in enumerate(([1.0, 2.0, 3.0], [-5.0, 0.0, 5.0])):
        X = rng.standard_normal((2000, 3))
        stores.append(write_zarr(tmp_path / f"d{k}.zarr", X, X @ np.array(w), chunk_rows=500))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    out = tmp_path / "m.npz"
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "streamridge", "fit", "--data", s, "--out", str(out), "--quiet"],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for s in stores
    ]
    results = [(p.wait(timeout=120), p.communicate()[1]) for p in procs]
    assert sorted(code for code, _ in results) == [0, 2], results
    winner = next(k for k, (code, _) in enumerate(results) if code == 0)
    loser = results[1 - winner][1].strip().splitlines()
    assert len(loser) == 1 and f"--out {out} exists" in loser[0], loser
    np.testing.assert_allclose(load_model(out).coef_, [[1.0, 2.0, 3.0], [-5.0, 0.0, 5.0]][winner], atol=1e-3)


# ---------------------------------------------------------------------- a path under a file
def test_out_under_a_file_says_it_is_a_file(tmp_path, store, model, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    inside = f"{model.name}/x"
    cases = [
        (["report", model.name, "--out", f"{inside}.html"], "--out"),
        (["report", model.name, "--out", "r.html", "--png", f"{inside}/figs"], "--png"),
        (["fit", "--data", store, "--out", f"{inside}.npz"], "--out"),
        (["fit", "--data", store, "--out", "n.npz", "--save-stats", f"{inside}.npz"], "--save-stats"),
        (["stats", "--data", store, "--out", f"{inside}.npz"], "--out"),
        (["predict", "--model", model.name, "--data", store, "--out", f"{inside}.zarr"], "--out"),
        (["demo", "--quick", "--out", f"{inside}/demo"], "--out"),
    ]
    for argv, option in cases:
        line = error(capsys, *argv)
        assert f"{option} {inside}" in line and f"{model} is a file, not a directory" in line, line
    line = error(capsys, "fit", "--data", store, "--out", "n.npz", "--checkpoint", f"{inside}/ck")
    assert line.endswith(f"--checkpoint {inside}/ck cannot be created: {model} is a file, not a directory")
    assert sorted(os.listdir(tmp_path)) == ["d.zarr", "m.npz"]


# ---------------------------------------------------------------------- not a model file
@pytest.mark.parametrize(
    ("content", "what"),
    [
        (b"run: streamridge fit\n", "a text file"),
        (b"", "an empty file"),
        (None, "a .npy array"),
        (bytes(range(256)) * 4, "binary data"),
    ],
)
def test_report_of_a_file_that_is_not_an_npz_names_what_it_is(tmp_path, capsys, content, what):
    path = tmp_path / "m.npz"
    if content is None:
        np.save(tmp_path / "m.npy", np.arange(3.0))
        os.replace(tmp_path / "m.npy", path)
    else:
        path.write_bytes(content)
    for argv in (["report", path], ["info", path]):
        line = error(capsys, *argv)
        assert line.endswith(
            f"{str(path)!r} is not a readable streamridge model file: it is {what}, not a .npz archive"
        )
        assert "pickle" not in line
    line = error(capsys, "merge", path, "--out", tmp_path / "s.npz")
    assert line.endswith(
        f"{str(path)!r} is not a streamridge statistics file: it is {what}, not a .npz archive; "
        "give a statistics file (written by streamridge stats, merge or fit --save-stats)"
    )


# ---------------------------------------------------------------------- the feature map's arrays
def _map_model(tmp_path, fmap, name="f.npz"):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((120, 3))
    path = tmp_path / name
    save_model(StreamRidgeCV(cv=3, features=fmap).fit(X, X[:, 0] - X[:, 2]), path)
    return path


def _with_arrays(path, out, **arrays):
    with np.load(path, allow_pickle=False) as z:
        content = {k: np.array(z[k]) for k in z.files}
    missing = [k for k in arrays if k not in content]
    assert not missing, (missing, sorted(content))
    content.update(arrays)
    np.savez(out, **content)
    return out


def _nan(a):
    a = a.copy()
    a.flat[0] = np.nan
    return a


def test_wrong_shaped_reservoir_is_refused_by_info_report_and_predict(tmp_path, store, capsys):
    from streamridge.features import EchoStateNetwork

    good = _map_model(tmp_path, EchoStateNetwork(20, seed=1))
    with np.load(good) as z:
        w_in = np.array(z["fmap.arrays.w_in_"])
    cases = [
        (
            dict(**{"fmap.arrays.w_res_": np.zeros((3, 3))}),
            "feature map esn: array w_res_ has shape (3, 3), expected (20, 20)",
        ),
        (dict(**{"fmap.arrays.w_in_": _nan(w_in)}), "feature map esn: array w_in_ holds NaN or inf"),
    ]
    for arrays, problem in cases:
        bad = _with_arrays(good, tmp_path / "bad.npz", **arrays)
        expected = f"streamridge: error: not a valid streamridge model file: {bad}: {problem}"
        for argv in (
            ["info", bad],
            ["report", bad, "--out", tmp_path / "r.html"],
            ["predict", "--model", bad, "--data", store, "--out", tmp_path / "p.zarr"],
        ):
            assert error(capsys, *argv) == expected
        with pytest.raises(ModelFileError, match="array w_"):
            load_model(bad)
    assert sorted(os.listdir(tmp_path)) == ["bad.npz", "d.zarr", "f.npz"]


def _maps():
    from streamridge.features import Concat, Distances, Nystroem, Pipeline, RandomHidden

    return {
        "random_hidden": (
            RandomHidden(8, seed=0),
            "fmap.arrays.weights_",
            np.zeros((8, 4)),
            "feature map random_hidden: array weights_ has shape (8, 4), expected (8, 3)",
        ),
        "nystroem": (
            Nystroem(10, seed=0),
            "fmap.arrays.normalization_",
            np.zeros((9, 9)),
            "feature map nystroem: array normalization_ has shape (9, 9), expected (10, 10)",
        ),
        "distances": (
            Distances(6, seed=0),
            "fmap.arrays.references_",
            np.zeros((6,)),
            "feature map distances: array references_ has shape (6,), expected (6, 3)",
        ),
        "pipeline": (
            Pipeline([RandomHidden(5, seed=0), RandomHidden(4, seed=1)]),
            "fmap.params.maps.1.arrays.weights_",
            np.zeros((4, 3)),
            "feature map pipeline part 1: random_hidden: array weights_ has shape (4, 3), expected (4, 5)",
        ),
        "concat": (
            Concat([RandomHidden(5, seed=0), Nystroem(4, seed=0)]),
            "fmap.params.maps.0.arrays.bias_",
            np.full(5, np.inf),
            "feature map concat part 0: random_hidden: array bias_ holds NaN or inf",
        ),
    }


@pytest.mark.parametrize("name", ["random_hidden", "nystroem", "distances", "pipeline", "concat"])
def test_every_map_checks_its_arrays_when_read(tmp_path, name):
    fmap, key, array, problem = _maps()[name]
    good = _map_model(tmp_path, fmap)
    load_model(good)  # the map as written passes
    bad = _with_arrays(good, tmp_path / "bad.npz", **{key: array})
    with pytest.raises(ModelFileError) as info:
        load_model(bad)
    assert str(info.value) == f"not a valid streamridge model file: {bad}: {problem}"


def test_statistics_with_a_corrupted_map_are_refused(tmp_path):
    from streamridge.features import RandomHidden

    rng = np.random.default_rng(0)
    X = rng.standard_normal((90, 3))
    path = tmp_path / "s.npz"
    save_stats(StreamRidgeCV(cv=3, features=RandomHidden(4, seed=0)).fit(X, X[:, 0]).stats_, path)
    with np.load(path) as z:
        content = {k: np.array(z[k]) for k in z.files}
    meta = json.loads(bytes(content["meta_json"]).decode())
    arrays = meta["features"]["arrays"]
    key = next(k for k in arrays if k.endswith("weights_"))
    arrays[key]["shape"] = [2, 6]
    content["meta_json"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    np.savez(tmp_path / "bad.npz", **content)
    with pytest.raises(ModelFileError) as info:
        load_stats(tmp_path / "bad.npz")
    assert str(info.value) == (
        f"not a valid streamridge statistics file: {tmp_path / 'bad.npz'}: "
        "feature map random_hidden: array weights_ has shape (2, 6), expected (4, 3)"
    )


# ---------------------------------------------------------------------- a report of many classes
def _class_labels(monkeypatch, n_classes, labels=str):
    """The class labels shown on the report's figure of an ``n_classes`` classifier, as it is saved."""
    import streamridge.report.html as hr

    rng = np.random.default_rng(5)
    X = rng.standard_normal((30 * n_classes, 6))
    y = np.array([labels(c) for c in range(n_classes)])[np.arange(30 * n_classes) % n_classes]
    model = StreamRidgeClassifierCV(cv=3, alphas=[0.1, 1.0, 10.0]).fit(X, y)
    from matplotlib.figure import Figure

    figures = []
    real = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **k: figures.append(fig) or real(fig, *a, **k))
    section = hr.classes_section(model)
    assert section.png is not None and len(figures) == 1
    ax = figures[0].axes[0]
    shown = [t for t in ax.get_yticklabels() + ax.get_xticklabels() if t.get_text() and t.get_visible()]
    boxes = [t.get_window_extent() for t in shown]  # where the saved figure has them (laid out at savefig)
    overlaps = [
        (shown[i].get_text(), shown[j].get_text())
        for i in range(len(boxes))
        for j in range(i + 1, len(boxes))
        if boxes[i].overlaps(boxes[j])
    ]
    assert overlaps == []
    return model, [t.get_text() for t in shown if "(n=" in t.get_text()]


def test_a_50_class_report_shows_every_label_without_overlap(monkeypatch):
    model, shown = _class_labels(monkeypatch, 50)
    assert shown == [f"{c} (n=30)" for c in model.classes_]


def test_a_300_class_report_thins_its_labels_to_every_kth(monkeypatch):
    model, shown = _class_labels(monkeypatch, 300, lambda c: f"class_{c:03d}")
    k = next(k for k in range(2, 10) if len(model.classes_[::k]) == len(shown))
    assert shown == [f"{c} (n=30)" for c in model.classes_[::k]]
