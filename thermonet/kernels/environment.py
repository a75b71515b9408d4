"""Process settings the kernels want, applied only when :func:`configure` is called.

Nothing here runs at import: the command line and :class:`thermonet.runner.Run` call
:func:`configure` before any kernel is compiled, and a library user may call it (or not) first.
Every setting yields to a value the user has already set in the environment, and results never
depend on any of them (only the wall time does).

512-bit vectors
    LLVM compiles for AVX-512 CPUs with 256-bit vectors by default (its ``prefer-256-bit``
    tuning). The kernels' element loops run faster with 512-bit vectors on AVX-512 machines
    (docs/performance.md) and give the same results: each element sees the same operations
    whatever the vector width, and no loop is vectorised as a reduction (fastmath is off). So,
    when the CPU has AVX-512F, :func:`configure` sets ``NUMBA_CPU_FEATURES`` to the host's
    features plus ``-prefer-256-bit``, provided that Numba has not been imported yet (it reads
    its configuration once), ``NUMBA_CPU_FEATURES`` is unset and ``THERMONET_AVX512`` is not
    ``0``. Numba's cache keys on the CPU features, so cached kernels of either setting are kept
    apart.

OpenMP spinning
    Numba's GNU OpenMP threads busy-wait up to ``GOMP_SPINCOUNT`` = 300,000 pause loops at
    every barrier; when another process keeps a core busy, a spinning thread and the thread it
    waits for share that core and every parallel region costs whole scheduler time slices
    (docs/performance.md). :func:`configure` sets ``GOMP_SPINCOUNT=10000`` unless
    ``GOMP_SPINCOUNT`` or ``OMP_WAIT_POLICY`` is set. It takes effect only before the first
    parallel kernel call of the process, when Numba starts its threading layer.
"""

from __future__ import annotations

import os
import sys

#: OpenMP busy-wait count :func:`configure` applies (see the module docstring)
GOMP_SPINCOUNT_DEFAULT = "10000"

_done = False


def _prefer_512_bit_vectors() -> None:
    if (os.environ.get("THERMONET_AVX512", "1") == "0" or "NUMBA_CPU_FEATURES" in os.environ
            or "numba" in sys.modules):
        return
    try:
        import llvmlite.binding as llb

        features = llb.get_host_cpu_features()
    except Exception:
        return
    if features.get("avx512f"):
        os.environ["NUMBA_CPU_FEATURES"] = features.flatten() + ",-prefer-256-bit"


def compiled_for_avx512() -> bool:
    """Whether Numba compiles this process's kernels with AVX-512: ``NUMBA_CPU_FEATURES`` if
    set, else the host's features unless ``NUMBA_CPU_NAME`` names another CPU. Only speed
    depends on it (the tile of :mod:`~thermonet.kernels.matmul.gemm`, the calibration's cache
    key)."""
    features = os.environ.get("NUMBA_CPU_FEATURES")
    if features is not None:
        return "+avx512f" in features.split(",")
    if os.environ.get("NUMBA_CPU_NAME", "host") not in ("", "host"):
        return False
    try:
        import llvmlite.binding as llb

        return bool(llb.get_host_cpu_features().get("avx512f"))
    except Exception:  # pragma: no cover - llvmlite always has the call
        return False


def _quiet_openmp_spinning() -> None:
    if "GOMP_SPINCOUNT" not in os.environ and "OMP_WAIT_POLICY" not in os.environ:
        os.environ["GOMP_SPINCOUNT"] = GOMP_SPINCOUNT_DEFAULT


def configure() -> None:
    """Apply the kernels' process settings (idempotent; see the module docstring).

    Call it before the first kernel is imported for the vector-width setting to apply; a later
    call still applies whatever can still take effect.
    """
    global _done
    if _done:
        return
    _prefer_512_bit_vectors()
    _quiet_openmp_spinning()
    _done = True
