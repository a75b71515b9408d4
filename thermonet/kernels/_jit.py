"""The only place thermonet chooses Numba options. Do not call ``numba.njit`` elsewhere.

* ``cache=True``: compile once, reuse across processes (``THERMONET_NUMBA_CACHE=0`` disables it).
* ``nogil=True``: kernels release the GIL so Python threads can run replicas in parallel.
* ``error_model="numpy"``: ``1.0/0.0`` gives ``inf`` instead of raising, so a non-finite energy
  becomes a rejected proposal, never an exception.
* ``fastmath`` is off. ``THERMONET_FASTMATH=1`` enables only the flags that keep NaN/inf
  semantics (no ``nnan``, no ``ninf``), so divergence checks keep working.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import numba

#: fastmath flags that keep NaN/inf semantics.
SAFE_FASTMATH = frozenset({"nsz", "arcp", "contract", "afn", "reassoc"})
_FASTMATH: Any = set(SAFE_FASTMATH) if os.environ.get("THERMONET_FASTMATH") == "1" else False
_CACHE = os.environ.get("THERMONET_NUMBA_CACHE", "1") != "0"


def kernel(func: Callable[..., Any] | None = None, *, parallel: bool = False) -> Any:
    """Compile ``func`` with thermonet's kernel options (cache, nogil, numpy error model)."""

    def wrap(f: Callable[..., Any]) -> Any:
        return numba.njit(
            cache=_CACHE, nogil=True, error_model="numpy", fastmath=_FASTMATH, parallel=parallel
        )(f)

    return wrap if func is None else wrap(func)
