"""Where local exploration is lost: how much of a fresh energy each rung's local moves give a
replica between two rounds of swaps, and what the run's passages cost in gradients.

The round-trip rate of parallel tempering is bounded by *efficient local exploration* (ELE;
Syed, Bouchard-Côté, Deligiannidis & Doucet, JRSS-B 2022): the local moves between two swap
rounds would renew the replica's energy, drawing it afresh from the rung's distribution.
Then a swap decision knows nothing of where the replica came from. When the moves do not
renew it, a replica that has just arrived from a colder rung still carries a low energy and
tends to be swapped back: the index process diffuses more slowly than the rejection rates
allow (:mod:`.ideal_exchange` gives the count a run would make under ELE).

:func:`local_exploration` measures this per rung from the trace, following every replica:

* ``rho1[k]``: the lag-1 autocorrelation of the replica's standardised energy
  ``z = (E - <E>_k) / sd_k`` across one round of local moves at rung k (its energy on arrival
  at the rung, and after the moves there); 0 under ELE, 1 if the moves do nothing;
* ``efficiency[k] = (1 - rho1) / (1 + rho1)``: the fraction of an independent energy one round
  of local moves gives, read as an AR(1) process (``1 / tau_int`` of that process; 1 under ELE);
* ``tau[k]``: the integrated autocorrelation time (Sokal's window) of the rung's own energy
  series, in iterations: swaps shorten it, slow local moves lengthen it;

and, with the gradients the run spent (:func:`gradients_per_iteration`), its restarts and round
trips per 10^6 gradients, the figure every change to the local budget is judged by.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from thermonet.stats import integrated_autocorrelation_time, mean_and_error

#: fewer pairs (arrival, departure) than this at a rung leave its autocorrelation NaN
MIN_PAIRS = 8


@dataclass(frozen=True)
class LocalExploration:
    """Per-rung renewal of the energy by local moves, and passages per gradient.

    Attributes
    ----------
    rho1, rho1_err : ndarray, shape (K,)
        Lag-1 autocorrelation of a replica's standardised energy across one round of local
        moves at each rung, and its autocorrelation-aware standard error (NaN where the rung's
        energy does not vary or too few pairs exist).
    efficiency : ndarray, shape (K,)
        ``(1 - rho1) / (1 + rho1)``, clipped to [0, 1]: 1 under ideal local exploration.
    tau : ndarray, shape (K,)
        Integrated autocorrelation time of each rung's energy series (iterations).
    gradients : float
        Gradients spent over the iterations measured (NaN when the sampler's cost per
        transition is unknown).
    restarts_per_mgrad, round_trips_per_mgrad : float
        Restarts and round trips (summed over replicas) per 10^6 gradients.
    """

    rho1: np.ndarray
    rho1_err: np.ndarray
    efficiency: np.ndarray
    tau: np.ndarray
    gradients: float
    restarts_per_mgrad: float
    round_trips_per_mgrad: float

    def to_dict(self) -> dict[str, Any]:
        """Plain lists and floats, for JSON."""
        return {"rho1": [float(v) for v in self.rho1],
                "rho1_err": [float(v) for v in self.rho1_err],
                "efficiency": [float(v) for v in self.efficiency],
                "tau": [float(v) for v in self.tau], "gradients": float(self.gradients),
                "restarts_per_mgrad": float(self.restarts_per_mgrad),
                "round_trips_per_mgrad": float(self.round_trips_per_mgrad)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LocalExploration:
        """The inverse of :meth:`to_dict`."""
        def arr(key: str) -> np.ndarray:
            return np.asarray(d[key], dtype=np.float64)

        return cls(arr("rho1"), arr("rho1_err"), arr("efficiency"), arr("tau"),
                   float(d["gradients"]), float(d["restarts_per_mgrad"]),
                   float(d["round_trips_per_mgrad"]))


def lag1_pairs(energy_nk: Any, replica_nk: Any, *, swaps_first: bool = False
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each replica's energy on arrival at a rung and after that rung's local moves.

    Parameters
    ----------
    energy_nk, replica_nk : array_like, shape (n, K)
        The trace's ``energy_k`` and ``replica_k``: after each iteration, the energy at slot k
        and the replica there.
    swaps_first : bool
        True for schemes whose swaps come before the local moves of an iteration
        (``even-odd``): a row's energies are then those after the moves at the row's slots.
        False (``deo``, ``random-pairs``): the moves come first and the swaps then carry the
        new energies to other slots.

    Returns
    -------
    (rung, before, after) : ndarrays, shape (K (n-1),)
        Pairs in iteration order: the rung of the moves, the energy the replica brought there
        and the energy it left with.
    """
    e = np.asarray(energy_nk, dtype=np.float64)
    r = np.asarray(replica_nk, dtype=np.int64)
    n, k = e.shape
    if n < 2:
        return np.zeros(0, np.int64), np.zeros(0), np.zeros(0)
    # slot_of[t, rep]: the slot replica rep holds after iteration t
    slot_of = np.empty_like(r)
    rows = np.arange(n)[:, None]
    slot_of[rows, r] = np.arange(k)[None, :]
    slots = np.tile(np.arange(k), (n - 1, 1))
    t = np.arange(n - 1)[:, None]
    if swaps_first:
        # moves at slot k in iteration t+1 act on replica r[t+1, k], which held
        # slot_of[t, r[t+1, k]] after iteration t
        before = e[t, slot_of[t, r[1:]]]
        after = e[1:]
    else:
        # moves at slot k in iteration t+1 act on replica r[t, k]; its energy after them is
        # recorded wherever the swaps of iteration t+1 put it
        before = e[:-1]
        after = e[t + 1, slot_of[t + 1, r[:-1]]]
    return slots.ravel(), before.ravel(), after.ravel()


