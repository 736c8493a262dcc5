"""mkdocs hook: replace ``<!-- cli-reference -->`` in a page by the help of every ``streamridge`` command.

The text comes from :func:`streamridge.cli.build_parser` at build time, so the
reference cannot drift from the parser.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

MARKER = "<!-- cli-reference -->"


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _helps(parser: argparse.ArgumentParser) -> dict[str, str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {a.dest: a.help or "" for a in action._choices_actions}
    return {}


def cli_markdown() -> str:
    """Markdown of the top-level usage, a table of commands and each command's ``--help``."""
    os.environ["COLUMNS"] = "100"  # stable wrapping of argparse help
    from streamridge.cli import build_parser

    parser = build_parser()
    subs, helps = _subcommands(parser), _helps(parser)
    out = ["```text", parser.format_help().rstrip(), "```", "", "| command | what it does |", "|---|---|"]
    out += [f"| [`{name}`](#streamridge-{name}) | {helps.get(name, '')} |" for name in subs]
    for name, sub in subs.items():
        out += [
            "",
            f"## streamridge {name}",
            "",
            helps.get(name, ""),
            "",
            "```text",
            sub.format_help().rstrip(),
            "```",
        ]
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """mkdocs event: expand the marker."""
    return markdown.replace(MARKER, cli_markdown()) if MARKER in markdown else markdown
