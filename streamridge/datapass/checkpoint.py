"""Resumable passes: the reduction tree's partial results, saved atomically with what they cover.

A checkpoint is one file ``DIR/checkpoint.npz``.  Its arrays are the statistics
of the partitions done so far (a valid statistics file for
:func:`~streamridge.stats.foldstats.load_stats`) and, under ``partial{j}_*``, the partial
results of the reduction tree (:class:`~streamridge.datapass.executors.TreeReducer`) with
their levels in the metadata, so a resumed pass merges in exactly the order of
an uninterrupted one: resumed statistics equal uninterrupted ones bit for bit.

The lanes of a stateful feature map (:mod:`streamridge.datapass.lane_task`) also save
inside a task: the task of a lane group writes ``DIR/lane-{k}.npz`` every
``every_s`` seconds (:class:`LaneSaver`) with its state vector -- its position in
the lanes, the map's state of every lane and its statistics accumulator -- so a
pass of a few long series resumes inside them, not from their start.  Files of
groups the tree's partials cover are removed.

The metadata holds a fingerprint of the data (every array's stored objects:
sizes and modification times of every zarr chunk; size, modification time and a
sampled hash of files), the partitioning and the pass options.  A resume
recomputes it and refuses a checkpoint that differs (docs/cluster.md says what is
and is not detected).  Both files carry a format version; a newer one is refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from streamridge.errors import CheckpointError, ModelFileError
from streamridge.sources import ROLES
from streamridge.stats.foldstats import STATS_ARRAYS, FoldStats, atomic_write_npz, load_stats, merge

FILE = "checkpoint.npz"
#: the progress file of lane group ``k``
LANE_FILE = "lane-{}.npz"
#: format of ``FILE`` (1: the tree's partials; 2: lane groups' progress files beside it)
VERSION = 2
LANE_FORMAT = "streamridge-lane-progress"
LANE_VERSION = 1


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def fingerprint(
    readers: dict[str, Any],
    spec_dict: dict[str, Any],
    row_offset: int,
    plan: dict[str, Any],
    description: str,
) -> dict[str, Any]:
    """What must match for a checkpoint to be resumed: the stored data, the partitioning and the options.

    Parameters
    ----------
    readers : dict of role to ArrayReader or None
    spec_dict : dict
        What the pass's kernel computes (:func:`streamridge.datapass.spec.spec_dict`).
    row_offset : int
    plan : dict
        The layout's description (partition boundaries, or chunks and lanes).
    description : str
        The data set, for the message.
    """
    arrays: dict[str, Any] = {}
    for role in ROLES:
        r = readers.get(role)
        arrays[role] = (
            None
            if r is None
            else {
                "shape": list(r.shape),
                "dtype": str(r.dtype),
                "grid": r.grid().describe(),
                "stored": _digest(r.fingerprint()),
            }
        )
    return {
        "data": str(description),
        "arrays": arrays,
        "partitions": plan,
        "options": spec_dict,
        "row_offset": int(row_offset),
    }


@dataclass
class Checkpointer:
    """Saves the running statistics every ``every_s`` seconds (and at the end).

    Parameters
    ----------
    directory : path
        Created if missing.
    every_s : float
        Minimum seconds between saves.
    """

    directory: str | os.PathLike[str]
    every_s: float = 10.0
    _last: float = field(default=0.0, init=False)
    saves: int = field(default=0, init=False)

    @property
    def path(self) -> Path:
        """The checkpoint file."""
        return Path(self.directory) / FILE

    def resume(self, fp: dict[str, Any]) -> tuple[list[tuple[int, FoldStats]], int] | None:
        """The reduction's partials and the number of partitions covered, or None without a checkpoint.

        Raises
        ------
        CheckpointError
            If the checkpoint was made from other data, partitions or options, or is unreadable.
        """
        Path(self.directory).mkdir(parents=True, exist_ok=True)
        self._last = time.monotonic()
        if not self.path.exists():
            return None
        try:
            stats = load_stats(self.path)
            info = stats.meta.get("checkpoint", {})
            _check_version(self.path, int(info.get("version", 1)), VERSION)
            partials = _load_partials(self.path, info.get("levels", []), info.get("schemes"))
            done = int(info["partitions_done"])
        except CheckpointError:
            raise
        except (ModelFileError, KeyError, ValueError, OSError) as exc:
            raise CheckpointError(
                f"checkpoint {self.path} is unreadable ({exc}); delete it to start over"
            ) from None
        _check_fingerprint(self.path, info.get("fingerprint", {}), fp)
        return partials, done

    def lane_saver(self, task: int, fp: dict[str, Any]) -> LaneSaver:
        """The saver of lane group ``task``'s progress (it travels with the task)."""
        return LaneSaver(os.fspath(self.directory), task, self.every_s, fp)

    def lane_progress(self, fp: dict[str, Any], done: int) -> dict[int, Any]:
        """The saved progress of lane groups ``done`` and after, by group (call after :meth:`resume`).

        Files of groups before ``done`` (covered by the partials) are removed.

        Raises
        ------
        CheckpointError
            If a file was made from other data, partitions or options, is of a newer format, or is unreadable.
        """
        self.drop_lanes(done)
        return {task: read_lane(path, fp) for task, path in self._lane_files() if task >= done}

    def drop_lanes(self, below: int) -> None:
        """Remove the progress files of lane groups before ``below`` (the partials cover them)."""
        for task, path in self._lane_files():
            if task < below:
                path.unlink(missing_ok=True)

    def _lane_files(self) -> list[tuple[int, Path]]:
        out = []
        for path in Path(self.directory).glob(LANE_FILE.format("*")):
            number = path.name[len("lane-") : -len(".npz")]
            if number.isdigit():
                out.append((int(number), path))
        return sorted(out)

    def due(self) -> bool:
        """Whether ``every_s`` has passed since the last save (cheap: call it before fetching the partials)."""
        return time.monotonic() - self._last >= self.every_s

    def save(self, partials: list[tuple[int, FoldStats]], partitions_done: int, fp: dict[str, Any]) -> None:
        """Write the partials (levels and statistics) covering the first ``partitions_done`` partitions."""
        total: FoldStats | None = None
        for _, s in partials:
            total = s if total is None else merge(total, s)
        if total is None:
            return
        arrays = {a: getattr(total, a) for a in STATS_ARRAYS}
        for j, (_, s) in enumerate(partials):
            arrays.update({f"partial{j}_{a}": getattr(s, a) for a in STATS_ARRAYS})
        info = {
            "fingerprint": fp,
            "partitions_done": int(partitions_done),
            "levels": [int(level) for level, _ in partials],
            "schemes": [
                s.meta.get("scheme") for _, s in partials
            ],  # a lane group's own folds (stats_kernel.py)
            "saved_at": time.time(),
            "version": VERSION,
        }
        meta = dict(total.meta, checkpoint=info, format="streamridge-stats", format_version=1)
        arrays["meta_json"] = np.frombuffer(json.dumps(meta, default=str).encode(), dtype=np.uint8)
        atomic_write_npz(self.path, arrays)
        self._last = time.monotonic()
        self.saves += 1


