"""The reservoir's step loop: independent series in lockstep, one GEMM per time step.

Used by :class:`~streamridge.features.EchoStateNetwork`.  The series of one call are
sorted by length (longest first), so the ``k`` series still running at a step are
the first ``k``.  The steps are processed in blocks over which ``k`` does not change,
each held in a small buffer of shape ``(steps, k, units)`` (two buffers, reused, so
they stay in cache and are never first-touched again): per block one GEMM computes
the input terms ``W_in u + b`` of all its rows (``[u, 1] @ [W_in'; b]``: the bias comes
with the product), then per step one GEMM ``X @ W'`` of the ``(k, units)`` states is
added in place and ``tanh`` applied in place, and at the end of the block every series'
rows are copied to the output (one contiguous slice per series).

This NumPy loop is the reference and the fallback: the reservoir runs the compiled loop of
:mod:`streamridge.features._compiled_steps` (numba) unless numba cannot be imported or the
environment sets ``STREAMRIDGE_STEP_LOOP=numpy``.  Measured (docs/benchmarks.md, section 7):
per step of 8 series x 200 units the GEMM takes ~12 us and tanh of the 1,600 values 1.5-3 us
(0.84-1.7 ns a value, by machine); the two or three other calls ~0.5 us each.  A BLAS GEMM
with beta = 1 into ``C`` through ctypes (no addition) and a ctypes ``daxpy`` for the leak were
not faster.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np

#: bytes of one block buffer (two alternate: the last states of one block are the previous states of the next)
BLOCK_BYTES = 1 << 20

#: blocks of fewer steps are written to the output by one fancy-index assignment instead of a slice per series
MIN_SLICE_STEPS = 4


def _sigmoid(C: np.ndarray) -> None:
    """1 / (1 + exp(-C)) in place, as 0.5 (1 + tanh(C / 2)) (no overflow for large |C|)."""
    C *= 0.5
    np.tanh(C, out=C)
    C += 1.0
    C *= 0.5


def _relu(C: np.ndarray) -> None:
    """max(C, 0) in place."""
    np.maximum(C, 0.0, out=C)


def _identity(C: np.ndarray) -> None:
    """C as it is (a linear reservoir)."""


#: the activations f of the units, each applied in place (tanh is called directly in the step loop)
ACTIVATIONS = {"tanh": lambda C: np.tanh(C, out=C), "sigmoid": _sigmoid, "relu": _relu, "identity": _identity}


def run_series(
    inputs: np.ndarray,
    pos: np.ndarray,
    ends: np.ndarray,
    weights: tuple[np.ndarray, np.ndarray, np.ndarray],
    a: float,
    X0: np.ndarray,
    out: np.ndarray,
    activation: str = "tanh",
    loop: str = "auto",
) -> np.ndarray:
    """States of the independent series ``inputs[pos[i]:ends[i]]`` (from states ``X0[i]``) into ``out``.

    .. code-block:: text

        x(t) = (1 - a) x(t-1) + a f(W_in u(t) + b + W x(t-1)),   f = tanh (or another of ACTIVATIONS)

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
    activation : one of :data:`ACTIVATIONS`
    loop : {"auto", "compiled", "numpy"}
        "auto": the compiled loop where numba can be imported, unless the environment variable
        ``STREAMRIDGE_STEP_LOOP`` is ``numpy``; "compiled" raises ImportError without numba.

    Returns
    -------
    array of shape (n_series, units)
        The final state of every series (in the order of ``pos``).
    """
    pos = np.asarray(pos, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    order = np.argsort(pos - ends, kind="stable")  # longest first
    starts, lengths = pos[order], (ends - pos)[order]
    X = np.array(X0, dtype=np.float64)[order]
    kernel = _compiled(loop)
    if kernel is not None:
        return _run_compiled(kernel, inputs, order, starts, lengths, weights, a, X, out, activation)
    units = out.shape[1]
    size = max(len(order), BLOCK_BYTES // (8 * max(1, units)))
    buffers = (np.empty(size * units), np.empty(size * units))
    U = np.empty((inputs.shape[0], inputs.shape[1] + 1))  # [u, 1]: the bias added by the input GEMM
    U[:, :-1], U[:, -1] = inputs, 1.0
    W_in = np.vstack([weights[0].T, weights[1]])
    for b, (t0, t1, k) in enumerate(_blocks(lengths, size)):
        Z = buffers[b % 2][: (t1 - t0) * k * units].reshape(t1 - t0, k, units)
        rows = starts[None, :k] + np.arange(t0, t1)[:, None]  # rows[i, s]: step t0 + i of series s
        np.matmul(U[rows.reshape(-1)], W_in, out=Z.reshape(-1, units))
        X = _steps(Z, np.ascontiguousarray(X[:k]), weights[2], a, activation)
        if t1 - t0 >= MIN_SLICE_STEPS:
            for j, r in enumerate(starts[:k].tolist()):
                out[r + t0 : r + t1] = Z[:, j]
        else:
            out[rows.reshape(-1)] = Z.reshape(-1, units)
    return out[ends - 1].copy()


_KERNEL: list[Any] = []  # the compiled module once imported, or None where it cannot be imported


def _compiled(loop: str) -> Any:
    """The module of the compiled loop for ``loop`` (see :func:`run_series`), or None for the NumPy loop."""
    if loop == "numpy" or (loop == "auto" and os.environ.get("STREAMRIDGE_STEP_LOOP", "") == "numpy"):
        return None
    if loop not in ("auto", "compiled"):
        raise ValueError(f"loop must be 'auto', 'compiled' or 'numpy', not {loop!r}")
    if not _KERNEL:
        try:
            from streamridge.features import _compiled_steps
        except (ImportError, RuntimeError) as e:  # RuntimeError: numba finds no writable cache directory
            if loop == "compiled":
                raise
            fix = (
                "install numba"
                if isinstance(e, ImportError)
                else "set NUMBA_CACHE_DIR to a writable directory"
            )
            warnings.warn(
                f"the reservoir's compiled step loop is unavailable ({type(e).__name__}: {e}); "
                f"the NumPy loop runs instead (about 1.3x slower at 200 units); {fix} to restore it",
                RuntimeWarning,
                stacklevel=2,
            )
            _KERNEL.append(None)
            return None
        _KERNEL.append(_compiled_steps)
    if _KERNEL[0] is None and loop == "compiled":
        raise ImportError("the compiled step loop is unavailable (see the warning given before)")
    return _KERNEL[0]


def _run_compiled(
    kernel: Any,
    inputs: np.ndarray,
    order: np.ndarray,
    starts: np.ndarray,
    lengths: np.ndarray,
    weights: tuple[np.ndarray, np.ndarray, np.ndarray],
    a: float,
    X: np.ndarray,
    out: np.ndarray,
    activation: str,
) -> np.ndarray:
    """:func:`run_series` by the compiled loop (``X``: the start states in the order of ``order``)."""
    target = out if out.flags.c_contiguous and out.dtype == np.float64 else np.array(out, dtype=np.float64)
    kernel.steps(
        np.ascontiguousarray(inputs, dtype=np.float64),
        starts,
        lengths,
        np.ascontiguousarray(np.asarray(weights[0], dtype=np.float64).T),
        np.ascontiguousarray(weights[1], dtype=np.float64),
        np.ascontiguousarray(weights[2], dtype=np.float64),
        float(a),
        activation,
        X,
        target,
    )
    if target is not out:
        out[...] = target
    finals = np.empty_like(X)
    finals[order] = X
    return finals


def _blocks(lengths: np.ndarray, size: int) -> list[tuple[int, int, int]]:
    """``(first step, stop step, series running)`` of every block: the number running is constant within a block,
    and a block holds at most ``size`` rows (at least one step).  ``lengths`` sorted decreasing."""
    out: list[tuple[int, int, int]] = []
    stops = np.unique(lengths)  # the steps at which series end
    t0 = 0
    for stop in stops.tolist():
        if stop <= t0:
            continue
        k = int(np.count_nonzero(lengths >= stop))
        step = max(1, size // k)
        out.extend((t, min(t + step, stop), k) for t in range(t0, stop, step))
        t0 = stop
    return out


def _steps(Z: np.ndarray, X: np.ndarray, WT: np.ndarray, a: float, activation: str = "tanh") -> np.ndarray:
    """Run the steps of one block in place: ``Z`` (steps, k, units) holds their input terms on entry and
    their states on return; ``X`` (k, units) is the state before the block.  Returns the last state (a view of ``Z``)."""
    dot, add, tanh, multiply = (
        np.dot,
        np.add,
        np.tanh,
        np.multiply,
    )  # bound once, positional out: fewer lookups per step
    other = None if activation == "tanh" else ACTIVATIONS[activation]
    tmp = np.empty_like(X)
    single = X.shape[0] == 1  # one series: a GEMV
    for C in Z:
        if single:
            dot(X[0], WT, tmp[0])
        else:
            dot(X, WT, tmp)
        add(C, tmp, C)
        if other is None:
            tanh(C, C)
        else:
            other(C)
        if a != 1.0:
            multiply(C, a, C)
            multiply(X, 1.0 - a, tmp)
            add(C, tmp, C)
        X = C
    return X
