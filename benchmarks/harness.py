"""What the benchmark scripts share: timing loops, machine load, test data, machine facts.

Imported by the bench_*.py scripts (run as scripts from any directory:
``python benchmarks/bench_mlp.py``; Python puts this folder on the path).
"""

from __future__ import annotations

import functools
import importlib
import itertools
import os
import platform
import time

#: the paper's M(3): 256 inputs, three hidden layers of 40, 10 classes
WIDTHS = (256, 40, 40, 40, 10)


def machine_busy() -> float | None:
    """Busy CPU-seconds of the whole machine so far (from /proc/stat), or None.

    Steal time counts as busy: in a virtual machine it is the time the host gave this guest's
    CPUs to others, which slows a timed loop as much as another process here does."""
    try:
        with open("/proc/stat") as fh:
            v = [int(t) for t in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return (sum(v[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def calibrate(f, min_time: float) -> tuple[int, float]:
    """(calls per timed loop so that one loop takes about ``min_time`` s, seconds per call)."""
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        dt = time.perf_counter() - t0
        if dt >= 0.05 or n >= 1 << 20:
            break
        n *= 2
    per_call = dt / n
    return max(1, round(min_time / max(per_call, 1e-9))), per_call


def timed_loop(f, n: int, warmup: int = 2) -> dict:
    """``n`` calls of ``f`` after ``warmup`` calls: the rate, this process's cores and the
    cores other processes used meanwhile (None where /proc/stat is missing)."""
    for _ in range(warmup):
        f()
    m0 = machine_busy()
    c0 = time.process_time()
    t0 = time.perf_counter()
    for _ in range(n):
        f()
    t1 = time.perf_counter()
    c1 = time.process_time()
    m1 = machine_busy()
    wall = t1 - t0
    other = None
    if m0 is not None and m1 is not None:
        other = max(0.0, (m1 - m0) - (c1 - c0)) / wall
    return {"rate": n / wall, "cpu": (c1 - c0) / wall, "other": other, "calls": n}


def make_data(n: int, seed: int = 0):
    """Random x ~ N(0, 1) (n, 256), labels 0..9, and theta_i ~ N(0, 1/fan_in)."""
    import numpy as np

    rng = np.random.default_rng(seed + n)
    x = rng.standard_normal((n, WIDTHS[0]))
    y = rng.integers(0, WIDTHS[-1], size=n).astype(np.int64)
    parts = []
    for a, b in itertools.pairwise(WIDTHS):
        parts.append(rng.standard_normal(a * b) / (a + 1) ** 0.5)
        parts.append(rng.standard_normal(b) / (a + 1) ** 0.5)
    return x, y, np.concatenate(parts)


def limit_blas(n: int):
    """Cap every loaded BLAS (numpy's and scipy's OpenBLAS, the one Numba's np.dot calls)."""
    import scipy.linalg.cython_blas  # noqa: F401  (load scipy's OpenBLAS before capping)
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=n, user_api="blas")


def cpu_model() -> str:
    """The CPU's model name with its family and model numbers (from /proc/cpuinfo): a virtual
    machine often reports only "AMD EPYC"."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("model name", "cpu family", "model") and key not in fields:
                    fields[key] = value.strip()
                if not line.strip() and fields:
                    break
    except OSError:
        pass
    name = fields.get("model name") or platform.processor() or "unknown"
    extra = []
    if "cpu family" in fields and "model" in fields:
        extra.append(f"family {fields['cpu family']} model {fields['model']}")
    return f"{name} ({', '.join(extra)})" if extra else name


def cpu_flags() -> set:
    """The CPU's feature flags (from /proc/cpuinfo)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def vector_flags() -> str:
    """The CPU's vector features that decide the kernels' code path (``avx2 avx512f fma``),
    for the machine line beside every figure."""
    return " ".join(sorted(cpu_flags() & {"avx2", "fma", "avx512f"})) or "none of avx2/fma/avx512f"


def versions() -> dict:
    """Versions of Python, thermonet and the numerical stack, the BLAS libraries loaded and
    LLVM's name for the host CPU."""
    v = {"python": platform.python_version()}
    for mod in ("thermonet", "numpy", "scipy", "numba", "llvmlite", "threadpoolctl", "torch",
                "jax", "jaxlib"):
        try:
            v[mod] = importlib.import_module(mod).__version__
        except Exception:
            v[mod] = None
    try:
        import scipy.linalg.cython_blas  # noqa: F401
        from threadpoolctl import threadpool_info

        v["blas"] = "; ".join(f"{i.get('internal_api')} {i.get('version')} "
                              f"({os.path.basename(i.get('filepath', ''))})"
                              for i in threadpool_info() if i.get("user_api") == "blas")
    except Exception:
        pass
    try:
        import llvmlite.binding as llvm
        import numba

        v["numba_svml"] = bool(numba.config.USING_SVML)
        v["llvm_cpu"] = llvm.get_host_cpu_name()
    except Exception:
        pass
    return v


def fmt(v, spec):
    """``v`` formatted with ``spec``, or ``-`` for None."""
    return "-" if v is None else format(v, spec)


@functools.cache
def gradient_loop():
    """A compiled ``loop(theta, net, work, partial, grad, n)``: ``n`` calls of the MLP
    gradient kernel (:func:`thermonet.kernels.mlp.loss_and_grad`) without returning to Python,
    and the sum of their energies. Built on first use, so importing the harness compiles
    nothing."""
    import numba

    from thermonet.kernels import mlp

    @numba.njit(nogil=True)
    def loop(theta, net, work, partial, grad, n):
        e = 0.0
        for _ in range(n):
            e += mlp.loss_and_grad(theta, net, work, partial, grad)
        return e

    return loop
