"""``scripts/bench_features.py`` with ``features.plan.LOCKSTEP_SERIES`` set to another value: an A/B of the lane-group rule.

Usage::

    python scripts/ab_lockstep_series.py 1 --only-pass --series 64 --steps 12500 --chunk-rows 3125 --repeats 2
    python scripts/ab_lockstep_series.py 16 --only-pass --series 64 --steps 12500 --chunk-rows 3125 --repeats 2

The first argument is the value (16 is the default; 1 gives groups of as many
lanes as keep ``MIN_TASKS`` tasks); the rest are ``bench_features.py``'s.
Alternate runs of the two values and compare (a).
"""

from __future__ import annotations

import os
import runpy
import sys

if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    import streamridge.datapass.plan as plan

    plan.LOCKSTEP_SERIES = int(sys.argv[1])
    sys.argv = [os.path.join(here, "bench_features.py"), *sys.argv[2:]]
    runpy.run_path(sys.argv[0], run_name="__main__")
