"""Blocks of partitions run by one cluster task: the same merges, in the same order, as one task per partition."""

from __future__ import annotations

import pytest

from streamridge.datapass import executors
from streamridge.datapass.executors import TreeReducer, call_block, partition_blocks


def _tree(
    first: int, n: int, blocks: list[tuple[int, int]] | None, stack: list[tuple[int, object]] | None = None
) -> object:
    """The merge expression of partitions ``first .. n - 1`` onto ``stack``: one push per partition, or one per block
    (a block merged by its own reducer, as :func:`call_block` does)."""
    merge = lambda a, b: (a, b)  # noqa: E731 - the expression records every merge and its order
    reducer = TreeReducer(merge, list(stack or []))
    if blocks is None:
        for i in range(first, n):
            reducer.push(f"p{i}")
    else:
        for start, size in blocks:
            inner = TreeReducer(merge)
            for i in range(start, start + size):
                inner.push(f"p{i}")
            ((_, node),) = inner.stack
            reducer.push(node, size.bit_length() - 1)
    return reducer.fold()


@pytest.mark.parametrize("workers", [1, 2, 3, 8])
@pytest.mark.parametrize("n", [1, 2, 7, 16, 31, 32, 33, 48, 100, 257])
@pytest.mark.parametrize("first", [0, 1, 3, 6])
def test_blocks_merge_as_partitions_one_by_one(n: int, workers: int, first: int) -> None:
    """Every partition once, in order, in aligned power-of-two blocks; the tree is the same expression
    as pushing the partitions one by one, also for a pass resumed at any partition (its stack as the
    one-by-one pushes left it)."""
    first = min(first, n - 1)
    blocks = partition_blocks(first, n, workers)
    assert [i for s, k in blocks for i in range(s, s + k)] == list(range(first, n))
    assert all(k & (k - 1) == 0 and s % k == 0 and k <= executors.MAX_BLOCK for s, k in blocks)
    head = TreeReducer(lambda a, b: (a, b))
    for i in range(first):
        head.push(f"p{i}")
    assert _tree(first, n, blocks, head.stack) == _tree(0, n, None)


@pytest.mark.parametrize(
    ("n", "workers", "sizes"),
    [(40, 2, {4}), (31, 2, {1, 2}), (16, 2, {2}), (15, 2, {1}), (40, 16, {1}), (1000, 2, {4})],
)
def test_block_size_leaves_tasks_for_every_worker(n: int, workers: int, sizes: set[int]) -> None:
    """Blocks of up to MAX_BLOCK partitions, as long as at least BLOCK_TASKS_PER_WORKER tasks per worker remain
    (40 partitions on 2 workers: 10 blocks of 4; on 16 workers: one partition a task, as before)."""
    assert {k for _, k in partition_blocks(0, n, workers)} == sizes


def test_a_block_names_the_partition_that_failed() -> None:
    def task(i: int) -> int:
        if i == 6:
            raise ValueError("bad chunk")
        return i

    assert call_block(task, lambda a, b: a + b, 4, [(4,), (5,)]) == 9
    with pytest.raises(ValueError, match="bad chunk") as info:
        call_block(task, lambda a, b: a + b, 4, [(4,), (5,), (6,), (7,)])
    assert info.value.streamridge_partition == 6  # type: ignore[attr-defined]
