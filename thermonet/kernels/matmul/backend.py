"""Which library the kernels' matrix products use: Intel MKL, NumPy's ``np.dot`` or
thermonet's own register-blocked products (:mod:`thermonet.kernels.matmul.gemm`).

``THERMONET_BLAS`` decides: ``mkl``, ``numpy`` (or ``openblas``), ``own`` force a backend;
``auto`` (the default, also when unset) takes the fastest one on this machine, measured once and
cached (:mod:`~thermonet.kernels.matmul.calibration`; MKL only if it is installed). The choice
is made once per process, when :data:`BACKEND` is first read: when a kernel that calls a
product is compiled or loaded (importing the kernels does not read it, except that
``THERMONET_BLAS=mkl`` is checked then), and it is compiled into those kernels
(:mod:`~thermonet.kernels.matmul.blas` has the products; :mod:`thermonet.kernels.jit` records
the backend in their cache entries). Until then :func:`pin` may fix it, which a resumed run
uses to keep its checkpoint's backend. This module needs no Numba, so both can import it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import sys
import threading
import warnings
from typing import Any

#: LLVM symbol names of the MKL products (registered when MKL is used)
SYM_D = "thermonet_blas_dgemm"
SYM_S = "thermonet_blas_sgemm"
#: LLVM symbol names of thermonet's own products (registered when that backend is used)
SYM_OWN = "thermonet_own_dgemm"
SYM_OWN32 = "thermonet_own_sgemm"

#: values of ``THERMONET_BLAS`` (``openblas`` is accepted for ``numpy``)
CHOICES = ("auto", "mkl", "numpy", "own")
_MKL_THREADING_SEQUENTIAL = 1
_MKL_CBWR_STRICT = 0x10000

_lock = threading.RLock()
_chosen: dict[str, Any] | None = None   # the process's choice, once made
_pinned: tuple[str, str] | None = None  # (backend, why) fixed by pin() before the choice


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


_mkl: tuple[ctypes.CDLL | None, str] | None = None


def load_mkl() -> tuple[ctypes.CDLL | None, str]:
    """Load and configure MKL once; return ``(library or None, why not)``."""
    global _mkl
    if _mkl is None:
        _mkl = _load_mkl()
    return _mkl


def _load_mkl() -> tuple[ctypes.CDLL | None, str]:
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
        lib.dgemm  # noqa: B018
    except AttributeError as exc:
        return None, f"{path} is not a usable MKL runtime ({exc}); using np.dot"
    return lib, ""


def mkl_version(lib: ctypes.CDLL) -> str:
    """MKL's version string (``MKL_Get_Version_String``)."""
    buf = ctypes.create_string_buffer(256)
    try:
        lib.MKL_Get_Version_String(buf, ctypes.c_int(len(buf)))
    except AttributeError:
        return ""
    return buf.value.decode(errors="replace").strip()


def requested() -> str:
    """``THERMONET_BLAS`` as one of :data:`CHOICES` (unset: ``auto``); raises RuntimeError
    with a one-line message for anything else."""
    want = os.environ.get("THERMONET_BLAS", "auto").strip().lower() or "auto"
    if want == "openblas":
        want = "numpy"
    if want not in CHOICES:
        raise RuntimeError(
            f"THERMONET_BLAS={want!r}; expected one of {', '.join(CHOICES)} or openblas "
            "(unset it for the measured choice)")
    return want


def candidates() -> dict[str, Any]:
    """The backends that can run here, name -> ``dgemm`` callable (for the measurement)."""
    from thermonet.kernels.matmul import calibration

    out: dict[str, Any] = {"numpy": calibration.numpy_dgemm()}
    lib, _ = load_mkl()
    if lib is not None:
        out["mkl"] = ctypes.cast(lib.dgemm, calibration.DGEMM)
    return out   # "own" is timed in a process of its own (calibration.measure_own)


