"""Fold assignment: a pure function of the global row index or the group id.

The fold of a row never depends on chunk sizes, worker count or call order, so
a streamed pass, a sharded pass and repeated ``partial_fit`` calls agree.

Schemes
-------
``hash``    rows are taken in aligned blocks of K consecutive global indices; each block
            gets its own seeded permutation of the K folds (ranks of
            splitmix64(row_index, seed) within the block).  A pure function of the
            row index, like a plain hash, but fold sizes differ by at most one, so
            no fold is empty once M >= K.
``group``   fold = splitmix64(group_id, seed) mod K (all rows of a group share a fold)
``logo``    one fold per distinct group value (leave-one-group-out)
``blocks``  K contiguous blocks of rows (time series); needs the row count up front
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import FoldError, ParameterError

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)

SCHEMES = ("hash", "group", "logo", "blocks")


def splitmix64(values: np.ndarray, seed: int) -> np.ndarray:
    """Mix unsigned 64-bit integers with a seed (the splitmix64 finalizer).

    Parameters
    ----------
    values : array of uint64
    seed : int

    Returns
    -------
    array of uint64, same shape
    """
    offset = np.uint64(((seed + 1) * 0x9E3779B97F4A7C15) % (1 << 64))
    z = np.asarray(values, dtype=np.uint64) + offset
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def group_keys(groups: np.ndarray) -> np.ndarray:
    """Map group ids of any dtype to stable uint64 keys (same id -> same key).

    Integer ids map to themselves (two's complement); every other dtype goes
    through BLAKE2b of its string form, so that ``"a"`` hashes the same in every
    process and Python version.
    """
    g = np.asarray(groups)
    if g.dtype.kind in "iub":
        return g.astype(np.int64).view(np.uint64)
    if g.dtype.kind == "f" and np.all(np.isfinite(g)) and np.all(g == np.round(g)):
        return g.astype(np.int64).view(np.uint64)
    uniq, inv = np.unique(g.astype(str), return_inverse=True)
    keys = np.array(
        [int.from_bytes(hashlib.blake2b(u.encode(), digest_size=8).digest(), "little") for u in uniq],
        dtype=np.uint64,
    )
    return keys[inv.reshape(-1)]


@dataclass(frozen=True)
class FoldScheme:
    """How rows are assigned to folds.

    Parameters
    ----------
    kind : {"hash", "group", "logo", "blocks"}
    n_folds : int
    seed : int
        Seed of the hash (``random_state``).
    n_rows : int or None
        Total row count; required by ``blocks``.
    group_values : tuple or None
        Sorted distinct group values; required by ``logo``.
    """

    kind: str
    n_folds: int
    seed: int = 0
    n_rows: int | None = None
    group_values: tuple[Any, ...] | None = field(default=None)

    def __post_init__(self) -> None:
        if self.kind not in SCHEMES:
            raise ParameterError(f"unknown fold scheme {self.kind!r}; use one of {SCHEMES}")
        if self.n_folds < 2:
            raise ParameterError(f"cv needs at least 2 folds; got {self.n_folds}")
        if self.kind == "blocks" and self.n_rows is None:
            raise ParameterError("cv='blocks' needs the row count up front (n_rows)")
        if self.kind == "logo" and self.group_values is None:
            raise ParameterError("cv='groups' needs the distinct group values")

    @property
    def needs_groups(self) -> bool:
        """Whether :meth:`assign` needs the group ids of the rows."""
        return self.kind in ("group", "logo")

    def assign(self, row_start: int, n: int, groups: np.ndarray | None = None) -> np.ndarray:
        """Fold ids of rows ``row_start .. row_start + n - 1``.

        Returns
        -------
        array of int64 of shape (n,)
        """
        if self.kind == "hash":
            return _block_permutation_folds(row_start, n, self.n_folds, self.seed)
        if self.kind == "blocks":
            rows = np.arange(row_start, row_start + n, dtype=np.int64)
            assert self.n_rows is not None
            if row_start + n > self.n_rows:
                raise FoldError(
                    f"cv='blocks' was set up for {self.n_rows} rows but row {row_start + n - 1} "
                    "arrived; pass the total row count (n_rows) of all data"
                )
            return (rows * self.n_folds) // self.n_rows
        if groups is None or len(groups) != n:
            raise FoldError(f"fold scheme {self.kind!r} needs one group id per row")
        if self.kind == "group":
            return (splitmix64(group_keys(groups), self.seed) % np.uint64(self.n_folds)).astype(
                np.int64
            )
        values = np.asarray(self.group_values)
        idx = np.searchsorted(values, groups)
        idx = np.clip(idx, 0, len(values) - 1)
        if not np.all(values[idx] == groups):
            bad = np.asarray(groups)[values[idx] != groups][:3]
            raise FoldError(
                f"group ids {bad.tolist()} were not seen when the leave-one-group-out folds "
                "were set up; pass all group values"
            )
        return idx.astype(np.int64)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable description (saved with stats and models)."""
        gv = None if self.group_values is None else [_plain(v) for v in self.group_values]
        return {
            "kind": self.kind,
            "n_folds": int(self.n_folds),
            "seed": int(self.seed),
            "n_rows": None if self.n_rows is None else int(self.n_rows),
            "group_values": gv,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FoldScheme:
        """Inverse of :meth:`to_dict`."""
        gv = d.get("group_values")
        return cls(
            kind=d["kind"],
            n_folds=int(d["n_folds"]),
            seed=int(d.get("seed", 0)),
            n_rows=d.get("n_rows"),
            group_values=None if gv is None else tuple(gv),
        )


def _block_permutation_folds(row_start: int, n: int, K: int, seed: int) -> np.ndarray:
    """Fold of rows ``row_start .. row_start+n-1``: rank of the row's hash within its block of K."""
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    b0 = row_start // K
    b1 = (row_start + n - 1) // K
    first = np.arange(b0 * K, (b1 + 1) * K, dtype=np.uint64).reshape(-1, K)
    keys = splitmix64(first, seed)
    ranks = np.argsort(np.argsort(keys, axis=1, kind="stable"), axis=1, kind="stable")
    offset = row_start - b0 * K
    return ranks.reshape(-1)[offset : offset + n].astype(np.int64)


def _plain(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def make_scheme(
    cv: int | str,
    *,
    seed: int = 0,
    has_groups: bool = False,
    n_rows: int | None = None,
    group_values: np.ndarray | None = None,
    n_blocks: int = 5,
) -> FoldScheme:
    """Build a :class:`FoldScheme` from the user-facing ``cv`` argument.

    Parameters
    ----------
    cv : int, "groups" or "blocks"
        ``K`` (hash of row index, or of the group id when groups are given),
        ``"groups"`` (leave-one-group-out) or ``"blocks"`` (``n_blocks``
        contiguous blocks).
    """
    if isinstance(cv, (bool, np.bool_)):
        raise ParameterError(f"cv must be an int >= 2, 'groups' or 'blocks'; got cv={cv!r}")
    if isinstance(cv, (int, np.integer)):
        kind = "group" if has_groups else "hash"
        return FoldScheme(kind, int(cv), seed=int(seed))
    if cv == "groups":
        if group_values is None:
            raise ParameterError("cv='groups' needs groups (one id per row)")
        values = tuple(np.unique(np.asarray(group_values)).tolist())
        if len(values) < 2:
            raise FoldError(
                f"cv='groups' needs at least 2 distinct groups; got {len(values)}"
            )
        return FoldScheme("logo", len(values), seed=int(seed), group_values=values)
    if cv == "blocks":
        return FoldScheme("blocks", int(n_blocks), seed=int(seed), n_rows=n_rows)
    raise ParameterError(f"cv must be an int >= 2, 'groups' or 'blocks'; got cv={cv!r}")
