"""``python -m streamridge``: the command line, see :mod:`streamridge.cli`."""

from __future__ import annotations

if __name__ == "__main__":  # importing this module must not run the command line
    from streamridge.cli import main

    raise SystemExit(main())
