#!/usr/bin/env bash
# The checks that need more cores than a 2-core machine, for a 16-core machine
# (docs/benchmarks.md, section 14). Usage, from the repository root:
#
#   OUT=/some/dir bash scripts/bench_device.sh            # full sizes
#   SMALL=1 OUT=/some/dir bash scripts/bench_device.sh    # a quick check of the script itself
#   BASELINE=.ab_old OUT=/some/dir bash scripts/bench_device.sh   # only the A/B steps: the package under
#       .ab_old/streamridge (a `git archive` of an older commit) alternated with this checkout's
#
# On a machine without dask and zarr (and no network), the wheels in .whl/ are installed into $OUT/site first.
# Fetch them beforehand with (for Python 3.12 there; the versions of the environment the figures are compared
# with):
#   python -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 -d .whl \
#     dask==2026.8.0 distributed==2026.8.0 zarr==3.1.6 numcodecs==0.16.6 zstandard==0.25.0 donfig==0.8.1.post1 \
#     google-crc32c==1.9.0 tblib==3.2.2 zict==3.0.0 partd==1.4.2 locket==1.0.0 tornado==6.6.1
#   mkdir .ab_old && git archive <older commit> streamridge | tar -x -C .ab_old
# ONLY=sched (with BASELINE) runs only the scheduler steps: local:2 pinned to 2 cores, and local:16 on all 16.
# Each step has its own time limit and writes its log to $OUT; a failed step does not stop the next.
set -u
export PYTHONUNBUFFERED=1  # bytecode is written: worker processes import dask and distributed afresh
OUT=${OUT:-$(mktemp -d)}; mkdir -p "$OUT"; echo "logs in $OUT"
PY=${PY:-python3}
if [ -d .whl ] && ! $PY -c "import dask, distributed, zarr, zstandard" 2>/dev/null; then
  $PY -m pip install -q --no-index --no-deps --no-cache-dir --upgrade --target "$OUT/site" .whl/*.whl || exit 1
  SITE=$OUT/site; export PYTHONPATH=$SITE:$PWD
else
  SITE=; export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
{ date -u; nproc; grep -m1 "model name" /proc/cpuinfo; uptime
  $PY -c "import sys, numpy, scipy, dask, distributed, zarr, streamridge, threadpoolctl; print(sys.version.split()[0], 'numpy', numpy.__version__, 'scipy', scipy.__version__, 'dask', dask.__version__, 'zarr', zarr.__version__); print([(i['internal_api'], i['num_threads'], i.get('architecture')) for i in threadpoolctl.threadpool_info()])"
} 2>&1 | tee "$OUT/machine.log"
if [ -n "${SMALL:-}" ]; then
  ESN="--repeats 1 --series 8 --steps 500 --chunk-rows 250"; MAP="--series 8 --steps 500 --chunk-rows 250 --repeats 1"
  SCALE="--workers 1 2 --rows 40000 --partition-rows 10000"; SCHED="--rows 50000 --chunk-rows 10000 --repeats 1"
else
  ESN="--repeats 2 --series 64 --steps 12500 --chunk-rows 3125"; MAP="--series 64 --steps 3125 --chunk-rows 3125 --repeats 3"
  SCALE="--workers 1 2 4 8 --rows 2000000 --partition-rows 50000"; SCHED="--rows 2000000 --chunk-rows 50000 --repeats 3"
fi
step() {  # step NAME LIMIT_S COMMAND...
  local name=$1 limit=$2; shift 2
  echo "== $name: $* (limit ${limit} s, load $(cut -d' ' -f1 /proc/loadavg))" | tee -a "$OUT/summary.log"
  local t0=$SECONDS
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; local rc=$?
  echo "   rc=$rc, $((SECONDS - t0)) s" | tee -a "$OUT/summary.log"
  grep -E "^\(|speed-up|^W=|^threads|ratio|local:2|rows/s" "$OUT/$name.log" | tail -20 | tee -a "$OUT/summary.log"
}
if [ -n "${BASELINE:-}" ]; then  # A/B: each step alternates the baseline's package and this checkout's
  path() { echo "${SITE:+$SITE:}$(cd "$1" && pwd)"; }
  if [ -n "${SMALL:-}" ]; then W="--series 8 --steps 500 --chunk-rows 250 --repeats 1"; S="--rows 50000 --chunk-rows 10000 --repeats 1"
  else W="--series 64 --steps 12500 --chunk-rows 3125 --repeats 2"; S="--rows 2000000 --chunk-rows 50000 --repeats 2"; fi
  for r in 1 2; do
    [ "${ONLY:-}" = sched ] && break
    for tree in "$BASELINE" .; do
      label=new; [ "$tree" = . ] || label=base
      step "esn_workers_${r}_$label" 100 env PYTHONPATH="$(path "$tree")" $PY scripts/bench_features.py --only-workers $W
    done
  done
  for r in 1 2; do
    for tree in "$BASELINE" .; do
      label=new; [ "$tree" = . ] || label=base
      step "sched_2cores_${r}_$label" 90 env PYTHONPATH="$(path "$tree")" taskset -c 0,1 $PY scripts/bench_schedulers.py $S --store "$OUT/sched.zarr" --schedulers threads local:2
    done
  done
  if [ "${ONLY:-}" = sched ]; then
    for tree in "$BASELINE" .; do
      label=new; [ "$tree" = . ] || label=base
      step "sched_16cores_$label" 60 env PYTHONPATH="$(path "$tree")" $PY scripts/bench_schedulers.py $S --store "$OUT/sched.zarr" --schedulers threads local:16
    done
  fi
  exit 0
fi
# 1. The ESN map pass on 1 and on 2 worker processes, with (a)-(d).
step esn_workers 220 $PY scripts/bench_features.py $ESN --workers
# 2. The pass on a real dask scheduler with 1, 2, 4, 8 worker processes (docs/scaling.md's model).
step scaling 180 $PY scripts/bench_scaling.py $SCALE
# 3. The ESN map alone vs its GEMMs at 500 and 1000 units (this machine's tanh and BLAS).
step esn_map500 45 $PY scripts/bench_features.py --only-map --units 500 $MAP
step esn_map1000 45 $PY scripts/bench_features.py --only-map --units 1000 $MAP
# 4. local:2 against threads with the process confined to 2 cores, nothing else running.
step sched_2cores 90 taskset -c 0,1 $PY scripts/bench_schedulers.py $SCHED --schedulers threads local:2
