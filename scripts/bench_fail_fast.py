"""How fast refusals and plans are: each figure against a baseline measured in the same run.

Usage::

    PYTHONPATH=. python scripts/bench_fail_fast.py [--repeat 5]

Prints milliseconds, best of ``--repeat`` runs (one run for the scheduler):

- an unreachable scheduler address (``tcp://127.0.0.1:1``): seconds until the
  ``SchedulerError``, as a ratio to ``CONNECT_TIMEOUT_S`` (at most about 1);
- an unreachable URL (a refused connection): seconds until the ``SourceError``, as a
  ratio to ``HTTP_CONNECT_TIMEOUT`` (far below 1: a refusal is not retried);
- the plan of 1e12 rows in 1-row stored chunks against the plan of 1e3 rows (about 1:
  a plan is a step, not a list of partitions);
- refusing a declared 1e12 x 1e6 zarr array (its statistics cannot fit) against opening a
  1000 x 10 zarr store (about 1: only metadata is read).

The tests count the work instead (connection attempts, lines run, store reads); this
script gives the times, which depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import zarr

from streamridge.datapass.driver import accumulate
from streamridge.datapass.partitions import plan_pass
from streamridge.datapass.scheduling import CONNECT_TIMEOUT_S
from streamridge.datapass.spec import PassSpec
from streamridge.errors import InputError, SchedulerError, SourceError
from streamridge.folds.schemes import FoldScheme
from streamridge.sources import open_source, write_zarr
from streamridge.sources._protocol import ArrayReader, RowGrid
from streamridge.sources._url import HTTP_CONNECT_TIMEOUT


class Declared(ArrayReader):
    """An array that declares a shape without data."""

    def __init__(self, shape: tuple[int, ...], step: int) -> None:
        super().__init__()
        self.shape, self.dtype, self.step = shape, np.dtype(np.float32), step

    def grid(self) -> RowGrid:
        """Stored chunks of ``step`` rows."""
        return RowGrid(self.shape[0], step=self.step)


def best(fn: Callable[[], Any], repeat: int, expect: type[BaseException] | None = None) -> float:
    """Best wall seconds of ``fn()`` (which must raise ``expect`` when given)."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        try:
            fn()
        except BaseException as exc:
            if expect is None or not isinstance(exc, expect):
                raise
        else:
            if expect is not None:
                raise AssertionError(f"{fn} did not raise {expect.__name__}")
        times.append(time.perf_counter() - t)
    return min(times)


def plan_of(n_rows: int) -> Any:
    """The plan of ``n_rows`` rows of 100 features in 1-row stored chunks (y in 7-row chunks)."""
    readers = {
        "X": Declared((n_rows, 100), 1),
        "y": Declared((n_rows,), 7),
        "groups": None,
        "sample_weight": None,
    }
    return plan_pass(readers, 0, n_rows, n_cells=5, stats_bytes=10**6, memory_budget=2**30)


def main() -> None:
    """Measure and print every figure with its baseline and ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rows = []
    X = np.zeros((1000, 10))
    spec = PassSpec(FoldScheme("hash", 5), None, 1)
    source = open_source(X, y=np.zeros(1000))
    scheduler = best(lambda: accumulate(source, spec, scheduler="tcp://127.0.0.1:1"), 1, SchedulerError)
    rows.append(("unreachable scheduler", scheduler, "CONNECT_TIMEOUT_S", CONNECT_TIMEOUT_S))
    url = best(lambda: open_source("http://127.0.0.1:1/x.zarr"), args.repeat, SourceError)
    rows.append(("unreachable URL (refused)", url, "HTTP_CONNECT_TIMEOUT", HTTP_CONNECT_TIMEOUT))
    plans = best(lambda: plan_of(10**12), args.repeat), best(lambda: plan_of(10**3), args.repeat)
    rows.append(("plan of 1e12 rows", plans[0], "plan of 1e3 rows", plans[1]))
    with tempfile.TemporaryDirectory() as tmp:
        zarr.create_array(f"{tmp}/huge.zarr", shape=(10**12, 10**6), chunks=(1000, 1000), dtype="f4")
        write_zarr(f"{tmp}/small.zarr", X, np.zeros(1000))
        huge = best(lambda: open_source(f"{tmp}/huge.zarr", y=None, require_y=False), args.repeat, InputError)
        small = best(lambda: open_source(f"{tmp}/small.zarr"), args.repeat)
    rows.append(("refuse a 1e12 x 1e6 zarr array", huge, "open a 1000 x 10 zarr store", small))
    print(f"{'what':34s} {'ms':>10s}  {'baseline':30s} {'ms':>10s}  {'ratio':>9s}")
    for what, seconds, base, base_seconds in rows:
        print(
            f"{what:34s} {1e3 * seconds:10.3f}  {base:30s} {1e3 * base_seconds:10.3f}  {seconds / base_seconds:9.3g}"
        )


if __name__ == "__main__":
    main()
