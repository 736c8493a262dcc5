"""What a worker of ``scheduler="local:N"`` imports to run a partition task: no ``dask.array``, no ``scipy.linalg``.

A worker process imports ``streamridge.datapass.scheduling.WORKER_MODULES`` when the
cluster starts, then unpickles and runs partition tasks (``call_task(run_partition,
readers, ...)``).  None of it needs a dask array; ``dask.array`` (with
``scipy.fft``) cost about 0.14 s of CPU per worker start, on the critical path
of a ``local:2`` fit; ``scipy.linalg`` 0.15-0.2 s more, where the kernel only needs
the BLAS pointers of its ``cython_blas`` extension (:mod:`streamridge.blas_nogil`).  The tasks here are the ones a real pass submits, pickled
in this process and run in a fresh interpreter that imported ``distributed``.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from streamridge.datapass import executors
from streamridge.datapass.driver import accumulate
from streamridge.sources import open_source, write_hdf5
from tests.scale_utils import ARRAYS, make_store, regression_spec

pytest.importorskip("distributed")
REPO = Path(__file__).resolve().parents[2]

# a worker process: distributed (which imports dask and dask.base), the modules the cluster imports at start,
# then the pickled tasks, run; prints whether dask.array was imported after the imports and after the tasks
WORKER = """
import importlib, pickle, sys
import distributed
from streamridge.datapass.scheduling import WORKER_MODULES
for name in WORKER_MODULES:
    importlib.import_module(name)
after_imports = "dask.array" in sys.modules
with open(sys.argv[1], "rb") as fh:
    tasks = pickle.load(fh)
results = {where: [task[0](*task[1:]) for task in ts] for where, ts in tasks.items()}
with open(sys.argv[2], "wb") as fh:
    pickle.dump(results, fh)
print(after_imports, "dask.array" in sys.modules, "scipy.linalg" in sys.modules)
"""


def _submitted_tasks(source: Any, monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """The ``(callable, *args)`` of every partition task a pass over ``source`` submits to a cluster."""
    tasks: list[tuple[Any, ...]] = []
    reduce_partitions = executors.reduce_partitions

    def record(task: Any, args: Any, n: int, *rest: Any, first: int = 0, **kwargs: Any) -> Any:
        tasks.extend(
            (executors.call_task, task, *args(i)) for i in range(first, n)
        )  # as _run_distributed submits
        return reduce_partitions(task, args, n, *rest, first=first, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(executors, "reduce_partitions", record)
        accumulate(source, regression_spec(), scheduler="sync", partition_rows=200)
    return tasks


def test_a_worker_runs_zarr_hdf5_npy_and_array_tasks_without_dask_array(
    tmp_path: Path, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, X, y, groups = make_store(tmp_path / "d.zarr", rng, 600, 4, chunk_rows=100)
    h5 = write_hdf5(tmp_path / "d.h5", X, y, groups, rng.random(600), chunk_rows=100)
    npy = tmp_path / "npy"
    npy.mkdir()
    for name, a in (("X", X), ("y", y), ("groups", groups)):
        np.save(npy / f"{name}.npy", a)
    sources = {
        "zarr": open_source(store, groups="groups", chunk_rows=200),
        "hdf5": open_source(h5, groups="groups", sample_weight="sample_weight", chunk_rows=200),
        "npy": open_source(str(npy), groups="groups", chunk_rows=200),
        "arrays": open_source(X, y=y, groups=groups, chunk_rows=200),
    }
    tasks = {where: _submitted_tasks(src, monkeypatch) for where, src in sources.items()}
    assert all(len(ts) == 3 for ts in tasks.values())
    (tmp_path / "tasks.pkl").write_bytes(pickle.dumps(tasks, protocol=5))

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [sys.executable, "-c", WORKER, str(tmp_path / "tasks.pkl"), str(tmp_path / "results.pkl")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "False", "False"]  # after the worker's imports, after the tasks
    results = pickle.loads((tmp_path / "results.pkl").read_bytes())
    for where, ts in tasks.items():
        for task, theirs in zip(ts, results[where], strict=True):
            ours = task[0](*task[1:])
            np.testing.assert_array_equal(theirs.count, ours.count, err_msg=where)
            for name in ARRAYS:
                np.testing.assert_array_equal(
                    getattr(theirs, name), getattr(ours, name), err_msg=f"{where} {name}"
                )


def test_is_dask_array_imports_nothing() -> None:
    """False for anything while ``dask.array`` was never imported, and it stays unimported."""
    code = (
        "import sys\nimport numpy as np\nfrom streamridge.sources._common import is_dask_array\n"
        "print(is_dask_array(np.zeros(3)), is_dask_array(None), 'dask.array' in sys.modules)"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "False", "False"]


def test_is_dask_array_once_dask_array_is_imported() -> None:
    import dask.array as da

    from streamridge.sources._common import is_dask_array

    X = np.zeros((4, 2))
    assert is_dask_array(da.from_array(X, chunks=2))
    assert not is_dask_array(X) and not is_dask_array(open_source(X, y=np.zeros(4)).readers)
    assert is_dask_array(open_source(X, y=np.zeros(4)).X)  # the views stay dask arrays


def test_blas_pointers_without_scipy_linalg_are_scipys() -> None:
    """The kernel's BLAS calls load ``cython_blas`` alone; the pointers equal those of ``scipy.linalg``'s module."""
    code = """
import ctypes, sys
import numpy as np
from streamridge import blas_nogil
assert "scipy.linalg" not in sys.modules
ours = blas_nogil._pointer("dsyrk"), blas_nogil._pointer("dgemm")
A = np.random.default_rng(0).random((40, 6)); C = np.asfortranarray(np.eye(6))
blas_nogil.syrk_upper(A, C)
from scipy.linalg import cython_blas
get = ctypes.pythonapi.PyCapsule_GetPointer
get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
name = ctypes.pythonapi.PyCapsule_GetName
name.restype, name.argtypes = ctypes.c_char_p, [ctypes.py_object]
theirs = tuple(get(c, name(c)) for c in (cython_blas.__pyx_capi__["dsyrk"], cython_blas.__pyx_capi__["dgemm"]))
print(ours == theirs and None not in ours, np.allclose(np.triu(C), np.triu(np.eye(6) + A.T @ A), rtol=1e-14))
"""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "True"]


def test_the_pass_limits_the_kernels_blas_however_the_process_started() -> None:
    """The controller that limits BLAS to one thread per task knows the kernel's library (scipy's) even
    when it is made before the kernel is imported: a process worker's initializer, or a bare ``accumulate``
    in an interpreter that imported nothing else (its rank-k updates then ran on 2 BLAS threads per task,
    a pass 3x slower)."""
    code = (
        "import streamridge.parallel as p\n"
        "c = p.blas_controller()\n"
        "import streamridge.stats.kernel\n"  # the kernel's BLAS, loaded after the controller was asked for
        "from threadpoolctl import threadpool_info\n"
        "with c.limit(limits=1):\n"
        "    print(sorted({i['filepath']: i['num_threads'] for i in threadpool_info()}.items()))\n"
    )
    env = dict(
        os.environ,
        PYTHONPATH=str(Path(__file__).resolve().parents[2]),
        OPENBLAS_NUM_THREADS="",
        OMP_NUM_THREADS="",
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    libs = eval(proc.stdout.strip().splitlines()[-1])  # [(path, threads)] printed by the child
    assert len(libs) >= 1 and all(threads == 1 for _, threads in libs), libs
