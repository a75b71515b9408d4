"""How many restarts and round trips a run would have made if its local sampler explored
perfectly: the replica index process under *efficient local exploration* (ELE).

Syed, Bouchard-Côté, Deligiannidis & Doucet (JRSS-B 2022, Sec. 3) analyse replica exchange
under ELE: after every round of local moves each replica's energy is a fresh draw from its
rung's distribution, so a swap attempt on pair (k, k+1) is accepted with probability
``1 - r_k`` independently of everything before. Under ELE the deterministic even-odd scheme's
round trips (summed over replicas) arrive at the rate

    tau = 1 / (2 + 2 sum_k r_k / (1 - r_k))   per iteration            (their Thm. 3)

which tends to ``1 / (2 + 2 Lambda)`` as the rungs get dense (``r_k -> 0``). A finite run
counts fewer: every replica must first reach an end before its first trip can begin, and for
long ladders that start-up takes a sizeable part of the run.

:func:`ideal_passages` gives both: it simulates the index process of the run's own scheme
with the run's measured rejection rates ``r_k`` and its number of iterations, and counts
restarts and round trips exactly as :func:`~thermonet.analysis.passages.replica_passages`
does (:func:`random_pairs_bound` bounds the paper's random-pairs scheme from above). The
ratio of a run's measured restarts to this expectation is the efficiency of its
local exploration: 1 when the sampler renews the energy between swaps, far below 1 when a
replica carries the energy of the rung it came from (and so tends to be sent back).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from thermonet.analysis.passages import PassageCounter
from thermonet.errors import ConfigError

#: independent simulations of the index process behind each expectation
REPEATS = 64

#: the schemes modelled: sweeps of disjoint pairs, where a replica meets at most one swap
#: attempt between rounds of local moves, so under ELE every attempt is independent. The
#: paper's random pairs attempt K overlapping pairs with the energies fixed in between (a pair
#: drawn twice can swap back), which the independent-attempt model over-counts: it is an upper
#: bound (:func:`random_pairs_bound`), not an expectation
SCHEMES = ("deo", "even-odd")


@dataclass(frozen=True)
class IdealPassages:
    """Restarts and round trips (summed over replicas) of the ELE index process.

    Attributes
    ----------
    restarts, restarts_sd, round_trips, round_trips_sd : float
        Mean and standard deviation over the simulated runs (the spread of one run's count,
        not the error of the mean).
    rate : float
        The steady round-trip rate per iteration, ``1 / (2 + 2 sum r/(1-r))`` for the
        deterministic even-odd scheme; NaN for the random start (no closed form used here).
    """

    restarts: float
    restarts_sd: float
    round_trips: float
    round_trips_sd: float
    rate: float

    def to_dict(self) -> dict[str, float]:
        """Plain floats, for JSON."""
        return {"restarts": self.restarts, "restarts_sd": self.restarts_sd,
                "round_trips": self.round_trips, "round_trips_sd": self.round_trips_sd,
                "rate": self.rate}


def steady_round_trip_rate(rejection: Any) -> float:
    """``1 / (2 + 2 sum_k r_k / (1 - r_k))``: round trips per iteration of the deterministic
    even-odd scheme under ELE (Syed et al. 2022, Thm. 3); 0 if any pair never accepts."""
    r = np.asarray(rejection, dtype=np.float64)
    if r.size == 0 or not np.all(np.isfinite(r)):
        return math.nan
    if np.any(r >= 1.0):
        return 0.0
    return float(1.0 / (2.0 + 2.0 * np.sum(r / (1.0 - r))))


def ideal_passages(rejection: Any, n_iterations: int, *, scheme: str = "deo",
                   repeats: int = REPEATS, seed: int = 0) -> IdealPassages:
    """The restarts and round trips a run of ``n_iterations`` would make under ELE.

    Parameters
    ----------
    rejection : array_like of float, shape (K-1,)
        Swap rejection rate of each adjacent pair (slot 0 the coldest).
    n_iterations : int
        Iterations of the run (one round of swaps each).
    scheme : {"deo", "even-odd"}
        The run's swap scheme (:mod:`thermonet.tempering.swaps`): a sweep of disjoint pairs,
        deterministic or with a random start.
    repeats, seed : int
        Simulated runs, and the seed of their random numbers (the expectation is a fixed
        function of its inputs).

    Returns
    -------
    IdealPassages
    """
    r = np.asarray(rejection, dtype=np.float64).ravel()
    if not np.all(np.isfinite(r)) or np.any((r < 0) | (r > 1)):
        raise ConfigError(f"rejection rates {r.tolist()[:6]}...; expected numbers in [0, 1]")
    if scheme not in SCHEMES:
        raise ConfigError(f"scheme = {scheme!r}; expected one of {SCHEMES} (the ELE model "
                          "assumes one attempt per replica between local moves)")
    n_slots = r.size + 1
    rate = steady_round_trip_rate(r) if scheme == "deo" else math.nan
    if n_slots < 2 or n_iterations <= 0:
        return IdealPassages(0.0, 0.0, 0.0, 0.0, rate)
    rng = np.random.default_rng(seed)
    # rep[m, k]: the replica at slot k of simulated run m (labels do not matter: any start
    # with one replica per slot is the same process)
    rep = np.tile(np.arange(n_slots), (repeats, 1))
    counter = PassageCounter(repeats, n_slots)
    for it in range(1, n_iterations + 1):
        first = it % 2 if scheme == "deo" else rng.integers(0, 2, size=repeats)
        _sweep(rep, r, np.broadcast_to(first, repeats), rng)
        counter.update(rep)
    restarts, trips = counter.restarts.sum(axis=1), counter.round_trips.sum(axis=1)
    return IdealPassages(float(restarts.mean()), float(restarts.std()),
                         float(trips.mean()), float(trips.std()), rate)


def _sweep(rep: np.ndarray, r: np.ndarray, first: np.ndarray,
           rng: np.random.Generator) -> None:
    """One sweep of disjoint pairs (j, j+1), j = first[m], first[m] + 2, ... in each
    simulated run m, in place."""
    repeats, n_slots = rep.shape
    u = rng.random((repeats, n_slots - 1))
    for start in (0, 1):
        js = np.arange(start, n_slots - 1, 2)
        ok = (u[:, js] >= r[js]) & (first == start)[:, None]
        a, b = rep[:, js], rep[:, js + 1]
        rep[:, js] = np.where(ok, b, a)
        rep[:, js + 1] = np.where(ok, a, b)


def random_pairs_bound(rejection: Any, n_iterations: int, *, n_swaps: int | None = None,
                       repeats: int = REPEATS, seed: int = 0) -> IdealPassages:
    """An upper bound on the restarts and round trips of the paper's random-pairs scheme under
    ELE: ``n_swaps`` attempts per iteration (default one per slot, as
    :class:`~thermonet.tempering.RandomPairs`) on uniformly drawn adjacent pairs, each accepted
    with probability ``1 - r_k`` independently.

    The real scheme attempts its pairs with the energies fixed in between, so a pair drawn
    twice tends to swap back (the reverse of a swap accepted with probability a < 1 is
    accepted with probability 1); treating the attempts as independent lets replicas travel
    further than they can, so the counts here exceed those of the scheme under ELE
    (checked against the engine in tests/analysis/test_ideal_exchange.py), and ELE is the best
    case a local sampler approaches. ``rate`` is NaN (no closed form). Parameters as
    :func:`ideal_passages`.
    """
    r = np.asarray(rejection, dtype=np.float64).ravel()
    if not np.all(np.isfinite(r)) or np.any((r < 0) | (r > 1)):
        raise ConfigError(f"rejection rates {r.tolist()[:6]}...; expected numbers in [0, 1]")
    n_slots = r.size + 1
    attempts = n_slots if n_swaps is None else int(n_swaps)
    if n_slots < 2 or n_iterations <= 0:
        return IdealPassages(0.0, 0.0, 0.0, 0.0, math.nan)
    rng = np.random.default_rng(seed)
    rep = np.tile(np.arange(n_slots), (repeats, 1))
    rows = np.arange(repeats)
    counter = PassageCounter(repeats, n_slots)
    for _ in range(n_iterations):
        js = rng.integers(0, n_slots - 1, size=(attempts, repeats))
        ok = rng.random((attempts, repeats)) >= r[js]
        for j, accept in zip(js, ok, strict=True):
            m, k = rows[accept], j[accept]
            rep[m, k], rep[m, k + 1] = rep[m, k + 1], rep[m, k]
        counter.update(rep)
    restarts, trips = counter.restarts.sum(axis=1), counter.round_trips.sum(axis=1)
    return IdealPassages(float(restarts.mean()), float(restarts.std()),
                         float(trips.mean()), float(trips.std()), math.nan)


def ideal_for_run(rejection: Any, n_iterations: int, ladder: dict[str, Any]
                  ) -> IdealPassages | None:
    """:func:`ideal_passages` for a run's measured rejections and its ``[ladder]``
    ``swap_scheme``; None for a single rung, a pair never attempted, or a scheme outside
    :data:`SCHEMES` (the paper's random pairs)."""
    r = np.asarray(rejection, dtype=np.float64)
    if r.size == 0 or not np.all(np.isfinite(r)) or n_iterations <= 0:
        return None
    scheme = str(ladder.get("swap_scheme", "random-pairs"))
    if scheme not in SCHEMES:
        return None
    return ideal_passages(r, n_iterations, scheme=scheme)


def ideal_line(restarts: int, round_trips: int, ideal: dict[str, float]) -> str:
    """One line comparing a run's restarts and round trips with :meth:`IdealPassages.to_dict`
    (the ELE expectation), with the efficiency of its local exploration."""
    exp_r, exp_t = ideal["restarts"], ideal["round_trips"]
    eff = f"{restarts / exp_r:.2f}" if exp_r > 0 else "n/a"
    return (f"restarts {restarts}, round trips {round_trips}; with local moves that renew the "
            f"energy between swaps (ELE) {exp_r:.0f} ± {ideal['restarts_sd']:.0f} and "
            f"{exp_t:.0f} ± {ideal['round_trips_sd']:.0f}: local-exploration efficiency {eff}")
