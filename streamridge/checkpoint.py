"""Resumable passes: the statistics of the first chunks, saved atomically with what they cover.

A checkpoint is one statistics file ``DIR/checkpoint.npz`` whose metadata holds a
fingerprint of the data and the pass options and the number of leading chunks
it covers.  Chunks are merged in order, so "chunks 0 .. i-1" describes it fully.
A checkpoint with another fingerprint is refused, never mixed in.
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
from .stats import FoldStats, load_stats, save_stats

FILE = "checkpoint.npz"


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _sample(arr: Any) -> str | None:
    """Hash of the first and last few rows of a dask array (reads two chunks)."""
    if arr is None:
        return None
    n = int(arr.shape[0])
    head = np.asarray(arr[: min(4, n)].compute(scheduler="sync"))
    tail = np.asarray(arr[max(0, n - 4) :].compute(scheduler="sync"))
    h = hashlib.sha256(head.tobytes())
    h.update(tail.tobytes())
    return h.hexdigest()[:16]


def fingerprint(source: Any, spec_dict: dict[str, Any], row_offset: int) -> dict[str, Any]:
    """What must match for a checkpoint to be resumed: data identity, chunking and options."""
    X = source.X
    parts = {}
    for name in ("X", "y", "groups", "sample_weight"):
        a = getattr(source, name, None)
        parts[name] = None if a is None else {"shape": list(a.shape), "dtype": str(a.dtype), "sample": _sample(a)}
    return {
        "data": str(getattr(source, "description", "")),
        "arrays": parts,
        "row_chunks": _digest(list(X.chunks[0])),
        "n_chunks": len(X.chunks[0]),
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

    def resume(self, fp: dict[str, Any]) -> tuple[FoldStats, int] | None:
        """Statistics and number of chunks covered, or None without a checkpoint.

        Raises
        ------
        CheckpointError
            If the checkpoint was made from other data or options.
        """
        Path(self.directory).mkdir(parents=True, exist_ok=True)
        self._last = time.monotonic()
        if not self.path.exists():
            return None
        try:
            stats = load_stats(self.path)
        except ModelFileError as exc:
            raise CheckpointError(f"checkpoint {self.path} is unreadable ({exc}); delete it to start over") from None
        info = stats.meta.get("checkpoint", {})
        old = info.get("fingerprint", {})
        if old != fp:
            diff = sorted(k for k in set(old) | set(fp) if old.get(k) != fp.get(k))
            raise CheckpointError(
                f"checkpoint {self.path} was made from other data or options (differs in: {', '.join(diff)}); "
                "delete it or use another checkpoint directory"
            )
        return stats, int(info["chunks_done"])

    def due(self) -> bool:
        """Whether ``every_s`` has passed since the last save (cheap: call it before building the stats)."""
        return time.monotonic() - self._last >= self.every_s

    def maybe_save(self, stats: FoldStats, chunks_done: int, fp: dict[str, Any], *, force: bool = False) -> bool:
        """Save if ``every_s`` has passed since the last save (or ``force``)."""
        now = time.monotonic()
        if not force and now - self._last < self.every_s:
            return False
        snap = stats.copy()
        snap.meta["checkpoint"] = {"fingerprint": fp, "chunks_done": int(chunks_done), "saved_at": time.time()}
        save_stats(snap, self.path)
        self._last = now
        self.saves += 1
        return True