def calibrate(force: bool = False) -> dict[str, Any]:
    """The measured choice for this machine (cached; ``force`` measures again), whatever
    ``THERMONET_BLAS`` says: see :func:`thermonet.kernels.matmul.calibration.calibrate`."""
    from thermonet.kernels.matmul import calibration

    lib, _ = load_mkl()
    names = ("numpy", "own") if lib is None else ("numpy", "mkl", "own")
    return calibration.calibrate(names, candidates,
                                 mkl_version(lib) if lib is not None else "", force=force)


def _select() -> dict[str, Any]:
    """The choice: ``{"backend", "library", "reason", "how", "rates"}``; registers MKL's
    symbols with LLVM if MKL is chosen."""
    if _pinned is not None:
        want, why = _pinned
        how = "pinned"
    else:
        want = requested()
        why = f"THERMONET_BLAS={want}"
        how = "override"
    rates: dict[str, Any] = {}
    if want in ("numpy", "own"):
        return {"backend": want, "library": "", "reason": why, "how": how, "rates": rates}
    lib, why_not = load_mkl()
    if lib is None and want == "mkl":
        raise RuntimeError(f"{why} but {why_not}; install the 'mkl' package or "
                           "unset THERMONET_BLAS")
    if want == "auto":
        from thermonet.kernels.matmul import calibration

        try:
            record = calibrate()
        except Exception as err:     # a measurement that fails must not stop the kernels
            why = f"the measurement failed ({type(err).__name__}: {err}); using np.dot"
            warnings.warn(why, RuntimeWarning, stacklevel=2)
            return {"backend": "numpy", "library": "", "reason": why, "how": "fallback",
                    "rates": rates}
        want, how, rates = record["backend"], record["how"], record["rates"]
        why = (f"{'measured' if how == 'measured' else 'measured earlier'} on this machine: "
               f"{calibration.describe(record)} on the M(3) block products")
    if want in ("numpy", "own"):
        return {"backend": want, "library": "", "reason": why, "how": how, "rates": rates}
    assert lib is not None   # only MKL is left, and calibrate() measures it only if it loads
    import llvmlite.binding as llb

    llb.add_symbol(SYM_D, ctypes.cast(lib.cblas_dgemm, ctypes.c_void_p).value)
    llb.add_symbol(SYM_S, ctypes.cast(lib.cblas_sgemm, ctypes.c_void_p).value)
    return {"backend": "mkl", "library": lib._name, "reason": why, "how": how, "rates": rates}


def choice() -> dict[str, Any]:
    """The process's choice (made on the first call): ``backend`` (``"mkl"``, ``"numpy"`` or
    ``"own"``), ``library`` (MKL's path or ""), ``reason`` (one line: why), ``how``
    (``measured``, ``cached``, ``override``, ``pinned`` or ``fallback``)
    and ``rates``
    (the measurement behind an automatic choice, else empty)."""
    global _chosen
    with _lock:
        if _chosen is None:
            _chosen = _select()
        return dict(_chosen)


def chosen() -> bool:
    """Whether the process's backend is fixed already (a kernel that calls a product compiled
    or loaded, or :func:`choice` called)."""
    return _chosen is not None


def pin(backend: str, why: str) -> bool:
    """Use ``backend`` in this process if nothing has chosen one yet and ``THERMONET_BLAS``
    asks for ``auto``; returns whether the process now uses ``backend``."""
    global _pinned
    if backend not in ("mkl", "numpy", "own"):
        return False
    try:
        auto = requested() == "auto"
    except RuntimeError:
        return False                  # the one-line error comes when the kernels load
    with _lock:
        if _chosen is None and auto and (backend != "mkl" or load_mkl()[0] is not None):
            _pinned = (backend, why)
    return choice()["backend"] == backend


def info() -> dict[str, str]:
    """The backend in use, its library and why (benchmarks and ``thermonet`` print this)."""
    c = choice()
    out = {"blas_backend": c["backend"]}
    if c["library"]:
        out["blas_library"] = c["library"]
    if c["reason"]:
        out["blas_note"] = c["reason"]
    return out


def __getattr__(name: str) -> Any:
    # BACKEND, LIBRARY and REASON are read, not computed, at import: the choice may measure
    if name == "BACKEND":
        return choice()["backend"]
    if name == "LIBRARY":
        return choice()["library"]
    if name == "REASON":
        return choice()["reason"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
