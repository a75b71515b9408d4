"""Executors: how independent pieces of work (replicas, repeats, draws) are spread out.

An executor has ``n_workers`` and ``map(fn, items) -> list`` returning results in the order of
``items``. Work handed to an executor must be independent and draw randomness only from its own
stream, so the result never depends on which executor runs it or with how many workers.

* :class:`SerialExecutor`: in the calling thread.
* :class:`ThreadExecutor`: Python threads over thermonet's nogil kernels (one machine). Inside it
  the kernels run single-threaded, so the threads do not oversubscribe the cores.
* :class:`thermonet.parallel.mpi.MPIExecutor`: the processes (ranks) of one MPI job, each
  running a contiguous block of the items on its own threads (docs/cluster.md).

Every process of an MPI job runs the same program on the same data; the executor gives each
rank its block of every ``map`` and all of them the full list of results. What only one process
may do (write a file, take a lock) goes through the job's :class:`World`:
``world.on_root(fn)`` runs ``fn`` on rank 0 and raises its error, if any, on every rank. A
process that is not an MPI job has the one-process :data:`LOCAL` world.
"""

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


def require_same(job: World, what: str, value: Any, fix: str) -> None:
    """Refuse, on every rank alike, a job whose ranks hold different ``value``s of ``what``
    (a result that depends on it would then depend on the ranks)."""
    if job.size <= 1:
        return
    values = job.allgather(value)
    if len({repr(v) for v in values}) > 1:
        from thermonet.errors import ConfigError

        shown = ", ".join(f"rank {r}: {v}" for r, v in enumerate(values))
        raise mark_collective(ConfigError(
            f"the MPI ranks use different {what} ({shown}); expected the same on every rank, "
            f"or the results would depend on how the work is spread; {fix}"))


def require_same_backend(job: World) -> None:
    """:func:`require_same` for the kernels' BLAS backend: ranks on different CPUs may each
    measure a different one fastest (:mod:`thermonet.kernels.matmul.calibration`), and the
    products' last bits differ between MKL and OpenBLAS."""
    if job.size <= 1:
        return
    from thermonet.kernels.matmul import blas

    require_same(job, "BLAS backends", str(blas.BACKEND),
                 "set THERMONET_BLAS=numpy (or own, or mkl) in the environment of every rank")


def is_collective(err: BaseException) -> bool:
    """Whether ``err`` was raised on every rank of the job alike (:func:`mark_collective`)."""
    return bool(getattr(err, "thermonet_collective", False))


def world(kind: str = "auto") -> World:
    """The job this process belongs to for the ``[run] executor`` value ``kind``.

    ``threads``: this process alone (refused when an MPI launcher started several);
    ``mpi``: the MPI job (imports mpi4py, which must be installed); ``auto``: the MPI job when
    an MPI launcher (``mpiexec``, ``srun``) started more than one process, else this process.
    """
    from thermonet.parallel import mpi

    return mpi.world(kind)


def active_world() -> World:
    """The MPI job if this process has joined one, else :data:`LOCAL` (never starts MPI)."""
    from thermonet.parallel import mpi

    return mpi.active() or LOCAL


def world_of(executor: Any) -> World:
    """The world an executor spans (:data:`LOCAL` for one without a ``world``)."""
    return getattr(executor, "world", None) or LOCAL


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


def executor_in(world: World, workers: int) -> Executor:
    """An executor of ``workers`` threads in each process of ``world`` (an MPI job's ranks,
    or this process alone)."""
    if world.size > 1:
        from thermonet.parallel import mpi

        return mpi.MPIExecutor(world, workers)  # type: ignore[arg-type]
    return SerialExecutor() if workers == 1 else ThreadExecutor(workers)


def make_executor(workers: int, kind: str = "threads") -> Executor:
    """An executor of ``workers`` threads (serial for 1) in each process of the world ``kind``
    (:func:`world`): across the ranks of an MPI job, or in this process alone."""
    if kind != "threads":
        from thermonet.parallel import mpi

        job = mpi.world(kind)
        if isinstance(job, mpi.MPIWorld):
            return mpi.MPIExecutor(job, workers)
    return SerialExecutor() if workers == 1 else ThreadExecutor(workers)
