"""The reservoir's step loops (streamridge.features._lockstep: the compiled one and the NumPy one) against an
explicit loop per series."""

from __future__ import annotations

import numpy as np
import pytest

from streamridge.features import EchoStateNetwork
from streamridge.features import _lockstep as lockstep


def reference(inputs, pos, ends, w_in, b, W, a, X0):
    """One series at a time, one row at a time (obviously correct)."""
    out = np.full((inputs.shape[0], W.shape[0]), -7.0)
    for p, e, x in zip(pos, ends, X0):
        for r in range(p, e):
            x = (1 - a) * x + a * np.tanh(w_in @ inputs[r] + b + W @ x)
            out[r] = x
    return out


def weights(rng, units, n_in, radius=0.95):
    W = rng.standard_normal((units, units))
    W *= radius / np.max(np.abs(np.linalg.eigvals(W)))
    return rng.uniform(-1, 1, (units, n_in)), rng.uniform(-0.3, 0.3, units), W


LOOPS = pytest.mark.parametrize("loop", ["compiled", "numpy"])  # the compiled loop (numba) and the NumPy loop


@LOOPS
@pytest.mark.parametrize("block_bytes", [1, 3000, 1 << 20])
@pytest.mark.parametrize("leak", [1.0, 0.35])
def test_packed_lockstep_equals_one_series_at_a_time(rng, monkeypatch, block_bytes, leak, loop):
    """Series of mixed lengths (1 to 300 rows, gaps between them), non-zero start states, blocks of one step,
    of a few steps cut at odd places, and one block for everything."""
    monkeypatch.setattr(lockstep, "BLOCK_BYTES", block_bytes)
    units, n_in = 12, 3
    lengths = np.array([300, 1, 57, 57, 2, 300, 140, 1, 9])
    gaps = rng.integers(0, 4, len(lengths))
    pos = np.cumsum(np.r_[0, (lengths + gaps)[:-1]]) + gaps[0]
    ends = pos + lengths
    inputs = rng.standard_normal((int(ends[-1]) + 3, n_in))
    w_in, b, W = weights(rng, units, n_in)
    X0 = rng.uniform(-0.5, 0.5, (len(pos), units))
    ref = reference(inputs, pos, ends, w_in, b, W, leak, X0)
    out = np.full_like(ref, -7.0)
    finals = lockstep.run_series(
        inputs, pos, ends, (w_in, b, np.ascontiguousarray(W.T)), leak, X0, out, loop=loop
    )
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-12)  # rows between the series untouched (-7)
    np.testing.assert_allclose(finals, ref[ends - 1], rtol=0, atol=1e-12)
    assert np.abs(ref[ends - 1] - X0).min() > 1e-6  # the states moved


@LOOPS
@pytest.mark.parametrize("lengths", [[1], [400], [400, 1, 57, 300]])
def test_leaky_steps_one_series_and_several(rng, monkeypatch, lengths, loop):
    """Leak rate < 1 with one series (the GEMV path) and several, blocks of a few steps; the bias (folded into
    the input GEMM as a column of ones) is non-zero."""
    monkeypatch.setattr(lockstep, "BLOCK_BYTES", 7000)
    units, n_in = 20, 2
    ends = np.cumsum(lengths)
    pos = ends - np.array(lengths)
    inputs = rng.standard_normal((int(ends[-1]), n_in))
    w_in, b, W = weights(rng, units, n_in)
    X0 = rng.uniform(-0.5, 0.5, (len(pos), units))
    ref = reference(inputs, pos, ends, w_in, b, W, 0.2, X0)
    out = np.empty_like(ref)
    finals = lockstep.run_series(
        inputs, pos, ends, (w_in, b, np.ascontiguousarray(W.T)), 0.2, X0, out, loop=loop
    )
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(finals, ref[ends - 1], rtol=0, atol=1e-12)


@LOOPS
def test_single_series_gemv_path(rng, loop):
    units, n_in = 30, 2
    inputs = rng.standard_normal((500, n_in))
    w_in, b, W = weights(rng, units, n_in)
    X0 = rng.uniform(-0.5, 0.5, (1, units))
    ref = reference(inputs, [0], [500], w_in, b, W, 1.0, X0)
    out = np.empty_like(ref)
    finals = lockstep.run_series(
        inputs, np.array([0]), np.array([500]), (w_in, b, np.ascontiguousarray(W.T)), 1.0, X0, out, loop=loop
    )
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(finals[0], ref[-1], rtol=0, atol=1e-12)


def test_apply_chunks_equals_apply_chunk_per_item(rng, monkeypatch):
    """Several chunks in one call (each its own series and state, as a lane group's round) = one call per chunk."""
    monkeypatch.setattr(lockstep, "BLOCK_BYTES", 5000)
    esn = EchoStateNetwork(16, leak_rate=0.7, bias_scaling=0.4, seed=5).fit(rng.standard_normal((10, 2)))
    items, singles = [], []
    for j, m in enumerate([200, 37, 1, 200, 120]):
        X = rng.standard_normal((m, 2))
        g = np.repeat([j, 50 + j], [m // 2, m - m // 2])
        _, state = esn.apply_chunk(rng.standard_normal((15, 2)), 0, np.full(15, j), esn.init_state())
        items.append((X, 1000 * j, g, state))
        singles.append(esn.apply_chunk(X, 1000 * j, g, state))
    for (F, state), (F1, state1) in zip(esn.apply_chunks(items), singles):
        np.testing.assert_allclose(F, F1, rtol=0, atol=1e-12)
        assert state[:2] == state1[:2]
        np.testing.assert_allclose(state[2], state1[2], rtol=0, atol=1e-12)


def test_apply_chunks_writes_into_the_given_buffer(rng):
    """``out=`` (as the pass reuses one buffer round after round): the features are views of it, equal to a fresh
    call; a buffer that does not fit is ignored."""
    esn = EchoStateNetwork(8, seed=2).fit(rng.standard_normal((10, 2)))
    items = [
        (rng.standard_normal((m, 2)), 0, np.full(m, j), esn.init_state()) for j, m in enumerate([30, 5, 12])
    ]
    fresh = esn.apply_chunks(items)
    buf = np.full((60, 8), np.nan)
    for (F, _), (F0, _) in zip(esn.apply_chunks(items, out=buf), fresh):
        assert np.shares_memory(F, buf)
        np.testing.assert_array_equal(F, F0)
    assert np.isnan(buf[47:]).all()
    for small in (np.empty((46, 8)), np.empty((60, 9)), np.empty((60, 8), dtype=np.float32)):
        for (F, _), (F0, _) in zip(esn.apply_chunks(items, out=small), fresh):
            assert not np.shares_memory(F, small)
            np.testing.assert_array_equal(F, F0)
