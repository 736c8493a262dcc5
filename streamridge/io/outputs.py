"""Output paths of the command line: checked before the pass, written all or none.

The rules (the table in ``docs/bad-input.md``):

- an output that does not exist is created; its directory must exist and be writable;
- an existing output is replaced only when ``overwrite`` is given **and** it was written by
  streamridge as the same kind of output (a model file, a statistics file, a prediction store,
  a demo data set, a report or a report figure), recognised by what only streamridge writes
  (:mod:`streamridge.io.output_kinds`); anything else is refused without suggesting ``--overwrite``;
- a path below a file is named as such ("m.npz is a file, not a directory");
- never replaced, whatever the options: the current directory, the home directory, ``/``, an
  input (data, model, statistics, checkpoint) or a directory that holds one, and nothing is
  written inside an input.  Paths are compared resolved (symlinks followed) and by device and
  inode, so a symlink or a hard link to the data counts as the data.

Writing goes through :class:`Transaction`: every output is first written to a hidden sibling,
then all are moved into place together; a failure of any leaves none of them (and the previous
files, if any, untouched).  A new name is taken by a step that fails when the name exists
(:func:`publish_new`), so of two runs writing the same new output the later one fails and the
earlier one's output is kept.  Messages name the user's paths, never the temporaries.
"""

from __future__ import annotations

import errno
import os
import shutil
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from streamridge.errors import OutputError
from streamridge.io.output_kinds import MARKER, written_by_streamridge

__all__ = ["MARKER", "Output", "Transaction", "check_outputs", "written_by_streamridge"]

_WHAT = {
    "model": "model file",
    "stats": "statistics file",
    "predictions": "prediction store",
    "demo-data": "demo data set",
    "report": "report (HTML)",
    "figure": "report figure (PNG)",
}
_NPZ_KINDS = ("model", "stats")


