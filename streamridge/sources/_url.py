"""URLs and local paths: fsspec options, timeouts and the errors of an unreachable address.

Reading a URL needs fsspec and, for http(s), aiohttp (the ``remote`` extra).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from streamridge.errors import SourceError

HTTP_CONNECT_TIMEOUT = 10.0  # seconds to open a connection before a URL counts as unreachable
HTTP_READ_TIMEOUT = 300.0  # seconds without a byte before a read is abandoned


def local_path(data: str | os.PathLike[str]) -> str:
    """Return a local path for ``data`` (``file://`` stripped, ``~`` expanded)."""
    text = os.fspath(data)
    if text.startswith("file://"):
        text = text[len("file://") :]
    return os.path.expanduser(text)


def is_url(data: str) -> bool:
    """Whether ``data`` is an fsspec URL other than ``file://``."""
    return "://" in data and not data.startswith("file://")


def remote_errors() -> tuple[type[BaseException], ...]:
    """Exception types that mean a URL could not be reached."""
    errors: list[type[BaseException]] = [OSError, TimeoutError, asyncio.TimeoutError]
    try:
        import aiohttp
    except ImportError:  # pragma: no cover - aiohttp is needed only for http(s)
        return tuple(errors)
    return (*errors, aiohttp.ClientError)


def remote_options(url: str, storage_options: dict[str, Any] | None) -> dict[str, Any]:
    """fsspec options for ``url``; http(s) gets a connect timeout unless one is given.

    Parameters
    ----------
    url : str
    storage_options : dict or None

    Returns
    -------
    dict
    """
    require_filesystem(url)
    options = dict(storage_options or {})
    if url.startswith(("http://", "https://")):
        import aiohttp

        client = dict(options.get("client_kwargs") or {})
        client.setdefault(
            "timeout", aiohttp.ClientTimeout(sock_connect=HTTP_CONNECT_TIMEOUT, sock_read=HTTP_READ_TIMEOUT)
        )
        if isinstance(client["timeout"], (int, float)):  # e.g. from --storage-options JSON: seconds in all
            client["timeout"] = aiohttp.ClientTimeout(
                total=float(client["timeout"]), sock_connect=HTTP_CONNECT_TIMEOUT
            )
        options["client_kwargs"] = client
    return options


def require_filesystem(url: str) -> None:
    """Fail in one line, naming the ``remote`` extra, when the filesystem of ``url`` is not installed."""
    import fsspec

    protocol = url.split("://", 1)[0].lower()
    try:
        fsspec.get_filesystem_class(protocol)
        if protocol in ("http", "https"):
            import aiohttp  # noqa: F401
    except ImportError as exc:
        reason = " ".join(str(exc).split())
        raise SourceError(
            f'reading {protocol}:// URLs needs optional packages; pip install "streamridge[remote]" ({reason})'
        ) from None
    except ValueError as exc:  # an unknown protocol
        raise SourceError(f"cannot read {url}: {' '.join(str(exc).split())}") from None
