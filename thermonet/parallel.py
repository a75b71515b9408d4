"""Executors: how independent pieces of work (replicas, repeats, draws) are spread out.

An executor has ``n_workers`` and ``map(fn, items) -> list`` returning results in the order of
``items``. Work handed to an executor must be independent and draw randomness only from its own
stream, so the result never depends on which executor runs it or with how many workers.

* :class:`SerialExecutor`: in the calling thread.
* :class:`ThreadExecutor`: Python threads over thermonet's nogil kernels (one machine). Inside it
  the kernels run single-threaded, so the threads do not oversubscribe the cores.

A cluster engine (MPI) plugs in by implementing the same two members.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Executor(Protocol):
    """Runs independent work items: ``map(fn, items)`` returns ``[fn(x) for x in items]``."""

    n_workers: int

    def map(self, fn: Callable[[Any], T], items: Iterable[Any]) -> list[T]: ...


class SerialExecutor:
    """Runs everything in the calling thread."""

    n_workers = 1

    def map(self, fn: Callable[[Any], T], items: Iterable[Any]) -> list[T]:
        return [fn(item) for item in items]

    def close(self) -> None:
        pass


class ThreadExecutor:
    """A persistent pool of ``n_workers`` threads; kernels single-threaded inside it."""

    def __init__(self, n_workers: int) -> None:
        if n_workers < 1:
            from thermonet.errors import ConfigError

            raise ConfigError(f"workers = {n_workers}; expected >= 1")
        self.n_workers = int(n_workers)
        self._pool: ThreadPoolExecutor | None = None

    def map(self, fn: Callable[[Any], T], items: Iterable[Any]) -> list[T]:
        from thermonet.kernels import threads

        items = list(items)
        # The BLAS cap is set from the calling thread: with OpenBLAS a cap set from a pool
        # thread is ignored once the main thread has set one (docs/performance.md).
        with threads.blas_single():
            if self.n_workers == 1 or len(items) <= 1:
                with threads.limit(1):
                    return [fn(item) for item in items]
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.n_workers, thread_name_prefix="thermonet")

            def wrapped(item: Any) -> T:
                with threads.limit(1, blas_threads=None):
                    return fn(item)

            return list(self._pool.map(wrapped, items))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def __del__(self) -> None:
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.shutdown(wait=False)


def make_executor(workers: int) -> SerialExecutor | ThreadExecutor:
    """A serial executor for 1 worker, a thread pool otherwise."""
    return SerialExecutor() if workers == 1 else ThreadExecutor(workers)
