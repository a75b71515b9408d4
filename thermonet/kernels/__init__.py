"""Layer 0: Numba kernels on flat arrays. Imports only numpy, numba, llvmlite and math.

Importing this package changes nothing in the process: :func:`configure` applies the kernels'
process settings (vector width, OpenMP spinning; :mod:`thermonet.kernels.environment`) and is
called by the command line and the runner. :func:`kernel` is the decorator every compiled
function of thermonet and of its plugins is compiled with (:mod:`thermonet.kernels.jit`).
"""

from __future__ import annotations

from typing import Any

from thermonet.kernels.environment import configure

__all__ = ["configure", "kernel"]


def __getattr__(name: str) -> Any:
    # imported on use: importing Numba here would fix its configuration before configure()
    if name == "kernel":
        from thermonet.kernels.jit import kernel

        return kernel
    raise AttributeError(f"module 'thermonet.kernels' has no attribute {name!r}")
