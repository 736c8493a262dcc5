"""The reservoir's step loop: independent series in lockstep, one GEMM per time step.

Used by :class:`~streamridge.features.EchoStateNetwork`.  The series of one call are
sorted by length (longest first) and their rows *packed by step*: step ``t`` of the
``k_t`` series still running occupies ``k_t`` consecutive rows, series in sorted
order, so the states of a step are one contiguous ``(k_t, units)`` block and the
first ``k_{t+1}`` rows of it are the previous states of the next step.  The rows are
processed in blocks of whole steps held in a small buffer (reused, so it stays in
cache and is never first-touched twice): per block one GEMM computes the input term
``W_in u + b`` of all its rows, then per step one GEMM ``X[:k] @ W'`` is added in
place and ``tanh`` applied in place, and at the end of the block one gather writes
its rows to the output in row order.
"""

from __future__ import annotations

import numpy as np

#: bytes of one block of packed rows (two such buffers alternate: the last states of one
#: block are the previous states of the next)
BLOCK_BYTES = 1 << 20


def run_series(
    inputs: np.ndarray,
    pos: np.ndarray,
    ends: np.ndarray,
    weights: tuple[np.ndarray, np.ndarray, np.ndarray],
    a: float,
    X0: np.ndarray,
    out: np.ndarray,
) -> np.ndarray:
    """States of the independent series ``inputs[pos[i]:ends[i]]`` (from states ``X0[i]``) into ``out``.

    .. code-block:: text

        x(t) = (1 - a) x(t-1) + a tanh(W_in u(t) + b + W x(t-1))

    Parameters
    ----------
    inputs : array of float64 of shape (n_rows, n_in)
        Raw inputs u(t), the series' rows at ``pos[i]:ends[i]``.
    pos, ends : array of int of shape (n_series,)
        First row and one past the last row of every series (non-empty, disjoint).
    weights : (W_in of shape (units, n_in), b of shape (units,), W' of shape (units, units))
        W' is the transposed recurrent matrix, C-contiguous.
    a : float
        Leak rate.
    X0 : array of shape (n_series, units)
        State before the first row of every series.
    out : array of float64 of shape (n_rows, units)
        Receives the states; rows outside the series are left as they are.

    Returns
    -------
    array of shape (n_series, units)
        The final state of every series (in the order of ``pos``).
    """
    pos = np.asarray(pos, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    order = np.argsort(pos - ends, kind="stable")  # longest first
    starts, lengths = pos[order], (ends - pos)[order]
    alive = _alive_per_step(lengths)
    offs = np.concatenate([[0], np.cumsum(alive)]).astype(np.int64)
    src = _packed_rows(offs, starts)
    X = np.array(X0, dtype=np.float64)[order]
    units = out.shape[1]
    rows = max(int(alive[0]), BLOCK_BYTES // (8 * max(1, units)))
    buffers = (np.empty((rows, units)), np.empty((rows, units)))
    tmp = np.empty((int(alive[0]), units))
    k_list, off_list = alive.tolist(), offs.tolist()
    t0, b = 0, 0
    while t0 < len(k_list):
        t1 = max(t0 + 1, int(np.searchsorted(offs, offs[t0] + rows, side="right")) - 1)
        r0, r1 = off_list[t0], off_list[t1]
        Z = buffers[b % 2][: r1 - r0]
        np.matmul(inputs[src[r0:r1]], weights[0].T, out=Z)
        Z += weights[1]
        X = _steps(Z, X, weights[2], a, k_list[t0:t1], off_list[t0:t1], r0, tmp)
        out[src[r0:r1]] = Z
        t0, b = t1, b + 1
    return out[ends - 1].copy()


def _alive_per_step(lengths: np.ndarray) -> np.ndarray:
    """Number of series still running at every step (``lengths`` sorted decreasing)."""
    steps = np.arange(int(lengths[0]))
    return len(lengths) - np.searchsorted(lengths[::-1], steps, side="right")


def _packed_rows(offs: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Row of ``inputs``/``out`` of every packed row: packed row ``offs[t] + s`` is step ``t`` of series ``s``."""
    r = np.arange(int(offs[-1]), dtype=np.int64)
    t = np.searchsorted(offs, r, side="right") - 1
    return starts[r - offs[t]] + t


def _steps(
    Z: np.ndarray,
    X: np.ndarray,
    WT: np.ndarray,
    a: float,
    ks: list[int],
    offs: list[int],
    r0: int,
    tmp: np.ndarray,
) -> np.ndarray:
    """Run the steps of one block in place: ``Z`` holds their input terms on entry and their states on return.

    ``X`` is the state of the step before the block (its first ``ks[0]`` rows are the
    series running); returns the block's last states (a view of ``Z``).
    """
    for k, o in zip(ks, offs):
        C = Z[o - r0 : o - r0 + k]
        prev = X if X.shape[0] == k else X[:k]
        if k == 1:
            np.dot(prev[0], WT, out=tmp[0])
        else:
            np.dot(prev, WT, out=tmp[:k])
        np.add(C, tmp[:k], out=C)
        np.tanh(C, out=C)
        if a != 1.0:
            np.multiply(C, a, out=C)
            np.multiply(prev, 1.0 - a, out=tmp[:k])
            np.add(C, tmp[:k], out=C)
        X = C
    return X
