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

from typing import Any

from thermonet.parallel.local import (
    EXECUTORS,
    LOCAL,
    Executor,
    LocalWorld,
    SerialExecutor,
    ThreadExecutor,
    World,
    is_collective,
    mark_collective,
)


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


__all__ = ["EXECUTORS", "LOCAL", "Executor", "LocalWorld", "SerialExecutor", "ThreadExecutor",
           "World", "active_world", "executor_in", "is_collective", "make_executor",
           "mark_collective", "require_same", "require_same_backend", "world", "world_of"]