def _load_partials(
    path: Path, levels: list[int], schemes: list[Any] | None = None
) -> list[tuple[int, FoldStats]]:
    schemes = schemes or [None] * len(levels)
    with np.load(path, allow_pickle=False) as z:
        return [
            (
                int(level),
                FoldStats.from_arrays(
                    [np.array(z[f"partial{j}_{a}"]) for a in STATS_ARRAYS],
                    None if sc is None else {"scheme": sc},
                ),
            )
            for j, (level, sc) in enumerate(zip(levels, schemes))
        ]


def _check_version(path: Path, version: int, known: int) -> None:
    if version > known:
        raise CheckpointError(
            f"checkpoint {path} is of format {version}, written by a newer streamridge (this one reads up to "
            f"format {known}); upgrade streamridge or delete the checkpoint"
        )


def _check_fingerprint(path: Path, old: dict[str, Any], fp: dict[str, Any]) -> None:
    if old != fp:
        diff = sorted(k for k in set(old) | set(fp) if old.get(k) != fp.get(k))
        raise CheckpointError(
            f"checkpoint {path} was made from other data or options (differs in: {', '.join(diff)}); "
            "delete it or use another checkpoint directory"
        )


@dataclass
class LaneSaver:
    """Saves a lane group's progress from the task that runs it, at most every ``every_s`` seconds.

    The task calls :meth:`begin` as it starts, :meth:`due` at the end of every slice of rows it maps, and
    :meth:`save` with its :class:`~streamridge.datapass.lane_task.GroupProgress`
    where due.  Picklable: it travels with the task to any worker, which writes
    ``directory/lane-{task}.npz`` itself (atomically).

    Parameters
    ----------
    directory : str
        The checkpoint directory (created by the client: it must be reachable from the workers).
    task : int
        The lane group's index in the pass.
    every_s : float
        Minimum seconds between saves, counted from the task's start.
    fingerprint : dict
        The pass's :func:`fingerprint`.
    """

    directory: str
    task: int
    every_s: float
    fingerprint: dict[str, Any]
    _last: float | None = field(default=None, init=False)

    @property
    def path(self) -> Path:
        """The progress file."""
        return Path(self.directory) / LANE_FILE.format(self.task)

    def begin(self) -> None:
        """Start the clock (the task starts)."""
        self._last = time.monotonic()

    def due(self) -> bool:
        """Whether ``every_s`` has passed since the last save (or :meth:`begin`)."""
        if self._last is None:
            self.begin()
        return time.monotonic() - self._last >= self.every_s  # type: ignore[operator]

    def save(self, progress: Any) -> None:
        """Write ``progress`` (a :class:`~streamridge.datapass.lane_task.GroupProgress`).

        Raises
        ------
        CheckpointError
            If the checkpoint directory is not there where the task runs.
        """
        from streamridge.features._series import encode_state

        if not Path(self.directory).is_dir():
            raise CheckpointError(
                f"checkpoint directory {self.directory} does not exist where the pass runs; put it on "
                "storage the workers share (the lanes of a stateful feature map save their progress there)"
            )
        states, arrays = encode_state(progress.states, "state_")
        arrays.update({f"stats_{k}": v for k, v in progress.stats.items()})
        meta = {
            "format": LANE_FORMAT,
            "format_version": LANE_VERSION,
            "fingerprint": self.fingerprint,
            "task": self.task,
            "position": [int(p) for p in progress.position],
            "rows_seen": int(progress.rows_seen),
            "slice_bytes": int(progress.slice_bytes),
            "states": states,
            "saved_at": time.time(),
        }
        arrays["meta_json"] = np.frombuffer(json.dumps(meta, default=str).encode(), dtype=np.uint8)
        atomic_write_npz(self.path, arrays)
        self._last = time.monotonic()


