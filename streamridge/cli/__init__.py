"""Command line entry point: ``streamridge fit | stats | merge | predict | info | report | demo | features``.

Every error a user can cause prints one line ``streamridge: error: MESSAGE`` on
stderr and exits with code 2 (``--debug`` shows the traceback instead); a
failed ``fit`` or ``predict`` leaves no output file under the final name.

The parser is :mod:`streamridge.cli.parser`; the commands live in
:mod:`streamridge.cli.fit` (fit, stats, merge, demo), :mod:`streamridge.cli.predict`,
:mod:`streamridge.cli.model` (info, report) and :mod:`streamridge.cli.features`, each
imported only when its command runs; what they print is :mod:`streamridge.cli.output`.
"""

from __future__ import annotations

import importlib
import os
import sys
import warnings
from collections.abc import Callable, Sequence

from streamridge.cli.parser import PROG, build_parser
from streamridge.errors import StreamRidgeError

__all__ = ["build_parser", "main"]

_USER_ERRORS = (StreamRidgeError, FileNotFoundError, KeyError, ValueError, OSError)
# each command's module is imported when it runs: `--help` and `info` do not pay for the pass
_COMMANDS = {
    "fit": "fit",
    "stats": "fit",
    "merge": "fit",
    "demo": "fit",
    "predict": "predict",
    "info": "model",
    "report": "model",
    "features": "features",
}


def _command(name: str) -> Callable[..., int]:
    """The function ``cmd_NAME`` of the command's module."""
    module = importlib.import_module(f".{_COMMANDS[name]}", __package__)
    return getattr(module, f"cmd_{name}")  # type: ignore[no-any-return]


def _message(exc: BaseException) -> str:
    text = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
    text = " ".join(str(text).split()) or type(exc).__name__
    return text


def _limit_malloc_arenas(arenas: int = 2) -> None:
    """Cap glibc's per-thread malloc arenas (like ``MALLOC_ARENA_MAX=2``) unless the user set it.

    Decompression threads each grow an arena of their own; without a cap peak RSS
    creeps up with the length of the pass instead of staying flat.
    """
    if "MALLOC_ARENA_MAX" in os.environ or not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").mallopt(-8, arenas)  # M_ARENA_MAX
    except (OSError, AttributeError):  # not glibc
        pass


def _show_one_line(message: Warning | str, category: type[Warning], *args: object, **kwargs: object) -> None:
    """Print a warning as one line ``streamridge: warning: ...`` (no source line)."""
    sys.stderr.write(f"streamridge: warning: {message}\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code (0 success, 2 user error, 130 interrupted).

    Warnings (e.g. a stored chunk larger than the memory budget) print as one line.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments without the program name (default ``sys.argv[1:]``).
    """
    with warnings.catch_warnings():  # restores warnings.showwarning on return
        warnings.showwarning = _show_one_line
        return _main(argv)


def _main(argv: Sequence[str] | None = None) -> int:
    """The command line behind :func:`main`; a failed command's exit stays one line (see :func:`_quiet_exit`)."""
    code = _run(argv)
    if code != 0 and "--debug" not in (sys.argv[1:] if argv is None else list(argv)):
        _quiet_exit()
    return code


def _quiet_exit() -> None:
    """Silence asyncio's "Task was destroyed but it is pending!" at interpreter exit.

    A read that failed (e.g. a corrupted stored chunk) can leave zarr's sibling
    chunk reads pending on its event loop; their destruction at exit logged
    three more lines after the one-line error.
    """
    import logging

    logging.getLogger("asyncio").setLevel(logging.CRITICAL)


def _run(argv: Sequence[str] | None = None) -> int:
    _limit_malloc_arenas()
    parser = build_parser()
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
    except SystemExit as exc:  # usage errors (2), --help and --version (0)
        return int(exc.code) if isinstance(exc.code, int) else 2
    try:
        return _command(args.command)(args)
    except BrokenPipeError:  # e.g. `streamridge info MODEL | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except _USER_ERRORS as exc:
        if args.debug:
            import traceback

            traceback.print_exc()
        print(f"{PROG}: error: {_message(exc)}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
