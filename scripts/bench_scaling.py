"""Driver load of the pass on a real ``dask scheduler`` + W ``dask worker`` processes (docs/scaling.md).

Usage::

    python scripts/bench_scaling.py                          # W = 2 and 4, N = 200, M = 400,000 float32
    python scripts/bench_scaling.py --workers 2 4 --features 200 --rows 400000 --partition-rows 20000

For each W it starts ``dask scheduler`` and W single-threaded ``dask worker``
processes (no nanny, BLAS on one thread) on this machine, runs
``accumulate`` over one Zarr store by the scheduler's address (after a warm-up
pass) and MEASURES, around the pass only:

  driver CPU        user + system CPU seconds of this (the client) process (psutil)
  driver bytes in   bytes this process read from its sockets (tornado's ``IOStream.read_from_fd``
                    counted; every message of distributed's TCP comms goes through it)
  driver bytes out  bytes it wrote to its sockets (task submissions)
  workers' bytes    bytes all workers read from / wrote to their sockets (the same counters installed
                    in each worker by ``client.run``): partial results moved between workers for the
                    merges, the final result sent to the driver, and the messages with the scheduler

and prints them with the size of one result (the statistics) and the number of
partitions P, per pass and per partition.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from streamridge.datapass.driver import PassReport, accumulate
from streamridge.datapass.spec import PassSpec
from streamridge.folds.schemes import FoldScheme
from streamridge.sources import open_source

ROOT = Path(__file__).resolve().parents[1]


def start_cluster(directory: Path, n: int) -> tuple[str, list[subprocess.Popen[bytes]]]:
    """``dask scheduler`` and ``n`` single-threaded ``dask worker`` processes; returns (address, processes)."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, PYTHONPATH=path, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    file = directory / "scheduler.json"
    log = open(directory / "cluster.log", "ab")
    sched = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "distributed.cli.dask_scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--no-dashboard",
            "--scheduler-file",
            str(file),
        ],
        env=env,
        stdout=log,
        stderr=log,
    )
    procs = [sched]
    deadline = time.monotonic() + 60
    while not file.exists() or not file.read_text().strip():
        if time.monotonic() > deadline or sched.poll() is not None:
            stop(procs)
            raise RuntimeError("dask scheduler did not start")
        time.sleep(0.1)
    address = json.loads(file.read_text())["address"]
    for i in range(n):
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "distributed.cli.dask_worker",
                    address,
                    "--nthreads",
                    "1",
                    "--no-nanny",
                    "--no-dashboard",
                    "--name",
                    f"w{i}",
                ],
                env=env,
                stdout=log,
                stderr=log,
                cwd=str(directory),
            )
        )
    from distributed import Client

    with Client(address, timeout=30) as client:
        client.wait_for_workers(n, timeout=60)
    return address, procs


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """Stop the cluster's processes (workers first)."""
    for p in reversed(procs):
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()


class SocketBytes:
    """Bytes this process reads from and writes to its sockets (tornado's IOStream: every distributed comm)."""

    def __init__(self) -> None:
        self.read = self.written = 0

    def install(self) -> None:
        """Wrap tornado's socket reads and writes (this process only) to count their bytes."""
        from tornado.iostream import IOStream

        if getattr(IOStream, "_counted", False):
            return
        IOStream._counted = True  # type: ignore[attr-defined]

        counter, read_from_fd, write_to_fd = self, IOStream.read_from_fd, IOStream.write_to_fd

        def counted_read(stream: Any, buf: Any) -> Any:
            n = read_from_fd(stream, buf)
            counter.read += n or 0
            return n

        def counted_write(stream: Any, data: Any) -> Any:
            n = write_to_fd(stream, data)
            counter.written += n or 0
            return n

        IOStream.read_from_fd = counted_read  # type: ignore[method-assign]
        IOStream.write_to_fd = counted_write  # type: ignore[method-assign]


SOCKETS = SocketBytes()


def _count_worker_sockets(dask_worker: Any) -> None:
    """(Run on each worker) count its socket bytes as ``SocketBytes`` does here."""
    if not hasattr(dask_worker, "socket_bytes"):
        dask_worker.socket_bytes = SocketBytes()
        dask_worker.socket_bytes.install()


def worker_socket_bytes(client: Any) -> tuple[int, int]:
    """Bytes all workers have read from and written to their sockets so far."""
    counts = client.run(lambda dask_worker: (dask_worker.socket_bytes.read, dask_worker.socket_bytes.written))
    return sum(r for r, _ in counts.values()), sum(w for _, w in counts.values())


