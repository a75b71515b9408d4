"""Restarts and round trips of replicas between the ends of a ladder (restarts as Pigeons.jl
counts them): :func:`replica_passages` for one recorded run, :class:`PassageCounter` for
many ladders counted one iteration at a time (:mod:`.ideal_exchange` simulates them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Passages:
    """Passages of each replica between the ends of the ladder.

    Attributes
    ----------
    restarts : ndarray of int64, shape (K,)
        Arrivals of replica r at the cold end (slot 0) after a visit to the hot end (slot
        K-1): a fresh draw from the hot, well-mixed end reaching the target (Pigeons.jl's
        "tempered restarts").
    round_trips : ndarray of int64, shape (K,)
        Trips cold -> hot -> cold of replica r; a replica's first trip starts at its first
        visit to the cold end, so ``round_trips <= restarts``.
    """

    restarts: np.ndarray
    round_trips: np.ndarray


class PassageCounter:
    """Restarts and round trips of the replicas of ``n_runs`` ladders of ``n_slots`` slots,
    counted one iteration at a time (:func:`replica_passages` for one recorded run,
    :func:`thermonet.analysis.ideal_exchange.ideal_passages` for simulated ones)."""

    def __init__(self, n_runs: int, n_slots: int) -> None:
        self._runs = np.arange(n_runs)
        self.last = np.full((n_runs, n_slots), -1)   # last end visited: -1 none, 0 cold, 1 hot
        self.trip = np.full((n_runs, n_slots), -1)   # the same, hot only after a cold visit
        self.restarts = np.zeros((n_runs, n_slots), dtype=np.int64)
        self.round_trips = np.zeros((n_runs, n_slots), dtype=np.int64)

    def update(self, replica_k: np.ndarray) -> None:
        """Count the iteration after which run m has replica ``replica_k[m, k]`` at slot k."""
        m, cold, hot = self._runs, replica_k[:, 0], replica_k[:, -1]
        self.restarts[m, cold] += self.last[m, cold] == 1
        self.round_trips[m, cold] += self.trip[m, cold] == 1
        self.last[m, cold] = 0
        self.trip[m, cold] = 0
        self.last[m, hot] = 1
        self.trip[m, hot] = np.where(self.trip[m, hot] == 0, 1, self.trip[m, hot])


def replica_passages(replica_k: Any) -> Passages:
    """Restarts and round trips of each replica, from which replica sits at each slot.

    Parameters
    ----------
    replica_k : array_like of int, shape (n_iterations, K)
        The replica at slot k after each iteration (a permutation of 0..K-1 per row); slot 0
        is the coldest, slot K-1 the hottest.

    Returns
    -------
    Passages
        Zeros for fewer than two slots or no rows.
    """
    r = np.asarray(replica_k)
    n_slots = r.shape[1] if r.ndim == 2 else 0
    counter = PassageCounter(1, n_slots)
    if n_slots >= 2:
        for row in r:
            counter.update(row[None, :])
    return Passages(counter.restarts[0], counter.round_trips[0])
