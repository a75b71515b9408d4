"""Layer 0: Numba kernels on flat arrays. Imports only numpy, numba, llvmlite and math.

512-bit vectors
---------------
LLVM compiles for AVX-512 CPUs with 256-bit vectors by default (its ``prefer-256-bit`` tuning).
The kernels' element loops (the logistic units, the softmax) run ~20% faster with 512-bit
vectors on this project's machine (docs/performance.md), and their results do not change: each
element sees the same operations whatever the vector width, and no loop is vectorised as a
reduction (fastmath is off). So, when the CPU has AVX-512F, importing this package sets
``NUMBA_CPU_FEATURES`` to the host's features plus ``-prefer-256-bit``, provided that

* Numba has not been imported yet (its configuration is read once, at its import),
* ``NUMBA_CPU_FEATURES`` is not already set, and
* ``THERMONET_AVX512`` is not ``0`` (set it to 0 to keep LLVM's default).

The setting applies to every Numba function compiled in the process, not only thermonet's.
Numba's cache keys on the CPU features, so cached kernels of either setting are kept apart.
"""

from __future__ import annotations

import os
import sys


def _prefer_512_bit_vectors() -> None:
    if (os.environ.get("THERMONET_AVX512", "1") == "0" or "NUMBA_CPU_FEATURES" in os.environ
            or "numba" in sys.modules):
        return
    try:
        import llvmlite.binding as llb

        features = llb.get_host_cpu_features()
    except Exception:  # noqa: BLE001  (an unusual llvmlite: keep the defaults)
        return
    if features.get("avx512f"):
        os.environ["NUMBA_CPU_FEATURES"] = features.flatten() + ",-prefer-256-bit"


_prefer_512_bit_vectors()