def measure(path: str, address: str, spec: PassSpec, partition_rows: int) -> dict[str, float]:
    """One pass by ``address`` (after a warm-up): wall, driver CPU, driver bytes, worker transfers."""
    from distributed import Client

    src = open_source(path)
    me = psutil.Process()
    rows = partition_rows
    with Client(address, timeout=30) as client:  # the counters' client; the pass opens its own
        accumulate(src, spec, scheduler=address, partition_rows=rows)  # warm-up: imports on the workers' side
        t0 = time.perf_counter()
        accumulate(src, spec, scheduler=address, partition_rows=rows)  # wall time without the byte counters
        plain = time.perf_counter() - t0
        SOCKETS.install()
        client.run(_count_worker_sockets)
        (wr0, ww0), cpu0, r0, w0 = worker_socket_bytes(client), me.cpu_times(), SOCKETS.read, SOCKETS.written
        t0 = time.perf_counter()
        report = PassReport()
        stats = accumulate(src, spec, scheduler=address, report=report, partition_rows=rows)
        wall, cpu1, r1, w1 = time.perf_counter() - t0, me.cpu_times(), SOCKETS.read, SOCKETS.written
        wr1, ww1 = worker_socket_bytes(client)
    result = sum(
        a.nbytes
        for a in (stats.weight, stats.count, stats.mean_x, stats.mean_y, stats.sxx, stats.sxy, stats.syy)
    )
    return {
        "wall_s": wall,
        "plain_wall_s": plain,
        "driver_cpu_s": (cpu1.user + cpu1.system) - (cpu0.user + cpu0.system),
        "driver_in": r1 - r0,
        "driver_out": w1 - w0,
        "workers_in": wr1 - wr0,
        "workers_out": ww1 - ww0,
        "result_bytes": result,
        "partitions": report.extra["partitions"],
        "rows": src.n_rows(),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workers", type=int, nargs="+", default=[2, 4])
    p.add_argument("--rows", type=int, default=400_000)
    p.add_argument("--features", type=int, default=200)
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--partition-rows", type=int, default=20_000, help="rows per partition (P = rows / this)")
    a = p.parse_args(argv)
    sys.path.insert(0, os.path.dirname(__file__))
    from bench_layouts import write

    spec = PassSpec(FoldScheme("hash", a.folds), None, 1)
    root = Path(tempfile.mkdtemp(prefix="bench-scaling-"))
    print(
        f"M={a.rows} N={a.features} float32 zarr (4 MB chunks), K={a.folds}, cores={os.cpu_count()}, "
        f"load at start {os.getloadavg()[0]:.2f}"
    )
    try:
        path = str(root / "data.zarr")
        write(path, "zarr-4mb", a.rows, a.features, "float32", 1)
        src = open_source(path)
        accumulate(src, spec, scheduler="threads", partition_rows=a.partition_rows)  # warm-up
        t0 = time.perf_counter()
        accumulate(src, spec, scheduler="threads", partition_rows=a.partition_rows)
        threads = time.perf_counter() - t0
        print(
            f"threads (this process, {os.cpu_count()} threads): {threads:.2f} s ({src.n_rows() / threads:,.0f} rows/s)",
            flush=True,
        )
        for W in a.workers:
            address, procs = start_cluster(root, W)
            try:
                r = measure(path, address, spec, a.partition_rows)
            finally:
                stop(procs)
            P = r["partitions"]
            print(
                f"W={W} P={P}: wall {r['plain_wall_s']:.2f} s ({r['rows'] / r['plain_wall_s']:,.0f} rows/s; "
                f"{r['wall_s']:.2f} s with the byte counters; / threads = {r['plain_wall_s'] / threads:.2f})  "
                f"driver CPU {r['driver_cpu_s']:.3f} s ({1e3 * r['driver_cpu_s'] / P:.1f} ms/partition)  "
                f"driver in {r['driver_in'] / 1e6:.2f} MB (one result = {r['result_bytes'] / 1e6:.2f} MB; "
                f"rest {(r['driver_in'] - r['result_bytes']) / P / 1e3:.1f} kB/partition)  "
                f"driver out {r['driver_out'] / 1e6:.2f} MB ({r['driver_out'] / P / 1e3:.1f} kB/partition)  "
                f"workers' sockets: in {r['workers_in'] / 1e6:.2f} MB, out {r['workers_out'] / 1e6:.2f} MB "
                f"({r['workers_in'] / max(r['result_bytes'], 1):.1f} results in)",
                flush=True,
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"load at end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
