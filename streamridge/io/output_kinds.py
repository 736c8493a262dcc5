"""Whether an existing path is an output streamridge wrote, recognised by what only streamridge writes.

=============  ===========================================================================
kind           recognised by
=============  ===========================================================================
model          a ``.npz`` (zip) archive whose ``header_json`` member is a JSON object with
               ``"format": "streamridge-model"``
stats          the same with ``meta_json`` and ``"format": "streamridge-stats"``
predictions,   a zarr store whose root attribute ``streamridge_output`` is the kind and whose
demo-data      top level holds nothing but zarr metadata and arrays; or an HDF5 file with
               that root attribute
report         an HTML document that starts ``<!DOCTYPE html><html><head>`` and has
               ``<meta name="generator" content="streamridge report">`` in its head
figure         a PNG file (signature, ``IHDR`` first) with a ``tEXt`` chunk ``Software`` =
               ``streamridge report`` before its image data, its CRC correct
=============  ===========================================================================

Anything else (a text file that mentions ``streamridge report``, a copy of the README, a
directory of the user's files beside zarr metadata) is not recognised, and
:mod:`streamridge.io.outputs` never replaces it.
"""

from __future__ import annotations

import json
import os
import struct
import zipfile
import zlib
from html.parser import HTMLParser
from typing import Any

MARKER = "streamridge_output"
"""Root attribute that marks a store written by streamridge; its value is the kind."""

REPORT_GENERATOR = "streamridge report"
"""The generator of ``streamridge report``: the HTML's generator meta tag and the PNGs' Software text."""

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_NPZ_FORMAT = {"model": ("header_json", "streamridge-model"), "stats": ("meta_json", "streamridge-stats")}
_ZARR_METADATA = frozenset({"zarr.json", ".zgroup", ".zattrs", ".zmetadata"})
_HEAD_BYTES = 64 * 1024  # our report's head is about 1 KiB; a PNG's text chunks come before its image data


def written_by_streamridge(path: str, kind: str) -> bool:
    """Whether ``path`` holds an output of ``kind`` written by streamridge (see the module's table).

    Parameters
    ----------
    path : str
        An existing path (resolved).
    kind : {"model", "stats", "predictions", "demo-data", "report", "figure"}

    Returns
    -------
    bool
    """
    if kind in _NPZ_FORMAT:
        member, value = _NPZ_FORMAT[kind]
        return os.path.isfile(path) and _npz_format(path, member) == value
    if kind == "report":
        return os.path.isfile(path) and is_report_html(_head(path))
    if kind == "figure":
        return os.path.isfile(path) and is_report_png(_head(path))
    if os.path.isdir(path):
        return _zarr_marker(path) == kind and _only_zarr_entries(path)
    if os.path.isfile(path):
        return _hdf5_marker(path) == kind
    return False


