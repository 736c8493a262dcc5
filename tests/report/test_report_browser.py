"""A headless Chromium screenshot of a report is not blank (the embedded images render offline).

Needs Debian's ``chromium`` (``apt-get install -y chromium``); slow (starts a browser).
"""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from streamridge import StreamRidgeCV
from streamridge.cli import main
from streamridge.io.model_file import save_model

BROWSER = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


def screenshot(html_path: str, png_path: str, *, width: int = 1000, height: int = 2400) -> None:
    """Render ``html_path`` with headless Chromium into ``png_path`` (no network: file:// only)."""
    assert BROWSER is not None
    cmd = [
        BROWSER,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        f"--screenshot={png_path}",
        f"--window-size={width},{height}",
        f"file://{html_path}",
    ]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)


@pytest.mark.slow
@pytest.mark.skipif(BROWSER is None, reason="no chromium (apt-get install -y chromium)")
def test_report_screenshot_is_not_blank(rng, tmp_path):
    import matplotlib.image as mpimg

    X = rng.standard_normal((400, 8))
    y = X @ rng.standard_normal(8) + rng.standard_normal(400)
    model = tmp_path / "m.npz"
    save_model(StreamRidgeCV(cv=5, alphas=np.logspace(-3, 4, 15), selection="backward").fit(X, y), model)
    out = tmp_path / "report.html"
    assert main(["report", str(model), "--out", str(out)]) == 0
    shot = tmp_path / "shot.png"
    screenshot(str(out), str(shot))
    img = mpimg.imread(shot)[..., :3]  # floats in [0, 1]
    assert img.shape[:2] == (2400, 1000)
    not_white = (img < 0.9).any(axis=2)
    assert not_white.mean() > 0.03  # text, tables and plots cover the page
    # the CV curve's blue (matplotlib C0 = #1f77b4) reached the screen: the embedded PNG was decoded
    blue = (np.abs(img - np.array([0x1F, 0x77, 0xB4]) / 255).max(axis=2) < 0.08).sum()
    assert blue > 500
    # the lower half holds content too (the selection path and coefficients sections)
    assert not_white[1200:].mean() > 0.02
