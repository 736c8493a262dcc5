"""Files: no user file is ever destroyed; outputs checked before the pass, all or none;
files created with the user's umask; model and statistics files validated by a schema."""

from __future__ import annotations

import errno
import json
import os
import stat

import numpy as np
import pytest

from streamridge import cli
from streamridge.errors import ModelFileError
from streamridge.io.model_file import load_model
from streamridge.sources import write_hdf5, write_zarr
from streamridge.stats.foldstats import load_stats


@pytest.fixture
def store(tmp_path, rng):
    X = rng.standard_normal((400, 4))
    y = X @ rng.standard_normal(4) + 0.1 * rng.standard_normal(400)
    return write_zarr(tmp_path / "d.zarr", X, y, np.arange(400) % 4, chunk_rows=100)


@pytest.fixture
def model(tmp_path, store, capsys):
    path = tmp_path / "m.npz"
    assert cli.main(["fit", "--data", store, "--out", str(path), "--quiet", "--include-stats"]) == 0
    capsys.readouterr()
    return path


def error(capsys, *argv):
    """Run the CLI; assert exit code 2 and one clean line; return the line."""
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2, (code, out, err)
    assert len(lines) == 1 and lines[0].startswith("streamridge: error: "), err
    assert ".tmp-" not in err and "[Errno" not in err and "Traceback" not in err, err
    return lines[0]


def ok(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def snapshot(directory):
    """Every file below ``directory`` with its bytes."""
    found = {}
    for root, _, files in os.walk(directory):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as fh:
                found[os.path.relpath(path, directory)] = fh.read()
    return found


def no_pass(monkeypatch):
    """Make any attempt to open the data fail loudly (the check must come before the pass)."""
    import streamridge.sources

    def boom(*args, **kwargs):
        raise AssertionError("the data was opened before the outputs were checked")

    monkeypatch.setattr(streamridge.sources, "open_source", boom)


# ---------------------------------------------------------------------- 7.1 never replace what is not ours
def test_predict_refuses_a_directory_that_is_not_a_prediction_store(tmp_path, store, model, capsys):
    results = tmp_path / "results"
    results.mkdir()
    (results / "notes.txt").write_text("a week of work")
    (results / "sub").mkdir()
    (results / "sub" / "table.csv").write_text("1,2,3")
    before = snapshot(results)
    for extra in ([], ["--overwrite"]):
        line = error(capsys, "predict", "--model", model, "--data", store, "--out", results, *extra)
        assert "not a prediction store written by streamridge" in line and "never replaced" in line
    assert snapshot(results) == before


@pytest.mark.parametrize("which", ["cwd", "home", "data_parent", "model_parent"])
def test_predict_never_replaces_cwd_home_or_parents_of_inputs(tmp_path, rng, capsys, monkeypatch, which):
    work = tmp_path / "work"
    (work / "data").mkdir(parents=True)
    (work / "models").mkdir()
    data = write_zarr(work / "data" / "d.zarr", rng.standard_normal((100, 3)), rng.standard_normal(100))
    model = work / "models" / "m.npz"
    ok(capsys, "fit", "--data", data, "--out", model, "--quiet")
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(work))
    target = {"cwd": ".", "home": "~", "data_parent": work / "data", "model_parent": work / "models"}[which]
    before = snapshot(work)
    line = error(capsys, "predict", "--model", model, "--data", data, "--out", target, "--overwrite")
    assert "never replaced" in line
    assert snapshot(work) == before


def test_predict_replaces_its_own_store_only_with_overwrite(tmp_path, store, model, capsys):
    from streamridge.io.outputs import written_by_streamridge

    preds = tmp_path / "p.zarr"
    ok(capsys, "predict", "--model", model, "--data", store, "--out", preds, "--quiet")
    assert written_by_streamridge(str(preds), "predictions")
    line = error(capsys, "predict", "--model", model, "--data", store, "--out", preds)
    assert "pass --overwrite" in line
    ok(capsys, "predict", "--model", model, "--data", store, "--out", preds, "--quiet", "--overwrite")
    assert written_by_streamridge(str(preds), "predictions")
    h5 = tmp_path / "p.h5"
    ok(capsys, "predict", "--model", model, "--data", store, "--out", h5, "--quiet")
    assert written_by_streamridge(str(h5), "predictions")
    ok(capsys, "predict", "--model", model, "--data", store, "--out", h5, "--quiet", "--overwrite")


