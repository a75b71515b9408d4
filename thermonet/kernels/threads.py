"""Thread control for the parallel kernels.

:func:`limit` sets the number of Numba threads for the duration of a block. Results never
depend on it (kernels reduce in a fixed block order); only the wall time does.

Inside a parallel kernel every Numba thread calls BLAS (``np.dot``) itself. A multi-threaded
BLAS underneath then oversubscribes the cores: OpenBLAS's own worker threads compete with
Numba's, and concurrent threaded OpenBLAS calls serialise on a lock while spinning. On a 2-core
machine this made the 2-thread M(3) gradient ~75x *slower* than the 1-thread one
(docs/performance.md). :func:`limit` therefore also caps every loaded BLAS library at one
thread (``blas_threads=1``) for the duration of the block, using ``threadpoolctl`` when it is
installed (without it BLAS is left alone).

OpenMP spinning
---------------
Numba's default threading layer here is GNU OpenMP, whose threads busy-wait up to
``GOMP_SPINCOUNT`` = 300,000 pause loops (~10 ms) at every barrier. When another process keeps
one of the cores busy, a spinning thread and the thread it waits for share a core, and every
parallel region then costs whole scheduler time slices: the 2-thread M(3) gradient at N = 500
fell from ~2,200/s to ~65/s. Importing this module therefore sets ``GOMP_SPINCOUNT=10000``
(~0.5 ms of spinning: the same speed on an idle machine, ~10x faster on a loaded one) unless
``GOMP_SPINCOUNT`` or ``OMP_WAIT_POLICY`` is already set. It only takes effect if imported
before Numba starts its threading layer (the first parallel kernel call in the process), which
is the case when the parallel kernels are reached through ``MLPPotential(threads > 1)``.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Any

import numba

#: OpenMP busy-wait default applied at import (see the module docstring)
GOMP_SPINCOUNT_DEFAULT = "10000"
if "GOMP_SPINCOUNT" not in os.environ and "OMP_WAIT_POLICY" not in os.environ:
    os.environ["GOMP_SPINCOUNT"] = GOMP_SPINCOUNT_DEFAULT

_lock = threading.Lock()
_blas: list[Any] | None = None      # threadpoolctl controllers of the loaded BLAS libraries
_depth = 0                          # nesting/concurrency count of active BLAS caps
_saved: list[tuple[Any, int]] = []  # (controller, thread count before the outermost cap)


def _blas_controllers() -> list[Any]:
    """Controllers of every loaded BLAS, found once (cheap to use afterwards: one C call)."""
    global _blas
    if _blas is None:
        try:
            import scipy.linalg.cython_blas  # noqa: F401  (the BLAS Numba's np.dot calls)
            from threadpoolctl import ThreadpoolController

            _blas = [c for c in ThreadpoolController().lib_controllers if c.user_api == "blas"]
        except Exception:  # noqa: BLE001  (no threadpoolctl / scipy: leave BLAS alone)
            _blas = []
    return _blas


def _cap_blas(n: int) -> None:
    global _depth
    with _lock:
        if _depth == 0:
            _saved.clear()
            for c in _blas_controllers():
                try:
                    cur = int(c.get_num_threads())
                    if cur != n:
                        c.set_num_threads(n)
                        _saved.append((c, cur))
                except Exception:  # noqa: BLE001
                    pass
        _depth += 1


def _restore_blas() -> None:
    global _depth
    with _lock:
        _depth -= 1
        if _depth == 0:
            for c, cur in _saved:
                try:
                    c.set_num_threads(cur)
                except Exception:  # noqa: BLE001
                    pass
            _saved.clear()


class limit:  # lower-case: used as a function, ``with limit(2): ...``
    """Use at most ``n_threads`` Numba threads (capped at ``numba.config.NUMBA_NUM_THREADS``).

    ``blas_threads`` (default 1) caps the BLAS libraries' own thread pools for the duration of
    the block, so that Numba threads calling BLAS do not oversubscribe the cores; ``None``
    leaves BLAS alone. Concurrent or nested ``limit`` blocks share one cap, lifted when the
    last of them exits. ``with limit(n) as m`` binds the thread count actually used.

    A class rather than a generator-based context manager, and nothing is set when the count
    is already right and BLAS is left alone (the common case with MKL): the threaded M(3)
    gradient enters it once per call, and at N = 500 the generator version with its two
    ``set_num_threads`` calls cost ~7 us of a ~310 us gradient (docs/performance.md).
    """

    __slots__ = ("_blas", "_old", "n")

    def __init__(self, n_threads: int, blas_threads: int | None = 1) -> None:
        self.n = max(1, min(int(n_threads), numba.config.NUMBA_NUM_THREADS))
        self._blas = None if blas_threads is None else max(1, int(blas_threads))
        self._old = 0

    def __enter__(self) -> int:
        old = numba.get_num_threads()
        self._old = old
        if old != self.n:
            numba.set_num_threads(self.n)
        if self._blas is not None:
            _cap_blas(self._blas)
        return self.n

    def __exit__(self, *exc: object) -> None:
        if self._blas is not None:
            _restore_blas()
        if self._old != self.n:
            numba.set_num_threads(self._old)


@contextlib.contextmanager
def blas_single() -> Iterator[None]:
    """Cap BLAS at one thread for the block, leaving Numba's thread count alone.

    thermonet's kernels call BLAS from code that does its own parallelism (blocks over Numba
    threads, replicas over Python threads), so a multi-threaded BLAS underneath only
    oversubscribes the cores (docs/performance.md). Nested and concurrent blocks share one cap;
    inside an outer block this costs a lock and a counter.
    """
    _cap_blas(1)
    try:
        yield
    finally:
        _restore_blas()
