"""A data set opened for the pass: :class:`Source`, its readers and its dask views built on first use.

The readers (:mod:`._protocol`) serve the pass; every role's dask view (``Source.X`` ...)
shares the row chunks and is built when first read, so a fit that only needs shapes,
chunks and distinct values never imports dask.  :func:`assemble` makes a Source of the
arrays a backend found; :func:`reopen` re-chunks one.
"""

from __future__ import annotations

import copy
import itertools
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from streamridge.errors import InputError
from streamridge.sources._common import (
    ROLES,
    check_arrays,
    choose_row_chunks,
    regular_step,
    string_list,
    to_dask,
)
from streamridge.sources._memory import DaskReader, NumpyReader
from streamridge.sources._protocol import ArrayReader, Container
from streamridge.sources.blocks import distinct_values

if TYPE_CHECKING:  # dask.array is imported where a dask view is built (in the driver), not by a worker
    import dask.array as da


class _Lazy:
    """A dask view not built yet: the reader it wraps, its row chunks, and the rows of them it shows.

    A fit of files that never touches ``Source.X`` (statistics, model selection)
    then never imports ``dask.array`` (0.2 s of a command's start-up).
    """

    __slots__ = ("array", "chunks", "rows", "token")

    def __init__(
        self, array: Any, chunks: tuple[int, ...], token: tuple[Any, ...], rows: tuple[int, int]
    ) -> None:
        self.array, self.chunks, self.token, self.rows = array, chunks, token, rows

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.rows[1] - self.rows[0], *(int(n) for n in self.array.shape[1:]))

    def row_chunks(self) -> tuple[int, ...]:
        """Row counts of the chunks of the view (the stored chunking cut to ``rows``)."""
        a, b = self.rows
        bounds = itertools.accumulate(self.chunks, initial=0)
        cut = sorted({a, b, *(x for x in bounds if a < x < b)})
        return tuple(hi - lo for lo, hi in itertools.pairwise(cut)) if b > a else ()

    def sliced(self, start: int, stop: int) -> _Lazy:
        a = self.rows[0]
        return _Lazy(self.array, self.chunks, self.token, (a + start, a + stop))

    def rechunked(self, chunks: tuple[int, ...]) -> _Lazy:
        if self.rows != (0, sum(self.chunks)):
            raise ValueError("a sliced view is rechunked as a dask array")
        return _Lazy(self.array, chunks, self.token, self.rows)

    def build(self) -> da.Array:
        view = to_dask(_dask_input(self.array), self.chunks, token=self.token)
        return view if self.rows == (0, sum(self.chunks)) else view[self.rows[0] : self.rows[1]]


