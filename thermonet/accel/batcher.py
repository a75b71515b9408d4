"""Gather the calls that the slots of a ladder make at the same moment into one batched call.

A replica-exchange iteration runs every slot's sampler independently
(:meth:`thermonet.tempering.ReplicaExchange._map_slots`); each sampler asks its potential for
trajectories, energies and gradients one at a time. On a GPU one replica's work is far too
small to fill the device, but the slots' requests are the same arithmetic on different
weights. :class:`BatchingExecutor` runs every slot in a thread of its own; when each slot that
is still working has a request waiting in the :class:`Batcher`, the waiting requests of one
kind run as a single batched call (rows in slot order, padded to a fixed batch size so that a
compiled function is never recompiled), and each thread gets its row back.

So the samplers, the warm-up, the adaptation and the checkpoints are the same code as on the
CPU engine: only where the arithmetic happens changes. Each slot still draws only from its
own random stream, and a row's result does not depend on the other rows, so the chain does
not depend on how the requests happened to be grouped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

#: ``fn(rows) -> results``: one batched call over ``rows`` (a list of per-row argument
#: tuples, padded to the batcher's size), returning one result per row
BatchedFn = Callable[[list[Any]], list[Any]]

_local = threading.local()


class _Request:
    __slots__ = ("done", "error", "fn", "key", "result", "row", "slot")

    def __init__(self, key: Any, row: Any, fn: BatchedFn, slot: int) -> None:
        self.key, self.row, self.fn, self.slot = key, row, fn, slot
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = False


class Batcher:
    """Collects requests from the slots' threads and runs them batched (module docstring).

    ``size``: the number of rows every batched call receives (the ladder's K); requests made
    outside a :class:`BatchingExecutor` (the main thread's checks, the swaps) run at once, as
    a batch of one row padded to ``size``.
    """

    def __init__(self, size: int = 1) -> None:
        self.size = max(int(size), 1)
        self._cond = threading.Condition()
        self._active = 0
        self._pending: list[_Request] = []
        #: batched calls made, and rows they carried (for benchmarks and tests)
        self.n_calls = 0
        self.n_rows = 0

    def call(self, key: Any, row: Any, fn: BatchedFn) -> Any:
        """``fn([row, ...])`` for this row, batched with the other slots' requests of the same
        ``key`` (a hashable naming the function and its static settings)."""
        slot = getattr(_local, "slot", None)
        if slot is None or getattr(_local, "batcher", None) is not self:
            return self._run(fn, [row])[0]
        req = _Request(key, row, fn, slot)
        with self._cond:
            self._pending.append(req)
            self._dispatch_if_ready()
            while not req.done:
                self._cond.wait()
        if req.error is not None:
            raise req.error
        return req.result

    def _run(self, fn: BatchedFn, rows: list[Any]) -> list[Any]:
        n = len(rows)
        size = max(self.size, n)
        self.n_calls += 1
        self.n_rows += n
        padded = rows + [rows[0]] * (size - n)
        return fn(padded)[:n]

    def _dispatch_if_ready(self) -> None:
        # holding the lock; every working slot is waiting here, so nothing else runs
        if not self._pending or len(self._pending) < self._active:
            return
        pending = sorted(self._pending, key=lambda r: r.slot)
        self._pending = []
        groups: dict[Any, list[_Request]] = {}
        for req in pending:
            groups.setdefault(req.key, []).append(req)
        for reqs in groups.values():
            try:
                results = self._run(reqs[0].fn, [r.row for r in reqs])
                for r, out in zip(reqs, results, strict=True):
                    r.result = out
            except BaseException as err:  # every waiting slot sees the failure
                for r in reqs:
                    r.error = err
            for r in reqs:
                r.done = True
        self._cond.notify_all()

    def _enter(self, n: int) -> None:
        with self._cond:
            self._active += n

    def _leave(self) -> None:
        with self._cond:
            self._active -= 1
            self._dispatch_if_ready()


class BatchingExecutor:
    """An executor (:class:`thermonet.parallel.Executor`) that runs every item in a thread of
    its own, so that their potentials' requests meet in ``batcher``."""

    def __init__(self, batcher: Batcher) -> None:
        self.batcher = batcher
        self._pool: ThreadPoolExecutor | None = None
        self._pool_size = 0

    @property
    def n_workers(self) -> int:
        """As many workers as the ladder has slots (every slot's requests join one batch)."""
        return self.batcher.size

    def map(self, fn: Callable[[Any], T], items: Iterable[Any]) -> list[T]:
        items = list(items)
        if not items:
            return []
        if self._pool is None or self._pool_size < len(items):
            if self._pool is not None:
                self._pool.shutdown()
            self._pool = ThreadPoolExecutor(len(items), thread_name_prefix="thermonet-batch")
            self._pool_size = len(items)
        batcher = self.batcher

        def run(job: tuple[int, Any]) -> T:
            _local.slot, _local.batcher = job[0], batcher
            try:
                return fn(job[1])
            finally:
                _local.slot = _local.batcher = None
                batcher._leave()

        batcher._enter(len(items))
        return list(self._pool.map(run, enumerate(items)))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def __del__(self) -> None:
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.shutdown(wait=False)
