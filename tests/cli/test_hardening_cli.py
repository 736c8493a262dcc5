"""The command line: one-line argparse errors, continuous labels refused by
``fit --classify``, start-up without the heavy dependencies, and URLs without the remote extra."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from streamridge import cli
from streamridge.sources import write_zarr

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("dask", "distributed", "zarr", "h5py", "sklearn")


def python(code, *, cwd=None, timeout=120):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout
    )


# ---------------------------------------------------------------------- 7.11 argparse errors in one line
@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (
            ["fit", "--data", "x.zarr", "--out", "m.npz", "--chunk-rows", "0"],
            "--chunk-rows: must be a positive integer",
        ),
        (["fit", "--data", "x.zarr", "--out", "m.npz", "--chunk-rows", "many"], "must be a positive integer"),
        (
            ["fit", "--data", "x.zarr", "--out", "m.npz", "--alphas"],
            "--alphas: expected at least one argument",
        ),
        (
            ["fit", "--data", "x.zarr", "--out", "m.npz", "--no-such-option"],
            "unrecognized arguments: --no-such-option",
        ),
        (["fit", "--data", "x.zarr"], "the following arguments are required: --out"),
        (["fit", "--data", "x", "--stats", "y", "--out", "m"], "not allowed with argument"),
        (["fit", "--data", "x", "--out", "m", "--folds", "two"], "invalid int value"),
        (["predict", "--model", "m.npz"], "required"),
        (["nonsense"], "invalid choice"),
        ([], "required: COMMAND"),
    ],
)
def test_argparse_errors_are_one_line(capsys, argv, words):
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("streamridge: error: ") and words in lines[0]
    assert "usage:" not in err


def test_help_and_version_still_work(capsys):
    assert cli.main(["--help"]) == 0
    assert "usage: streamridge" in capsys.readouterr().out
    assert cli.main(["fit", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--overwrite" in out and "--save-stats" in out
    assert cli.main(["--version"]) == 0


def test_argparse_error_from_the_command_line(tmp_path):
    proc = python(
        "import sys; from streamridge.cli import main; sys.exit(main(['stats', '--data', 'x', '--out']))"
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("streamridge: error: argument --out")


# ---------------------------------------------------------------------- 7.5 continuous labels (CLI side)
def test_fit_classify_refuses_continuous_labels(tmp_path, rng, capsys):
    X = rng.standard_normal((200, 3))
    store = write_zarr(tmp_path / "c.zarr", X, rng.standard_normal(200), chunk_rows=50)
    model = tmp_path / "m.npz"
    assert cli.main(["fit", "--data", store, "--classify", "--out", str(model), "--quiet"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("streamridge: error: ") and "continuous" in lines[0]
    assert not model.exists()


def test_fit_classify_accepts_integer_valued_float_labels(tmp_path, rng, capsys):
    X = rng.standard_normal((300, 3))
    labels = (X[:, 0] > 0).astype(np.float64)  # 0.0 / 1.0: discrete, not continuous
    store = write_zarr(tmp_path / "c.zarr", X, labels, chunk_rows=100)
    code = cli.main(["fit", "--data", store, "--classify", "--out", str(tmp_path / "m.npz"), "--json"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["classes"] == [0.0, 1.0]


# ---------------------------------------------------------------------- start-up
def _imported_after(code):
    proc = python(f"import sys\n{code}\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


def test_import_streamridge_and_cli_are_light():
    assert _imported_after("import streamridge, streamridge.cli") == "[]"


def test_help_and_info_are_light(tmp_path, capsys):
    rng = np.random.default_rng(0)
    from streamridge import StreamRidgeCV
    from streamridge.io.model_file import save_model

    model = tmp_path / "m.npz"
    save_model(StreamRidgeCV(cv=3).fit(rng.standard_normal((60, 3)), rng.standard_normal(60)), model)
    code = f"""
from streamridge.cli import main
assert main(["info", {str(model)!r}]) == 0
assert main(["info", {str(model)!r}, "--json"]) == 0
try:
    main(["--help"])
except SystemExit:
    pass
"""
    assert _imported_after(code) == "[]"


def test_public_names_still_resolve():
    import streamridge

    assert streamridge.StreamRidgeCV.__name__ == "StreamRidgeCV"
    assert (
        callable(streamridge.load_stats) and callable(streamridge.merge) and callable(streamridge.save_stats)
    )
    assert set(streamridge.__all__) <= set(dir(streamridge))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = streamridge.nope


# ---------------------------------------------------------------------- URLs without the remote extra
def test_url_without_the_remote_extra_names_the_extra(tmp_path):
    code = """
import sys
sys.modules["aiohttp"] = None  # as if the remote extra were not installed
from streamridge.cli import main
codes = [main(["fit", "--data", url, "--out", "m.npz"]) for url in ("http://127.0.0.1:9/x.zarr", "https://127.0.0.1:9/x.h5")]
sys.exit(0 if codes == [2, 2] else 1)
"""
    proc = python(code, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 2 and all('pip install "streamridge[remote]"' in line for line in lines), lines
    assert lines[0].startswith("streamridge: error: reading http:// URLs needs optional packages")
    assert not (tmp_path / "m.npz").exists()


def test_failed_command_exit_stays_one_line_with_pending_reads(tmp_path):
    """An asyncio task left pending (as zarr's sibling chunk reads are when one chunk is corrupted) adds
    no "Task was destroyed but it is pending!" lines after the one-line error (seen flaky in
    test_scale.py::test_corrupted_chunk_cli_one_line_no_files); --debug keeps them."""
    script = tmp_path / "pending.py"
    script.write_text(
        "import asyncio, sys, threading, time\n"
        "from streamridge import cli\n"
        "loop = asyncio.new_event_loop()\n"
        "threading.Thread(target=loop.run_forever, daemon=True).start()\n"
        "async def never():\n"
        "    await asyncio.sleep(3600)\n"
        "loop.call_soon_threadsafe(lambda: asyncio.ensure_future(never(), loop=loop))\n"
        "time.sleep(0.1)\n"
        "rc = cli.main(['info', sys.argv[1]] + sys.argv[2:])\n"
        "loop.call_soon_threadsafe(loop.stop)\n"
        "time.sleep(0.1)\n"
        "sys.exit(rc)\n"
    )
    missing = str(tmp_path / "missing.npz")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    quiet = subprocess.run(
        [sys.executable, str(script), missing], capture_output=True, text=True, env=env, timeout=60
    )
    assert quiet.returncode == 2
    assert len(quiet.stderr.strip().splitlines()) == 1, quiet.stderr
    debug = subprocess.run(
        [sys.executable, str(script), missing, "--debug"], capture_output=True, text=True, env=env, timeout=60
    )
    assert debug.returncode == 2 and "Task was destroyed" in debug.stderr
