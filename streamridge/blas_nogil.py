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

Two updates serve the pass's kernel (:mod:`streamridge.stats.kernel`) and the solve stage's forms (:mod:`streamridge.forms.parts`):

* :func:`syrk_upper` -- ``C += A' A`` on the upper triangle of a Fortran-ordered ``C``;
* :func:`gemm_tn` -- ``C += alpha B' A`` for a Fortran-ordered ``C``.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

_P = ctypes.c_void_p
_ONE = ctypes.c_double(1.0)
_UPPER, _NOTRANS, _TRANS = b"U", b"N", b"T"


def _cython_blas() -> Any:
    """scipy's ``scipy.linalg.cython_blas`` extension module, without importing ``scipy.linalg`` if possible.

    ``import scipy.linalg`` costs 0.15-0.2 s of CPU (scipy's bundled
    ``array_api_compat`` pulls in ``numpy.f2py``, ``numpy.ma``, ``numpy.testing``),
    paid by every worker process of a ``local:N`` cluster before its first task,
    on the critical path of a short pass; loading the extension file itself
    takes ~2 ms.  The loaded module is not registered in ``sys.modules``: a
    later ``import scipy.linalg`` loads it as usual (the shared library is
    mapped once, so the function pointers are the same).  Falls back to the
    normal import where the file cannot be found or loaded.
    """
    import sys

    if "scipy.linalg" not in sys.modules:
        try:
            import importlib.machinery
            import importlib.util
            import os

            import scipy

            folder = os.path.join(os.path.dirname(str(scipy.__file__)), "linalg")
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                path = os.path.join(folder, "cython_blas" + suffix)
                if os.path.exists(path):
                    loader = importlib.machinery.ExtensionFileLoader("scipy.linalg.cython_blas", path)
                    spec = importlib.util.spec_from_file_location(
                        "scipy.linalg.cython_blas", path, loader=loader
                    )
                    if spec is None:  # pragma: no cover - a path the loader refuses
                        break
                    module = importlib.util.module_from_spec(spec)
                    loader.exec_module(module)
                    return module
        except Exception:  # pragma: no cover - fall back to the package import below
            pass
    from scipy.linalg import cython_blas

    return cython_blas


def _pointer(name: str) -> Any:
    """The C function pointer scipy exports for ``name`` (None when unavailable)."""
    try:
        cython_blas = _cython_blas()
        capsule = cython_blas.__pyx_capi__[name]
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


def _load() -> tuple[Callable[..., None] | None, Callable[..., None] | None]:
    syrk_address, gemm_address = _pointer("dsyrk"), _pointer("dgemm")
    # Fortran BLAS: every argument by reference
    syrk = None if syrk_address is None else ctypes.CFUNCTYPE(None, *([_P] * 10))(syrk_address)
    gemm = None if gemm_address is None else ctypes.CFUNCTYPE(None, *([_P] * 13))(gemm_address)
    return syrk, gemm


_dsyrk, _dgemm = _load()


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
    _dsyrk(
        _UPPER,
        _NOTRANS,
        ctypes.byref(ni),
        ctypes.byref(ki),
        ctypes.byref(_ONE),
        A.ctypes.data,
        ctypes.byref(ni),
        ctypes.byref(_ONE),
        C.ctypes.data,
        ctypes.byref(ni),
    )


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
    if _dgemm is None or not (
        B.flags.c_contiguous and A.flags.c_contiguous and C.flags.f_contiguous and _f64(A, B, C)
    ):
        C += alpha * (B.T @ A)
        return
    ti, ni, ki = _ref(t), _ref(n), _ref(k)
    a = ctypes.c_double(alpha)
    # Fortran views: B' is (t x k, ld t), A' is (n x k, ld n); C = B' (A')' : op(a) = B', op(b) = (A')'
    _dgemm(
        _NOTRANS,
        _TRANS,
        ctypes.byref(ti),
        ctypes.byref(ni),
        ctypes.byref(ki),
        ctypes.byref(a),
        B.ctypes.data,
        ctypes.byref(ti),
        A.ctypes.data,
        ctypes.byref(ni),
        ctypes.byref(_ONE),
        C.ctypes.data,
        ctypes.byref(ti),
    )
