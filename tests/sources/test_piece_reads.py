"""Pieces decoded ahead into reused arrays: reuse only when let go, tokens bound the pieces alive, values intact."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from streamridge.sources.pieces import PieceBuffers, _Closed, piece_stream


class FakeReader:
    """Rows ``i`` hold ``i`` in every column; blocks decoded in pieces into ``alloc``'s arrays, slowly."""

    def __init__(self, rows: int, width: int = 3, delay: float = 0.0) -> None:
        self.shape, self.dtype, self.delay = (rows, width), np.dtype("float64"), delay
        self.pools: set[Any] = set()  # the PieceBuffers pieces were taken from
        self.n_pieces = 0

    def pieces(
        self, a: int, b: int, rows: int, alloc: Callable[[int], np.ndarray] | None = None
    ) -> Iterator[np.ndarray]:
        for s in range(a, b, rows):
            n = min(rows, b - s)
            piece = np.empty((n, self.shape[1])) if alloc is None else alloc(n)
            self.n_pieces += 1
            if alloc is not None:
                self.pools.add(alloc.__self__)  # type: ignore[attr-defined]
            time.sleep(self.delay)
            piece[:] = np.arange(s, s + n, dtype=np.float64)[:, None]
            yield piece
            del piece

    def read(self, a: int, b: int) -> np.ndarray:
        return np.repeat(np.arange(a, b, dtype=np.float64)[:, None], self.shape[1], axis=1)


def _address(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


def test_a_buffer_is_reused_once_let_go_and_never_while_held() -> None:
    buffers = PieceBuffers(10, (3,), "float64", keep=2)
    first = buffers.take(10)
    base = _address(first)
    del first
    again = buffers.take(7)
    assert _address(again) == base and again.shape == (7, 3)  # let go: the same memory, no fresh pages
    assert buffers.allocated == 1
    view = again[::2]  # a view held by the consumer keeps the array out of reuse
    del again
    other = buffers.take(10)
    assert _address(other) != base and buffers.allocated == 2
    del other
    assert _address(buffers.take(10)) != base  # the other pooled array; the held one still not
    del view
    assert _address(buffers.take(10)) == base and buffers.allocated == 2


def test_a_full_pool_drops_a_held_array_rather_than_overwrite_it() -> None:
    buffers = PieceBuffers(4, (2,), "float64", keep=1)
    held = buffers.take(4)
    held[:] = 7.0
    fresh = buffers.take(4)  # the pooled one is held: a new array replaces it in the pool
    fresh[:] = 1.0
    assert _address(fresh) != _address(held) and np.all(held == 7.0)
    del fresh
    assert _address(buffers.take(4)) != _address(held) and buffers.allocated == 2


def test_tokens_bound_the_pieces_alive_and_closing_frees_a_waiting_producer() -> None:
    closing = threading.Event()
    buffers = PieceBuffers(4, (2,), "float64", keep=2, slots=2, closing=closing)
    a, b = buffers.take(4), buffers.take(4)
    got: list[Any] = []
    thread = threading.Thread(target=lambda: got.append(buffers.take(4)))
    thread.start()
    time.sleep(0.2)
    assert not got  # a third piece waits for a token
    del a
    buffers.release(1)
    thread.join(timeout=5)
    assert len(got) == 1 and _address(got[0]) != _address(b)  # the token and the array let go
    failed: list[BaseException] = []

    def blocked() -> None:
        try:
            buffers.take(4)
        except _Closed as exc:
            failed.append(exc)

    thread = threading.Thread(target=blocked)
    thread.start()
    time.sleep(0.1)
    closing.set()
    thread.join(timeout=5)
    assert not thread.is_alive() and len(failed) == 1


@pytest.mark.parametrize(
    ("ahead", "slots", "group"), [(True, 2, 1), (True, 3, 2), (True, None, 1), (False, None, 2)]
)
def test_a_stream_of_reused_arrays_hands_every_row_intact(ahead: bool, slots: int | None, group: int) -> None:
    """The consumer reads its group after the decoder had time to run ahead: no piece in use is overwritten."""
    reader = FakeReader(1000, delay=0.002)
    ranges = [(0, 400), (400, 800), (800, 1000)]
    seen = []
    for grp in piece_stream(reader, ranges, 30, ahead=ahead, slots=slots, group=group):
        assert 1 <= len(grp) <= group
        time.sleep(0.005)  # the decode thread fills what it may meanwhile
        for a, b, s, piece, _extra in grp:
            assert a <= s < b and s + len(piece) <= b
            assert np.array_equal(
                piece, np.repeat(np.arange(s, s + len(piece), dtype=np.float64)[:, None], 3, axis=1)
            )
            seen.append((s, len(piece)))
        del grp, piece  # done with the group's pieces: their arrays may be reused
    assert seen == [(s, min(30, b - s)) for a, b in ranges for s in range(a, b, 30)]
    alive = (slots or 2 + 1 + group) if ahead else group
    (pool,) = reader.pools
    assert (
        reader.n_pieces == len(seen) == 35 and 1 <= pool.allocated <= alive
    )  # arrays reused, not one per piece


def test_a_consumer_that_keeps_pieces_gets_fresh_arrays_not_overwritten_ones() -> None:
    reader = FakeReader(600)
    kept = []
    for grp in piece_stream(reader, [(0, 600)], 50, ahead=True, slots=2):
        kept.extend(piece for _a, _b, _s, piece, _e in grp)
        del grp
    for i, piece in enumerate(kept):
        assert np.all(piece == np.arange(50 * i, 50 * i + 50)[:, None])
    (pool,) = reader.pools
    assert pool.allocated == len(kept) == 12


def test_an_error_while_decoding_reaches_the_consumer_and_stops_the_thread() -> None:
    class Broken(FakeReader):
        def pieces(self, a: int, b: int, rows: int, alloc: Any = None) -> Iterator[np.ndarray]:
            yield from super().pieces(a, a + rows, rows, alloc)
            raise OSError("stored chunk c/0/0 (zstd) is corrupted: test")

    before = threading.active_count()
    with pytest.raises(OSError, match="corrupted"):
        for _grp in piece_stream(Broken(500), [(0, 500)], 50, ahead=True, slots=2):
            pass
    assert threading.active_count() == before


def test_a_consumer_that_stops_early_stops_a_waiting_decoder() -> None:
    before = threading.active_count()
    stream = piece_stream(FakeReader(5000), [(0, 5000)], 10, ahead=True, slots=2)
    next(stream)
    time.sleep(0.1)  # the decoder now waits for a token
    stream.close()
    assert threading.active_count() == before
