"""Per-(fold, class) sufficient statistics of ridge regression.

For every cell (fold k, class c) we keep the weight sum ``n``, the row count,
the weighted means of X and Y and the *centered* co-moments

.. code-block:: text

    Sxx = sum_i w_i (x_i - xbar)(x_i - xbar)'      (N, N)
    Sxy = sum_i w_i (x_i - xbar)(y_i - ybar)'      (N, T)
    syy = sum_i w_i (y_i - ybar)**2                (T,)  per-target diagonal of Y'Y

Chunks are reduced with the pairwise update of Chan, Golub & LeVeque (1979):
for two parts a, b with n = n_a + n_b and delta = mean_b - mean_a,

.. code-block:: text

    mean = mean_a + delta * n_b / n
    S    = S_a + S_b + (n_a n_b / n) delta delta'

which is associative up to rounding and never forms raw sums of squares, so an
offset of 1e6 in the data costs no accuracy.  Only the diagonal of Y'Y is kept:
every criterion here (summed or per-target squared error) needs no more, and
with thousands of targets the full T x T matrix would dominate memory.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamridge.errors import IncompatibleStatsError, ModelFileError
from streamridge.stats import series_spans
from streamridge.stats.json_diff import describe_difference

STATS_FORMAT = "streamridge-stats"
STATS_VERSION = 1
STATS_ARRAYS = ("weight", "count", "mean_x", "mean_y", "sxx", "sxy", "syy")


@dataclass
class FoldStats:
    """Mergeable sufficient statistics, one cell per (fold, class).

    Attributes
    ----------
    weight : array of shape (n_folds, n_classes)
        Sum of sample weights per cell (the row count when unweighted).
    count : array of shape (n_folds, n_classes)
        Number of rows per cell.
    mean_x : array of shape (n_folds, n_classes, n_features)
    mean_y : array of shape (n_folds, n_classes, n_targets)
    sxx : array of shape (n_folds, n_classes, n_features, n_features)
    sxy : array of shape (n_folds, n_classes, n_features, n_targets)
    syy : array of shape (n_folds, n_classes, n_targets)
    meta : dict
        JSON-serialisable description: fold scheme, classes, feature and
        target names, rows seen (the next global row index).
    """

    weight: np.ndarray
    count: np.ndarray
    mean_x: np.ndarray
    mean_y: np.ndarray
    sxx: np.ndarray
    sxy: np.ndarray
    syy: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def zeros(
        cls, n_folds: int, n_classes: int, n_features: int, n_targets: int, meta: dict | None = None
    ) -> FoldStats:
        """Empty statistics (the identity of :func:`merge`)."""
        K, C, N, T = n_folds, n_classes, n_features, n_targets
        return cls(
            weight=np.zeros((K, C)),
            count=np.zeros((K, C), dtype=np.int64),
            mean_x=np.zeros((K, C, N)),
            mean_y=np.zeros((K, C, T)),
            sxx=np.zeros((K, C, N, N)),
            sxy=np.zeros((K, C, N, T)),
            syy=np.zeros((K, C, T)),
            meta=dict(meta or {}),
        )

    @classmethod
    def from_arrays(
        cls, arrays: list[np.ndarray] | tuple[np.ndarray, ...], meta: dict[str, Any] | None = None
    ) -> FoldStats:
        """Build from arrays in the order weight, count, mean_x, mean_y, sxx, sxy, syy."""
        return cls(**dict(zip(STATS_ARRAYS, arrays)), meta=dict(meta or {}))

    @property
    def n_folds(self) -> int:
        """Number of folds K."""
        return int(self.weight.shape[0])

    @property
    def n_classes(self) -> int:
        """Number of classes C (1 for regression)."""
        return int(self.weight.shape[1])

    @property
    def n_features(self) -> int:
        """Number of features N."""
        return int(self.mean_x.shape[2])

    @property
    def n_targets(self) -> int:
        """Number of targets T."""
        return int(self.mean_y.shape[2])

    @property
    def n_rows(self) -> int:
        """Total number of rows accumulated."""
        return int(self.count.sum())

    def copy(self) -> FoldStats:
        """Deep copy."""
        return FoldStats.from_arrays(
            [getattr(self, a).copy() for a in STATS_ARRAYS], json.loads(json.dumps(self.meta))
        )

    def cell(self, k: int, c: int) -> FoldStats:
        """Statistics of one cell as a 1 x 1 FoldStats."""
        return FoldStats.from_arrays([getattr(self, a)[k : k + 1, c : c + 1].copy() for a in STATS_ARRAYS])

    def scaled(self, factor: np.ndarray) -> FoldStats:
        """Cells re-weighted by ``factor`` (shape (n_folds, n_classes)): weights and co-moments scale, means do not."""
        f = np.asarray(factor, dtype=np.float64)
        return FoldStats(
            self.weight * f,
            self.count.copy(),
            self.mean_x.copy(),
            self.mean_y.copy(),
            self.sxx * f[..., None, None],
            self.sxy * f[..., None, None],
            self.syy * f[..., None],
            meta=dict(self.meta),
        )


def merge(a: FoldStats, b: FoldStats, *, continues: bool = False) -> FoldStats:
    """Pairwise (Chan-Golub-LeVeque) merge of two statistics, cell by cell.

    Returns a new object; metadata of ``a`` is kept and ``rows_seen`` is the
    maximum of both (row ranges of merged shards are disjoint).  Leave-one-group-out
    statistics of different group sets merge by group id: the result has one fold per
    group of either (a union, in sorted order), as one pass over all rows would.
    Statistics of a stateful feature map that hold the same series are refused
    (:mod:`streamridge.stats.series_spans`); with ``continues`` (``partial_fit``: ``b``'s pass
    began with the map's state after ``a``'s last row) the series ending ``a`` may go on in ``b``.

    Raises
    ------
    IncompatibleStatsError
        Other shapes, fold schemes, feature maps, ...; overlapping rows; a series in both.
    """
    a, b = _align_groups(a, b)
    _check_compatible(a, b)
    ra, rb = a.meta.get("row_ranges"), b.meta.get("row_ranges")
    ranges = _union_ranges(ra, rb) if ra and rb else None
    spans = _merged_spans(a.meta.get("series_spans"), b.meta.get("series_spans"), continues)
    n = a.weight + b.weight
    safe = np.where(n > 0, n, 1.0)
    fb = np.where(n > 0, b.weight / safe, 0.0)
    f = np.where(n > 0, a.weight * b.weight / safe, 0.0)
    dx = b.mean_x - a.mean_x
    dy = b.mean_y - a.mean_y
    fdx = f[..., None] * dx
    sxx = np.add(a.sxx, b.sxx)
    _add_outer(sxx, fdx, dx)
    sxy = np.add(a.sxy, b.sxy)
    _add_outer(sxy, fdx, dy)
    out = FoldStats(
        weight=n,
        count=a.count + b.count,
        mean_x=a.mean_x + dx * fb[..., None],
        mean_y=a.mean_y + dy * fb[..., None],
        sxx=sxx,
        sxy=sxy,
        syy=a.syy + b.syy + f[..., None] * dy * dy,
        meta=dict(a.meta),
    )
    # cells with zero weight but rows (all weights zero): keep the first nonempty mean
    only_b = (a.weight == 0) & (b.weight > 0)
    if np.any(only_b):
        out.mean_x[only_b] = b.mean_x[only_b]
        out.mean_y[only_b] = b.mean_y[only_b]
    if ranges is not None:
        out.meta["row_ranges"] = ranges
    if spans is not None:
        out.meta["series_spans"] = spans
    if "rows_seen" in a.meta or "rows_seen" in b.meta:
        out.meta["rows_seen"] = max(int(a.meta.get("rows_seen", 0)), int(b.meta.get("rows_seen", 0)))
    return out


def _merged_spans(a: list[Any] | None, b: list[Any] | None, continues: bool) -> list[Any] | None:
    """The series spans of a merge: both joined, a series in both refused; where one has none
    (a file written before spans were recorded), those of the other."""
    if a is None or b is None:
        return a if b is None else b
    clash = series_spans.find_clash(a, b, continues=continues)
    if clash is not None:
        series, early, late = clash
        raise IncompatibleStatsError(
            f"series {series!r} starts again at row {late[1]} ({series_spans.describe_rows(late)}) after its "
            f"{series_spans.describe_rows(early)} in other statistics; a stateful feature map runs each series "
            "once, from its first row, so these statistics restarted it from rest; merge only statistics that "
            "each hold whole series (sort the data by series, then time, and cut shards between series)"
        )
    return series_spans.join(a, b, continues=continues)


def _add_outer(S: np.ndarray, u: np.ndarray, v: np.ndarray, piece: int = 2**20) -> None:
    """``S += u[..., :, None] * v[..., None, :]`` in pieces of about ``piece`` bytes, in place.

    The same products and sums as the one-line broadcast (the same bits), without
    its temporary as large as ``S`` (800 MB for 10 x 10 cells at N = 1000): each
    piece is computed and added while it is in cache.

    Parameters
    ----------
    S : array of shape (..., n, m), C-contiguous
    u : array of shape (..., n)
    v : array of shape (..., m)
    """
    n, m = S.shape[-2:]
    cells = S.view()
    cells.shape = (-1, n, m)  # raises rather than copies: the writes must reach S
    U, V = u.reshape(-1, n), v.reshape(-1, m)
    rows = max(1, piece // (8 * max(1, m)))
    if rows < n:  # large cells: strips of rows, one cell at a time
        for c in range(cells.shape[0]):
            for i in range(0, n, rows):
                cells[c, i : i + rows] += U[c, i : i + rows, None] * V[c, None, :]
        return
    step = max(1, piece // (8 * max(1, n * m)))  # small cells: several at once
    for c in range(0, cells.shape[0], step):
        cells[c : c + step] += U[c : c + step, :, None] * V[c : c + step, None, :]


def _align_groups(a: FoldStats, b: FoldStats) -> tuple[FoldStats, FoldStats]:
    """Both statistics over the union of their groups when they are ``logo`` statistics of different groups."""
    sa, sb = a.meta.get("scheme"), b.meta.get("scheme")
    if (
        not (isinstance(sa, dict) and isinstance(sb, dict) and sa.get("kind") == "logo" == sb.get("kind"))
        or sa == sb
    ):
        return a, b
    from streamridge.folds.schemes import FoldScheme, union_groups

    union, where_a, where_b = union_groups(FoldScheme.from_dict(sa), FoldScheme.from_dict(sb))
    d = union.to_dict()
    return _on_folds(a, where_a, union.n_folds, d), _on_folds(b, where_b, union.n_folds, d)


def _on_folds(s: FoldStats, where: np.ndarray, n_folds: int, scheme: dict[str, Any]) -> FoldStats:
    """``s`` with its fold k moved to fold ``where[k]`` of ``n_folds`` (the others empty)."""
    if where.shape[0] != s.n_folds:
        raise IncompatibleStatsError(
            f"leave-one-group-out statistics hold {s.n_folds} folds but their scheme names {where.shape[0]} groups"
        )
    arrays = []
    for name in STATS_ARRAYS:
        old = getattr(s, name)
        new = np.zeros((n_folds, *old.shape[1:]), dtype=old.dtype)
        new[where] = old
        arrays.append(new)
    return FoldStats.from_arrays(arrays, dict(s.meta, scheme=scheme))


def _union_ranges(a: list[list[int]], b: list[list[int]]) -> list[list[int]]:
    """Union of two lists of disjoint [start, stop) row ranges; overlap is an error (rows counted twice)."""
    ranges = sorted([list(map(int, r)) for r in a] + [list(map(int, r)) for r in b])
    out: list[list[int]] = []
    for lo, hi in ranges:
        if out and lo < out[-1][1]:
            raise IncompatibleStatsError(
                f"statistics overlap in rows [{lo}, {min(hi, out[-1][1])}): those rows would be counted twice; "
                "merge statistics of disjoint row ranges only"
            )
        if out and lo == out[-1][1]:
            out[-1][1] = hi
        else:
            out.append([lo, hi])
    return out


def merge_all(parts: list[FoldStats]) -> FoldStats:
    """Merge a list pairwise as a balanced tree (deterministic order)."""
    if not parts:
        raise ValueError("merge_all needs at least one FoldStats")
    level = list(parts)
    while len(level) > 1:
        nxt = [merge(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def combine(stats: FoldStats, mask: np.ndarray) -> FoldStats:
    """Merge the cells selected by a boolean mask of shape (n_folds, n_classes) into one 1 x 1 cell."""
    idx = np.argwhere(mask)
    parts = [stats.cell(int(k), int(c)) for k, c in idx]
    if not parts:
        return FoldStats.zeros(1, 1, stats.n_features, stats.n_targets)
    return merge_all(parts)


#: the meta fields two statistics must share, the feature map first (it decides the width and the names)
_COMPAT_KEYS = (
    "features",
    "scheme",
    "classes",
    "n_features",
    "n_targets",
    "feature_names",
    "target_names",
    "task",
)


def _check_compatible(a: FoldStats, b: FoldStats) -> None:
    """Raise unless ``a`` and ``b`` are of one problem; a meta field that differs is named by path."""
    for key in _COMPAT_KEYS:
        if key in a.meta and key in b.meta and a.meta[key] != b.meta[key]:
            fix = "; compute every shard with the same features file" if key == "features" else ""
            raise IncompatibleStatsError(
                f"statistics differ in {key}: {describe_difference(a.meta[key], b.meta[key])}; "
                f"only statistics of the same features, targets and fold scheme can be merged{fix}"
            )
    if a.weight.shape != b.weight.shape or a.sxy.shape != b.sxy.shape:
        raise IncompatibleStatsError(
            f"statistics have different shapes (folds, classes, features, targets): "
            f"{a.sxy.shape} vs {b.sxy.shape}; they come from different problems"
        )


def save_stats(stats: FoldStats, path: str | os.PathLike[str]) -> None:
    """Write statistics to one ``.npz`` file atomically (no pickle)."""
    meta = dict(stats.meta, format=STATS_FORMAT, format_version=STATS_VERSION)
    arrays = {a: getattr(stats, a) for a in STATS_ARRAYS}
    arrays["meta_json"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    atomic_write_npz(path, arrays)


def load_stats(path: str | os.PathLike[str]) -> FoldStats:
    """Read statistics written by :func:`save_stats`.

    Raises
    ------
    ModelFileError
        One line: missing file, not a statistics file, a newer format, or a field of the meta
        header or an array that fails the schema of :mod:`streamridge.io.schema`.
    """
    from streamridge.io.schema import check_stats

    name = os.fspath(path)
    _check_is_stats_file(name)
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(bytes(z["meta_json"]).decode())
            arrays = [z[a] for a in STATS_ARRAYS]  # each read into its own new array: no second copy
    except (KeyError, ValueError, OSError, EOFError, TypeError, AttributeError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise ModelFileError(f"{name!r} is not a streamridge statistics file ({reason})") from exc
    if not isinstance(meta, dict) or meta.get("format") != STATS_FORMAT:
        raise ModelFileError(f"{name!r} is not a streamridge statistics file")
    version = meta.get("format_version", 1)
    if isinstance(version, int) and not isinstance(version, bool) and version > STATS_VERSION:
        raise ModelFileError(
            f"{name!r} has statistics format {version}, newer than this "
            f"streamridge ({STATS_VERSION}); upgrade streamridge"
        )
    check_stats(meta, dict(zip(STATS_ARRAYS, arrays)), name)
    meta.pop("format", None)
    meta.pop("format_version", None)
    return FoldStats.from_arrays(arrays, meta)


def _check_is_stats_file(name: str) -> None:
    """Raise one line saying what ``name`` is where it cannot be a statistics file (missing, a directory,
    a model file, not an ``.npz``, an ``.npz`` without the statistics header)."""
    import zipfile

    from streamridge.io.outputs import written_by_streamridge
    from streamridge.io.schema import not_an_npz

    fix = "give a statistics file (written by streamridge stats, merge or fit --save-stats)"
    if not os.path.exists(name):
        raise ModelFileError(f"statistics file {name!r} does not exist")
    if os.path.isdir(name):
        raise ModelFileError(f"{name!r} is a directory, not a streamridge statistics file; {fix}")
    if written_by_streamridge(name, "model"):
        raise ModelFileError(f"{name!r} is a streamridge model file, not a statistics file; {fix}")
    if not zipfile.is_zipfile(name):
        what = not_an_npz(name) or "not readable as a zip archive"
        raise ModelFileError(
            f"{name!r} is not a streamridge statistics file: it is {what}, not a .npz archive; {fix}"
        )
    try:
        with zipfile.ZipFile(name) as z:
            has_meta = "meta_json.npy" in z.namelist()
    except (OSError, zipfile.BadZipFile):
        return  # the reader names the problem
    if not has_meta:
        raise ModelFileError(
            f"{name!r} is an .npz archive but not a streamridge statistics file (no meta_json header); {fix}"
        )


def atomic_write_npz(path: str | os.PathLike[str], arrays: dict[str, np.ndarray]) -> None:
    """``np.savez`` into a temporary file beside ``path``, fsync, then rename over it.

    The file gets the permissions of any new file (``0666`` less the umask), not the
    ``0600`` of the temporary; errors name ``path``, never the temporary.
    """
    from streamridge.io.outputs import current_umask

    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ModelFileError(f"cannot write {path}: it is a directory; name a .npz file")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".npz", dir=directory)
    except OSError as exc:
        raise ModelFileError(f"cannot write {path}: {exc.strerror or exc}") from exc
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, 0o666 & ~current_umask())
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **arrays)  # type: ignore[arg-type]  # straight to the file: no copy of it in memory
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, ModelFileError):
            raise ModelFileError(f"cannot write {path}: {exc.strerror or exc}") from exc
        raise
