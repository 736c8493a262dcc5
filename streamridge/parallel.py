"""Run independent per-fold NumPy work on a thread pool with matched BLAS threads.

LAPACK/BLAS calls on N x N matrices of a few hundred rows scale poorly with
threads; running the K folds concurrently, one BLAS thread each, uses all cores
without oversubscription (NumPy releases the GIL inside LAPACK calls).
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from threadpoolctl import ThreadpoolController

T = TypeVar("T")

_inside = threading.local()  # set in pool workers: nested map_folds calls do not start pools


@functools.cache
def blas_controller() -> ThreadpoolController:
    """One controller per process (inspecting the loaded BLAS libraries costs ~1 ms).

    The controller knows the libraries loaded when it is made, so the kernel's
    BLAS (scipy's, through :mod:`streamridge.blas_nogil`) is loaded first:
    made before it, the controller left it threaded, and a pass of two tasks
    ran its rank-k updates on four BLAS threads over two cores (3x slower).
    """
    from streamridge import blas_nogil  # noqa: F401  (loads scipy's BLAS library: ~2 ms)

    return ThreadpoolController()


def n_cpus() -> int:
    """Cores usable by this process."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def map_folds(fn: Callable[[int], T], n: int, *, workers: int | None = None) -> list[T]:
    """``[fn(0), ..., fn(n-1)]`` computed on up to ``workers`` threads (default: the cores).

    While the pool runs, BLAS uses ``cores // workers`` threads (process-wide).
    The environment variable ``STREAMRIDGE_FOLD_WORKERS`` overrides the default.
    Called from inside a worker of another ``map_folds``, it runs serially.
    """
    cpus = n_cpus()
    if workers is None:
        workers = int(os.environ.get("STREAMRIDGE_FOLD_WORKERS", cpus))
    workers = min(n, workers)
    if workers <= 1 or getattr(_inside, "pool", False):  # nested calls run serially in their worker
        return [fn(k) for k in range(n)]

    def run(k: int) -> T:
        _inside.pool = True
        return fn(k)

    with blas_controller().limit(limits=max(1, cpus // workers)), ThreadPoolExecutor(workers) as pool:
        return list(pool.map(run, range(n)))


#: below this many features one BLAS thread per task beats threaded BLAS (scripts/bench_lambda.py)
SMALL_N = 1024


def solve_stage_limits(n_features: int) -> Any:
    """Context for the solve stage: one BLAS thread when N is small (folds run on the cores instead)."""
    if n_features <= SMALL_N and n_cpus() > 1:
        return blas_controller().limit(limits=1)
    return contextlib.nullcontext()


#: a batch of targets is cut among the cores only where each part keeps at least this many columns (its
#: products stay wide; scripts/bench_banded.py --fit-stats)
MIN_PART_COLUMNS = 512


def column_parts(n_columns: int, workers: int, *, when: bool = True) -> list[slice]:
    """``n_columns`` cut into ``workers`` consecutive parts, or one part (``when`` False, one worker, or
    fewer than :data:`MIN_PART_COLUMNS` columns a part).  A function of the counts only."""
    if not when or workers <= 1 or n_columns < MIN_PART_COLUMNS * workers:
        return [slice(0, n_columns)]
    return [slice(n_columns * s // workers, n_columns * (s + 1) // workers) for s in range(workers)]


def map_columns(fn: Callable[[slice], None], n_columns: int) -> None:
    """``fn(cols)`` for the :func:`column_parts` of ``n_columns`` columns, one per core, on threads.

    For the element-wise passes over a batch of many targets (NumPy releases the GIL on large
    arrays), which would otherwise run on one core while the others wait.
    """
    parts = column_parts(n_columns, n_cpus())
    map_folds(lambda i: fn(parts[i]), len(parts))


def all_cores() -> Any:
    """Context: BLAS on every core, for the products over a batch of many targets (wide enough for all
    of them) where :func:`solve_stage_limits` holds BLAS to one thread."""
    return blas_controller().limit(limits=n_cpus())