def _head(path: str) -> bytes:
    """The first bytes of a file (empty when it cannot be read)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(_HEAD_BYTES)
    except OSError:
        return b""


# ---------------------------------------------------------------------- report HTML and PNG
class _HeadEvents(HTMLParser):
    """The parse events of an HTML document's start: ``(what, tag, attributes)``, text kept if not blank."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.events: list[tuple[str, str, dict[str, str | None]]] = []

    def handle_decl(self, decl: str) -> None:
        self.events.append(("decl", " ".join(decl.lower().split()), {}))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.events.append(("start", tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        self.events.append(("end", tag, {}))

    def handle_data(self, data: str) -> None:
        if data.strip():
            self.events.append(("text", "", {}))

    def handle_comment(self, data: str) -> None:
        self.events.append(("other", "", {}))

    def handle_pi(self, data: str) -> None:
        self.events.append(("other", "", {}))


def is_report_html(head: bytes) -> bool:
    """Whether ``head`` (a file's first bytes) starts an HTML document of ``streamridge report``.

    The document must open with ``<!DOCTYPE html>``, ``<html>`` and ``<head>`` (nothing
    before them but white space) and hold ``<meta name="generator" content="streamridge
    report">`` in its head, before any other element than ``meta``, ``title`` and ``style``.
    """
    parser = _HeadEvents()
    parser.feed(head.decode("utf-8", errors="replace"))  # the first bytes may end inside a character
    events = parser.events
    if [(e[0], e[1]) for e in events[:3]] != [("decl", "doctype html"), ("start", "html"), ("start", "head")]:
        return False
    inside = ""  # the title or style element whose text may follow
    for what, tag, attrs in events[3:]:
        if what == "start" and tag == "meta":
            if attrs.get("name") == "generator" and attrs.get("content") == REPORT_GENERATOR:
                return True
        elif what == "start" and tag in ("title", "style"):
            inside = tag
        elif what == "end" and tag == inside:
            inside = ""
        elif what != "text" or not inside:
            return False  # the end of the head, another element, or text outside title and style
    return False


def is_report_png(head: bytes) -> bool:
    """Whether ``head`` (a file's first bytes) is a PNG of ``streamridge report``.

    The chunks are read in order from the signature: ``IHDR`` first, then a ``tEXt``
    chunk with key ``Software`` and value ``streamridge report`` before the image data
    (``IDAT``); every chunk read must have a correct CRC.
    """
    if not head.startswith(PNG_SIGNATURE):
        return False
    wanted = b"Software\x00" + REPORT_GENERATOR.encode()
    pos, first = len(PNG_SIGNATURE), True
    while pos + 12 <= len(head):
        length, ctype = struct.unpack(">I4s", head[pos : pos + 8])
        end = pos + 8 + length
        if end + 4 > len(head):
            return False
        data, crc = head[pos + 8 : end], struct.unpack(">I", head[end : end + 4])[0]
        if zlib.crc32(ctype + data) != crc or (first and ctype != b"IHDR"):
            return False
        if ctype == b"tEXt" and data == wanted:
            return True
        if ctype in (b"IDAT", b"IEND"):
            return False
        pos, first = end + 4, False
    return False


# ---------------------------------------------------------------------- npz, zarr, HDF5
def _npz_format(path: str, member: str) -> str | None:
    try:
        import numpy as np

        with zipfile.ZipFile(path) as z, z.open(f"{member}.npy") as fh:
            header = json.loads(bytes(np.lib.format.read_array(fh, allow_pickle=False)).decode())
    except (OSError, KeyError, ValueError, zipfile.BadZipFile, UnicodeDecodeError):
        return None
    value = header.get("format") if isinstance(header, dict) else None
    return value if isinstance(value, str) else None


def _zarr_marker(path: str) -> str | None:
    for name, key in (("zarr.json", "attributes"), (".zattrs", None)):
        try:
            with open(os.path.join(path, name), encoding="utf-8") as fh:
                doc: Any = json.load(fh)
        except (OSError, ValueError):
            continue
        attrs = doc.get(key) if key and isinstance(doc, dict) else doc
        if isinstance(attrs, dict) and isinstance(attrs.get(MARKER), str):
            return str(attrs[MARKER])
    return None


def _only_zarr_entries(path: str) -> bool:
    """Whether the top level of a store holds only zarr metadata and arrays (directories with metadata)."""
    try:
        entries = list(os.scandir(path))
    except OSError:
        return False
    for entry in entries:
        if entry.name in _ZARR_METADATA and entry.is_file(follow_symlinks=False):
            continue
        is_array = entry.is_dir(follow_symlinks=False) and any(
            os.path.isfile(os.path.join(entry.path, m)) for m in ("zarr.json", ".zarray")
        )
        if not is_array:
            return False
    return True


def _hdf5_marker(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            if fh.read(8) != b"\x89HDF\r\n\x1a\n":
                return None
    except OSError:
        return None
    import h5py

    try:
        with h5py.File(path, "r") as f:
            value = f.attrs.get(MARKER)
    except OSError:
        return None
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    return value if isinstance(value, str) else None
