"""Old path of :mod:`thermonet.kernels.jit` (plugins written against it keep working)."""

from thermonet.kernels.jit import SAFE_FASTMATH, kernel, prange

__all__ = ["SAFE_FASTMATH", "kernel", "prange"]
