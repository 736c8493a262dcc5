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
``splits``  an explicit fold id per row, made from a scikit-learn splitter or from
            (train, test) index arrays by :func:`folds_from_splits`; the ids travel
            with the rows as a column (like group ids), the scheme keeps their
            digest and, when short, their run-length encoding.  ``training`` is
            ``"complement"`` (train on all other rows, K-fold) or ``"forward"``
            (train on the folds before, TimeSeriesSplit); with ``train_only=1``
            fold 0 holds rows that are never validated but always trained on.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamridge.errors import FoldError, ParameterError

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)

SCHEMES = ("hash", "group", "logo", "blocks", "splits")
TRAININGS = ("complement", "forward")
#: run-length encodings of explicit fold ids longer than this are not stored (the digest is)
MAX_RUNS = 1000


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
    kind : {"hash", "group", "logo", "blocks", "splits"}
    n_folds : int
        Number of fold cells of the statistics (for ``splits`` with
        ``train_only=1`` one more than the folds that are validated).
    seed : int
        Seed of the hash (``random_state``).
    n_rows : int or None
        Total row count; required by ``blocks``.
    group_values : tuple or None
        Sorted distinct group values; required by ``logo``.
    training : {"complement", "forward"}
        Training part of a validated fold: all other folds, or the folds before it.
    train_only : {0, 1}
        Leading folds that are never validated (rows in no test set).
    digest : str or None
        BLAKE2b digest of the fold ids (``splits``): statistics of other splits never merge.
    runs : tuple of (fold, length) pairs or None
        Run-length encoding of the fold ids (``splits``, when at most ``MAX_RUNS`` runs).
    """

    kind: str
    n_folds: int
    seed: int = 0
    n_rows: int | None = None
    group_values: tuple[Any, ...] | None = field(default=None)
    training: str = "complement"
    train_only: int = 0
    digest: str | None = None
    runs: tuple[tuple[int, int], ...] | None = None

    def __post_init__(self) -> None:
        if self.kind not in SCHEMES:
            raise ParameterError(f"unknown fold scheme {self.kind!r}; use one of {SCHEMES}")
        if self.n_folds < (1 if self.kind == "logo" else 2):  # logo: one series so far (partial_fit, a shard)
            raise ParameterError(f"cv needs at least 2 folds; got {self.n_folds}")
        if self.kind == "blocks" and self.n_rows is None:
            raise ParameterError("cv='blocks' needs the row count up front (n_rows)")
        if self.kind == "logo" and self.group_values is None:
            raise ParameterError("cv='groups' needs the distinct group values")
        if self.training not in TRAININGS or self.train_only not in (0, 1):
            raise ParameterError(f"unknown fold training {self.training!r} / train_only={self.train_only!r}")
        if self.kind != "splits" and (self.training != "complement" or self.train_only):
            raise ParameterError(f"fold scheme {self.kind!r} trains on the complement of each fold")
        if self.kind == "splits":
            self._check_splits()

    def _check_splits(self) -> None:
        if self.n_rows is None:
            raise ParameterError("explicit splits need the row count (n_rows)")
        if self.digest is not None and not isinstance(self.digest, str):
            raise ParameterError(f"the digest of explicit splits must be a string; got {self.digest!r}")
        if self.runs is not None:
            runs = np.array(self.runs, dtype=np.int64).reshape(-1, 2)
            if (
                (runs[:, 1] <= 0).any()
                or runs[:, 1].sum() != self.n_rows
                or not np.isin(runs[:, 0], range(self.n_folds)).all()
            ):
                raise ParameterError(
                    f"the runs of explicit splits must have positive lengths summing to n_rows={self.n_rows} "
                    f"and folds in [0, {self.n_folds - 1}]"
                )

    @property
    def validated(self) -> range:
        """Indices of the folds that are validated (all but the ``train_only`` leading ones)."""
        return range(self.train_only, self.n_folds)

    @property
    def forward(self) -> bool:
        """Whether each fold is trained on the folds before it (forward chaining)."""
        return self.training == "forward"

    @property
    def needs_groups(self) -> bool:
        """Whether :meth:`assign` needs the group ids of the rows."""
        return self.kind in ("group", "logo") or (self.kind == "splits" and self.runs is None)

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
        if self.kind == "splits":
            return self._explicit(row_start, n, None if groups is None else np.asarray(groups))
        if groups is None or len(groups) != n:
            raise FoldError(f"fold scheme {self.kind!r} needs one group id per row")
        if self.kind == "group":
            return (splitmix64(group_keys(groups), self.seed) % np.uint64(self.n_folds)).astype(np.int64)
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

    def _explicit(self, row_start: int, n: int, ids: np.ndarray | None) -> np.ndarray:
        """Fold ids of a ``splits`` scheme: from its runs (a pure function of the row index) when
        stored, else from the fold-id column, checked against the scheme."""
        assert self.n_rows is not None
        if row_start + n > self.n_rows:
            raise FoldError(
                f"the cv splits were made for {self.n_rows} rows but row {row_start + n - 1} arrived; "
                "splits index the rows of one fit call"
            )
        if self.runs is not None:
            folds, lengths = np.array(self.runs, dtype=np.int64).reshape(-1, 2).T
            rows = np.arange(row_start, row_start + n, dtype=np.int64)
            return folds[np.searchsorted(np.cumsum(lengths), rows, side="right")]
        if ids is None or len(ids) != n:
            raise FoldError("explicit cv splits without stored runs need the fold id of every row")
        if ids.dtype.kind not in "iu" or (n and (ids.min() < 0 or ids.max() >= self.n_folds)):
            raise FoldError(f"explicit fold ids must be integers in [0, {self.n_folds - 1}]")
        return ids.astype(np.int64)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable description (saved with stats and models)."""
        gv = None if self.group_values is None else [plain(v) for v in self.group_values]
        d: dict[str, Any] = {
            "kind": self.kind,
            "n_folds": int(self.n_folds),
            "seed": int(self.seed),
            "n_rows": None if self.n_rows is None else int(self.n_rows),
            "group_values": gv,
        }
        if self.kind == "splits":  # only here, so that older schemes' dicts (and their merges) are unchanged
            d["training"] = self.training
            d["train_only"] = int(self.train_only)
            d["digest"] = self.digest
            d["runs"] = None if self.runs is None else [[int(f), int(m)] for f, m in self.runs]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FoldScheme:
        """Inverse of :meth:`to_dict`."""
        gv = d.get("group_values")
        runs = d.get("runs")
        return cls(
            kind=d["kind"],
            n_folds=int(d["n_folds"]),
            seed=int(d.get("seed", 0)),
            n_rows=d.get("n_rows"),
            group_values=None if gv is None else tuple(gv),
            training=str(d.get("training", "complement")),
            train_only=int(d.get("train_only", 0)),
            digest=d.get("digest"),
            runs=None if runs is None else tuple((int(f), int(m)) for f, m in runs),
        )

    def fold_ids(self) -> np.ndarray | None:
        """Fold id of every row of a ``splits`` scheme, from its run-length encoding (None if not stored)."""
        if self.runs is None:
            return None
        folds, lengths = np.array(self.runs, dtype=np.int64).reshape(-1, 2).T
        return np.repeat(folds, lengths)


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


