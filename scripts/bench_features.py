"""A feature map streamed inside the pass vs the same features written to disk and streamed back.

Usage::

    python scripts/bench_features.py                        # ESN 200 units, 16 series x 12,500 steps
    python scripts/bench_features.py --map random_hidden --units 500 --series 8 --steps 25000
    python scripts/bench_features.py --series 256 --steps 781     # 16 short series per chunk: run in lockstep
    python scripts/bench_features.py --series 64 --steps 3125 --workers   # (e) 1 vs 2 worker processes
    python scripts/bench_features.py --only-workers --series 64 --steps 12500 --chunk-rows 3125 --repeats 2   # (e) alone
    python scripts/bench_features.py --only-cli --series 64 --steps 12500 --chunk-rows 3125   # (g) alone
    python scripts/bench_features.py --only-pass --series 20000 --steps 50 --units 50 --cv 5 --default-chunks
    python scripts/bench_features.py --only-map --units 1000 --series 16 --steps 1000   # (c) alone
    python scripts/bench_features.py --only-map --baseline old_lockstep.py   # (c) also with a copy of an older step loop
    python scripts/bench_features.py --lane-results --series 64 --steps 3125 --chunk-rows 3125   # (f) alone

Measured in one run on the same data (raw inputs: 2 float32 columns, one target, series ids):

  (a) map pass    ``compute_stats`` on the raw zarr store with ``features=`` (map applied per chunk);
  (b) disk route  the features computed once and written to zarr (float32), then ``compute_stats`` on them;
                  reported as write time, pass time and their sum, with the disk space of both stores;
  (c) map alone   the map over all rows chunk by chunk in memory on one thread, and its matrix-product cost alone
                  (ESN: series in groups of plan.group_size run in lockstep as the pass runs them, writing into one
                  output buffer reused from group to group as a lane group reuses it from round to round, and per
                  step the GEMM X[:k] @ W' of the k series still running; random hidden: one GEMM)
                  -> ratio map / GEMM-GEMV; for the ESN also the same map with a new output array per group (its
                  first touch of memory), and tanh alone over as many values as the map outputs.  Timed as CPU time
                  of the one thread (BLAS limited to 1 thread), less disturbed by other processes than wall time;
  (d) workers     the map pass on 1 worker (sync, BLAS on 1 thread) vs the threaded scheduler (all cores;
                  series run in parallel).
  (g) command line  ``streamridge fit`` (leave one series out, the map from a features file, the default
                  chunking) and ``streamridge predict`` of the raw store, run in this process, against (c)'s map
                  alone on one thread (``--only-cli``).
  (f) lane results  with cv="groups", the lane-group tasks run in this process and their results merged by the
                  pass's tree: each group's statistics over its own series' folds vs over all folds (alternated;
                  CPU time of the tasks and of the merges, and the bytes of the pickled results a cluster moves).
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import tempfile
import time
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

import streamridge as sr
from streamridge.features import EchoStateNetwork, RandomHidden
from streamridge.sources import write_zarr


def du(path: str) -> int:
    """Bytes under a directory."""
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def make_raw(series: int, steps: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inputs u ~ U(0, 0.5) (2 columns), target a NARMA-like response, series ids."""
    rng = np.random.default_rng(seed)
    u = rng.uniform(0, 0.5, (series * steps, 2)).astype(np.float32)
    y = np.zeros(series * steps, dtype=np.float32)
    y[1:] = 0.5 * u[:-1, 0] + 0.3 * u[:-1, 1] ** 2
    return u, y, np.repeat(np.arange(series), steps)


def best(fn, repeats: int, clock=time.perf_counter) -> float:
    times = []
    for _ in range(repeats):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return min(times)


