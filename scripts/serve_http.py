"""Serve a directory over HTTP the way object stores and web servers do: byte ranges, keep-alive, many connections.

Usage::

    python scripts/serve_http.py DIR --port 8765      # http://127.0.0.1:8765/<path under DIR>
    python scripts/serve_http.py DIR --latency-ms 20  # each answer starts 20 ms late, as from a distant store

``python -m http.server`` is no model of a remote store: it ignores ``Range`` headers (a
suffix range for a shard's index gets the whole shard back), speaks HTTP/1.0 (a connection
per request) and listens with a backlog of 5, so 128 concurrent requests wait for TCP's
1 s, 3 s, ... retries (fsspec fetching 128 chunks of 1 MB at once took 109 s against it).
This server (aiohttp's static files) answers ranges, keeps connections open and accepts
a backlog of 1,024. The test suite's ``http_root`` fixture runs it (:func:`served`);
so does ``scripts/bench_remote.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any


@contextlib.contextmanager
def served(directory: str, latency_ms: float = 0.0, *, timeout: float = 20.0) -> Iterator[str]:
    """``directory`` served by this script in a child process on a free port of 127.0.0.1; yields the base URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        directory,
        "--port",
        str(port),
        "--latency-ms",
        str(latency_ms),
    ]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("serve_http.py did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=10)


def app(directory: str, latency_ms: float = 0.0) -> Any:
    """An aiohttp application serving ``directory``'s files (no listings) at ``/``, each answer ``latency_ms`` late."""
    from aiohttp import web

    @web.middleware
    async def late(request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        await asyncio.sleep(latency_ms / 1000)
        return await handler(request)

    application = web.Application(middlewares=[late] if latency_ms > 0 else [])
    application.router.add_static("/", directory, show_index=False, follow_symlinks=False)
    return application


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("directory")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--latency-ms", type=float, default=0.0, help="delay before each answer (default 0)")
    args = p.parse_args(argv)
    from aiohttp import web

    web.run_app(
        app(args.directory, args.latency_ms),
        host=args.host,
        port=args.port,
        backlog=1024,
        print=None,
        access_log=None,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