class _View:
    """A role's dask view on a :class:`Source`: built from its :class:`_Lazy` on first access, then kept."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.role = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return None  # the dataclass field's default
        value = obj.__dict__.get(self.role)
        if isinstance(value, _Lazy):
            built = value.build()
            obj.__dict__[self.role] = built
            if obj._views.get(self.role) is value:
                obj._views[self.role] = built
            return built
        return value

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__[self.role] = value


@dataclass
class Source:
    """Arrays of one data set: row-range readers for the pass, dask views sharing their row chunks.

    The dask views of a source opened by :func:`open_source` are built when
    first read (``source.X``), then kept; :meth:`shape`, :meth:`n_rows`,
    :meth:`row_chunks`, :meth:`select_rows`, :meth:`distinct` and the pass
    itself do not build them.

    Attributes
    ----------
    X : dask array of shape (n_rows, n_features)
        Original dtype; one chunk along the features.
    y : dask array of shape (n_rows,) or (n_rows, n_targets), or None
    groups : dask array of shape (n_rows,), or None
    sample_weight : dask array of shape (n_rows,), or None
    feature_names : list of str or None
        From the ``feature_names`` attribute of X (or of its group or file).
    target_names : list of str or None
        From the ``target_names`` attribute of y (or of its group or file).
    description : str
        E.g. ``"zarr store /data/big.zarr (X: 2000000 x 200 float32)"``.
    readers : dict of role to ArrayReader or None
        What the pass reads (stored chunks, row ranges); a dask array replaced
        on the Source (``dataclasses.replace(src, X=...)``) is read instead.
    rows : tuple of int
        The rows ``[start, stop)`` of the readers this source covers.
    """

    X: da.Array = _View()  # type: ignore[assignment]
    y: da.Array | None = _View()  # type: ignore[assignment]
    groups: da.Array | None = _View()  # type: ignore[assignment]
    sample_weight: da.Array | None = _View()  # type: ignore[assignment]
    feature_names: list[str] | None = None
    target_names: list[str] | None = None
    description: str = "arrays"
    readers: dict[str, ArrayReader | None] | None = field(default=None, repr=False, compare=False)
    rows: tuple[int, int] | None = field(default=None, repr=False, compare=False)
    _views: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def shape(self, role: str = "X") -> tuple[int, ...] | None:
        """Shape of ``role``'s array (X, y, groups or sample_weight), None where it is absent.

        Unlike ``Source.X.shape`` this builds no dask view.
        """
        value = self.__dict__.get(role)
        return None if value is None else tuple(int(n) for n in value.shape)

    def n_rows(self) -> int:
        """Number of rows."""
        return self._x_shape()[0]

    def n_features(self) -> int:
        """Number of features (columns of X)."""
        return self._x_shape()[1]

    def _x_shape(self) -> tuple[int, ...]:
        shape = self.shape("X")
        assert shape is not None
        return shape

    def row_chunks(self) -> tuple[int, ...]:
        """Row counts of the chunks of the dask views."""
        value = self.__dict__.get("X")
        if isinstance(value, _Lazy):
            return value.row_chunks()
        return tuple(int(c) for c in self.X.chunks[0])

    def distinct(self, role: str) -> np.ndarray:
        """Sorted distinct values of the 1-D (or one-column) array of ``role``.

        Read through its reader where its view was never replaced (every stored
        chunk once, a block at a time; no dask), else reduced by dask chunk by
        chunk on the local threaded scheduler.  Never the whole column in memory.
        """
        value = self.__dict__.get(role)
        if value is None:
            raise ValueError(f"the source has no {role}")
        reader = (self.readers or {}).get(role)
        if reader is not None and self._reads_reader(role):
            start = 0 if self.rows is None else self.rows[0]  # the reader's rows of this source
            return distinct_values(reader, start, start + int(value.shape[0]))
        import dask.array as da
        from dask.threaded import get as threads  # a callable: dask imports distributed to resolve a name

        view = getattr(self, role)
        return np.unique(np.asarray(da.unique(view.reshape(-1)).compute(scheduler=threads)))

    def _reads_reader(self, role: str) -> bool:
        """Whether ``role`` is still the view the source was opened with (not replaced): its reader holds its rows."""
        return self._views.get(role) is self.__dict__.get(role)

    def rechunk(self, row_chunks: tuple[int, ...]) -> Source:
        """Return a copy whose dask views all have the given row chunks (the readers are kept)."""

        def re(role: str) -> Any:
            value = self.__dict__.get(role)
            if value is None:
                return None
            if isinstance(value, _Lazy) and value.rows == (0, sum(value.chunks)):
                return value.rechunked(row_chunks)
            return to_dask(getattr(self, role), row_chunks, token=())

        return _with_views(self, {role: re(role) for role in ROLES})

    def select_rows(self, start: int, stop: int) -> Source:
        """The same data restricted to rows ``[start, stop)``."""
        lo = 0 if self.rows is None else self.rows[0]

        def cut(role: str) -> Any:
            value = self.__dict__.get(role)
            if value is None:
                return None
            return value.sliced(start, stop) if isinstance(value, _Lazy) else value[start:stop]

        views = {role: cut(role) for role in ROLES}
        out = _with_views(self, views)
        out.rows = (lo + start, lo + stop)
        out.description = f"{self.description} rows {start}:{stop}"
        return out

    def pass_readers(self) -> tuple[dict[str, ArrayReader | None], int]:
        """Readers of X, y, groups, sample_weight for the pass, and the first row they cover.

        A role whose dask view was replaced since the source was opened is read
        from its current dask array.
        """
        out: dict[str, ArrayReader | None] = {}
        offsets = set()
        for role in ROLES:
            value = self.__dict__.get(role)  # not getattr: a view not built yet stays so
            reader = (self.readers or {}).get(role)
            if value is None:
                out[role] = None
            elif reader is not None and self._reads_reader(role):
                out[role] = reader
                offsets.add(0 if self.rows is None else self.rows[0])
            else:
                out[role] = DaskReader(getattr(self, role))
                offsets.add(0)
        if len(offsets) > 1:  # a mix of sliced readers and replaced views: read everything from the views
            return {
                role: None if getattr(self, role) is None else DaskReader(getattr(self, role))
                for role in ROLES
            }, 0
        return out, offsets.pop() if offsets else 0


def _evolve(source: Source, **changes: Any) -> Source:
    """``dataclasses.replace`` that keeps views not built yet unbuilt (``replace`` reads every field)."""
    out = copy.copy(source)
    out._views = dict(source._views)
    for name, value in changes.items():
        setattr(out, name, value)
    return out


def _with_views(source: Source, views: dict[str, Any]) -> Source:
    out = _evolve(source, **views)
    out._views = {role: views[role] for role in ROLES if source._reads_reader(role)}
    return out


def assemble(
    container: Container,
    arrays: dict[str, Any],
    token: tuple[Any, ...],
    named: set[str],
    *,
    chunk_rows: int | None,
    memory_budget: int,
) -> Source:
    """A :class:`Source` of the arrays found in ``container`` (views not built yet), checked.

    Parameters
    ----------
    container : Container
        Where the arrays were found (its attributes give feature and target names).
    arrays : dict of role to ArrayReader or None
    token : tuple
        What identifies the stored data (location, modification time) in the dask views' names.
    named : set of str
        Roles given by name (a ``y`` found by name carries ``target_names``).
    chunk_rows, memory_budget :
        As :func:`streamridge.sources.open_source`.
    """
    check_arrays(arrays, container.where)
    X = arrays["X"]
    n_rows, n_features = (int(n) for n in X.shape)
    check_statistics_fit(n_features, container.where)
    grid = X.grid()
    row_chunks = choose_row_chunks(
        n_rows,
        n_features,
        native_rows=grid.unit if grid.regular else 1,  # a shard's inner chunk: the unit a read decodes
        chunk_rows=chunk_rows,
        memory_budget=memory_budget,
    )
    views: dict[str, Any] = {
        role: None if arrays[role] is None else _Lazy(arrays[role], row_chunks, (*token, role), (0, n_rows))
        for role in ROLES
    }
    feature_names = string_list(container.attr(X, "feature_names"))
    y = arrays["y"]
    target_names = string_list(container.attr(y, "target_names")) if "y" in named and y is not None else None
    _check_names(feature_names, n_features, "feature_names", container.where)
    n_targets = 1 if y is None or len(y.shape) == 1 else int(y.shape[1])
    _check_names(target_names, n_targets, "target_names", container.where)
    description = f"{container.where} (X: {n_rows} x {n_features} {np.dtype(X.dtype)})"
    X_view = views["X"]
    assert X_view is not None
    return Source(
        X_view,
        views["y"],
        views["groups"],
        views["sample_weight"],
        feature_names=feature_names,
        target_names=target_names,
        description=description,
        readers=dict(arrays),
        _views=dict(views),
    )


def _dask_input(reader: ArrayReader) -> Any:
    """What the dask view wraps: the array itself when it is in memory or already dask."""
    if isinstance(reader, (NumpyReader, DaskReader)):
        return reader.array
    return reader


def check_statistics_fit(n_features: int, where: str) -> None:
    """Refuse at once an X whose N x N statistics alone exceed this machine's memory.

    Raises
    ------
    InputError
        Naming the size of one N x N float64 matrix and the memory.
    """
    need = 8 * n_features * n_features
    total = _physical_memory()
    if total is not None and need > total:
        raise InputError(
            f"X in {where} has {n_features} features: its statistics need at least {_size(need)} "
            f"(N x N x 8 bytes per fold and class), more than this machine's {_size(total)} of memory; "
            "select or reduce the features first"
        )


def _physical_memory() -> int | None:
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if n < 1000:
            return f"{n:.3g} {unit}"
        n /= 1000
    return f"{n:.3g} EB"


def _check_names(names: list[str] | None, expected: int, what: str, where: str) -> None:
    if names is not None and len(names) != expected:
        raise InputError(f"{what} in {where} has {len(names)} names but the data has {expected} columns")


def reopen(source: Source, *, chunk_rows: int | None, memory_budget: int) -> Source:
    """``source`` with row chunks chosen anew (:func:`streamridge.sources.open_source` of a Source)."""
    row_chunks = choose_row_chunks(
        source.n_rows(),
        source.n_features(),
        native_rows=regular_step(source.row_chunks()),
        chunk_rows=chunk_rows,
        memory_budget=memory_budget,
    )
    return source if row_chunks == source.row_chunks() else source.rechunk(row_chunks)
