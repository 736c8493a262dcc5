"""The reservoir's step loop compiled by numba: per step one BLAS GEMM, then one fused loop.

Per step of the ``k`` series still running (sorted longest first, as in
:mod:`streamridge.features._lockstep`): ``tmp = X[:k] @ W'`` by BLAS (numba's ``np.dot``
calls SciPy's), then, in one loop over the ``k x units`` values, the input term
``W_in u + b``, the activation, the leak and the writes of the new state to ``X`` and to
the output row.  The NumPy loop makes five to seven passes over the states per step,
each a call from Python; here the values stay in registers.  The loop holds no GIL
(``nogil``): threads of the pass step their lane groups in parallel.

The tanh is our own, vectorizable (the C library's is one value at a time): with
``y = -2|x|`` (|x| clamped to 20, where tanh is 1 in float64) reduced to
``y = k ln 2 + r``, |r| <= ln(2)/2, Cephes' rational form of the exponential
``e^r = (Q(r^2) + r P(r^2)) / (Q(r^2) - r P(r^2))`` folds with ``(1 - e^y) / (1 + e^y)``
into one division::

    tanh|x| = (Q (1 - s) - r P (1 + s)) / (Q (1 + s) - r P (1 - s)),   s = 2^k

which keeps full relative accuracy for small |x| (s = 1: ``-r P / Q``): within 4 ulp of
the exact tanh, an absolute error below 4.5e-16 (tests/features/test_compiled_steps.py).
Measured: 0.77 ns a value against NumPy's 1.6-1.7 ns (``scripts/ab_step_loop_parts.py``);
the map at 200 units 1.17-1.19x its own matrix products against the NumPy loop's 1.45-1.56x
(``scripts/bench_esn_step.py``).

numba is imported here only, when a reservoir first runs: ``import streamridge`` and
``streamridge --help`` do not load it.  The compiled code is cached on disk (numba's
cache) after the first run.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit, types
from numba.extending import intrinsic

_LOG2E = 1.4426950408889634
_LN2_HI = 0.693145751953125  # ln 2 = _LN2_HI + _LN2_LO, _LN2_HI exact in 17 bits: k * _LN2_HI is exact
_LN2_LO = 1.42860682030941723212e-6
_P0, _P1, _P2 = 1.26177193074810590878e-4, 3.02994407707441961300e-2, 9.99999999999999999910e-1
_Q0, _Q1, _Q2, _Q3 = (
    3.00198505138664455042e-6,
    2.52448340349684104192e-3,
    2.27265548208155028766e-1,
    2.00000000000000000009e0,
)
_CLAMP = 20.0  # tanh(20) = 1 - 8.5e-18: 1.0 in float64
_OPTS: dict[str, Any] = {"fastmath": {"contract"}, "error_model": "numpy", "cache": True}


@intrinsic
def _as_float(typingctx: Any, bits: Any) -> Any:
    """The float64 whose bit pattern is the int64 ``bits`` (a register move, vectorizable)."""
    sig = types.float64(types.int64)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.bitcast(args[0], context.get_value_type(types.float64))

    return sig, codegen


@njit(inline="always", **_OPTS)
def tanh(x: float) -> float:
    """tanh(x) within 4 ulp, branch-free (see the module docstring); NaN stays NaN, tanh(-0) = -0."""
    ax = abs(x)
    ax = _CLAMP if ax > _CLAMP else ax  # NaN > 20 is False: NaN passes through
    y = -2.0 * ax
    kf = np.floor(y * _LOG2E + 0.5)
    r = y - kf * _LN2_HI
    r = r - kf * _LN2_LO
    rr = r * r
    rp = r * ((_P0 * rr + _P1) * rr + _P2)
    q = ((_Q0 * rr + _Q1) * rr + _Q2) * rr + _Q3
    s: float = _as_float((np.int64(kf) + 1023) << 52)  # type: ignore[call-arg]  # 2^k, k in [-58, 0]
    t = (q * (1.0 - s) - rp * (1.0 + s)) / (q * (1.0 + s) - rp * (1.0 - s))
    return math.copysign(t, x)


@njit(inline="always", **_OPTS)
def _activate(z: float, act: int) -> float:
    """The activation ``act`` of ``z``: 0 tanh, 1 sigmoid, 2 relu, 3 identity (a constant of each entry in
    :data:`_ENTRIES`: the other branches are pruned at compile time)."""
    if act == 0:
        return tanh(z)
    if act == 1:
        return 0.5 * (tanh(0.5 * z) + 1.0)  # the sigmoid as the NumPy loop computes it
    if act == 2:
        return 0.0 if z < 0.0 else z  # NaN stays NaN
    return z


@njit(**_OPTS)
def _values(tmp, k, inputs, starts, t, w_in_t, b, a, act, leaky, X, out):  # type: ignore[no-untyped-def]
    """New states of the ``k`` series at step ``t`` from ``tmp = X[:k] @ W'``, into ``X`` and ``out``."""
    n, n_in = tmp.shape[1], inputs.shape[1]
    c = 1.0 - a
    for i in range(k):
        row = starts[i] + t
        if n_in == 1:  # one or two inputs (the common case): the input term unrolled
            u0 = inputs[row, 0]
            for j in range(n):
                v = _activate(tmp[i, j] + b[j] + u0 * w_in_t[0, j], act)
                if leaky:
                    v = a * v + c * X[i, j]
                X[i, j] = v
                out[row, j] = v
        elif n_in == 2:
            u0, u1 = inputs[row, 0], inputs[row, 1]
            for j in range(n):
                v = _activate(tmp[i, j] + b[j] + u0 * w_in_t[0, j] + u1 * w_in_t[1, j], act)
                if leaky:
                    v = a * v + c * X[i, j]
                X[i, j] = v
                out[row, j] = v
        else:
            z = tmp[i]
            for j in range(n):
                z[j] += b[j]
            for q in range(n_in):
                uq = inputs[row, q]
                for j in range(n):
                    z[j] += uq * w_in_t[q, j]
            for j in range(n):
                v = _activate(z[j], act)
                if leaky:
                    v = a * v + c * X[i, j]
                X[i, j] = v
                out[row, j] = v


