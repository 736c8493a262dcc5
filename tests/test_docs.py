"""The documentation builds in mkdocs strict mode (broken links, missing API objects fail) and holds
the generated CLI and API references."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None,
    reason='mkdocs is not installed (pip install ".[docs]")',
)


def test_docs_build_strict(tmp_path):
    site = tmp_path / "site"
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        NO_MKDOCS_2_WARNING="1",
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(ROOT / "mkdocs.yml"),
            "-d",
            str(site),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    cli = (site / "cli" / "index.html").read_text()
    from streamridge.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for name in commands:  # every command's --help, generated from the parser
        assert f"usage: streamridge {name}" in cli, name
    assert "--alpha-per-target" in cli and "--png DIR" in cli
    api = (site / "api" / "index.html").read_text()
    for name in (
        "StreamRidgeCV",
        "StreamRidgeClassifierCV",
        "open_source",
        "save_stats",
        "cv_curve",
        "write_report",
    ):
        assert name in api, name
    assert "Grid of regularization strengths" in api  # the estimators' run-time docstrings are rendered
    assert (site / "images" / "demo.png").stat().st_size > 10_000
    for page in (
        "getting-started",
        "how-it-works",
        "benchmarks",
        "cluster",
        "bad-input",
        "guide/selection",
        "guide/features",
        "guide/models",
    ):
        assert (site / page / "index.html").exists(), page