def test_predict_refuses_a_zarr_or_hdf5_store_not_written_by_predict(tmp_path, rng, store, model, capsys):
    other = write_zarr(tmp_path / "other.zarr", rng.standard_normal((10, 4)))
    other_h5 = write_hdf5(tmp_path / "other.h5", rng.standard_normal((10, 4)))
    for target in (other, other_h5):
        before = snapshot(tmp_path / "other.zarr"), os.path.getsize(other_h5)
        line = error(capsys, "predict", "--model", model, "--data", store, "--out", target, "--overwrite")
        assert "not a prediction store" in line
        assert (snapshot(tmp_path / "other.zarr"), os.path.getsize(other_h5)) == before


@pytest.mark.parametrize("command", ["fit", "stats", "merge"])
def test_npz_outputs_replace_only_their_own_kind_with_overwrite(tmp_path, store, model, capsys, command):
    stats = tmp_path / "s.npz"
    ok(capsys, "stats", "--data", store, "--out", stats, "--quiet")
    foreign = tmp_path / "mine.npz"
    np.savez(foreign, precious=np.arange(5))
    text = tmp_path / "notes.txt"
    text.write_text("keep me")
    argv = {
        "fit": ["fit", "--data", store, "--quiet", "--out"],
        "stats": ["stats", "--data", store, "--quiet", "--out"],
        "merge": ["merge", stats, "--quiet", "--out"],
    }[command]
    own = tmp_path / "own.npz"
    ok(capsys, *argv, own)
    for target in (foreign, text, model if command != "fit" else stats):
        before = target.read_bytes()
        line = error(capsys, *argv, target, "--overwrite")
        assert "written by streamridge" in line and "never replaced" in line
        assert target.read_bytes() == before
    assert "pass --overwrite" in error(capsys, *argv, own)
    ok(capsys, *argv, own, "--overwrite")


def test_demo_refuses_foreign_outputs_before_any_work(tmp_path, capsys, monkeypatch):
    import streamridge.cli.demo

    monkeypatch.setattr(
        streamridge.cli.demo, "write_demo", lambda *a, **k: pytest.fail("demo data was written")
    )
    target = tmp_path / "demo"
    target.mkdir()
    (target / "model.npz").write_text("someone's file")
    assert "never replaced" in error(capsys, "demo", "--quick", "--out", target, "--overwrite")
    (target / "model.npz").unlink()
    (target / "narma10.zarr").mkdir()
    (target / "narma10.zarr" / "data.bin").write_bytes(b"123")
    assert "not a demo data set" in error(capsys, "demo", "--quick", "--out", target, "--overwrite")
    assert (target / "narma10.zarr" / "data.bin").read_bytes() == b"123"
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert "needs a directory" in error(capsys, "demo", "--quick", "--out", afile)


# ---------------------------------------------------------------------- 7.2 symlinks and hard links
def test_output_through_a_symlink_of_the_data_is_refused(tmp_path, store, model, capsys):
    link = tmp_path / "link.zarr"
    link.symlink_to(store)
    before = snapshot(store)
    line = error(capsys, "predict", "--model", model, "--data", link, "--out", store, "--overwrite")
    assert "is an input" in line
    line = error(capsys, "predict", "--model", model, "--data", store, "--out", link, "--overwrite")
    assert "is an input" in line
    assert snapshot(store) == before


def test_output_hard_linked_to_an_input_is_refused(tmp_path, store, capsys):
    s1 = tmp_path / "s1.npz"
    ok(capsys, "stats", "--data", store, "--out", s1, "--quiet")
    hard = tmp_path / "hard.npz"
    os.link(s1, hard)
    before = s1.read_bytes()
    assert "is an input" in error(capsys, "merge", s1, "--out", hard, "--overwrite")
    assert "is an input" in error(capsys, "fit", "--stats", s1, "--out", hard, "--overwrite")
    assert s1.read_bytes() == before and hard.read_bytes() == before


def test_output_inside_the_input_store_is_refused(tmp_path, store, model, capsys):
    line = error(capsys, "predict", "--model", model, "--data", store, "--out", os.path.join(store, "p.zarr"))
    assert "inside the input" in line


# ---------------------------------------------------------------------- 7.3 all outputs or none
def test_save_stats_checked_before_the_pass(tmp_path, store, capsys, monkeypatch):
    no_pass(monkeypatch)
    m = tmp_path / "m.npz"
    (tmp_path / "sdir").mkdir()
    assert "is an existing directory" in error(
        capsys, "fit", "--data", store, "--out", m, "--save-stats", tmp_path / "sdir"
    )
    assert "does not exist" in error(
        capsys, "fit", "--data", store, "--out", m, "--save-stats", tmp_path / "no" / "s.npz"
    )
    assert "same path as --out" in error(capsys, "fit", "--data", store, "--out", m, "--save-stats", m)
    assert not m.exists()


