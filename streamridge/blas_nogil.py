"""In-place BLAS updates that release the GIL, for the pass's worker threads.

``scipy.linalg.blas`` (f2py wrappers) holds the GIL for the whole call: two
worker threads of the pass, each running its partition's ``dsyrk``, ran one
after the other (measured: 2 threads x the same work took as long as 2x one
thread, where NumPy's matmul and the calls below took half).  This module
calls the same BLAS routines -- the function pointers scipy exports for Cython
in ``scipy.linalg.cython_blas.__pyx_capi__``, the way numba does -- through
:mod:`ctypes`, which releases the GIL during a foreign call.  Where those
pointers cannot be had, the updates fall back to NumPy's matmul (which also
releases the GIL) plus an addition.

Two updates serve the pass's kernel (:mod:`streamridge.kernel`) and the solve stage's forms (:mod:`streamridge.parts`):

* :func:`syrk_upper` -- ``C += A' A`` on the upper triangle of a Fortran-ordered ``C``;
* :func:`gemm_tn` -- ``C += alpha B' A`` for a Fortran-ordered ``C``.

One more serves the reservoir's step loop (:mod:`streamridge.features._lockstep`), which calls
it once per time step on small arrays, so its arguments are bound once and each call passes
two addresses only:

* :func:`axpy_update` -- ``y += alpha x`` over n contiguous values.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

_P = ctypes.c_void_p
_ONE = ctypes.c_double(1.0)
_UPPER, _NOTRANS, _TRANS = b"U", b"N", b"T"


def _pointer(name: str) -> Any:
    """The C function pointer scipy exports for ``name`` (None when unavailable)."""
    try:
        from scipy.linalg import cython_blas

        capsule = cython_blas.__pyx_capi__[name]  # type: ignore[attr-defined]
        get_name = ctypes.pythonapi.PyCapsule_GetName
        get_name.restype = ctypes.c_char_p
        get_name.argtypes = [ctypes.py_object]
        get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
        get_pointer.restype = ctypes.c_void_p
        get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
        address = get_pointer(capsule, get_name(capsule))
    except Exception:  # pragma: no cover - a scipy without Cython BLAS pointers
        return None
    return address or None


def _load(name: str, n_args: int) -> Callable[..., None] | None:
    address = _pointer(name)
    # Fortran BLAS: every argument by reference
    return None if address is None else ctypes.CFUNCTYPE(None, *([_P] * n_args))(address)


_dsyrk, _dgemm, _daxpy = _load("dsyrk", 10), _load("dgemm", 13), _load("daxpy", 6)


def _f64(*arrays: np.ndarray) -> bool:
    return all(a.dtype == np.float64 for a in arrays)


def _ref(v: int) -> ctypes.c_int:
    return ctypes.c_int(v)


def syrk_upper(A: np.ndarray, C: np.ndarray) -> None:
    """``C += A' A`` on the upper triangle of ``C``, in place, without holding the GIL.

    Parameters
    ----------
    A : C-contiguous float64 array of shape (k, n)
    C : Fortran-contiguous float64 array of shape (n, n)
        Only its upper triangle is updated; the strict lower one is left as it was.
    """
    k, n = A.shape
    if k == 0:
        return
    if _dsyrk is None or not (A.flags.c_contiguous and C.flags.f_contiguous and _f64(A, C)):
        C += np.triu(A.T @ A)
        return
    ni, ki = _ref(n), _ref(k)
    # A (C order, k x n) is A' in Fortran order (n x k, leading dimension n): C += A' (A')'
    _dsyrk(_UPPER, _NOTRANS, ctypes.byref(ni), ctypes.byref(ki), ctypes.byref(_ONE), A.ctypes.data,
           ctypes.byref(ni), ctypes.byref(_ONE), C.ctypes.data, ctypes.byref(ni))


def gemm_tn(B: np.ndarray, A: np.ndarray, C: np.ndarray, alpha: float = 1.0) -> None:
    """``C += alpha B' A``, in place, without holding the GIL.

    Parameters
    ----------
    B : C-contiguous float64 array of shape (k, t)
    A : C-contiguous float64 array of shape (k, n)
    C : Fortran-contiguous float64 array of shape (t, n)
    alpha : float
    """
    k, t = B.shape
    n = A.shape[1]
    if k == 0:
        return
    if _dgemm is None or not (B.flags.c_contiguous and A.flags.c_contiguous and C.flags.f_contiguous and _f64(A, B, C)):
        C += alpha * (B.T @ A)
        return
    ti, ni, ki = _ref(t), _ref(n), _ref(k)
    a = ctypes.c_double(alpha)
    # Fortran views: B' is (t x k, ld t), A' is (n x k, ld n); C = B' (A')' : op(a) = B', op(b) = (A')'
    _dgemm(_NOTRANS, _TRANS, ctypes.byref(ti), ctypes.byref(ni), ctypes.byref(ki), ctypes.byref(a),
           B.ctypes.data, ctypes.byref(ti), A.ctypes.data, ctypes.byref(ni), ctypes.byref(_ONE), C.ctypes.data,
           ctypes.byref(ti))


def _bound(*values: Any) -> tuple[list[Any], list[ctypes.c_void_p]]:
    """ctypes scalars for ``values`` (int -> c_int, float -> c_double, bytes -> char) and their addresses."""
    keep = [ctypes.c_int(v) if isinstance(v, int) else ctypes.c_double(v) if isinstance(v, float) else ctypes.c_char_p(v) for v in values]
    refs = [ctypes.c_void_p(ctypes.cast(c, ctypes.c_void_p).value) if isinstance(c, ctypes.c_char_p) else ctypes.c_void_p(ctypes.addressof(c)) for c in keep]
    return keep, refs


def axpy_update(n: int, alpha: float) -> Callable[[int, int], None] | None:
    """A function ``f(x, y)`` doing ``y += alpha x`` over ``n`` contiguous float64 values given by address
    (None where the BLAS pointer is unavailable)."""
    if _daxpy is None:
        return None
    keep, (ni, a, inc) = _bound(n, float(alpha), 1)
    axpy = _daxpy

    def update(x: int, y: int) -> None:
        axpy(ni, a, x, inc, y, inc)

    update.keep = keep  # type: ignore[attr-defined]
    return update
