"""The MPI executor: the ranks of one job (``mpiexec -n R``, ``srun``) share every ``map``.

Every rank runs the same program on the same data with the same random streams. ``map(fn,
items)`` gives rank r the contiguous block :func:`block` ``(len(items), R, r)``, runs it on the
rank's own threads (a :class:`~thermonet.parallel.ThreadExecutor`), and gathers the results
of all blocks on every rank (``allgather``), in the order of ``items``. So each rank ends every
``map`` holding what a one-process run holds, and the code around it (the swaps, the records)
runs identically everywhere: the result is the one-process result bit for bit, as long as each
item is a pure function of its inputs and its own random stream (the tempering engine returns
each slot's stream with its result for this reason).

A work item that raises on one rank raises the same error on every rank after the gather (the
lowest rank's error wins), so the job ends together and no rank waits. A failure the others
cannot see (a rank killed, an error outside a ``map`` or :meth:`MPIWorld.on_root`) is the
command line's to handle: it calls :meth:`MPIWorld.abort`.

mpi4py is imported only here and only when an MPI job is asked for, so thermonet works
without it; asking for one without it gives a one-line error that says how to install it.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import traceback
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from thermonet.errors import ConfigError, ThermonetError
from thermonet.parallel.local import EXECUTORS, LOCAL, ThreadExecutor, mark_collective

T = TypeVar("T")

#: environment variables by which MPI launchers announce the number of processes: MPICH's
#: and Intel MPI's hydra and Slurm's PMI-2 (PMI_SIZE), Open MPI, MVAPICH
SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")
#: set by launchers that do not announce the size (PMIx: ``srun --mpi=pmix``)
RANK_VARIABLES = ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK")

INSTALL = ("pip install 'thermonet[mpi]' (mpi4py and the mpich wheel), or on a cluster build "
           "mpi4py against the site's MPI (docs/cluster.md)")

_world: MPIWorld | None = None


def launcher_size() -> int | None:
    """The number of processes an MPI launcher started (None: not started by one, or a
    launcher that does not say)."""
    for name in SIZE_VARIABLES:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return None


def launched() -> bool:
    """Whether an MPI launcher started this process."""
    return any(name in os.environ for name in (*SIZE_VARIABLES, *RANK_VARIABLES))


def block(n_items: int, size: int, rank: int) -> tuple[int, int]:
    """Items ``[lo, hi)`` of rank ``rank`` of ``size``: contiguous blocks, the first
    ``n_items % size`` ranks one item more than the others."""
    q, r = divmod(n_items, size)
    lo = rank * q + min(rank, r)
    return lo, lo + q + (rank < r)


def portable(err: BaseException, rank: int = 0) -> BaseException:
    """``err`` if it survives pickling (to be raised on the other ranks), else a
    :class:`~thermonet.errors.ThermonetError` carrying its type and message; either way with
    the rank and traceback where it was raised (``thermonet_origin``, for the report)."""
    try:
        copy = pickle.loads(pickle.dumps(err))
    except Exception:
        copy = None
    if not isinstance(copy, BaseException):
        copy = ThermonetError(f"{type(err).__name__}: {err}")
    origin = "".join(traceback.format_exception(err)).rstrip()
    with contextlib.suppress(AttributeError):   # exceptions with __slots__
        copy.thermonet_origin = f"raised on MPI rank {rank}:\n{origin}"  # type: ignore[attr-defined]
    return copy


class MPIWorld:
    """The ranks of ``comm`` (mpi4py's ``COMM_WORLD``)."""

    def __init__(self, comm: Any) -> None:
        self.comm = comm
        self.rank = int(comm.Get_rank())
        self.size = int(comm.Get_size())
        self.is_root = self.rank == 0

    def on_root(self, fn: Callable[[], T]) -> T | None:
        value: T | None = None
        failure: BaseException | None = None
        if self.is_root:
            try:
                value = fn()
            except BaseException as err:
                failure = err
        shared = self.comm.bcast(None if failure is None else portable(failure), root=0)
        if failure is not None:
            raise mark_collective(failure)
        if shared is not None:
            raise mark_collective(shared)
        return value

    def agree(self, signum: int | None) -> int | None:
        from mpi4py import MPI

        agreed = int(self.comm.allreduce(int(signum or 0), op=MPI.MAX))
        return agreed or None

    def barrier(self) -> None:
        self.comm.Barrier()

    def abort(self, code: int) -> None:
        self.comm.Abort(code)

    def share(self, run: Callable[[list[Any]], list[T]], items: Iterable[Any]) -> list[T]:
        items = list(items)
        lo, hi = block(len(items), self.size, self.rank)
        failure: BaseException | None = None
        results: list[T] = []
        try:
            results = list(run(items[lo:hi]))
            if len(results) != hi - lo:
                raise ThermonetError(f"a block of {hi - lo} items gave {len(results)} "
                                     "results; expected one per item")
        except BaseException as err:
            failure = err
        parts = self.allgather((None if failure is None else portable(failure, self.rank),
                                None if failure is not None else results))
        for rank, (shared, _) in enumerate(parts):
            if shared is not None:
                raise mark_collective(failure if rank == self.rank and failure is not None
                                      else shared)
        return [value for _, part in parts for value in part]

    def allgather(self, value: Any) -> list[Any]:
        """``value`` of every rank, in rank order, on every rank."""
        return list(self.comm.allgather(value))


class MPIExecutor:
    """The ranks of ``world``, each running its block of a ``map`` on ``workers`` threads."""

    def __init__(self, world: MPIWorld, workers: int = 1) -> None:
        self.world = world
        self.inner = ThreadExecutor(workers)
        self.n_workers = world.size * self.inner.n_workers

    def map(self, fn: Callable[[Any], T], items: Iterable[Any]) -> list[T]:
        return self.world.share(lambda block: self.inner.map(fn, block), items)

    def close(self) -> None:
        self.inner.close()


def active() -> MPIWorld | None:
    """The MPI job this process joined, if it has (never starts MPI)."""
    return _world


def world(kind: str = "auto") -> Any:
    """The world of the ``[run] executor`` value ``kind`` (see :func:`thermonet.parallel.world`)."""
    if kind not in EXECUTORS:
        raise ConfigError(f"executor = {kind!r}; expected one of {', '.join(EXECUTORS)}")
    size = launcher_size()
    if kind == "threads":
        if size is not None and size > 1:
            raise ConfigError(f"[run] executor = \"threads\" but an MPI launcher started {size} "
                              "processes, which would each run the whole job; set executor = "
                              "\"auto\" or \"mpi\", or start one process without mpiexec/srun")
        return LOCAL
    if kind == "auto" and not launched():
        return LOCAL
    if kind == "auto" and size is not None and size <= 1:
        return LOCAL
    job = join(size, kind)
    return LOCAL if kind == "auto" and job.size == 1 else job


def join(expected: int | None, kind: str) -> MPIWorld:
    """Initialise MPI (once) and return the job's world; refuse a job that MPI sees as one
    process when the launcher started several (mpi4py built for another MPI)."""
    global _world
    if _world is None:
        try:
            from mpi4py import MPI
        except ImportError:
            why = (f"[run] executor = \"{kind}\"" if kind == "mpi" else
                   f"an MPI launcher started {expected or 'several'} processes")
            raise ConfigError(f"{why} but mpi4py is not installed; expected mpi4py and an MPI "
                              f"library; install them with {INSTALL}") from None
        _world = MPIWorld(MPI.COMM_WORLD)
    if expected is not None and expected > 1 and _world.size == 1:
        raise ConfigError(f"the MPI launcher started {expected} processes but MPI sees each as "
                          "a job of one: mpi4py is built against another MPI than the launcher "
                          f"(use the launcher of that MPI, e.g. the mpich wheel's mpiexec, or "
                          f"{INSTALL})")
    return _world


__all__ = ["INSTALL", "MPIExecutor", "MPIWorld", "active", "block", "join", "launched",
           "launcher_size", "portable", "world"]
