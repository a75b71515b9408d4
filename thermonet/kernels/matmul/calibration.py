"""Which matrix-product library is fastest here: a short measurement on the kernels' own
products, cached per machine.

The MLP kernels spend most of a gradient in 11 matrix products per block of 128 rows (for
M(3): the 256 -> 40 input layer, the 40 x 40 layers, the 40 -> 10 output layer, forward and
backward). Which library does those fastest depends on the CPU: Intel MKL was 1.2-1.9x faster
than OpenBLAS on an Intel Xeon (AVX-512), OpenBLAS 1.3x faster than MKL on an AMD EPYC
(docs/performance.md). So, unless ``THERMONET_BLAS`` names a backend, the first process on a
machine times exactly those products, in the layouts each backend's kernels use, and keeps the
faster backend:

* each candidate's ``dgemm`` is called through ``ctypes`` with the same arguments (for
  ``numpy``, the SciPy OpenBLAS function Numba's ``np.dot`` calls; for ``mkl``, MKL in the
  sequential, strict-reproducibility mode the kernels use), one thread, on fixed operands;
* the candidates are timed in interleaved rounds for about half a second; each candidate's
  figure is its fastest round (a shared machine only ever adds time);
* thermonet's own products (:mod:`thermonet.kernels.matmul.gemm`) are timed on the same products in
  a process of their own (:func:`measure_own`: compiling them needs the backend that is being
  chosen), from one compiled loop over the block's products, fastest round;
* the winner is the fastest, except that another backend must beat ``np.dot`` by more than
  :data:`MARGIN` (a tie keeps the backend that needs nothing else).

The per-call ``ctypes`` overhead (about a microsecond) is the same for the two libraries, so
it cannot change which of them is faster; the rates printed include it (thermonet's own
products, called from compiled code, have none: about 11 us of a block's 60-200).

The choice is written to ``calibration.json`` in thermonet's cache directory
(:func:`cache_dir`), under a key made of the CPU (model, LLVM name, AVX2/AVX-512F/FMA), the
number of CPUs, and the versions of NumPy, SciPy, Numba, MKL and thermonet: a new CPU or a new
library is measured again. A cache file that cannot be read is measured again with a warning;
one that cannot be written leaves the choice to this process.

A measurement records the machine's load (the 1-minute load average and the number of CPUs,
:func:`machine_load`). One taken on a busy machine (more than :data:`BUSY_LOAD` runnable
processes per CPU) is measured again by the next process that finds the machine quiet (and
only then: on a machine that stays busy it is used, not measured over and over); an entry
without a recorded load counts as busy.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

#: version of the cache file's layout (a new one is measured again)
SCHEMA = 2
#: file name of the cache in :func:`cache_dir`
CACHE_FILE = "calibration.json"
#: MKL is chosen only if it is faster than ``np.dot`` by more than this fraction
MARGIN = 0.02
#: rows per block (``DEFAULT_BLOCK`` of :class:`thermonet.architectures.mlp.MLP`)
ROWS = 128
#: the network the products are taken from: M(3)
WIDTHS = (256, 40, 40, 40, 10)
#: seconds of interleaved timing rounds (after one warm-up round)
BUDGET_S = 0.5

#: a measurement with more runnable processes per CPU than this (1-minute load average / CPUs)
#: was taken on a busy machine: other processes may have slowed one candidate's rounds
BUSY_LOAD = 0.5

_CANDIDATE_ORDER = ("numpy", "mkl", "own")


def products(backend: str, widths: tuple[int, ...] = WIDTHS,
             rows: int = ROWS) -> list[tuple[bool, bool, int, int, int]]:
    """The products of one block, ``(ta, tb, m, n, k)`` with ``C[m, n] = op(A) @ op(B)``
    (row-major operands, as in :func:`thermonet.kernels.mlp.block_loss_and_grad`).

    With ``numpy`` the forward products of the layers above the first use a transposed copy of
    the weights (``tb`` false), as the kernels do for that backend; with ``own`` every layer's
    does.
    """
    out = []
    n_layers = len(widths) - 1
    for layer in range(n_layers):               # forward: z = a_prev @ W.T
        n_in, n_out = widths[layer], widths[layer + 1]
        tb = backend == "mkl" or (backend == "numpy" and layer == 0)
        out.append((False, tb, rows, n_out, n_in))
    for layer in range(n_layers - 1, -1, -1):   # backward
        n_in, n_out = widths[layer], widths[layer + 1]
        out.append((True, False, n_out, n_in, rows))      # dW = dz.T @ a_prev
        if layer > 0:
            out.append((False, False, rows, n_in, n_out))  # da = dz @ W
    return out


def flops(prods: list[tuple[bool, bool, int, int, int]]) -> int:
    """Floating-point operations of a list of products (2 m n k each)."""
    return sum(2 * m * n * k for _, _, m, n, k in prods)


# the candidates' dgemm (Fortran interface: every argument by reference)

_c_int_p = ctypes.POINTER(ctypes.c_int)
_c_dbl_p = ctypes.POINTER(ctypes.c_double)
DGEMM = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_char_p, _c_int_p, _c_int_p, _c_int_p,
                          _c_dbl_p, ctypes.c_void_p, _c_int_p, ctypes.c_void_p, _c_int_p,
                          _c_dbl_p, ctypes.c_void_p, _c_int_p)


def numpy_dgemm() -> Any:
    """SciPy's ``dgemm``: the function Numba's ``np.dot`` calls for float64 products."""
    import scipy.linalg.cython_blas as cython_blas

    capsule = cython_blas.__pyx_capi__["dgemm"]
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype = ctypes.c_char_p
    get_name.argtypes = [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return DGEMM(get_pointer(capsule, get_name(capsule)))


def block_calls(dgemm: Any, prods: list[tuple[bool, bool, int, int, int]],
           rng: np.random.Generator) -> tuple[list[tuple[Any, ...]], list[np.ndarray]]:
    """Argument tuples of ``dgemm`` for ``prods`` on fixed random operands (kept alive)."""
    keep: list[np.ndarray] = []
    calls = []
    one, zero = ctypes.c_double(1.0), ctypes.c_double(0.0)
    for ta, tb, m, n, k in prods:
        a = rng.standard_normal((k, m) if ta else (m, k))
        b = rng.standard_normal((n, k) if tb else (k, n))
        c = np.empty((m, n))
        keep += [a, b, c]
        # row-major C = op(A) op(B) is column-major C.T = op(B).T op(A).T
        calls.append((b"T" if tb else b"N", b"T" if ta else b"N", ctypes.byref(ctypes.c_int(n)),
                      ctypes.byref(ctypes.c_int(m)), ctypes.byref(ctypes.c_int(k)),
                      ctypes.byref(one), b.ctypes.data, ctypes.byref(ctypes.c_int(b.shape[1])),
                      a.ctypes.data, ctypes.byref(ctypes.c_int(a.shape[1])),
                      ctypes.byref(zero), c.ctypes.data, ctypes.byref(ctypes.c_int(n))))
    return [(dgemm, *args) for args in calls], keep


def _block_seconds(calls: list[tuple[Any, ...]], reps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(reps):
        for f, *args in calls:
            f(*args)
    return (time.perf_counter() - t0) / reps


@contextlib.contextmanager
def _one_blas_thread() -> Iterator[None]:
    """The kernels run each product on one thread (:mod:`thermonet.kernels.threads`)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def measure(dgemms: dict[str, Any], budget_s: float = BUDGET_S) -> dict[str, dict[str, float]]:
    """Time one block's products with each ``dgemm`` in ``dgemms`` (name -> function).

    Returns name -> ``{"us_per_block", "gflops", "rounds"}``: the fastest round of each
    candidate, rounds interleaved over about ``budget_s`` seconds.
    """
    rng = np.random.default_rng(0)
    setups = {name: block_calls(f, products(name), rng) for name, f in dgemms.items()}
    best = dict.fromkeys(setups, float("inf"))
    rounds = 0
    with _one_blas_thread():
        for calls, _ in setups.values():         # warm-up: page in code and operands
            _block_seconds(calls, 3)
        reps = max(1, int(2e-3 / max(min(_block_seconds(c, 1) for c, _ in setups.values()),
                                     1e-7)))
        t_end = time.perf_counter() + budget_s
        while rounds < 5 or time.perf_counter() < t_end:
            for name, (calls, _) in setups.items():
                best[name] = min(best[name], _block_seconds(calls, reps))
            rounds += 1
    return {name: {"us_per_block": best[name] * 1e6,
                   "gflops": flops(products(name)) / best[name] / 1e9, "rounds": rounds}
            for name in setups}