def lag1_autocorrelation(before: Any, after: Any, mean: float) -> tuple[float, float]:
    """The correlation of energies on arrival at a rung and after its local moves, about the
    rung's mean energy, with a standard error (pairs in iteration order).

    ``rho = sum(d_b d_a) / sum((d_b^2 + d_a^2) / 2)`` with ``d = E - mean``: the lag-1
    autocorrelation of the standardised energy, the rung's variance estimated from the same
    pairs (in equilibrium a replica arrives with an energy drawn from the rung's own
    distribution). As a ratio estimator, its error is the autocorrelation-aware standard
    error of the residuals ``d_b d_a - rho (d_b^2 + d_a^2) / 2`` over the mean denominator
    (for an AR(1) series this is Bartlett's ``sqrt((1 - rho^2) / n)``). NaN for fewer than
    :data:`MIN_PAIRS` pairs, non-finite energies or a constant rung.
    """
    b = np.asarray(before, dtype=np.float64) - mean
    a = np.asarray(after, dtype=np.float64) - mean
    if b.size < MIN_PAIRS or not (np.all(np.isfinite(b)) and np.all(np.isfinite(a))):
        return math.nan, math.nan
    num, den = b * a, 0.5 * (b * b + a * a)
    scale = float(den.mean())
    if not scale > 0:
        return math.nan, math.nan
    rho = float(num.mean()) / scale
    _, se = mean_and_error(num - rho * den)
    return rho, se / scale


def gradients_per_iteration(sampler: dict[str, Any], n_trajectories: Any,
                            temperatures: Any) -> float:
    """Gradients one iteration costs: the sampler's mean leapfrog steps per trajectory times
    the trajectories summed over the sampled rungs (a prior rung draws without gradients).

    ``sampler`` is the run's resolved ``[sampler]`` table; with ``n_leapfrog_jitter = j`` a
    trajectory runs L' steps uniform on ``[max(1, ceil((1 - j) L)), L]``. NaN for a sampler
    without ``n_leapfrog`` (a plugin whose cost per transition is not known here).
    """
    n_leap = sampler.get("n_leapfrog")
    if isinstance(n_leap, bool) or not isinstance(n_leap, int):
        return math.nan
    jitter = float(sampler.get("n_leapfrog_jitter", 0.0) or 0.0)
    low = max(1, math.ceil((1.0 - jitter) * n_leap)) if jitter > 0 else n_leap
    mean_steps = (low + n_leap) / 2.0
    t = np.asarray(temperatures, dtype=np.float64)
    per_rung = np.broadcast_to(np.asarray(n_trajectories, dtype=np.float64), t.shape)
    return float(mean_steps * per_rung[np.isfinite(t)].sum())


def local_exploration(energy_nk: Any, replica_nk: Any, *, restarts: int, round_trips: int,
                      gradients: float, swaps_first: bool = False) -> LocalExploration:
    """:class:`LocalExploration` of the iterations given (after the discard).

    Parameters
    ----------
    energy_nk, replica_nk : array_like, shape (n, K)
        The trace's ``energy_k`` and ``replica_k`` over the iterations measured.
    restarts, round_trips : int
        Passages over the same iterations (summed over replicas).
    gradients : float
        Gradients spent over them (``n * gradients_per_iteration(...)``).
    swaps_first : bool
        As :func:`lag1_pairs`.
    """
    e = np.asarray(energy_nk, dtype=np.float64)
    n, k = e.shape if e.ndim == 2 else (0, 0)
    rho, err, tau = (np.full(k, math.nan) for _ in range(3))
    if n >= 2:
        rung, before, after = lag1_pairs(e, replica_nk, swaps_first=swaps_first)
        for j in range(k):
            col = e[:, j]
            if not np.all(np.isfinite(col)):
                continue
            tau[j] = integrated_autocorrelation_time(col) if np.ptp(col) > 0 else math.nan
            at = rung == j
            rho[j], err[j] = lag1_autocorrelation(before[at], after[at], float(col.mean()))
    with np.errstate(invalid="ignore", divide="ignore"):
        eff = np.clip((1.0 - rho) / (1.0 + rho), 0.0, 1.0)
    per = 1e6 / gradients if gradients > 0 and math.isfinite(gradients) else math.nan
    return LocalExploration(rho, err, eff, tau, float(gradients), restarts * per,
                            round_trips * per)


def exploration_line(le: LocalExploration, temperatures: Any) -> str:
    """One line: passages per 10^6 gradients and the rung whose local moves renew the energy
    least."""
    t = np.asarray(temperatures, dtype=np.float64)
    head = (f"per 10^6 gradients: {le.restarts_per_mgrad:.3g} restarts, "
            f"{le.round_trips_per_mgrad:.3g} round trips" if math.isfinite(le.gradients)
            else "gradients unknown for this sampler")
    finite = np.isfinite(le.rho1) & np.isfinite(t)
    if not finite.any():
        return head
    i = int(np.argmax(np.where(finite, le.rho1, -np.inf)))
    median = float(np.median(le.rho1[finite]))
    return (f"{head}; energy autocorrelation across local moves: median {median:.2f}, "
            f"worst {le.rho1[i]:.2f} ± {le.rho1_err[i]:.2f} at T = {t[i]:.4g} "
            f"(efficiency {le.efficiency[i]:.2f}; 0 and 1 under ideal local exploration)")


__all__ = ["MIN_PAIRS", "LocalExploration", "exploration_line", "gradients_per_iteration",
           "lag1_autocorrelation", "lag1_pairs", "local_exploration"]