@dataclass(frozen=True)
class Output:
    """One output of a command.

    Attributes
    ----------
    path : str
        As the user gave it.
    kind : {"model", "stats", "predictions", "demo-data", "report", "figure"}
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


def _check_existing(out: Output, target: str, *, overwrite: bool) -> None:
    if not os.path.lexists(target):
        return
    name, what = f"{out.option} {out.path}", _WHAT[out.kind]
    if out.kind in _NPZ_KINDS and os.path.isdir(target):
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
    blocker = _file_ancestor(parent)
    if blocker is not None:
        raise OutputError(f"cannot write {out.option} {out.path}: {blocker} is a file, not a directory")
    if not os.path.isdir(parent):
        raise OutputError(f"cannot write {out.option} {out.path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"cannot write {out.option} {out.path}: directory {parent} is not writable")


def _file_ancestor(path: str) -> str | None:
    """The nearest existing one of ``path`` and its parents when it is not a directory, else None."""
    for candidate in _ancestors(path):
        if os.path.lexists(candidate):
            return None if os.path.isdir(candidate) else candidate
    return None


def check_checkpoint(path: str | None) -> None:
    """A checkpoint must be a directory (created if missing); checked before the pass."""
    if path is None:
        return
    if os.path.lexists(path) and not os.path.isdir(path):
        raise OutputError(f"--checkpoint {path} must be a directory; it is an existing file")
    blocker = _file_ancestor(resolve(path))
    if blocker is not None:
        raise OutputError(f"--checkpoint {path} cannot be created: {blocker} is a file, not a directory")


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
@dataclass(frozen=True)
class _Staged:
    tmp: str
    target: str
    kind: str
    option: str


class Transaction:
    """Outputs written to hidden siblings, then moved into place together (all or none).

    Use as a context manager: :meth:`stage` gives the temporary path for a target; leaving
    the block without error moves every staged output into place, an error removes them.

    A name that exists when the outputs are moved into place (another run wrote it while
    this one ran) is replaced only with ``overwrite`` and only if it is an output of the
    same kind written by streamridge; otherwise nothing is moved and :class:`OutputError`
    says so.  A new name is published by a step that fails when the name exists
    (:func:`publish_new`), so of two runs writing the same new name the later one fails.

    Parameters
    ----------
    overwrite : bool
        Whether an existing output of the same kind written by streamridge may be replaced.
    """

    def __init__(self, *, overwrite: bool = False) -> None:
        self.overwrite = overwrite
        self._staged: list[_Staged] = []

    def stage(self, target: str, kind: str, option: str = "--out") -> str:
        """A fresh hidden path beside ``target`` to write the output (of ``kind``) into."""
        parent, base = os.path.split(target)
        tmp = os.path.join(parent, f".tmp-{base}-{uuid.uuid4().hex[:8]}")
        self._staged.append(_Staged(tmp, target, kind, option))
        return tmp

    @contextmanager
    def writing(self, target: str, kind: str, option: str = "--out") -> Iterator[str]:
        """:meth:`stage`, with OS errors of the write reported on ``target`` (not the temporary)."""
        tmp = self.stage(target, kind, option)
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
        for s in self._staged:
            _remove(s.tmp)
        self._staged.clear()

    def commit(self) -> None:
        """Move every staged output into place; on failure restore what was there and raise."""
        published: list[tuple[str, str | None]] = []  # (target, backup of the previous output or None)
        try:
            for s in self._staged:
                if not os.path.lexists(s.tmp):
                    raise OutputError(f"cannot write {s.option} {s.target}: nothing was written")
                published.append((s.target, self._publish(s)))
        except OSError as exc:
            for target, old in reversed(published):
                _remove(target)
                if old is not None:
                    os.replace(old, target)
            self.discard()
            if isinstance(exc, OutputError):
                raise
            raise OutputError(f"cannot write {s.option} {s.target}: {_reason(exc)}") from exc
        for _, old in published:
            if old is not None:
                _remove(old)
        self._staged.clear()

    def _publish(self, s: _Staged) -> str | None:
        """Move one staged output into place; return the hidden backup of what it replaced, if any."""
        if os.path.lexists(s.target):
            self._check_replace(s)
            return _replace(s.tmp, s.target)
        try:
            publish_new(s.tmp, s.target)
        except OSError as exc:
            if not os.path.lexists(s.target):
                raise
            raise _appeared(s, written_by_streamridge(s.target, s.kind)) from exc
        return None

    def _check_replace(self, s: _Staged) -> None:
        ours = written_by_streamridge(s.target, s.kind)
        if not (self.overwrite and ours):
            raise _appeared(s, ours and not self.overwrite)


def _appeared(s: _Staged, ours: bool) -> OutputError:
    """The refusal for an output name that was taken while the command ran."""
    what = _WHAT[s.kind]
    found = f"a {what} written by another run" if ours else f"not a {what} written by streamridge"
    return OutputError(
        f"{s.option} {s.target} exists now ({found}); it was kept and nothing was written; choose another path"
    )


_NO_HARD_LINKS = frozenset({errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EMLINK})


def publish_new(tmp: str, target: str) -> None:
    """Move the finished ``tmp`` to the new name ``target``; fail if the name exists.

    A file is hard-linked to its name (``link`` fails when the name exists, whoever made
    it), then its temporary name is removed.  A directory (a zarr store) is renamed onto
    its name after a check that the name is free: ``rename`` never replaces a file or a
    non-empty directory, so the only thing that could be replaced is an empty directory
    made in the instant between the check and the rename.  On a file system without hard
    links a file is published the same way (check, then rename).

    Raises
    ------
    FileExistsError
        If ``target`` exists (or ``OSError`` with ``ENOTEMPTY`` / ``ENOTDIR`` from the rename).
    """
    if _hard_link(tmp, target):
        os.unlink(tmp)
        return
    if os.path.lexists(target):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), target)
    os.rename(tmp, target)


def _replace(tmp: str, target: str) -> str:
    """Replace ``target`` by ``tmp``; return the hidden path that keeps the previous output until commit.

    A file is replaced atomically (``rename`` over it, the previous file kept by a hard
    link); a directory, which ``rename`` cannot replace, is moved aside first.  If the
    move fails, ``target`` is as it was.
    """
    parent, base = os.path.split(target)
    old = os.path.join(parent, f".old-{base}-{uuid.uuid4().hex[:8]}")
    linked = _hard_link(target, old)
    if not linked:
        os.replace(target, old)
    try:
        os.replace(tmp, target)
    except OSError:
        if linked:
            os.remove(old)
        else:
            os.replace(old, target)
        raise
    return old


def _hard_link(path: str, link: str) -> bool:
    """Hard-link a file (not a directory) to ``link``; False where that is impossible."""
    if os.path.isdir(path) and not os.path.islink(path):
        return False
    try:
        os.link(path, link, follow_symlinks=False)
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
        return False
    return True


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
