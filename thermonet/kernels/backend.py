"""Which library the kernels' matrix products use: Intel MKL when it loads, else ``np.dot``.

The choice (``THERMONET_BLAS``: ``auto``, ``mkl``, ``numpy``/``openblas``) is made once per
process, when this module is first imported, and is compiled into the kernels
(:mod:`thermonet.kernels.blas` has the products; :mod:`thermonet.kernels.jit` stamps the cache
with the backend). This module needs no Numba, so both can import it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import sys

#: LLVM symbol names of the MKL products (registered when MKL is used)
SYM_D = "thermonet_blas_dgemm"
SYM_S = "thermonet_blas_sgemm"

_CHOICES = ("auto", "mkl", "numpy")
_MKL_THREADING_SEQUENTIAL = 1
_MKL_CBWR_STRICT = 0x10000


def _candidates() -> list[str]:
    paths: list[str] = []
    env = os.environ.get("THERMONET_MKL_LIB")
    if env:
        return [env]
    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix)):
        paths += sorted(glob.glob(os.path.join(prefix, "lib", "libmkl_rt.so*")), reverse=True)
        paths += sorted(glob.glob(os.path.join(prefix, "Library", "bin", "mkl_rt*.dll")))
    found = ctypes.util.find_library("mkl_rt")
    if found:
        paths.append(found)
    return paths


def _load_mkl() -> tuple[ctypes.CDLL | None, str]:
    """Load and configure MKL; return ``(library or None, why not)``."""
    tried = _candidates()
    if not tried:
        return None, "MKL is not installed (pip install 'thermonet[mkl]' to use it)"
    errors = []
    for path in tried:
        try:
            lib = ctypes.CDLL(path)
            break
        except OSError as exc:
            errors.append(f"{path}: {exc}")
    else:
        return None, "could not load MKL: " + "; ".join(errors)
    try:
        lib.MKL_Set_Threading_Layer.restype = ctypes.c_int
        layer = lib.MKL_Set_Threading_Layer(_MKL_THREADING_SEQUENTIAL)
        if layer != _MKL_THREADING_SEQUENTIAL:
            return None, (f"MKL was already initialised with threading layer {layer} by another "
                          "library; thermonet needs the sequential layer and uses np.dot")
        branch = lib.mkl_cbwr_get_auto_branch()
        if lib.MKL_CBWR_Set(ctypes.c_int(branch | _MKL_CBWR_STRICT)) != 0:
            return None, "MKL refused strict reproducibility mode (MKL_CBWR); using np.dot"
        lib.cblas_dgemm  # noqa: B018  (AttributeError if this is not a full MKL)
        lib.cblas_sgemm  # noqa: B018
    except AttributeError as exc:
        return None, f"{path} is not a usable MKL runtime ({exc}); using np.dot"
    return lib, ""


def _select() -> tuple[str, str, str]:
    """Return ``(backend, library path, reason)`` and register the MKL symbols if used."""
    want = os.environ.get("THERMONET_BLAS", "auto").strip().lower() or "auto"
    if want == "openblas":
        want = "numpy"
    if want not in _CHOICES:
        raise RuntimeError(
            f"THERMONET_BLAS={want!r}; expected one of {', '.join(_CHOICES)} "
            "(unset it for automatic choice)")
    if want == "numpy":
        return "numpy", "", "THERMONET_BLAS=numpy"
    lib, why = _load_mkl()
    if lib is None:
        if want == "mkl":
            raise RuntimeError(f"THERMONET_BLAS=mkl but {why}; install the 'mkl' package or "
                               "unset THERMONET_BLAS")
        return "numpy", "", why
    import llvmlite.binding as llb

    llb.add_symbol(SYM_D, ctypes.cast(lib.cblas_dgemm, ctypes.c_void_p).value)
    llb.add_symbol(SYM_S, ctypes.cast(lib.cblas_sgemm, ctypes.c_void_p).value)
    return "mkl", lib._name, ""


#: ``"mkl"`` or ``"numpy"``: the backend of the kernels' matrix products in this process
BACKEND, LIBRARY, REASON = _select()


def info() -> dict[str, str]:
    """The backend in use, its library and why MKL is not used (benchmarks print this)."""
    out = {"blas_backend": BACKEND}
    if LIBRARY:
        out["blas_library"] = LIBRARY
    if REASON:
        out["blas_note"] = REASON
    return out