def measure_own(budget_s: float = BUDGET_S) -> dict[str, float]:
    """Time one block's products with thermonet's own products
    (:mod:`~thermonet.kernels.matmul.gemm_timing`), in a process of its own: compiling them here
    would need the backend that is being chosen."""
    env = {**os.environ, "THERMONET_BLAS": "own"}
    module = "thermonet.kernels.matmul.gemm_timing"
    out = subprocess.run([sys.executable, "-m", module, str(budget_s)], env=env,
                         capture_output=True, text=True, timeout=600, check=False)
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"timing thermonet's own products failed: {tail}")
    rate = json.loads(lines[-1])
    return {"us_per_block": float(rate["us_per_block"]),
            "gflops": flops(products("own")) / float(rate["us_per_block"]) / 1e3,
            "rounds": int(rate["rounds"])}


def choose(rates: dict[str, dict[str, float]]) -> str:
    """The backend to use given the measured rates: the fastest, except that another backend
    must beat ``numpy`` by more than :data:`MARGIN` (see the module docstring)."""
    if "numpy" not in rates:
        return min(rates, key=lambda name: rates[name]["us_per_block"])
    ref = rates["numpy"]["us_per_block"] * (1.0 - MARGIN)
    faster = {name: r["us_per_block"] for name, r in rates.items()
              if name != "numpy" and r["us_per_block"] < ref}
    return min(faster, key=faster.__getitem__) if faster else "numpy"


