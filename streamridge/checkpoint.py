"""Resumable passes: the reduction tree's partial results, saved atomically with what they cover.

A checkpoint is one file ``DIR/checkpoint.npz``.  Its arrays are the statistics
of the partitions done so far (a valid statistics file for
:func:`~streamridge.stats.load_stats`) and, under ``partial{j}_*``, the partial
results of the reduction tree (:class:`~streamridge.executors.TreeReducer`) with
their levels in the metadata, so a resumed pass merges in exactly the order of
an uninterrupted one: resumed statistics equal uninterrupted ones bit for bit.

The metadata holds a fingerprint of the data (every array's stored objects:
sizes and modification times of every zarr chunk; size, modification time and a
sampled hash of files), the partitioning and the pass options.  A resume
recomputes it and refuses a checkpoint that differs (docs/cluster.md says what is
and is not detected).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import CheckpointError, ModelFileError
from .stats import _ARRAYS, FoldStats, atomic_write_npz, load_stats, merge

FILE = "checkpoint.npz"
_ROLES = ("X", "y", "groups", "sample_weight")


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
        The pass options (:func:`streamridge.stream.spec_dict`).
    row_offset : int
    plan : dict
        The partition plan's description.
    description : str
        The data set, for the message.
    """
    arrays: dict[str, Any] = {}
    for role in _ROLES:
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
            partials = _load_partials(self.path, info.get("levels", []), info.get("schemes"))
            done = int(info["partitions_done"])
        except (ModelFileError, KeyError, ValueError, OSError) as exc:
            raise CheckpointError(
                f"checkpoint {self.path} is unreadable ({exc}); delete it to start over"
            ) from None
        old = info.get("fingerprint", {})
        if old != fp:
            diff = sorted(k for k in set(old) | set(fp) if old.get(k) != fp.get(k))
            raise CheckpointError(
                f"checkpoint {self.path} was made from other data or options (differs in: {', '.join(diff)}); "
                "delete it or use another checkpoint directory"
            )
        return partials, done

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
        arrays = {a: getattr(total, a) for a in _ARRAYS}
        for j, (_, s) in enumerate(partials):
            arrays.update({f"partial{j}_{a}": getattr(s, a) for a in _ARRAYS})
        info = {
            "fingerprint": fp,
            "partitions_done": int(partitions_done),
            "levels": [int(level) for level, _ in partials],
            "schemes": [s.meta.get("scheme") for _, s in partials],  # a lane group's own folds (features/plan.py)
            "saved_at": time.time(),
        }
        meta = dict(total.meta, checkpoint=info, format="streamridge-stats", format_version=1)
        arrays["meta_json"] = np.frombuffer(json.dumps(meta, default=str).encode(), dtype=np.uint8)
        atomic_write_npz(self.path, arrays)
        self._last = time.monotonic()
        self.saves += 1


def _load_partials(path: Path, levels: list[int], schemes: list[Any] | None = None) -> list[tuple[int, FoldStats]]:
    schemes = schemes or [None] * len(levels)
    with np.load(path, allow_pickle=False) as z:
        return [
            (int(level), FoldStats.from_arrays([np.array(z[f"partial{j}_{a}"]) for a in _ARRAYS], None if sc is None else {"scheme": sc}))
            for j, (level, sc) in enumerate(zip(levels, schemes))
        ]
