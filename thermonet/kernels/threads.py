"""Thread control for the parallel kernels.

:func:`limit` sets the number of Numba threads for the duration of a block. Results never
depend on it (kernels reduce in a fixed block order); only the wall time does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numba


@contextlib.contextmanager
def limit(n_threads: int) -> Iterator[int]:
    """Use at most ``n_threads`` Numba threads (capped at ``numba.config.NUMBA_NUM_THREADS``)."""
    n = max(1, min(int(n_threads), numba.config.NUMBA_NUM_THREADS))
    old = numba.get_num_threads()
    numba.set_num_threads(n)
    try:
        yield n
    finally:
        numba.set_num_threads(old)