# the per-machine cache

def cache_dir() -> str:
    """The cache directory: ``THERMONET_CACHE_DIR``, else the platform's user cache
    (``$XDG_CACHE_HOME/thermonet``, by default ``~/.cache/thermonet``, on Linux;
    ``~/Library/Caches/thermonet`` on macOS; ``LOCALAPPDATA/thermonet/Cache`` on Windows)."""
    env = os.environ.get("THERMONET_CACHE_DIR")
    if env:
        return env
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.expanduser("~\\AppData\\Local")
        return os.path.join(base, "thermonet", "Cache")
    if sys.platform == "darwin":
        return os.path.expanduser("~/Library/Caches/thermonet")
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(base, "thermonet")


def _cpu_model() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8",
                                            errors="replace") as fh:
        for line in fh:
            if line.startswith(("model name", "Model", "cpu model")):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _version(dist: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""


def _own_products_hash() -> str:
    """A hash of thermonet's own products' source (``gemm.py``): a development version whose
    products changed is measured again although its version number did not."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gemm.py")
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()[:16]
    except OSError:
        return ""


def machine_key(mkl_version: str = "") -> dict[str, Any]:
    """What the measurement depends on: CPU, whether the kernels are compiled for its AVX-512
    (``NUMBA_CPU_NAME``/``NUMBA_CPU_FEATURES`` can hold them to AVX2), CPU count, library
    versions and the own products' source."""
    try:
        import llvmlite.binding as llb

        features = llb.get_host_cpu_features()
        cpu_name = str(llb.get_host_cpu_name())
        flags = {f: bool(features.get(f)) for f in ("avx2", "avx512f", "fma")}
    except Exception:
        cpu_name, flags = "", {}
    try:
        n_cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n_cpus = os.cpu_count() or 1
    from thermonet.kernels.environment import compiled_for_avx512

    return {"schema": SCHEMA, "cpu_model": _cpu_model(), "cpu_name": cpu_name, **flags,
            "compiled_avx512": compiled_for_avx512(), "own_products": _own_products_hash(),
            "n_cpus": n_cpus, "python": platform.python_version(), "numpy": np.__version__,
            "scipy": _version("scipy"), "numba": _version("numba"),
            "mkl": mkl_version or _version("mkl"), "thermonet": _version("thermonet")}


def key_id(key: dict[str, Any]) -> str:
    """A short stable name for a :func:`machine_key`."""
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def read_cache(path: str) -> dict[str, Any]:
    """The cache's entries (key id -> record); ``{}`` if there is none. A file that is not a
    thermonet calibration cache raises ValueError (the caller warns and measures again)."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (FileNotFoundError, NotADirectoryError):
        return {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path} is unreadable ({err})") from None
    entries = data.get("entries") if isinstance(data, dict) else None
    if not isinstance(entries, dict) or any(
            not isinstance(v, dict) or v.get("backend") not in _CANDIDATE_ORDER
            for v in entries.values()):
        raise ValueError(f"{path} is not a thermonet calibration cache")
    return entries


def write_cache(path: str, entries: dict[str, Any]) -> None:
    """Replace the cache file atomically (concurrent writers: the last one wins)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".calibration-", suffix=".thermonet-tmp",
                               dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"schema": SCHEMA, "entries": entries}, fh, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def calibrate(names: tuple[str, ...], dgemms: Callable[[], dict[str, Any]],
              mkl_version: str = "", *, force: bool = False) -> dict[str, Any]:
    """The cached record for this machine, or a new measurement (``force``: always measure).

    ``names`` are the candidates that can run here; ``dgemms()`` gives their functions (only
    called to measure: finding SciPy's ``dgemm`` imports ``scipy.linalg``, most of a second).
    Returns ``{"backend", "how", "key", "rates", "measured_utc"}``; ``how`` is ``"measured"``
    or ``"cached"``.
    """
    key = machine_key(mkl_version)
    kid = key_id(key)
    path = os.path.join(cache_dir(), CACHE_FILE)
    try:
        entries = read_cache(path)
    except ValueError as err:
        warnings.warn(f"{err}; measuring the matrix-product backends again and replacing it",
                      RuntimeWarning, stacklevel=2)
        entries = {}
    record = entries.get(kid)
    load = machine_load()
    if (not force and record is not None and record.get("key") == key
            and set(record.get("rates", {})) - {"own"} == set(names) - {"own"}
            and (not busy(record.get("load")) or busy(load))):
        return {**record, "how": "cached"}
    rates = measure(dgemms())
    if "own" in names:
        try:
            rates["own"] = measure_own()
        except (OSError, RuntimeError, ValueError, KeyError, subprocess.SubprocessError) as err:
            warnings.warn(f"{err}; choosing among the other backends (the choice is cached: "
                          "`thermonet calibrate --force` measures again)", RuntimeWarning,
                          stacklevel=2)
    record = {"backend": choose(rates), "key": key, "rates": rates, "load": load,
              "measured_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    entries[kid] = record
    try:
        write_cache(path, entries)
    except OSError as err:
        warnings.warn(f"could not write the calibration cache {path} ({err}); the choice "
                      "holds for this process only (set THERMONET_CACHE_DIR to a writable "
                      "directory)", RuntimeWarning, stacklevel=2)
    return {**record, "how": "measured"}


def machine_load() -> dict[str, Any]:
    """``{"loadavg_1min", "n_cpus"}``: the 1-minute load average (None where the platform has
    none) and the number of CPUs."""
    try:
        avg: float | None = round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        avg = None
    return {"loadavg_1min": avg, "n_cpus": os.cpu_count() or 1}


def _per_cpu(load: Any) -> float:
    """Runnable processes per CPU of a recorded load; infinite when unknown."""
    if not isinstance(load, dict) or load.get("loadavg_1min") is None:
        return float("inf")
    return float(load["loadavg_1min"]) / max(1, int(load.get("n_cpus") or 1))


def busy(load: Any) -> bool:
    """Whether a recorded load (:func:`machine_load`) was too high to trust a timing: more than
    :data:`BUSY_LOAD` runnable processes per CPU, or unknown."""
    return _per_cpu(load) > BUSY_LOAD


def describe_load(load: Any) -> str:
    """``load 1.93 on 2 CPUs`` (or ``load unknown``)."""
    if not isinstance(load, dict) or load.get("loadavg_1min") is None:
        return "load unknown"
    return f"load {load['loadavg_1min']:.2f} on {load['n_cpus']} CPUs"


def describe(record: dict[str, Any]) -> str:
    """One line: the rates behind a choice, e.g. ``numpy 48.1, mkl 37.0 GFLOP/s``."""
    rates = record.get("rates") or {}
    return ", ".join(f"{name} {r['gflops']:.1f}" for name, r in
                     sorted(rates.items(), key=lambda kv: -kv[1]["gflops"])) + " GFLOP/s"


__all__ = ["BUDGET_S", "BUSY_LOAD", "CACHE_FILE", "DGEMM", "MARGIN", "ROWS", "SCHEMA",
           "WIDTHS", "block_calls", "busy", "cache_dir", "calibrate", "choose", "describe",
           "describe_load", "flops", "key_id", "machine_key", "machine_load", "measure",
           "measure_own", "numpy_dgemm", "products", "read_cache", "write_cache"]
