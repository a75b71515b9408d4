"""Thread control for the parallel kernels.

:func:`limit` sets the number of Numba threads for the duration of a block. Results never
depend on it (kernels reduce in a fixed block order); only the wall time does.

Inside a parallel kernel every Numba thread calls BLAS (``np.dot``) itself. A multi-threaded
BLAS underneath then oversubscribes the cores: OpenBLAS's own worker threads compete with
Numba's, and concurrent threaded OpenBLAS calls serialise on a lock while spinning
(docs/performance.md measures the cost). :func:`limit` therefore also caps every loaded BLAS library
at one thread (``blas_threads=1``) for the duration of the block, using ``threadpoolctl`` when it is
installed (without it BLAS is left alone).

OpenMP busy-waiting is tamed by :func:`thermonet.kernels.configure`
(:mod:`thermonet.kernels.environment`), which :class:`thermonet.architectures.mlp.MLPPotential`
calls when it is built with ``threads > 1``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import numba

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
        except Exception:
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
                except Exception:
                    pass
        _depth += 1


def _restore_blas() -> None:
    global _depth
    with _lock:
        _depth -= 1
        if _depth == 0:
            for c, cur in _saved:
                # a library that went away has nothing to restore
                with contextlib.suppress(Exception):
                    c.set_num_threads(cur)
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
    ``set_num_threads`` calls cost a few percent of a small gradient (docs/performance.md).
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