def plain(v: Any) -> Any:
    """A NumPy scalar as the Python value (JSON-safe labels and group ids); anything else as it is."""
    return v.item() if isinstance(v, np.generic) else v


def make_scheme(
    cv: int | str,
    *,
    seed: int = 0,
    has_groups: bool = False,
    n_rows: int | None = None,
    group_values: np.ndarray | None = None,
    n_blocks: int = 5,
    min_groups: int = 2,
) -> FoldScheme:
    """Build a :class:`FoldScheme` from the user-facing ``cv`` argument.

    Parameters
    ----------
    cv : int, "groups" or "blocks"
        ``K`` (hash of row index, or of the group id when groups are given),
        ``"groups"`` (leave-one-group-out) or ``"blocks"`` (``n_blocks``
        contiguous blocks).
    min_groups : int
        Fewest distinct groups ``"groups"`` accepts: 2 for a fit; 1 for a batch of
        ``partial_fit`` or a shard, whose folds grow as series arrive (the fold
        count is checked when the model is selected).
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
        if len(values) < max(1, min_groups):
            raise FoldError(f"cv='groups' needs at least 2 distinct groups; got {len(values)}")
        return FoldScheme("logo", len(values), seed=int(seed), group_values=values)
    if cv == "blocks":
        return FoldScheme("blocks", int(n_blocks), seed=int(seed), n_rows=n_rows)
    raise ParameterError(f"cv must be an int >= 2, 'groups' or 'blocks'; got cv={cv!r}")


def union_groups(a: FoldScheme, b: FoldScheme) -> tuple[FoldScheme, np.ndarray, np.ndarray]:
    """Leave-one-group-out scheme over the groups of two ``logo`` schemes.

    Returns
    -------
    scheme : FoldScheme
        One fold per distinct group of either, in sorted order (as one fit over all rows).
    where_a, where_b : arrays of int64
        Fold of the union holding each fold of ``a`` and of ``b``.
    """
    ga, gb = np.asarray(a.group_values), np.asarray(b.group_values)
    try:
        values = np.unique(np.concatenate([ga, gb]))
    except (TypeError, ValueError) as exc:
        raise FoldError(
            f"group ids of different kinds cannot share folds: {ga[:3].tolist()} vs {gb[:3].tolist()}"
        ) from exc
    scheme = FoldScheme("logo", len(values), seed=a.seed, group_values=tuple(values.tolist()))
    return scheme, np.searchsorted(values, ga).astype(np.int64), np.searchsorted(values, gb).astype(np.int64)


def _split_indices(a: Any, n_rows: int, i: int, what: str) -> np.ndarray:
    """Row indices of the ``what`` set of split ``i`` (integer indices or a boolean mask)."""
    arr = np.asarray(a)
    if arr.dtype.kind == "b":
        if arr.shape != (n_rows,):
            raise ParameterError(f"cv split {i}: the {what} mask has shape {arr.shape}; expected ({n_rows},)")
        return np.flatnonzero(arr)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.dtype.kind not in "iu":
        raise ParameterError(f"cv split {i}: {what} indices must be integers; got dtype {arr.dtype}")
    arr = arr.reshape(-1).astype(np.int64)
    if arr.min() < 0 or arr.max() >= n_rows:
        bad = arr[(arr < 0) | (arr >= n_rows)][0]
        raise ParameterError(f"cv split {i}: {what} index {int(bad)} is out of range for {n_rows} rows")
    return arr


def _pairs(splits: Any, n_rows: int) -> list[tuple[np.ndarray, np.ndarray]]:
    try:
        items = list(splits)
    except TypeError:
        raise ParameterError(
            f"cv must yield (train, test) index arrays; got {type(splits).__name__}"
        ) from None
    out = []
    for i, item in enumerate(items):
        if isinstance(item, (str, bytes)) or not hasattr(item, "__len__") or len(item) != 2:
            raise ParameterError(f"cv split {i} is not a (train, test) pair of index arrays")
        out.append(
            (_split_indices(item[0], n_rows, i, "training"), _split_indices(item[1], n_rows, i, "test"))
        )
    if not out:
        raise ParameterError("cv gave no (train, test) splits")
    return out


def _test_folds(pairs: list[tuple[np.ndarray, np.ndarray]], n_rows: int) -> np.ndarray:
    """Split index of the test set holding each row (-1: in no test set); refuses overlapping test sets."""
    fold = np.full(n_rows, -1, dtype=np.int64)
    slot = np.zeros(n_rows, dtype=np.int64)  # position of a row in its test array: duplicates overwrite
    for i, (_, test) in enumerate(pairs):
        if len(test) == 0:
            raise ParameterError(f"cv split {i} has an empty test set")
        positions = np.arange(len(test))
        slot[test] = positions
        if not np.array_equal(slot[test], positions):
            raise ParameterError(f"cv split {i} repeats rows in its test set")
        taken = fold[test] >= 0
        if taken.any():
            r = int(test[np.flatnonzero(taken)[0]])
            raise ParameterError(
                f"cv splits are not a partition of the rows: row {r} is in the test sets of splits "
                f"{int(fold[r])} and {i} (as ShuffleSplit or repeated K-fold make); use splits whose "
                "test sets are disjoint, such as KFold"
            )
        fold[test] = i
    return fold


def _training_kind(pairs: list[tuple[np.ndarray, np.ndarray]], fold: np.ndarray) -> str:
    """``"complement"`` if every training set is all rows outside its test set, ``"forward"`` if it is
    all rows of earlier test sets and of no test set; otherwise a one-line :class:`ParameterError`."""
    n = fold.shape[0]
    before = int((fold < 0).sum()) + np.concatenate([[0], np.cumsum([len(t) for _, t in pairs])])
    ok = {"complement": True, "forward": True}
    for i, (train, test) in enumerate(pairs):
        if len(train) == 0:
            raise ParameterError(f"cv split {i} has an empty training set")
        mask = np.zeros(n, dtype=bool)
        mask[train] = True
        size = int(mask.sum())
        if size != len(train):
            raise ParameterError(f"cv split {i} repeats rows in its training set")
        if mask[test].any():
            raise ParameterError(f"cv split {i} has rows in both its training and its test set")
        ft = fold[train]
        ok["complement"] &= size == n - len(test)
        ok["forward"] &= size == int(before[i]) and bool(np.all(ft < i))
        if not (ok["complement"] or ok["forward"]):
            raise ParameterError(_bad_training_message(i, mask, fold))
    return "complement" if ok["complement"] else "forward"


def _bad_training_message(i: int, mask: np.ndarray, fold: np.ndarray) -> str:
    unused = np.flatnonzero((fold < 0) & ~mask)
    if len(unused):
        return (
            f"cv splits are not a partition of the rows: rows {unused[:5].tolist()} are in no test set and "
            f"not in the training set of split {i}; every row must be in exactly one test set "
            "(rows in no test set are allowed only when every training set holds them; a TimeSeriesSplit gap or "
            "max_train_size leaves rows out)"
        )
    return (
        f"the training set of cv split {i} is neither all rows outside its test set (K-fold) nor all rows "
        "before it (forward chaining, as TimeSeriesSplit without gap or max_train_size); such splits "
        "cannot be computed from per-fold statistics"
    )


def _runs(ids: np.ndarray) -> tuple[tuple[int, int], ...] | None:
    starts = np.concatenate([[0], np.flatnonzero(np.diff(ids)) + 1])
    if len(starts) > MAX_RUNS:
        return None
    lengths = np.diff(np.concatenate([starts, [len(ids)]]))
    return tuple((int(ids[s]), int(m)) for s, m in zip(starts, lengths))


def folds_from_splits(splits: Any, n_rows: int, *, seed: int = 0) -> tuple[np.ndarray, FoldScheme]:
    """Fold id per row and the ``splits`` scheme of an iterable of (train, test) index arrays.

    The test sets must be disjoint.  Every training set must be either all rows
    outside its test set (K-fold, GroupKFold, PredefinedSplit, ...) or all rows
    of the earlier test sets plus the rows of no test set (forward chaining,
    TimeSeriesSplit).  Rows in no test set form fold 0, which is trained on and
    never validated; test set i is fold i (+1 when there is such a fold 0).

    Parameters
    ----------
    splits : iterable of (array of int or bool, array of int or bool)
    n_rows : int
    seed : int
        Kept in the scheme (``random_state``); the folds do not use it.

    Returns
    -------
    fold_ids : array of int32 of shape (n_rows,)
    scheme : FoldScheme

    Raises
    ------
    ParameterError
        One line naming the split and rows that make the splits unusable
        (overlapping test sets, rows used nowhere, training sets of another form).
    """
    pairs = _pairs(splits, n_rows)
    fold = _test_folds(pairs, n_rows)
    training = _training_kind(pairs, fold)
    train_only = int((fold < 0).any())
    ids = (fold + train_only).astype(np.int32)
    digest = hashlib.blake2b(ids.astype("<i4").tobytes(), digest_size=16).hexdigest()
    n_folds = len(pairs) + train_only
    if n_folds < 2:
        raise ParameterError("cv needs at least 2 folds; got 1 split that covers every row")
    scheme = FoldScheme(
        "splits",
        n_folds,
        seed=int(seed),
        n_rows=int(n_rows),
        training=training,
        train_only=train_only,
        digest=digest,
        runs=_runs(ids),
    )
    return ids, scheme