def test_failed_save_stats_leaves_neither_file(tmp_path, store, capsys, monkeypatch):
    import streamridge.stats.foldstats

    m, s = tmp_path / "m.npz", tmp_path / "s.npz"

    def full(stats, path):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(streamridge.stats.foldstats, "save_stats", full)
    line = error(capsys, "fit", "--data", store, "--out", m, "--save-stats", s, "--quiet")
    assert "No space left on device" in line and str(s) in line
    assert sorted(os.listdir(tmp_path)) == ["d.zarr"]


def test_disk_full_names_the_output_not_a_temporary(tmp_path, store, capsys, monkeypatch):
    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    m, s = tmp_path / "m.npz", tmp_path / "s.npz"
    line = error(capsys, "fit", "--data", store, "--out", m, "--save-stats", s, "--quiet")
    assert line == f"streamridge: error: cannot write --out {m}: No space left on device"
    assert sorted(os.listdir(tmp_path)) == ["d.zarr"]


def test_failed_save_stats_keeps_the_previous_model_and_statistics(tmp_path, store, capsys, monkeypatch):
    import streamridge.stats.foldstats

    m, s = tmp_path / "m.npz", tmp_path / "s.npz"
    ok(capsys, "fit", "--data", store, "--out", m, "--save-stats", s, "--quiet")
    before = m.read_bytes(), s.read_bytes()

    def full(stats, path):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(streamridge.stats.foldstats, "save_stats", full)
    error(
        capsys,
        "fit",
        "--data",
        store,
        "--out",
        m,
        "--save-stats",
        s,
        "--alphas",
        "1",
        "--quiet",
        "--overwrite",
    )
    assert (m.read_bytes(), s.read_bytes()) == before
    assert sorted(os.listdir(tmp_path)) == ["d.zarr", "m.npz", "s.npz"]


# ---------------------------------------------------------------------- 7.12 clear messages, before the pass
def test_messages_name_no_temporary_or_errno(tmp_path, store, model, capsys, monkeypatch):
    (tmp_path / "adir").mkdir()
    afile = tmp_path / "afile.zarr"
    afile.write_text("x")
    no_pass(monkeypatch)
    assert "existing directory" in error(capsys, "fit", "--data", store, "--out", tmp_path / "adir")
    assert "existing directory" in error(capsys, "stats", "--data", store, "--out", tmp_path / "adir")
    assert "not a prediction store" in error(
        capsys, "predict", "--model", model, "--data", store, "--out", afile
    )
    ckpt = tmp_path / "ckpt"
    ckpt.write_text("x")
    for command in ("fit", "stats"):
        line = error(capsys, command, "--data", store, "--out", tmp_path / "o.npz", "--checkpoint", ckpt)
        assert "must be a directory" in line


def test_python_save_to_a_directory_names_the_path_not_a_temporary(tmp_path, model):
    from streamridge.io.model_file import save_model

    (tmp_path / "adir").mkdir()
    with pytest.raises(ModelFileError) as e:
        save_model(load_model(model), tmp_path / "adir")
    assert "is a directory" in str(e.value) and ".tmp-" not in str(e.value)


# ---------------------------------------------------------------------- 7.13 umask
@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_outputs_follow_the_umask(tmp_path, store, capsys, umask):
    old = os.umask(umask)
    try:
        m, s, z, h = tmp_path / "m.npz", tmp_path / "s.npz", tmp_path / "p.zarr", tmp_path / "p.h5"
        ok(capsys, "fit", "--data", store, "--out", m, "--save-stats", s, "--quiet")
        ok(capsys, "merge", s, "--out", tmp_path / "all.npz", "--quiet")
        ok(capsys, "predict", "--model", m, "--data", store, "--out", z, "--quiet")
        ok(capsys, "predict", "--model", m, "--data", store, "--out", h, "--quiet")
    finally:
        os.umask(old)
    files = [m, s, tmp_path / "all.npz", h, z / "zarr.json"]
    modes = {p.name: stat.S_IMODE(os.stat(p).st_mode) for p in files}
    assert modes == {p.name: 0o666 & ~umask for p in files}
    assert stat.S_IMODE(os.stat(z).st_mode) == 0o777 & ~umask


# ---------------------------------------------------------------------- 7.10 schemas
def rewrite(path, out, *, header=None, meta=None, arrays=None):
    with np.load(path, allow_pickle=False) as z:
        content = {k: np.array(z[k]) for k in z.files}
    key = "header_json" if "header_json" in content else "meta_json"
    doc = json.loads(bytes(content[key]).decode())
    doc.update(header or meta or {})
    content[key] = np.frombuffer(json.dumps(doc).encode(), dtype=np.uint8)
    content.update(arrays or {})
    np.savez(out, **content)
    return out


