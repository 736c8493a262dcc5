"""``streamridge report``: one self-contained HTML file (PNG images embedded) describing a model file.

Sections, each present only when the model holds what it needs (otherwise a
sentence says why): data and pass summary; CV error against lambda; lambda per
target; band weights and per-band R² of a banded model; nested CV and scores;
selection path; prefix curve; classes; coefficients (:mod:`streamridge.report.sections`).  Figures come from
:mod:`streamridge.report.plot`; the file is written atomically, and ``--png DIR``
also saves each figure as a PNG file.
"""

from __future__ import annotations

import base64
import html
import os
import shutil
from typing import Any

from streamridge.io.output_kinds import REPORT_GENERATOR as GENERATOR
from streamridge.report.sections import (
    FIGURE_KEYS,
    Section,
    bands_section,
    candidates_section,
    classes_section,
    coefficients_section,
    lambda_section,
    nested_section,
    prefix_section,
    selection_section,
    summary_section,
    targets_section,
)

# ---------------------------------------------------------------------- document
_CSS = """
body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
h1{font-size:1.6rem}h2{border-bottom:1px solid #ccc;padding-bottom:.2rem;margin-top:2rem}
table{border-collapse:collapse;margin:.5rem 0;font-size:.85rem}td,th{border:1px solid #ddd;padding:.15rem .5rem;text-align:left}
img{max-width:100%;height:auto;display:block;margin:.5rem 0}.note{color:#666;font-size:.85rem}
.warn{color:#a00;font-weight:bold}
"""


def build_sections(model: Any, header: dict[str, Any], path: str) -> list[Section]:
    """Every section of the report, in order (omitted ones carry their reason)."""
    return [
        summary_section(model, header, path),
        lambda_section(model),
        candidates_section(model),
        targets_section(model),
        *bands_section(model),
        nested_section(model),
        selection_section(model),
        prefix_section(model),
        classes_section(model),
        coefficients_section(model),
    ]


def render(sections: list[Section], title: str) -> str:
    """The HTML document of the sections (images as base64 data URIs)."""
    parts = [
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><meta name='generator' content='{GENERATOR}'>"
        f"<title>{html.escape(title)}</title>",
        f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>",
    ]
    for s in sections:
        if s.omitted is not None:
            continue
        parts.append(f"<section id='{s.key}'><h2>{html.escape(s.title)}</h2>")
        if s.png is not None:
            data = base64.b64encode(s.png).decode()
            parts.append(f"<img alt='{html.escape(s.title)}' src='data:image/png;base64,{data}'>")
        parts.append(s.body + "</section>")
    left_out = [s for s in sections if s.omitted is not None]
    if left_out:
        parts.append("<section id='omitted'><h2>Sections left out</h2><ul>")
        parts += [f"<li><b>{html.escape(s.title)}</b>: {html.escape(s.omitted or '')}</li>" for s in left_out]
        parts.append("</ul></section>")
    parts.append("</body></html>")
    return "".join(parts)


def check_report_outputs(model_path: str, out: str | None, png_dir: str | None, *, overwrite: bool) -> str:
    """Check the report's outputs before any work (rules of :mod:`streamridge.io.outputs`); return the HTML path.

    ``out`` defaults to the model's path with suffix ``.html``.  ``png_dir`` must be
    a directory or a new path in a writable directory; figures in it are replaced
    only with ``overwrite`` and only if ``streamridge report`` wrote them.
    """
    from streamridge.errors import OutputError
    from streamridge.io.outputs import Output, check_outputs

    outputs = [Output(out or os.path.splitext(model_path)[0] + ".html", "report")]
    if png_dir is not None:
        if os.path.lexists(png_dir) and not os.path.isdir(png_dir):
            raise OutputError(f"--png {png_dir} must be a directory; it is an existing file")
        if not os.path.isdir(png_dir):  # created by the report: its parent must be writable
            check_outputs([Output(png_dir, "figure", "--png")], [model_path], overwrite=False)
        else:
            outputs += [Output(os.path.join(png_dir, f"{key}.png"), "figure", "--png") for key in FIGURE_KEYS]
    return check_outputs(outputs, [model_path], overwrite=overwrite)[0]


def build_report(model_path: str) -> tuple[list[Section], str]:
    """Read a model file and build its sections and HTML document (nothing is written).

    Raises
    ------
    ModelFileError
        Not a model file, or a newer format.
    MissingDependencyError
        matplotlib is not installed.
    """
    from streamridge.io.model_file import load_model_core
    from streamridge.report.plot import require_matplotlib

    model = load_model_core(model_path)  # the report reads the fitted attributes: no scikit-learn needed
    require_matplotlib()
    header = dict(getattr(model, "_model_header", {}) or {})
    sections = build_sections(model, header, os.path.abspath(model_path))
    return sections, render(sections, f"streamridge report: {os.path.basename(model_path)}")


def write_report(
    model_path: str, out: str, *, png_dir: str | None = None, overwrite: bool = False
) -> list[Section]:
    """Read a model file and write its report to ``out`` (and the figures to ``png_dir``), all or none.

    Parameters
    ----------
    model_path : str
        A model file of :func:`streamridge.io.model_file.save_model`.
    out : str
        The HTML file to write.
    png_dir : str or None
        Also write ``<section>.png`` for every figure here (created if missing).
    overwrite : bool
        Replace a report and figures that ``streamridge report`` wrote; nothing else is
        ever replaced (see :mod:`streamridge.io.output_kinds`).

    Returns
    -------
    list of Section

    Raises
    ------
    ModelFileError
        Not a model file, or a newer format.
    MissingDependencyError
        matplotlib is not installed.
    OutputError
        A file could not be written, or exists and may not be replaced; then none is
        written (and what was there is kept).
    """
    from streamridge.io.outputs import Transaction

    sections, document = build_report(model_path)
    figures = [
        (os.path.join(png_dir, f"{s.key}.png"), s.png) for s in sections if png_dir and s.png is not None
    ]
    created = png_dir is not None and _new_directory(png_dir)
    try:
        with Transaction(overwrite=overwrite) as tx:
            for target, data in [(out, document.encode()), *figures]:
                kind, option = ("report", "--out") if target == out else ("figure", "--png")
                with tx.writing(target, kind, option) as tmp, open(tmp, "wb") as fh:
                    fh.write(data or b"")
    except BaseException:
        if created:
            shutil.rmtree(png_dir, ignore_errors=True)  # type: ignore[arg-type]
        raise
    return sections


def _new_directory(path: str) -> bool:
    """Create the directory ``path``; False when it exists already (made by another run meanwhile)."""
    try:
        os.makedirs(path)
    except FileExistsError:
        return False
    return True