@njit(nogil=True, **_OPTS)
def _steps(inputs, starts, lengths, w_in_t, b, WT, a, act, leaky, X, out):  # type: ignore[no-untyped-def]
    n_series = starts.size
    tmp = np.empty((n_series, WT.shape[0]))
    k = n_series
    for t in range(lengths[0] if n_series else 0):
        while k > 0 and lengths[k - 1] <= t:
            k -= 1
        if k == 1:
            np.dot(X[0], WT, tmp[0])  # one series: a GEMV
        else:
            np.dot(X[:k], WT, tmp[:k])
        _values(tmp, k, inputs, starts, t, w_in_t, b, a, act, leaky, X, out)
    return X


# One entry per activation and leak, each calling _steps with them as constants: numba compiles a loop for each
# (typed as literals), without the other activations' branches (3-4 % of the map at 200 units,
# scripts/bench_esn_step.py).  Entries compile on first use; numba.literally would instead raise and
# recompile-check on every call (4 ms a call).
@njit(nogil=True, **_OPTS)
def _tanh(i, s, n, w, b, WT, a, X, out):  # type: ignore[no-untyped-def]
    return _steps(i, s, n, w, b, WT, a, 0, False, X, out)


@njit(nogil=True, **_OPTS)
def _tanh_leaky(i, s, n, w, b, WT, a, X, out):  # type: ignore[no-untyped-def]
    return _steps(i, s, n, w, b, WT, a, 0, True, X, out)


@njit(nogil=True, **_OPTS)
def _sigmoid(i, s, n, w, b, WT, a, X, out):  # type: ignore[no-untyped-def]
    return _steps(i, s, n, w, b, WT, a, 1, False, X, out)


@njit(nogil=True, **_OPTS)
def _sigmoid_leaky(i, s, n, w, b, WT, a, X, out):  # type: ignore[no-untyped-def]
    return _steps(i, s, n, w, b, WT, a, 1, True, X, out)


@njit(nogil=True, **_OPTS)
def _relu(i, s, n, w, b, WT, a, X, out):  # type: ignore[no-untyped-def]
    return _steps(i, s, n, w, b, WT, a, 2, False, X, out)


@njit(nogil=True, **_OPTS)
def _relu_leaky(i, s, n, w, b, WT, a, X, out):  # type: ignore[no-untyped-def]
    return _steps(i, s, n, w, b, WT, a, 2, True, X, out)


@njit(nogil=True, **_OPTS)
def _identity(i, s, n, w, b, WT, a, X, out):  # type: ignore[no-untyped-def]
    return _steps(i, s, n, w, b, WT, a, 3, False, X, out)


@njit(nogil=True, **_OPTS)
def _identity_leaky(i, s, n, w, b, WT, a, X, out):  # type: ignore[no-untyped-def]
    return _steps(i, s, n, w, b, WT, a, 3, True, X, out)


_ENTRIES = {
    ("tanh", False): _tanh,
    ("tanh", True): _tanh_leaky,
    ("sigmoid", False): _sigmoid,
    ("sigmoid", True): _sigmoid_leaky,
    ("relu", False): _relu,
    ("relu", True): _relu_leaky,
    ("identity", False): _identity,
    ("identity", True): _identity_leaky,
}


def steps(
    inputs: np.ndarray,
    starts: np.ndarray,
    lengths: np.ndarray,
    w_in_t: np.ndarray,
    b: np.ndarray,
    WT: np.ndarray,
    a: float,
    activation: str,
    X: np.ndarray,
    out: np.ndarray,
) -> np.ndarray:
    """Run the series ``inputs[starts[i] : starts[i] + lengths[i]]`` (``lengths`` decreasing) from the states ``X``
    (updated in place to the final states), writing every state to its row of ``out`` (all C-contiguous float64;
    ``w_in_t`` is W_in', ``WT`` is W').  The loop of ``activation`` (a name of ``_lockstep.ACTIVATIONS``) and of whether
    the leak rate ``a`` is 1, compiled on first use."""
    return _ENTRIES[(activation, a != 1.0)](inputs, starts, lengths, w_in_t, b, WT, a, X, out)  # type: ignore[no-any-return]