MODEL_BREAKS = [
    {"params": [1, 2]},
    {"scheme": None},
    {"timings": [1.0, 2.0]},
    {"n_features_in": 10**12},
    {"n_features_in": "4"},
    {"y_1d": "yes"},
    {"classes": {"a": 1}},
    {"feature_names": [1, 2, 3, 4]},
    {"feature_names": ["a"]},
    {"n_folds": -3},
    {"n_targets": 0},
    {"selected_features": [99]},
    {"scheme": {"kind": "hash", "n_folds": "five"}},
    {"stats_meta": {"scheme": None}},
]


@pytest.mark.parametrize(
    "change", MODEL_BREAKS, ids=[next(iter(c)) + "-" + str(i) for i, c in enumerate(MODEL_BREAKS)]
)
def test_model_file_schema(tmp_path, store, model, capsys, change):
    bad = rewrite(model, tmp_path / "bad.npz", header=change)
    with pytest.raises(ModelFileError) as e:
        load_model(bad)
    message = str(e.value)
    assert message.startswith(f"not a valid streamridge model file: {bad}: ") and "\n" not in message
    for argv in (["info", bad], ["info", bad, "--json"], ["predict", "--model", bad, "--data", store, "--out", tmp_path / "p.zarr"],
                 ["fit", "--stats", bad, "--out", tmp_path / "m2.npz"]):  # fmt: skip
        assert "not a valid streamridge model file" in error(capsys, *argv)
    assert not (tmp_path / "p.zarr").exists() and not (tmp_path / "m2.npz").exists()


def test_model_file_arrays_must_match_the_header(tmp_path, model):
    for arrays in ({"coef": np.zeros(7)}, {"support": np.zeros(4)}, {"alphas": np.zeros((2, 2))},
                   {"stats_sxx": np.zeros((5, 1, 4, 3))}):  # fmt: skip
        with pytest.raises(ModelFileError, match="not a valid streamridge model file"):
            load_model(rewrite(model, tmp_path / "bad.npz", arrays=arrays))


STATS_BREAKS = [
    {"scheme": None},
    {"scheme": [5]},
    {"classes": "abc"},
    {"n_features": 10**12},
    {"n_targets": [1]},
    {"row_ranges": {"a": 1}},
    {"rows_seen": "many"},
    {"task": 5},
    {"feature_names": [1, 2, 3, 4]},
    {"y_1d": None},
    {"format_version": [1]},
]


@pytest.mark.parametrize(
    "change", STATS_BREAKS, ids=[next(iter(c)) + "-" + str(i) for i, c in enumerate(STATS_BREAKS)]
)
def test_stats_file_schema(tmp_path, store, capsys, change):
    good = tmp_path / "s.npz"
    ok(capsys, "stats", "--data", store, "--out", good, "--quiet")
    bad = rewrite(good, tmp_path / "bad.npz", meta=change)
    with pytest.raises(ModelFileError) as e:
        load_stats(bad)
    assert str(e.value).startswith(f"not a valid streamridge statistics file: {bad}: ")
    assert "not a valid streamridge statistics file" in error(
        capsys, "fit", "--stats", bad, "--out", tmp_path / "m.npz"
    )
    assert "not a valid streamridge statistics file" in error(
        capsys, "merge", good, bad, "--out", tmp_path / "a.npz"
    )
    assert not (tmp_path / "m.npz").exists() and not (tmp_path / "a.npz").exists()


def test_stats_file_arrays_must_be_consistent(tmp_path, store, capsys):
    good = tmp_path / "s.npz"
    ok(capsys, "stats", "--data", store, "--out", good, "--quiet")
    for arrays in ({"sxx": np.zeros((5, 1, 4, 3))}, {"weight": -np.ones((5, 1))}, {"mean_x": np.zeros(3)},
                   {"syy": np.zeros((5, 1, 2))}):  # fmt: skip
        with pytest.raises(ModelFileError, match="not a valid streamridge statistics file"):
            load_stats(rewrite(good, tmp_path / "bad.npz", arrays=arrays))


def test_marker_is_a_root_attribute(tmp_path, rng):
    from streamridge.io.outputs import MARKER, written_by_streamridge

    path = write_zarr(tmp_path / "x.zarr", rng.standard_normal((3, 2)), root_attrs={MARKER: "predictions"})
    assert written_by_streamridge(path, "predictions") and not written_by_streamridge(path, "demo-data")
    assert not written_by_streamridge(
        write_zarr(tmp_path / "y.zarr", rng.standard_normal((3, 2))), "predictions"
    )
