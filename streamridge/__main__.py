"""``python -m streamridge``: the command line, see :mod:`streamridge.cli`."""

from __future__ import annotations

from .cli import main

raise SystemExit(main())