def _report_map_alone(fmap, u: np.ndarray, g: np.ndarray, args) -> None:
    """(c) alone: the map, its products, the map with a new output per group, and tanh alone (CPU time);
    with ``--baseline`` the map and its products are timed alternately with the baseline step loop."""
    cpu = time.thread_time
    with threadpool_limits(1):
        if args.baseline:
            _report_baseline(fmap, u, g, args)
        t_alone = best(lambda: _map_alone(fmap, u, g, args.chunk_rows), args.repeats, cpu)
        t_gemm = best(lambda: _matmul_cost(fmap, u, g, args.chunk_rows), args.repeats, cpu)
        t_fresh = best(lambda: _map_alone(fmap, u, g, args.chunk_rows, reuse=False), args.repeats, cpu)
        t_tanh = best(lambda: _tanh_cost(fmap, u), args.repeats, cpu)
    values = len(u) * fmap.n_features_out_
    print(
        f"(c) map alone, 1 thread (CPU)    {t_alone:8.3f} s; its GEMM/GEMV alone {t_gemm:.3f} s; ratio {t_alone / t_gemm:.2f}; "
        f"{len(u) / t_alone:,.0f} rows/s"
    )
    print(f"    new output array per group   {t_fresh:8.3f} s; ratio {t_fresh / t_gemm:.2f}")
    print(
        f"    tanh alone of {values:,} values {t_tanh:.3f} s ({t_tanh / values * 1e9:.2f} ns each; {t_tanh / t_gemm:.2f} of the products)"
    )


def _report_baseline(fmap, u: np.ndarray, g: np.ndarray, args) -> None:
    """The map with this tree's step loop, the baseline's (a copy of an older ``_lockstep.py``) and the products,
    alternated ``--repeats`` times (CPU time, best of each): ratios to the products and new vs old."""
    import importlib.util

    from streamridge.features import _reservoir

    spec = importlib.util.spec_from_file_location("baseline_lockstep", args.baseline)
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)
    new_run = _reservoir.run_series
    times: dict[str, list[float]] = {"new": [], "old": [], "gemm": []}
    for _ in range(args.repeats):
        for name in times:
            _reservoir.run_series = old.run_series if name == "old" else new_run
            t0 = time.thread_time()
            _matmul_cost(fmap, u, g, args.chunk_rows) if name == "gemm" else _map_alone(
                fmap, u, g, args.chunk_rows
            )
            times[name].append(time.thread_time() - t0)
        _reservoir.run_series = new_run
    t_new, t_old, t_gemm = (min(times[n]) for n in ("new", "old", "gemm"))
    print(
        f"(c) alternated x{args.repeats}, CPU: new {t_new:.3f} s, old {t_old:.3f} s, GEMMs {t_gemm:.3f} s; "
        f"ratio new {t_new / t_gemm:.3f}, old {t_old / t_gemm:.3f}; new vs old {t_old / t_new:.3f}x; load {os.getloadavg()[0]:.1f}"
    )


