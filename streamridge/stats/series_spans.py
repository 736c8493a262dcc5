"""Row spans of the series in statistics of a stateful feature map, checked where statistics merge.

A stateful map (reservoir, delays) runs each series once, from its first row
to its last, in one pass.  Statistics of such a map record the rows of every
series they hold in ``meta["series_spans"]``: a list of ``[series id, first
row, end row]`` in row order, in the global row numbers of the data (a shard's
``rows=``, a ``partial_fit`` call's place in the stream).  Two statistics that
hold the same series cannot be merged into those of one pass: the second part
was run from rest, where one pass would have carried the state into it.

The one exception is ``partial_fit``: a call begins with the map's state after
the previous call's last row, so the series that ended one call continues into
the next (``continues=True``): its two spans touch and are joined.  Everything
here is pure list arithmetic; the pass reads the spans
(:func:`streamridge.estimators.mapped.series_spans`).
"""

from __future__ import annotations

from typing import Any

#: one span: [series id, first row, end row (one past the last)]
Span = list[Any]


def find_clash(a: list[Span], b: list[Span], *, continues: bool = False) -> tuple[Any, Span, Span] | None:
    """The first series held by both span lists (in row order of its later part), or None.

    Parameters
    ----------
    a, b : list of [id, first, end]
        The spans of two statistics (or of the statistics so far and of a new ``partial_fit`` call).
    continues : bool
        ``b`` was computed from the map's state after ``a``'s last row: a series that ends
        ``a`` and starts ``b`` where ``a`` ended is one series run on, not a clash.

    Returns
    -------
    (id, earlier span, later span) or None
    """
    first_of = {_key(s[0]): s for s in a}
    if not first_of or not b:
        return None
    last_a = max(a, key=lambda s: int(s[2]))
    first_b = min(b, key=lambda s: int(s[1]))
    clashes = []
    for span in b:
        other = first_of.get(_key(span[0]))
        if other is None:
            continue
        if continues and other is last_a and span is first_b and int(other[2]) == int(span[1]):
            continue
        early, late = sorted((other, span), key=lambda s: int(s[1]))
        clashes.append((int(late[1]), early, late))
    if not clashes:
        return None
    _, early, late = min(clashes, key=lambda c: c[0])
    return early[0], early, late


def join(a: list[Span], b: list[Span], *, continues: bool = False) -> list[Span]:
    """The spans of both, in row order; with ``continues`` the series ending ``a`` and starting ``b`` is one span.

    Call :func:`find_clash` first: any other series held by both is kept twice.
    """
    spans = sorted(([*s] for s in [*a, *b]), key=lambda s: (int(s[1]), int(s[2])))
    if not continues or not a or not b:
        return spans
    out: list[Span] = []
    for span in spans:
        if out and _key(out[-1][0]) == _key(span[0]) and int(out[-1][2]) == int(span[1]):
            out[-1][2] = span[2]
        else:
            out.append(span)
    return out


def describe_rows(span: Span) -> str:
    """``"rows 0:100"`` of a span."""
    return f"rows {int(span[1])}:{int(span[2])}"


def check_spans(value: Any) -> str | None:
    """Why ``value`` is not a valid ``series_spans`` field (a problem for the file schema), or None."""
    if not isinstance(value, list):
        return f"must be a list of [series id, first row, end row]; got {type(value).__name__}"
    seen: set[Any] = set()
    for span in value:
        if not (isinstance(span, list) and len(span) == 3 and isinstance(span[0], (int, float, str))):
            return f"must be a list of [series id, first row, end row]; got {str(span)[:60]}"
        if (
            not all(isinstance(r, int) and not isinstance(r, bool) for r in span[1:])
            or not 0 <= span[1] < span[2]
        ):
            return f"must hold rows 0 <= first < end; got {str(span)[:60]}"
        if _key(span[0]) in seen:
            return f"names series {span[0]!r} twice"
        seen.add(_key(span[0]))
    return None


def _key(series: Any) -> tuple[str, Any]:
    """A dict key that keeps ids of different JSON types apart (``1``, ``"1"``, ``True``)."""
    return type(series).__name__, series
