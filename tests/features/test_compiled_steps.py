"""The reservoir's compiled step loop (streamridge.features._compiled_steps): its tanh against an exact
reference, its states against an explicit loop per series and against the NumPy loop, and how it is chosen."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from streamridge.features import EchoStateNetwork
from streamridge.features import _lockstep as lockstep

numba = pytest.importorskip("numba")
from streamridge.features import _compiled_steps as compiled  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


@numba.njit(error_model="numpy")
def _tanh_all(x, out):  # type: ignore[no-untyped-def]
    for i in range(x.size):
        out[i] = compiled.tanh(x[i])


def _ulps(ours: np.ndarray, x: np.ndarray) -> np.ndarray:
    """|ours - tanh(x)| in units in the last place of the exact tanh (long double, rounded to float64)."""
    exact = np.tanh(x.astype(np.longdouble))
    return np.abs(ours.astype(np.longdouble) - exact) / np.spacing(np.abs(exact.astype(np.float64)))


def test_tanh_is_within_4_ulp_of_the_exact_value(rng):
    """Over 11 decades of |x|, both signs, the breakpoints of the range reduction (k ln 2 / 2) and the clamp."""
    if np.finfo(np.longdouble).eps >= np.finfo(np.float64).eps:
        pytest.skip("no extended precision here for the exact reference")
    x = np.concatenate(
        [rng.standard_normal(20_000) * s for s in (1e-9, 1e-5, 1e-2, 0.1, 0.3, 1.0, 3.0, 8.0, 19.0)]
        + [np.arange(-80, 81) * math.log(2) / 2 + d for d in (-1e-12, 0.0, 1e-12)]
        + [np.linspace(-21, 21, 20_001)]
    )
    ours = np.empty_like(x)
    _tanh_all(x, ours)
    ulps = _ulps(ours, x)
    assert ulps.max() <= 4.0, (ulps.max(), x[np.argmax(ulps)])  # measured: 3.9 near |x| = 12
    assert ulps.mean() < 0.7  # measured: 0.63
    assert np.abs(ours - np.tanh(x.astype(np.longdouble))).max() < 4.5e-16
    assert np.all(np.abs(ours) <= 1.0)


def test_tanh_special_values():
    x = np.array(
        [0.0, -0.0, 5e-324, -5e-324, 1e-300, 19.1, -19.1, 20.0, 25.0, 1e300, -1e300, np.inf, -np.inf, np.nan]
    )
    ours = np.empty_like(x)
    _tanh_all(x, ours)
    expected = np.array([0.0, -0.0, 5e-324, -5e-324, 1e-300, 1, -1, 1, 1, 1, -1, 1, -1, np.nan])
    np.testing.assert_array_equal(ours, expected)  # NaN equals NaN here
    assert np.signbit(ours[1]) and not np.signbit(ours[0])


ACTS = {
    "tanh": np.tanh,
    "sigmoid": lambda z: 1.0 / (1.0 + np.exp(-z)),
    "relu": lambda z: np.maximum(z, 0.0),
    "identity": lambda z: z,
}


def reference(inputs, pos, ends, w_in, b, W, a, X0, f):
    """One series at a time, one row at a time (obviously correct)."""
    out = np.full((inputs.shape[0], W.shape[0]), -7.0)
    for p, e, x in zip(pos, ends, X0):
        for r in range(p, e):
            x = (1 - a) * x + a * f(w_in @ inputs[r] + b + W @ x)
            out[r] = x
    return out


def problem(rng, units, n_in, lengths, radius=0.95):
    W = rng.standard_normal((units, units))
    W *= radius / np.max(np.abs(np.linalg.eigvals(W)))
    w_in, b = rng.uniform(-1, 1, (units, n_in)), rng.uniform(-0.3, 0.3, units)
    lengths = np.asarray(lengths)
    gaps = rng.integers(0, 4, len(lengths))
    pos = np.cumsum(np.r_[0, (lengths + gaps)[:-1]]) + gaps[0]
    ends = pos + lengths
    inputs = rng.standard_normal((int(ends[-1]) + 3, n_in))
    X0 = rng.uniform(-0.5, 0.5, (len(pos), units))
    return inputs, pos, ends, (w_in, b, W), X0


@pytest.mark.parametrize("activation", list(ACTS))
@pytest.mark.parametrize("leak", [1.0, 0.35])
@pytest.mark.parametrize("n_in", [1, 2, 5])
def test_compiled_loop_equals_one_series_at_a_time(rng, activation, leak, n_in):
    """Every activation, with and without leak, one, two and five inputs (the three input-term loops), series of
    mixed lengths with gaps between them (left untouched) and non-zero start states."""
    inputs, pos, ends, (w_in, b, W), X0 = problem(rng, 13, n_in, [90, 1, 33, 33, 2, 90, 7])
    ref = reference(inputs, pos, ends, w_in, b, W, leak, X0, ACTS[activation])
    out = np.full_like(ref, -7.0)
    finals = lockstep.run_series(
        inputs, pos, ends, (w_in, b, np.ascontiguousarray(W.T)), leak, X0, out, activation, loop="compiled"
    )
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(finals, ref[ends - 1], rtol=0, atol=1e-12)
    assert np.abs(ref[ends - 1] - X0).min() > 1e-6  # the states moved


@pytest.mark.parametrize("lengths", [[1], [300], [300, 1, 57, 300]])
def test_compiled_loop_equals_the_numpy_loop(rng, lengths):
    """200 units (the loops' own sizes: GEMV for one series, GEMM for several), to 1e-13."""
    inputs, pos, ends, (w_in, b, W), X0 = problem(rng, 200, 2, lengths)
    weights = (w_in, b, np.ascontiguousarray(W.T))
    outs, finals = {}, {}
    for loop in ("compiled", "numpy"):
        outs[loop] = np.full((inputs.shape[0], 200), -7.0)
        finals[loop] = lockstep.run_series(inputs, pos, ends, weights, 0.3, X0, outs[loop], loop=loop)
    np.testing.assert_allclose(outs["compiled"], outs["numpy"], rtol=0, atol=1e-13)
    np.testing.assert_allclose(finals["compiled"], finals["numpy"], rtol=0, atol=1e-13)
    assert np.abs(outs["compiled"] - outs["numpy"]).max() > 0  # two different computations


def test_compiled_loop_writes_an_output_of_any_layout(rng):
    """A Fortran-ordered output (not the loop's own layout) gets the same states; rows outside the series kept."""
    inputs, pos, ends, (w_in, b, W), X0 = problem(rng, 9, 2, [40, 12])
    weights = (w_in, b, np.ascontiguousarray(W.T))
    c_out = np.full((inputs.shape[0], 9), -7.0)
    f_out = np.asfortranarray(np.full((inputs.shape[0], 9), -7.0))
    lockstep.run_series(inputs, pos, ends, weights, 0.5, X0, c_out, loop="compiled")
    lockstep.run_series(inputs, pos, ends, weights, 0.5, X0, f_out, loop="compiled")
    np.testing.assert_array_equal(f_out, c_out)


def test_the_esn_runs_the_compiled_loop_unless_told_otherwise(rng, monkeypatch):
    """``auto`` runs the compiled loop; ``STREAMRIDGE_STEP_LOOP=numpy`` the NumPy loop (bit for bit its own)."""
    esn = EchoStateNetwork(30, leak_rate=0.4, seed=3).fit(rng.standard_normal((10, 2)))
    u = rng.standard_normal((200, 2))
    g = np.repeat([0, 1], 100)
    calls = []
    real = compiled.steps
    monkeypatch.setattr(compiled, "steps", lambda *a: calls.append(1) or real(*a))
    auto = esn.transform(u, groups=g)
    assert calls
    monkeypatch.setenv("STREAMRIDGE_STEP_LOOP", "numpy")
    calls.clear()
    numpy_loop = esn.transform(u, groups=g)
    assert not calls
    out = np.empty((200, 30))
    lockstep.run_series(
        u, np.array([0, 100]), np.array([100, 200]), (esn.w_in_, esn.bias_, esn.w_res_.T.copy()), 0.4,
        np.zeros((2, 30)), out, loop="numpy",
    )  # fmt: skip
    np.testing.assert_array_equal(numpy_loop, out)
    np.testing.assert_allclose(auto, numpy_loop, rtol=0, atol=1e-13)


def test_without_numba_the_numpy_loop_runs_with_a_warning(rng, monkeypatch):
    import streamridge.features

    monkeypatch.setattr(lockstep, "_KERNEL", [])
    monkeypatch.delattr(streamridge.features, "_compiled_steps")
    monkeypatch.setitem(sys.modules, "streamridge.features._compiled_steps", None)  # import fails
    inputs, pos, ends, (w_in, b, W), X0 = problem(rng, 8, 2, [20, 5])
    weights = (w_in, b, np.ascontiguousarray(W.T))
    out, ref = np.zeros((inputs.shape[0], 8)), np.zeros((inputs.shape[0], 8))
    with pytest.warns(RuntimeWarning, match="compiled step loop is unavailable.*install numba"):
        lockstep.run_series(inputs, pos, ends, weights, 1.0, X0, out)
    lockstep.run_series(inputs, pos, ends, weights, 1.0, X0, ref, loop="numpy")
    np.testing.assert_array_equal(out, ref)
    with pytest.raises(ImportError):
        lockstep.run_series(inputs, pos, ends, weights, 1.0, X0, out, loop="compiled")


def test_the_compiled_loop_releases_the_gil(rng):
    """Two threads stepping reservoirs at once: the loop runs without the GIL (``nogil``), so a Python thread
    counting meanwhile is not stopped for the loop's whole run."""
    assert all(f.targetoptions.get("nogil") for f in [compiled._steps, *compiled._ENTRIES.values()])
    inputs, pos, ends, (w_in, b, W), X0 = problem(rng, 100, 2, [20_000])
    weights = (w_in, b, np.ascontiguousarray(W.T))
    out = np.empty((inputs.shape[0], 100))
    lockstep.run_series(inputs[:50], [0], [10], weights, 1.0, X0, out[:50], loop="compiled")  # compiled
    done = threading.Event()
    ticks = [0]

    def count() -> None:
        while not done.is_set():
            ticks[0] += 1

    t = threading.Thread(target=count)
    t.start()
    try:
        before = ticks[0]
        lockstep.run_series(inputs, pos, ends, weights, 1.0, X0, out, loop="compiled")
        during = ticks[0] - before
    finally:
        done.set()
        t.join()
    assert during > 1000  # holding the GIL for the whole call would leave about 0-3 ticks


def test_importing_streamridge_does_not_import_numba():
    """numba (0.2 s) is imported when a reservoir first runs, not by ``import streamridge`` or the maps."""
    code = (
        "import sys, numpy as np\nimport streamridge\nfrom streamridge.features import EchoStateNetwork\n"
        "esn = EchoStateNetwork(5, seed=0).fit(np.zeros((3, 1)))\nbefore = 'numba' in sys.modules\n"
        "esn.transform(np.ones((4, 1)))\nprint(before, 'numba' in sys.modules)"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    env.pop("STREAMRIDGE_STEP_LOOP", None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "True"]


def test_a_call_costs_microseconds_and_keeps_no_reference_to_its_arrays(rng):
    """A closed-loop forecast calls the loop once per step: each call dispatches straight to its compiled entry
    (numba.literally would raise and retry on every call: ~4 ms, with the arrays held by the exception's frames
    until the next one, so a pass kept its previous round's buffer alive)."""
    import gc
    import time
    import weakref

    inputs, pos, ends, (w_in, b, W), X0 = problem(rng, 20, 2, [10])
    weights = (w_in, b, np.ascontiguousarray(W.T))
    out = np.empty((inputs.shape[0], 20))
    lockstep.run_series(inputs, pos, ends, weights, 0.3, X0, out, loop="compiled")  # compiled or loaded
    t = time.perf_counter()
    for _ in range(200):
        lockstep.run_series(inputs, pos, ends, weights, 0.3, X0, out, loop="compiled")
    assert (time.perf_counter() - t) / 200 < 5e-4  # measured: about 10 us with the wrapper
    ref = weakref.ref(out)
    del out
    gc.collect()
    assert ref() is None
