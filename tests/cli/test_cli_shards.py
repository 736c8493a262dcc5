"""``streamridge stats`` / ``merge`` / ``fit --stats``: shards by rows equal one pass."""

from __future__ import annotations

import json

import numpy as np
import pytest

from streamridge import load_model, load_stats
from streamridge.cli import main
from streamridge.sources import write_zarr


@pytest.fixture
def store(tmp_path, rng):
    X = rng.standard_normal((2400, 7)).astype(np.float32)
    y = X @ rng.standard_normal(7) + rng.standard_normal(2400)
    g = (np.arange(2400) // 100).astype(np.int32)
    return write_zarr(str(tmp_path / "d.zarr"), X, y, groups=g, chunk_rows=300)


@pytest.mark.parametrize(
    "folds", [["--folds", "4"], ["--leave-group-out", "--groups", "groups"], ["--blocks", "3"]]
)
def test_shards_merge_equal_one_pass(tmp_path, store, folds, capsys):
    s1, s2, s = (str(tmp_path / f) for f in ("s1.npz", "s2.npz", "s.npz"))
    assert main(["stats", "--data", store, *folds, "--rows", "0:1000", "--out", s1, "--quiet"]) == 0
    assert main(["stats", "--data", store, *folds, "--rows", "1000:", "--out", s2, "--quiet"]) == 0
    assert main(["merge", s2, s1, "--out", s, "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["rows"] == 2400 and facts["row_ranges"] == [[0, 2400]]
    m_whole, m_merged = str(tmp_path / "w.npz"), str(tmp_path / "m.npz")
    assert (
        main(
            [
                "fit",
                "--data",
                store,
                *folds,
                "--out",
                m_whole,
                "--save-stats",
                str(tmp_path / "w_stats.npz"),
                "--quiet",
            ]
        )
        == 0
    )
    assert main(["fit", "--stats", s, "--out", m_merged, "--quiet"]) == 0
    whole, merged = load_stats(tmp_path / "w_stats.npz"), load_stats(s)
    for f in ("sxx", "sxy", "syy", "mean_x"):
        a, b = getattr(whole, f), getattr(merged, f)
        assert np.abs(a - b).max() <= 1e-12 * np.abs(a).max()
    a, b = load_model(m_whole), load_model(m_merged)
    assert a.alpha_ == b.alpha_
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-10)


def test_overlapping_or_incompatible_shards_refused(tmp_path, store, capsys):
    s1, s2, s3 = (str(tmp_path / f) for f in ("s1.npz", "s2.npz", "s3.npz"))
    main(["stats", "--data", store, "--rows", "0:1500", "--out", s1, "--quiet"])
    main(["stats", "--data", store, "--rows", "1000:2400", "--out", s2, "--quiet"])
    main(["stats", "--data", store, "--rows", "1500:2400", "--seed", "3", "--out", s3, "--quiet"])
    capsys.readouterr()
    out = str(tmp_path / "s.npz")
    assert main(["merge", s1, s2, "--out", out]) == 2
    err = capsys.readouterr().err
    assert "counted twice" in err and err.count("\n") == 1
    assert main(["merge", s1, s3, "--out", out]) == 2
    assert "scheme" in capsys.readouterr().err
    assert not (tmp_path / "s.npz").exists()


def test_stats_with_checkpoint_resumes_to_same_result(tmp_path, store):
    ck = tmp_path / "ck"
    a, b = str(tmp_path / "a.npz"), str(tmp_path / "b.npz")
    assert main(["stats", "--data", store, "--checkpoint", str(ck), "--out", a, "--quiet"]) == 0
    assert (ck / "checkpoint.npz").exists()
    # a rerun finds a complete checkpoint and gives the same statistics without reading rows again
    assert main(["stats", "--data", store, "--checkpoint", str(ck), "--out", b, "--quiet"]) == 0
    np.testing.assert_array_equal(load_stats(a).sxx, load_stats(b).sxx)
    # other options with the same checkpoint are refused
    assert (
        main(["stats", "--data", store, "--seed", "9", "--checkpoint", str(ck), "--out", b, "--quiet"]) == 2
    )


def test_fit_over_http_with_storage_options(http_root, rng, tmp_path, capsys):
    """A zarr store served on 127.0.0.1, read through fsspec with options from the command line."""
    root, url = http_root
    X = rng.standard_normal((600, 4)).astype(np.float32)
    y = X @ np.arange(1.0, 5.0) + rng.standard_normal(600)
    write_zarr(str(root / "cli_http.zarr"), X, y, chunk_rows=150)
    out = str(tmp_path / "m.npz")
    opts = json.dumps({"client_kwargs": {"timeout": 30}})
    assert (
        main(["fit", "--data", f"{url}/cli_http.zarr", "--storage-options", opts, "--out", out, "--json"])
        == 0
    )
    facts = json.loads(capsys.readouterr().out)
    assert facts["rows"] == 600
    local = str(tmp_path / "d.zarr")
    write_zarr(local, X, y, chunk_rows=150)
    ref = str(tmp_path / "r.npz")
    assert main(["fit", "--data", local, "--out", ref, "--quiet"]) == 0
    np.testing.assert_allclose(load_model(out).coef_, load_model(ref).coef_, rtol=1e-12)


def test_disk_full_leaves_nothing_half_written(tmp_path, store, capsys, monkeypatch):
    """ENOSPC while a model or statistics file is written: exit 2, one line, no file, no temporary."""
    import errno
    import os

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    assert main(["fit", "--data", store, "--out", str(out_dir / "m.npz"), "--quiet"]) == 2
    assert main(["stats", "--data", store, "--out", str(out_dir / "s.npz"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all("No space left on device" in line for line in err)
    assert list(out_dir.iterdir()) == []


@pytest.mark.parametrize(
    ("one", "other", "named"),
    [
        ({"map": "esn", "n_units": 6, "seed": 1}, {"map": "esn", "n_units": 6, "seed": 2}, "seed 1 vs 2"),
        (
            {"map": "esn", "n_units": 6, "washout": 0},
            {"map": "esn", "n_units": 6, "washout": 5},
            "washout 0 vs 5",
        ),
        (
            {
                "map": "pipeline",
                "maps": [{"map": "delays", "n_delays": 2}, {"map": "esn", "n_units": 6, "seed": 3}],
            },
            {
                "map": "pipeline",
                "maps": [{"map": "delays", "n_delays": 2}, {"map": "esn", "n_units": 6, "seed": 4}],
            },
            "maps[1].seed 3 vs 4",
        ),
        ({"map": "esn", "n_units": 6}, {"map": "delays", "n_delays": 5}, "map 'esn' vs 'delays'"),
    ],
    ids=["seed", "washout", "nested", "kind"],
)
def test_merge_of_other_maps_names_the_parameter(tmp_path, store, capsys, one, other, named):
    """The refusal names the parameter that differs and both values, not the two maps whole."""
    shards = []
    for i, (spec, rows) in enumerate(((one, "0:1200"), (other, "1200:2400"))):
        (tmp_path / f"f{i}.json").write_text(json.dumps(spec))
        shards.append(str(tmp_path / f"s{i}.npz"))
        argv = ["stats", "--data", store, "--groups", "groups", "--features", str(tmp_path / f"f{i}.json")]
        assert main([*argv, "--rows", rows, "--out", shards[i], "--quiet"]) == 0
    capsys.readouterr()
    assert main(["merge", *shards, "--out", str(tmp_path / "s.npz")]) == 2
    assert capsys.readouterr().err == (
        f"streamridge: error: statistics differ in features: {named}; only statistics of the same features, targets "
        "and fold scheme can be merged; compute every shard with the same features file\n"
    )


def test_merge_of_a_file_that_is_not_statistics_says_what_it_is(tmp_path, store, capsys):
    """A model file, a directory or a text file given as statistics: the refusal says what the file is."""
    s = str(tmp_path / "s.npz")
    assert main(["stats", "--data", store, "--rows", "0:1200", "--out", s, "--quiet"]) == 0
    model = str(tmp_path / "m.npz")
    assert main(["fit", "--data", store, "--out", model, "--quiet"]) == 0
    (tmp_path / "notes.txt").write_text("merge these\n")
    np.savez(tmp_path / "plain.npz", a=np.zeros(3))
    fix = "give a statistics file (written by streamridge stats, merge or fit --save-stats)"
    for path, said in (
        (model, f"'{model}' is a streamridge model file, not a statistics file; {fix}"),
        (store, f"'{store}' is a directory, not a streamridge statistics file; {fix}"),
        (
            str(tmp_path / "notes.txt"),
            f"'{tmp_path / 'notes.txt'}' is not a streamridge statistics file: it is a text file, not a .npz archive; {fix}",
        ),
        (
            str(tmp_path / "plain.npz"),
            f"'{tmp_path / 'plain.npz'}' is an .npz archive but not a streamridge statistics file (no meta_json header); {fix}",
        ),
    ):
        capsys.readouterr()
        assert main(["merge", s, path, "--out", str(tmp_path / "out.npz")]) == 2
        assert capsys.readouterr().err == f"streamridge: error: {said}\n"
    assert not (tmp_path / "out.npz").exists()