def _tanh_cost(fmap, u: np.ndarray) -> None:
    """tanh in place over as many values as the map outputs, in blocks of 1 MiB (as the step loop applies it)."""
    block = np.random.default_rng(0).uniform(-2, 2, (1 << 17) // fmap.n_features_out_ * fmap.n_features_out_)
    for _ in range(-(-len(u) * fmap.n_features_out_ // block.size)):
        np.tanh(block, out=block)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--map", choices=("esn", "random_hidden"), default="esn")
    ap.add_argument("--units", type=int, default=200)
    ap.add_argument(
        "--leak-rate", type=float, default=1.0, help="ESN leak rate (below 1: the leaky step loop)"
    )
    ap.add_argument("--series", type=int, default=16)
    ap.add_argument("--steps", type=int, default=12_500)
    ap.add_argument("--chunk-rows", type=int, default=12_500)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--workers", action="store_true", help="(e): the map pass on 1 vs 2 worker processes")
    ap.add_argument(
        "--cv", type=int, default=None, help="K hash folds for (a), (d), (e) (default: one fold per series)"
    )
    ap.add_argument(
        "--default-chunks",
        action="store_true",
        help="(a), (d), (e): the estimator's default chunk rows, not --chunk-rows",
    )
    ap.add_argument("--only-pass", action="store_true", help="(a) and (d) only")
    ap.add_argument(
        "--only-cli", action="store_true", help="(g) only: streamridge fit and predict of the raw store"
    )
    ap.add_argument(
        "--only-workers", action="store_true", help="(e) only: the map pass on 1 vs 2 worker processes"
    )
    ap.add_argument("--only-map", action="store_true", help="(c) only: the map alone vs its GEMM/GEMV cost")
    ap.add_argument(
        "--lane-results", action="store_true", help="(f) only: lane groups' results, own folds vs all folds"
    )
    ap.add_argument(
        "--baseline",
        default=None,
        help="with --only-map: a copy of an older _lockstep.py to time alternately",
    )
    args = ap.parse_args()
    root = args.dir or tempfile.mkdtemp(prefix="bench_features_")
    fmap = (
        EchoStateNetwork(args.units, leak_rate=args.leak_rate, seed=1)
        if args.map == "esn"
        else RandomHidden(args.units, seed=1)
    )
    u, y, g = make_raw(args.series, args.steps)
    raw = write_zarr(os.path.join(root, "raw.zarr"), u, y, g, chunk_rows=args.chunk_rows)
    fmap = fmap.fit(u)
    est = dict(
        cv="groups" if args.cv is None else args.cv,
        features=fmap,
        chunk_rows=None if args.default_chunks else args.chunk_rows,
    )
    print(
        f"{args.map} {args.units} units, {args.series} series x {args.steps} steps = {len(y):,} rows, chunks of {args.chunk_rows}"
    )

    if args.only_map:
        _report_map_alone(fmap, u, g, args)
        return
    if args.lane_results:
        _report_lane_results(est, raw, args)
        return
    if args.only_cli:
        _report_cli(fmap, u, g, raw, root, args)
        if args.dir is None:
            shutil.rmtree(root)
        return
    if args.only_workers:
        one, two = _workers(est, raw, args.repeats)
        print(
            f"(e) map pass, 1 / 2 worker processes (dask LocalCluster, started before timing) "
            f"{one:.2f} s / {two:.2f} s; speed-up {one / two:.2f}x"
        )
        if args.dir is None:
            shutil.rmtree(root)
        return
    t_map = best(
        lambda: sr.StreamRidgeCV(**est, scheduler="threads").compute_stats(raw, groups="groups"), args.repeats
    )
    with threadpool_limits(1):  # one worker with one BLAS thread, as each threaded worker has
        t_map1 = best(
            lambda: sr.StreamRidgeCV(**est, scheduler="sync").compute_stats(raw, groups="groups"),
            args.repeats,
        )
    if args.only_pass:
        print(f"(a) map pass, threads            {t_map:8.2f} s   {len(y) / t_map:12,.0f} rows/s")
        print(f"(d) map pass 1 worker (sync)     {t_map1:8.2f} s; load {os.getloadavg()[0]:.1f}")
        if args.dir is None:
            shutil.rmtree(root)
        return

    feat_path = os.path.join(root, "features.zarr")
    t0 = time.perf_counter()
    F = fmap.transform(u, groups=g).astype(np.float32)
    write_zarr(feat_path, F, y, g, chunk_rows=args.chunk_rows)
    t_write = time.perf_counter() - t0
    del F
    t_disk = best(
        lambda: sr.StreamRidgeCV(cv="groups", chunk_rows=args.chunk_rows, scheduler="threads").compute_stats(
            feat_path, groups="groups"
        ),
        args.repeats,
    )

    with threadpool_limits(1):
        t_alone = best(lambda: _map_alone(fmap, u, g, args.chunk_rows), args.repeats)
        t_gemm = best(lambda: _matmul_cost(fmap, u, g, args.chunk_rows), args.repeats)

        from streamridge.datapass import plan

        sizes = plan.LANE_GROUP, plan.MAX_LANE_GROUP
        plan.LANE_GROUP = plan.MAX_LANE_GROUP = 1  # the series one at a time (before lanes ran in groups)
        t_alone1 = best(lambda: _map_alone(fmap, u, g, args.chunk_rows), args.repeats)
        t_gemv1 = best(lambda: _matmul_cost(fmap, u, g, args.chunk_rows), args.repeats)
        plan.LANE_GROUP, plan.MAX_LANE_GROUP = sizes
    t_workers = _workers(est, raw, args.repeats) if args.workers else None

    raw_b, feat_b = du(os.path.join(root, "raw.zarr")), du(feat_path)
    print(f"(a) map pass, threads            {t_map:8.2f} s   {len(y) / t_map:12,.0f} rows/s")
    print(
        f"(b) write features + pass        {t_write:8.2f} s + {t_disk:.2f} s = {t_write + t_disk:.2f} s   "
        f"(map pass is {(t_write + t_disk) / t_map:.2f}x faster end to end; pass over stored features alone {t_disk / t_map:.2f}x of (a))"
    )
    print(
        f"    disk: raw {raw_b / 2**20:.1f} MiB, features {feat_b / 2**20:.1f} MiB (avoided by the map pass)"
    )
    print(
        f"(c) map alone, 1 thread          {t_alone:8.2f} s; its GEMM/GEMV alone {t_gemm:.2f} s; ratio {t_alone / t_gemm:.2f}"
    )
    print(
        f"    series one at a time         {t_alone1:8.2f} s; its GEMV alone {t_gemv1:.2f} s; ratio {t_alone1 / t_gemv1:.2f}; "
        f"batched map {t_alone1 / t_alone:.2f}x faster"
    )
    print(
        f"(d) map pass 1 worker (sync)     {t_map1:8.2f} s; threads {t_map:.2f} s; speed-up {t_map1 / t_map:.2f}x on {os.cpu_count()} cores"
    )
    if t_workers is not None:
        print(
            f"(e) map pass, 1 / 2 worker processes (dask LocalCluster, started before timing) "
            f"{t_workers[0]:.2f} s / {t_workers[1]:.2f} s; speed-up {t_workers[0] / t_workers[1]:.2f}x"
        )
    if args.dir is None:
        shutil.rmtree(root)


def _report_cli(fmap, u: np.ndarray, g: np.ndarray, raw: str, root: str, args) -> None:
    """(g): ``streamridge fit`` and ``predict`` of the raw store in this process, best of repeats."""
    import json

    from streamridge import cli

    spec = os.path.join(root, "features.json")
    with open(spec, "w") as f:
        json.dump(
            {"map": "esn" if args.map == "esn" else "random_hidden", "n_units": args.units, "seed": 1}, f
        )
    model, out = os.path.join(root, "m.npz"), os.path.join(root, "p.zarr")
    fit = [
        "fit",
        "--data",
        raw,
        "--groups",
        "groups",
        "--leave-group-out",
        "--features",
        spec,
        "--out",
        model,
        "--quiet",
        "--overwrite",
    ]
    predict = [
        "predict",
        "--model",
        model,
        "--data",
        raw,
        "--groups",
        "groups",
        "--out",
        out,
        "--quiet",
        "--overwrite",
    ]
    t_fit = best(lambda: cli.main(fit), args.repeats)
    t_predict = best(lambda: cli.main(predict), args.repeats)
    with threadpool_limits(1):
        t_alone = best(lambda: _map_alone(fmap, u, g, args.chunk_rows), args.repeats)
    n = len(u)
    print(
        f"(g) streamridge fit {t_fit:.2f} s ({n / t_fit:,.0f} rows/s), predict {t_predict:.2f} s ({n / t_predict:,.0f} rows/s); "
        f"map alone on 1 thread {t_alone:.2f} s; load {os.getloadavg()[0]:.1f}"
    )


def _map_pass(est: dict, raw: str, client: Any) -> Any:
    return sr.StreamRidgeCV(**est, scheduler=client).compute_stats(raw, groups="groups")


def _workers(est: dict, raw: str, repeats: int) -> tuple[float, float]:
    """The map pass on a local cluster of 1 and of 2 single-threaded worker processes, started as
    ``scheduler="local:N"`` starts them (each cluster started, and its workers warmed up by one untimed
    pass, before timing)."""
    from streamridge.datapass.scheduling import scheduler_session

    out = []
    for n in (1, 2):
        with scheduler_session(f"local:{n}") as cluster:
            run = functools.partial(_map_pass, est, raw, cluster.client())
            run()
            out.append(best(run, repeats))
            print(f"    {n} worker(s): {out[-1]:.2f} s (best of {repeats}), load {os.getloadavg()[0]:.1f}")
    return out[0], out[1]


def _report_lane_results(est: dict, raw: str, args) -> None:
    """(f): lane-group tasks and their merge tree in this process (1 BLAS thread), each group's statistics over
    its own series' folds ("own") or over all folds ("all", as before), alternated; CPU time, best of repeats."""
    import pickle

    from streamridge.datapass import lane_task, plan, stats_kernel
    from streamridge.datapass.stats_kernel import StatsKernel
    from streamridge.sources import open_source

    model = sr.StreamRidgeCV(**est)
    model.compute_stats(raw, groups="groups")  # the fitted map and the pass's spec
    src = open_source(raw, groups="groups", chunk_rows=args.chunk_rows)
    starts = np.concatenate([[0], np.cumsum(src.X.chunks[0])[:-1]]).astype(np.int64)
    calls = plan.lane_calls(src, model._spec, starts, 0, plan.dask_block)
    kernel = StatsKernel(model._spec, model._spec.features.n_features_out_)
    own = stats_kernel.lane_scheme
    times: dict[str, list[tuple[float, float]]] = {"all": [], "own": []}
    with threadpool_limits(1):
        for _ in range(args.repeats):
            for mode in times:
                stats_kernel.lane_scheme = own if mode == "own" else (lambda scheme, values: scheme)
                t0 = time.process_time()
                level = [lane_task.lane_task(*call[1], kernel) for call in calls]
                t1 = time.process_time()
                size = sum(len(pickle.dumps(r)) for r in level)
                t2 = time.process_time()
                while len(level) > 1:
                    level = [
                        kernel.merge(*level[i : i + 2]) if i + 1 < len(level) else level[i]
                        for i in range(0, len(level), 2)
                    ]
                stats_kernel.all_folds(level[0], model._spec)
                times[mode].append((t1 - t0, time.process_time() - t2))
                print(
                    f"    {mode} folds: {len(calls)} lane-group results of {size / 1e6:.1f} MB pickled in all",
                    flush=True,
                )
    stats_kernel.lane_scheme = own
    for mode, v in times.items():
        print(
            f"(f) {mode} folds: lane-group tasks CPU {min(t for t, _ in v):.3f} s, merge tree CPU {min(m for _, m in v):.3f} s "
            f"(best of {args.repeats}); load {os.getloadavg()[0]:.1f}"
        )


def _series_groups(g: np.ndarray) -> list[list[tuple[int, int]]]:
    """(start, stop) of every series, in groups of plan.group_size (the series one task of the pass runs together;
    here one series = one lane, as with --chunk-rows equal to --steps)."""
    from streamridge.datapass.plan import group_size

    heads = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    runs = list(zip(heads.tolist(), np.append(heads[1:], len(g)).tolist()))
    size = group_size(len(runs), len(runs))  # one series per lane, as the pass groups them
    return [runs[i : i + size] for i in range(0, len(runs), size)]


def _map_alone(
    fmap, u: np.ndarray, g: np.ndarray, chunk_rows: int, reuse: bool = True, buf: np.ndarray | None = None
) -> None:
    """The map over all rows without statistics: the ESN as the pass runs it (series in groups of plan.group_size,
    each group in lockstep; ``reuse``: into one output buffer, ``buf`` if given (written before, as the pass's
    buffer is after its first round); whole chunks, where the pass maps a round in slices of at most
    plan.GROUP_BYTES), other maps chunk by chunk."""
    if isinstance(fmap, EchoStateNetwork):
        if buf is None:
            buf = np.empty(
                (0, fmap.n_features_out_)
            )  # one output buffer reused, as a lane group reuses it per round
        for group in _series_groups(g):
            rows = sum(b - a for a, b in group)
            buf = buf if reuse and buf.shape[0] >= rows else np.empty((rows, fmap.n_features_out_))
            fmap.apply_chunks([(u[a:b], a, g[a:b], fmap.init_state()) for a, b in group], out=buf)
        return
    state = fmap.init_state()
    for a in range(0, len(u), chunk_rows):
        _, state = fmap.apply_chunk(u[a : a + chunk_rows], a, g[a : a + chunk_rows], state)


def _matmul_cost(fmap, u: np.ndarray, g: np.ndarray, chunk_rows: int) -> None:
    """The map's matrix products alone (no nonlinearity, no bookkeeping): for the ESN the same steps as
    :func:`_map_alone` (per step the GEMM X[:k] @ W' of the k series of a group still running; a GEMV for one)."""
    if isinstance(fmap, EchoStateNetwork):
        WT = np.ascontiguousarray(fmap.w_res_.T)
        for group in _series_groups(g):
            lengths = np.sort([b - a for a, b in group])[::-1]
            X = np.zeros((len(lengths), WT.shape[0]))
            buf = np.empty_like(X)
            if len(lengths) == 1:
                x, b = X[0], buf[0]
                for _ in range(int(lengths[0])):
                    np.dot(x, WT, out=b)
                    x, b = b, x
                continue
            k = len(lengths)
            for t in range(int(lengths[0])):
                while lengths[k - 1] <= t:
                    k -= 1
                np.dot(X[:k], WT, out=buf[:k])
                X, buf = buf, X
    else:
        W = fmap.weights_
        for a in range(0, len(u), chunk_rows):
            _ = u[a : a + chunk_rows].astype(np.float64) @ W.T


if __name__ == "__main__":
    main()
