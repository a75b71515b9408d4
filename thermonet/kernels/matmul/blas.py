"""The matrix products of the kernels: Intel MKL, NumPy's ``np.dot`` or thermonet's own,
whichever is fastest here.

On the skinny shapes of the MLP kernels ((rows x 256)(256 x 40), the 40 x 40 layers) MKL's
``dgemm`` can be faster than the OpenBLAS that Numba's ``np.dot`` calls, or slower, depending on
the CPU, and thermonet's own register-blocked products (:mod:`thermonet.kernels.matmul.gemm`) can be
faster than both (docs/performance.md); the products are most of a gradient's cost. So
(:mod:`thermonet.kernels.matmul.backend`):

* ``THERMONET_BLAS=auto`` (the default): the fastest on this machine of ``np.dot``, thermonet's
  own products and, if it can be loaded (``pip install thermonet[mkl]``, i.e. the ``mkl``
  wheel from PyPI), MKL, measured once on the kernels' own products and cached
  (:mod:`thermonet.kernels.matmul.calibration`).
* ``THERMONET_BLAS=mkl``: use MKL; importing the kernels fails with a one-line message if it
  cannot be loaded.
* ``THERMONET_BLAS=numpy`` (or ``openblas``): always ``np.dot`` (SciPy's OpenBLAS under Numba).
* ``THERMONET_BLAS=own``: thermonet's own products (float64 and float32).

MKL is used in its *sequential* threading layer (every call on the calling thread: the parallel
kernels split the data blocks over Numba's threads themselves) and in strict conditional
numerical reproducibility mode (``MKL_CBWR = <the CPU's branch>,STRICT``), so a product's
result does not depend on the alignment of its operands: the serial and threaded kernels stay
bitwise identical and a resumed run repeats its arithmetic exactly. If another library loaded
MKL first with a threaded layer, thermonet leaves it alone and uses ``np.dot``
(:data:`REASON` says so). thermonet's own products give the same bits on every x86-64 CPU.

The backends round differently (results agree to ~1e-13 relative, not bitwise), so the
backend is part of a run's provenance (:func:`info`) and of the cache entry of every kernel
that calls a product (:mod:`thermonet.kernels.jit`). Kernels read :func:`gemm` and
:func:`gemm_acc` as attributes of this module (``blas.gemm``) when they are typed, which
chooses the backend then: importing the kernels does not, so a run whose kernels call no
product never measures it.

The kernels call :func:`gemm` with C-contiguous 2-D operands (``c = op(a) @ op(b)``), and
:func:`gemm_acc` (``c += alpha * op(a) @ op(b)``) where a gradient goes straight into the
momenta (:func:`thermonet.kernels.mlp.loss_and_kick`); MKL is reached through a symbol
registered with LLVM, which keeps the kernels cacheable.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

import llvmlite.binding as llb
import numpy as np
from numba import types
from numba.extending import overload

from thermonet.kernels import jit
from thermonet.kernels.jit import kernel, lazy_symbol
from thermonet.kernels.matmul import backend
from thermonet.kernels.matmul import gemm as own
from thermonet.kernels.matmul.backend import (
    SYM_D,
    SYM_OWN,
    SYM_OWN32,
    SYM_S,
    info,
)

__all__ = ["info"]   # and, read when first used (__getattr__): BACKEND, LIBRARY, REASON, gemm,
#   gemm_acc


_i32 = types.int32
_sig_d = types.void(_i32, _i32, _i32, _i32, _i32, _i32, types.float64, types.intp, _i32,
                    types.intp, _i32, types.float64, types.intp, _i32)
_sig_s = types.void(_i32, _i32, _i32, _i32, _i32, _i32, types.float32, types.intp, _i32,
                    types.intp, _i32, types.float32, types.intp, _i32)
_dgemm = types.ExternalFunction(SYM_D, _sig_d)
_sgemm = types.ExternalFunction(SYM_S, _sig_s)
_ROW_MAJOR = 101
_NO_TRANS = 111
_TRANS = 112


@kernel
def _gemm_numpy(ta, tb, a, b, c):
    a = np.ascontiguousarray(a)      # no copy for the C-contiguous operands of the kernels
    b = np.ascontiguousarray(b)
    if ta:
        if tb:
            np.dot(a.T, b.T, c)
        else:
            np.dot(a.T, b, c)
    elif tb:
        np.dot(a, b.T, c)
    else:
        np.dot(a, b, c)


@kernel
def _unit_strides(a, b, c):
    s = c.itemsize
    return not (a.strides[1] != s or b.strides[1] != s or c.strides[1] != s
                or a.strides[0] % s or b.strides[0] % s or c.strides[0] % s)


@kernel
def _mkl_product(ta, tb, a, b, c):
    """``c = op(a) @ op(b)`` by MKL, for operands with unit stride along their last axis."""
    s = c.itemsize
    m, n = c.shape
    k = a.shape[0] if ta else a.shape[1]
    if m == 0 or n == 0:
        return
    if k == 0:
        c[:] = 0
        return
    lda = a.strides[0] // s
    ldb = b.strides[0] // s
    ldc = c.strides[0] // s
    op_a = _TRANS if ta else _NO_TRANS
    op_b = _TRANS if tb else _NO_TRANS
    if s == 4:
        _sgemm(_ROW_MAJOR, op_a, op_b, m, n, k, np.float32(1.0), a.ctypes.data, lda,
               b.ctypes.data, ldb, np.float32(0.0), c.ctypes.data, ldc)
    else:
        _dgemm(_ROW_MAJOR, op_a, op_b, m, n, k, 1.0, a.ctypes.data, lda, b.ctypes.data, ldb,
               0.0, c.ctypes.data, ldc)


@kernel
def _mkl_or_numpy(ta, tb, a, b, c):
    if _unit_strides(a, b, c):
        _mkl_product(ta, tb, a, b, c)
    else:
        _gemm_numpy(ta, tb, a, b, c)


def _mkl_by_layout(ta, tb, a, b, c):
    """Resolved when a kernel is compiled (below): C-contiguous operands, which is what the
    kernels pass, go straight to MKL, so the ``np.dot`` fallback for strided operands is not
    compiled into them (about a second of a cold start, docs/performance.md)."""


@overload(_mkl_by_layout)
def _mkl_by_layout_typed(ta, tb, a, b, c):
    if all(getattr(x, "layout", "") == "C" for x in (a, b, c)):
        return lambda ta, tb, a, b, c: _mkl_product(ta, tb, a, b, c)
    return lambda ta, tb, a, b, c: _mkl_or_numpy(ta, tb, a, b, c)


@kernel
def _gemm_mkl(ta, tb, a, b, c):
    _mkl_by_layout(ta, tb, a, b, c)


@kernel
def _gemm_acc_numpy(ta, tb, a, b, c, alpha):
    t = np.empty(c.shape, a.dtype)
    _gemm_numpy(ta, tb, a, b, t)
    m, n = c.shape
    for i in range(m):
        for j in range(n):
            c[i, j] = c[i, j] + alpha * t[i, j]


@kernel
def _mkl_acc(ta, tb, a, b, c, alpha):
    """``c += alpha * op(a) @ op(b)`` by MKL (float64, unit stride along the last axis)."""
    s = c.itemsize
    m, n = c.shape
    k = a.shape[0] if ta else a.shape[1]
    if m == 0 or n == 0 or k == 0:
        return                      # an empty product adds nothing
    _dgemm(_ROW_MAJOR, _TRANS if ta else _NO_TRANS, _TRANS if tb else _NO_TRANS, m, n, k,
           alpha, a.ctypes.data, a.strides[0] // s, b.ctypes.data, b.strides[0] // s, 1.0,
           c.ctypes.data, c.strides[0] // s)


@kernel
def _mkl_acc_or_numpy(ta, tb, a, b, c, alpha):
    if c.itemsize == 8 and _unit_strides(a, b, c):
        _mkl_acc(ta, tb, a, b, c, alpha)
    else:
        _gemm_acc_numpy(ta, tb, a, b, c, alpha)


def _mkl_acc_by_layout(ta, tb, a, b, c, alpha):
    """As :func:`_mkl_by_layout`, for :func:`gemm_acc` (float64 only goes to MKL)."""


@overload(_mkl_acc_by_layout)
def _mkl_acc_by_layout_typed(ta, tb, a, b, c, alpha):
    if all(getattr(x, "layout", "") == "C" and getattr(x, "dtype", None) == types.float64
           for x in (a, b, c)):
        return lambda ta, tb, a, b, c, alpha: _mkl_acc(ta, tb, a, b, c, alpha)
    return lambda ta, tb, a, b, c, alpha: _mkl_acc_or_numpy(ta, tb, a, b, c, alpha)


@kernel
def _gemm_acc_mkl(ta, tb, a, b, c, alpha):
    _mkl_acc_by_layout(ta, tb, a, b, c, alpha)


_own_dgemm = types.ExternalFunction(SYM_OWN, own.C_SIGNATURE)
_own_sgemm = types.ExternalFunction(SYM_OWN32, own.C_SIGNATURE32)
_own_lock = threading.Lock()
_own_symbols = {SYM_OWN: "float64", SYM_OWN32: "float32"}


def _register_own(symbol: str) -> None:
    """Compile (or load) the own products behind ``symbol`` and register it, once: only a
    kernel that calls them needs them (:func:`thermonet.kernels.jit.lazy_symbol`), and each
    dtype's products are about 2 CPU s of a cold start (a run of the shallow regression
    kernel uses neither, a float64 run not the float32 ones)."""
    with _own_lock:
        dtype = _own_symbols.pop(symbol, None)
        if dtype is not None:
            llb.add_symbol(symbol, own.c_product_address(dtype))


# a bad THERMONET_BLAS, or MKL asked for and missing, fails at import in one line; the automatic
# choice waits for a kernel that calls a product (it may measure)
if backend.requested() == "mkl":
    backend.choice()

lazy_symbol(SYM_OWN, functools.partial(_register_own, SYM_OWN))
lazy_symbol(SYM_OWN32, functools.partial(_register_own, SYM_OWN32))


# the C-callable product's int64 arguments (gemm.C_SIGNATURE), built here rather than in a
# helper that takes the arrays, whose reference counts it would update at every product
@kernel
def _own_call(ta, tb, a, b, c, alpha, accumulate):
    args = (np.int64(ta), np.int64(tb), np.int64(accumulate), np.int64(c.shape[0]),
            np.int64(c.shape[1]), np.int64(a.shape[0] if ta else a.shape[1]),
            np.int64(a.ctypes.data), np.int64(a.strides[0] // 8), np.int64(b.ctypes.data),
            np.int64(b.strides[0] // 8), np.int64(c.ctypes.data), np.int64(c.strides[0] // 8))
    _own_dgemm(own.argument_block(args), alpha)


@kernel
def _own_call32(ta, tb, a, b, c, alpha, accumulate):
    args = (np.int64(ta), np.int64(tb), np.int64(accumulate), np.int64(c.shape[0]),
            np.int64(c.shape[1]), np.int64(a.shape[0] if ta else a.shape[1]),
            np.int64(a.ctypes.data), np.int64(a.strides[0] // 4), np.int64(b.ctypes.data),
            np.int64(b.strides[0] // 4), np.int64(c.ctypes.data), np.int64(c.strides[0] // 4))
    _own_sgemm(own.argument_block(args), np.float32(alpha))


def _own_by_type(ta, tb, a, b, c):
    """Resolved when a kernel is compiled: C-contiguous float64 or float32 operands go to
    thermonet's own products (:mod:`thermonet.kernels.matmul.gemm`, through the symbols registered
    as they are typed), anything else to ``np.dot``."""


def _own_kind(a, b, c):
    for dt in (types.float64, types.float32):
        if all(getattr(x, "layout", "") == "C" and getattr(x, "dtype", None) == dt
               for x in (a, b, c)):
            return dt
    return None


@overload(_own_by_type)
def _own_by_type_typed(ta, tb, a, b, c):
    kind = _own_kind(a, b, c)
    if kind == types.float64:
        _register_own(SYM_OWN)       # before the kernel being typed is linked
        return lambda ta, tb, a, b, c: _own_call(ta, tb, a, b, c, 1.0, 0)
    if kind == types.float32:
        _register_own(SYM_OWN32)
        return lambda ta, tb, a, b, c: _own_call32(ta, tb, a, b, c, 1.0, 0)
    return lambda ta, tb, a, b, c: _gemm_numpy(ta, tb, a, b, c)


@kernel
def _gemm_own(ta, tb, a, b, c):
    _own_by_type(ta, tb, a, b, c)


def _own_acc_by_type(ta, tb, a, b, c, alpha):
    """As :func:`_own_by_type`, for :func:`gemm_acc` (float64 only, as with MKL)."""


@overload(_own_acc_by_type)
def _own_acc_by_type_typed(ta, tb, a, b, c, alpha):
    if _own_kind(a, b, c) == types.float64:
        _register_own(SYM_OWN)
        return lambda ta, tb, a, b, c, alpha: _own_call(ta, tb, a, b, c, alpha, 1)
    return lambda ta, tb, a, b, c, alpha: _gemm_acc_numpy(ta, tb, a, b, c, alpha)


@kernel
def _gemm_acc_own(ta, tb, a, b, c, alpha):
    _own_acc_by_type(ta, tb, a, b, c, alpha)


_GEMM = {"mkl": _gemm_mkl, "numpy": _gemm_numpy, "own": _gemm_own}
_GEMM_ACC = {"mkl": _gemm_acc_mkl, "numpy": _gemm_acc_numpy, "own": _gemm_acc_own}

# ``gemm(ta, tb, a, b, c)``: ``c = op(a) @ op(b)`` with ``op(x) = x.T if t else x``, for
# float64 or float32 2-D arrays of one dtype with unit stride along their last axis.
#
# ``gemm_acc(ta, tb, a, b, c, alpha)``: ``c += alpha * op(a) @ op(b)`` (float64; other
# dtypes through a temporary). With ``np.dot`` the product is rounded first and then
# ``c + alpha * product`` is formed element by element, exactly as a separate update would;
# MKL's ``beta = 1`` update rounds differently (a few ulp), which is the price of not writing
# the product to memory at all.
#
# Both are the backend's kernel, looked up when read (module ``__getattr__``).


def __getattr__(name: str) -> Any:
    # the backend is chosen when first read, which a kernel calling a product does as it is
    # typed (jit.compiled_backend records it in that kernel's cache entry)
    if name == "gemm":
        return _GEMM[jit.compiled_backend()]
    if name == "gemm_acc":
        return _GEMM_ACC[jit.compiled_backend()]
    if name in ("BACKEND", "LIBRARY", "REASON"):
        return getattr(backend, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
