"""Output paths of the command line: checked before the pass, written all or none.

The rules (the table in ``docs/bad-input.md``):

- an output that does not exist is created; its directory must exist and be writable;
- an existing output is replaced only when ``overwrite`` is given **and** it was written by
  streamridge as the same kind of output (a model file, a statistics file, a prediction store,
  a demo data set), recognised by the format field or marker attribute streamridge writes;
- never replaced, whatever the options: the current directory, the home directory, ``/``, an
  input (data, model, statistics, checkpoint) or a directory that holds one, and nothing is
  written inside an input.  Paths are compared resolved (symlinks followed) and by device and
  inode, so a symlink or a hard link to the data counts as the data.

Writing goes through :class:`Transaction`: every output is first written to a hidden sibling,
then all are moved into place together; a failure of any leaves none of them (and the previous
files, if any, untouched).  Messages name the user's paths, never the temporaries.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from .errors import OutputError

MARKER = "streamridge_output"
"""Root attribute that marks a store written by streamridge; its value is the kind."""

_WHAT = {
    "model": "model file",
    "stats": "statistics file",
    "predictions": "prediction store",
    "demo-data": "demo data set",
    "report": "report (HTML)",
    "figure": "report figure (PNG)",
}
#: bytes near the start of the HTML and PNG files of ``streamridge report`` (its generator tag)
REPORT_TAG = b"streamridge report"
_NPZ_FORMAT = {"model": ("header_json", "streamridge-model"), "stats": ("meta_json", "streamridge-stats")}


@dataclass(frozen=True)
class Output:
    """One output of a command.

    Attributes
    ----------
    path : str
        As the user gave it.
    kind : {"model", "stats", "predictions", "demo-data"}
    option : str
        The option that named it (for messages), e.g. ``"--save-stats"``.
    """

    path: str
    kind: str
    option: str = "--out"


def resolve(path: str | os.PathLike[str]) -> str:
    """Absolute path with ``~`` expanded and every symlink resolved."""
    text = os.fspath(path)
    if text.startswith("file://"):
        text = text[len("file://") :]
    return os.path.realpath(os.path.expanduser(text))


def _is_url(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def check_outputs(outputs: Sequence[Output], inputs: Sequence[str | None], *, overwrite: bool) -> list[str]:
    """Refuse, before any work, outputs that cannot or must not be written.

    Parameters
    ----------
    outputs : sequence of Output
    inputs : sequence of str or None
        Paths the command reads (data, model, statistics, checkpoint); URLs and None are skipped.
    overwrite : bool
        Whether an existing output written by streamridge may be replaced.

    Returns
    -------
    list of str
        The resolved path of every output, in order.

    Raises
    ------
    OutputError
        One line naming the output, the problem and the fix.
    """
    local = [resolve(p) for p in inputs if p is not None and not _is_url(os.fspath(p))]
    targets: list[str] = []
    for out in outputs:
        target = resolve(out.path)
        for previous, earlier in zip(targets, outputs):
            if previous == target:
                raise OutputError(
                    f"{out.option} {out.path} names the same path as {earlier.option} {earlier.path}; "
                    "give each output its own path"
                )
        _check_protected(out, target, local)
        _check_existing(out, target, overwrite=overwrite)
        _check_parent(out, target)
        targets.append(target)
    return targets


def _contains(directory: str, path: str) -> bool:
    """Whether ``path`` is ``directory`` or lies below it (both resolved)."""
    try:
        return os.path.commonpath([directory, path]) == directory
    except ValueError:  # different drives
        return False


def _same_inode(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _ancestors(path: str) -> Iterator[str]:
    while True:
        yield path
        parent = os.path.dirname(path)
        if parent == path:
            return
        path = parent


def _check_protected(out: Output, target: str, inputs: list[str]) -> None:
    name = f"{out.option} {out.path}"
    for special, what in (
        (os.getcwd(), "the current directory"),
        (os.path.expanduser("~"), "the home directory"),
    ):
        if _contains(target, resolve(special)):
            raise OutputError(
                f"{name} is or contains {what}, which is never replaced; name a new file or store"
            )
    exists = os.path.lexists(target)
    for source in inputs:
        if target == source or (exists and _same_inode(target, source)):
            raise OutputError(f"{name} is an input of this command ({source}); choose another output path")
        if _contains(target, source) or (exists and any(_same_inode(target, a) for a in _ancestors(source))):
            raise OutputError(
                f"{name} contains the input {source}, which is never replaced; choose another path"
            )
        if _contains(source, target) and _is_zarr_dir(source):
            raise OutputError(f"{name} lies inside the input {source}; write outputs outside the input data")


def _is_zarr_dir(path: str) -> bool:
    markers = ("zarr.json", ".zgroup", ".zarray")
    return os.path.isdir(path) and (
        path.endswith(".zarr") or any(os.path.exists(os.path.join(path, m)) for m in markers)
    )


def written_by_streamridge(path: str, kind: str) -> bool:
    """Whether ``path`` holds an output of ``kind`` written by streamridge (format field or marker)."""
    if kind in _NPZ_FORMAT:
        return os.path.isfile(path) and _npz_format(path, _NPZ_FORMAT[kind][0]) == _NPZ_FORMAT[kind][1]
    if kind in ("report", "figure"):
        return os.path.isfile(path) and _starts_with_tag(path)
    if os.path.isdir(path):
        return _zarr_marker(path) == kind
    if os.path.isfile(path):
        return _hdf5_marker(path) == kind
    return False


def _starts_with_tag(path: str) -> bool:
    """Whether the first 4 KiB of a file hold :data:`REPORT_TAG` (HTML generator meta, PNG Software text)."""
    try:
        with open(path, "rb") as fh:
            return REPORT_TAG in fh.read(4096)
    except OSError:
        return False


def _npz_format(path: str, member: str) -> str | None:
    try:
        with zipfile.ZipFile(path) as z, z.open(f"{member}.npy") as fh:
            import numpy as np

            header = json.loads(bytes(np.lib.format.read_array(fh, allow_pickle=False)).decode())
    except (OSError, KeyError, ValueError, zipfile.BadZipFile, UnicodeDecodeError):
        return None
    value = header.get("format") if isinstance(header, dict) else None
    return value if isinstance(value, str) else None


def _zarr_marker(path: str) -> str | None:
    for name, key in (("zarr.json", "attributes"), (".zattrs", None)):
        try:
            with open(os.path.join(path, name), encoding="utf-8") as fh:
                doc = json.load(fh)
        except (OSError, ValueError):
            continue
        attrs = doc.get(key) if key and isinstance(doc, dict) else doc
        if isinstance(attrs, dict) and isinstance(attrs.get(MARKER), str):
            return str(attrs[MARKER])
    return None


def _hdf5_marker(path: str) -> str | None:
    with open(path, "rb") as fh:
        if fh.read(8) != b"\x89HDF\r\n\x1a\n":
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


def _check_existing(out: Output, target: str, *, overwrite: bool) -> None:
    if not os.path.lexists(target):
        return
    name, what = f"{out.option} {out.path}", _WHAT[out.kind]
    if out.kind in _NPZ_FORMAT and os.path.isdir(target):
        raise OutputError(f"{name} is an existing directory; name a {what} (e.g. {out.kind}.npz) to write")
    if not written_by_streamridge(target, out.kind):
        raise OutputError(
            f"{name} exists and is not a {what} written by streamridge; it is never replaced, "
            "choose a new path (or remove it yourself)"
        )
    if not overwrite:
        raise OutputError(f"{name} exists (a {what} from an earlier run); pass --overwrite to replace it")


def _check_parent(out: Output, target: str) -> None:
    parent = os.path.dirname(target)
    if not os.path.isdir(parent):
        raise OutputError(f"cannot write {out.option} {out.path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"cannot write {out.option} {out.path}: directory {parent} is not writable")


def check_checkpoint(path: str | None) -> None:
    """A checkpoint must be a directory (created if missing); checked before the pass."""
    if path is not None and os.path.lexists(path) and not os.path.isdir(path):
        raise OutputError(f"--checkpoint {path} must be a directory; it is an existing file")


def demo_outputs(directory: str, *, overwrite: bool) -> tuple[str, str]:
    """Check the demo's data store and model in ``directory`` (created if missing) before any work.

    Returns
    -------
    store, model : str
        Resolved paths of ``directory/narma10.zarr`` and ``directory/model.npz``.
    """
    if os.path.lexists(directory) and not os.path.isdir(directory):
        raise OutputError(f"--out {directory} is an existing file; the demo needs a directory")
    if not os.path.isdir(directory):
        check_outputs([Output(directory, "demo-data")], [], overwrite=False)  # the directory and its parent
        os.makedirs(directory)
    outputs = [
        Output(os.path.join(directory, "narma10.zarr"), "demo-data"),
        Output(os.path.join(directory, "model.npz"), "model"),
    ]
    store, model = check_outputs(outputs, [], overwrite=overwrite)
    return store, model


# ---------------------------------------------------------------------- all or none
class Transaction:
    """Outputs written to hidden siblings, then moved into place together (all or none).

    Use as a context manager: :meth:`stage` gives the temporary path for a target; leaving
    the block without error moves every staged output into place, an error removes them.
    """

    def __init__(self) -> None:
        self._staged: list[tuple[str, str, str]] = []  # (temporary, target, option)

    def stage(self, target: str, option: str = "--out") -> str:
        """A fresh hidden path beside ``target`` to write the output into."""
        parent, base = os.path.split(target)
        tmp = os.path.join(parent, f".tmp-{base}-{uuid.uuid4().hex[:8]}")
        self._staged.append((tmp, target, option))
        return tmp

    @contextmanager
    def writing(self, target: str, option: str = "--out") -> Iterator[str]:
        """:meth:`stage`, with OS errors of the write reported on ``target`` (not the temporary)."""
        tmp = self.stage(target, option)
        try:
            yield tmp
        except OSError as exc:
            root: BaseException = exc
            while isinstance(root.__cause__, OSError):
                root = root.__cause__
            if not isinstance(root, OSError) or root.errno is None:  # our own one-line messages
                raise
            raise OutputError(f"cannot write {option} {target}: {_reason(root)}") from exc

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.discard()

    def discard(self) -> None:
        """Remove every staged temporary."""
        for tmp, _, _ in self._staged:
            _remove(tmp)
        self._staged.clear()

    def commit(self) -> None:
        """Move every staged output into place; on failure restore what was there and raise."""
        moved: list[str] = []
        backups: list[tuple[str, str]] = []
        try:
            for tmp, target, option in self._staged:
                if not os.path.lexists(tmp):
                    raise OutputError(f"cannot write {option} {target}: nothing was written")
                if os.path.lexists(target):
                    parent, base = os.path.split(target)
                    old = os.path.join(parent, f".old-{base}-{uuid.uuid4().hex[:8]}")
                    os.replace(target, old)
                    backups.append((old, target))
                os.replace(tmp, target)
                moved.append(target)
        except OSError as exc:
            for target in moved:
                _remove(target)
            for old, target in backups:
                os.replace(old, target)
            self.discard()
            if isinstance(exc, OutputError):
                raise
            raise OutputError(f"cannot write {target}: {_reason(exc)}") from exc
        for old, _ in backups:
            _remove(old)
        self._staged.clear()


def _reason(exc: OSError) -> str:
    """The reason of an OS error without its errno number or file names."""
    return exc.strerror if exc.strerror else str(exc).split(":")[0]


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.remove(path)


def current_umask() -> int:
    """The process umask, read without changing it where the platform allows."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
