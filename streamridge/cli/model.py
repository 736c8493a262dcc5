"""The commands that read a model file: ``info`` (its header as text or JSON) and ``report`` (HTML).

``info`` imports numpy and the model file's reader only, not the solvers: it stays fast.
"""

from __future__ import annotations

import argparse
import os

from streamridge.cli import features as cli_features
from streamridge.cli.output import emit


def cmd_info(args: argparse.Namespace) -> int:
    """``streamridge info``: print the header of a model file."""
    from streamridge.io.model_file import read_model
    from streamridge.report.summary import format_info

    header, _ = read_model(args.model)
    lines = (
        []
        if args.json
        else [format_info(header, os.path.abspath(args.model)), *cli_features.info_lines(header)]
    )
    emit(header if args.json else "\n".join(lines), as_json=args.json)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """``streamridge report``: a self-contained HTML report of a model file (matplotlib imported lazily)."""
    from streamridge.report.html import check_report_outputs, write_report

    out = check_report_outputs(args.model, args.out, args.png, overwrite=args.overwrite)
    sections = write_report(args.model, out, png_dir=args.png, overwrite=args.overwrite)
    shown = [s.key for s in sections if s.omitted is None]
    print(f"wrote {out} ({len(shown)} sections: {', '.join(shown)})")
    return 0
