"""The pieces of :mod:`thermonet.parallel` that need no MPI: the :class:`World` contract and
this process's :data:`LOCAL` world, the :class:`Executor` contract, the serial and thread
executors, and the marking of errors raised on every rank alike. :mod:`thermonet.parallel.mpi`
builds on them."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

#: the ``[run] executor`` values: ``auto`` (MPI when started by an MPI launcher with more than
#: one process, threads otherwise), ``threads``, ``mpi``
EXECUTORS = ("auto", "threads", "mpi")


class World(Protocol):
    """The processes of a job: ``rank`` of ``size``; rank 0 (``is_root``) writes files."""

    rank: int
    size: int
    is_root: bool

    def on_root(self, fn: Callable[[], T]) -> T | None:
        """``fn()`` on rank 0 (None elsewhere); its exception is raised on every rank."""
        ...

    def agree(self, signum: int | None) -> int | None:
        """The stop request of any rank (the highest signal number), the same on every rank."""
        ...

    def barrier(self) -> None:
        """Wait until every rank has arrived."""
        ...

    def abort(self, code: int) -> None:
        """End every process of the job now (a failure on one rank that the others cannot
        see: without this they would wait for it forever)."""
        ...

    def allgather(self, value: Any) -> list[Any]:
        """``value`` of every rank, in rank order, on every rank."""
        ...

    def share(self, run: Callable[[list[Any]], list[T]], items: Iterable[Any]) -> list[T]:
        """``run(block)`` on each rank's contiguous block of ``items``, which must return one
        result per item; every rank gets all the results, in the order of ``items``. An error
        on any rank is raised on every rank (:func:`mark_collective`)."""
        ...


class LocalWorld:
    """One process: everything runs here."""

    rank = 0
    size = 1
    is_root = True

    def on_root(self, fn: Callable[[], T]) -> T | None:
        return fn()

    def agree(self, signum: int | None) -> int | None:
        return signum

    def barrier(self) -> None:
        pass

    def abort(self, code: int) -> None:
        pass

    def share(self, run: Callable[[list[Any]], list[T]], items: Iterable[Any]) -> list[T]:
        return run(list(items))

    def allgather(self, value: Any) -> list[Any]:
        return [value]


#: the world of a process that is not part of an MPI job
LOCAL = LocalWorld()


def mark_collective(err: BaseException) -> BaseException:
    """Record that ``err`` is raised on every rank of the job (so ending normally cannot
    leave a rank waiting)."""
    with contextlib.suppress(AttributeError):   # exceptions with __slots__
        err.thermonet_collective = True  # type: ignore[attr-defined]
    return err


def is_collective(err: BaseException) -> bool:
    """Whether ``err`` was raised on every rank of the job alike (:func:`mark_collective`)."""
    return bool(getattr(err, "thermonet_collective", False))


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


__all__ = ["EXECUTORS", "LOCAL", "Executor", "LocalWorld", "SerialExecutor", "ThreadExecutor",
           "World", "is_collective", "mark_collective"]