def read_lane(path: Path, fp: dict[str, Any]) -> Any:
    """The :class:`~streamridge.datapass.lane_task.GroupProgress` saved in ``path`` by a :class:`LaneSaver`.

    Raises
    ------
    CheckpointError
        If the file was made from other data, partitions or options, is of a newer format, or is unreadable.
    """
    from streamridge.datapass.lane_task import GroupProgress
    from streamridge.features._series import decode_state

    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: np.array(z[k]) for k in z.files}
        meta = json.loads(arrays.pop("meta_json").tobytes().decode())
        if meta.get("format") != LANE_FORMAT:
            raise ValueError(f"not a lane progress file (format {meta.get('format')!r})")
        _check_version(path, int(meta["format_version"]), LANE_VERSION)
        _check_fingerprint(path, meta.get("fingerprint", {}), fp)
        progress = GroupProgress(
            position=(int(meta["position"][0]), int(meta["position"][1])),
            states=decode_state(meta["states"], arrays),
            rows_seen=int(meta["rows_seen"]),
            stats={k[len("stats_") :]: v for k, v in arrays.items() if k.startswith("stats_")},
            slice_bytes=int(meta["slice_bytes"]),
        )
    except CheckpointError:
        raise
    except (KeyError, ValueError, TypeError, IndexError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise CheckpointError(f"checkpoint {path} is unreadable ({exc}); delete it to start over") from None
    if not isinstance(progress.states, list):
        raise CheckpointError(f"checkpoint {path} is unreadable (no lane states); delete it to start over")
    return progress
