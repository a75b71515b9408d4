"""A per-rung local-move budget chosen in warm-up from how well each rung renews a replica's
energy between two swap rounds, then frozen.

At rung k, ``n_k`` trajectories run between swap rounds. The lag-1 autocorrelation ``rho1_k``
of a replica's standardised energy across one such round (0: the energy is drawn afresh, 1:
the moves do nothing) is measured over warm-up iterations run exactly as in production. If
the rounds compose roughly geometrically, one trajectory keeps ``rho1_k^(1/n_k)`` of it, and
``m`` trajectories keep ``rho1_k^(m/n_k)``. :func:`allocate` gives every sampled rung the
count that brings that to the same value everywhere: ``m_k`` proportional to
``n_k / -log(rho1_k)``, scaled so that the total (the gradients per iteration, the trajectory
length being the same at every rung) equals the measured scheme's, within ``[lo, hi]``.
Any fixed count per rung leaves each rung's distribution invariant, so once the counts are
frozen production is an exact, time-homogeneous Markov chain.

:func:`lag1_sums` accumulates, from two consecutive iterations' ``energy_k`` and
``replica_k``, each rung's pair (energy on arrival, energy after the rung's moves) in the
sums :func:`rho1` reads; they are plain arrays, so a checkpoint can hold them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from thermonet.errors import ConfigError
from thermonet.types import FloatArray, IntArray

#: the pair sums per rung, in column order
COLUMNS = ("n", "before", "after", "before_sq", "after_sq", "cross")
#: measured autocorrelations are clipped into this range before the allocation: a rung whose
#: moves renew the energy (rho1 <= 0) or barely move it (rho1 -> 1) gets a finite weight
RHO_RANGE = (0.02, 0.98)


def lag1_sums(sums: FloatArray, energy_before: Any, replica_before: Any, energy_after: Any,
              replica_after: Any, *, swaps_first: bool) -> None:
    """Add each rung's pair of one iteration to ``sums`` (K, 6) in place.

    ``energy_before``, ``replica_before``: the trace's ``energy_k`` and ``replica_k`` after
    the previous iteration; ``energy_after``, ``replica_after``: after this one. With the
    moves before the swaps (``deo``, ``random-pairs``) rung k moved the replica it held
    before, and its energy after the moves is wherever the swaps put it; with the swaps first
    (``even-odd``) rung k moved the replica it holds now, which arrived with the energy it had
    at its previous slot.
    """
    e0 = np.asarray(energy_before, dtype=np.float64)
    e1 = np.asarray(energy_after, dtype=np.float64)
    r0 = np.asarray(replica_before, dtype=np.int64)
    r1 = np.asarray(replica_after, dtype=np.int64)
    slot_of0, slot_of1 = np.empty_like(r0), np.empty_like(r1)
    slot_of0[r0] = np.arange(r0.size)
    slot_of1[r1] = np.arange(r1.size)
    if swaps_first:
        before, after = e0[slot_of0[r1]], e1
    else:
        before, after = e0, e1[slot_of1[r0]]
    ok = np.isfinite(before) & np.isfinite(after)
    b, a = np.where(ok, before, 0.0), np.where(ok, after, 0.0)
    sums += np.stack([ok.astype(np.float64), b, a, b * b, a * a, b * a], axis=1)


def rho1(sums: FloatArray) -> FloatArray:
    """Per rung: ``sum(d_b d_a) / sum((d_b^2 + d_a^2) / 2)``, ``d = E - mean`` over the rung's
    pairs (the estimator of :func:`thermonet.analysis.local_exploration.lag1_autocorrelation`);
    NaN where fewer than 2 pairs or no variation."""
    s = np.asarray(sums, dtype=np.float64)
    n, sb, sa, sbb, saa, sba = s.T
    with np.errstate(invalid="ignore", divide="ignore"):
        m = (sb + sa) / (2.0 * n)
        cross = sba - m * (sb + sa) + n * m * m
        square = 0.5 * (sbb + saa) - m * (sb + sa) + n * m * m
        out = np.where((n >= 2) & (square > 0), cross / square, np.nan)
    return np.asarray(out, dtype=np.float64)


def allocate(rho1_k: Any, counts_k: Any, sampled: Any, *, lo: int, hi: int) -> IntArray:
    """Trajectories per rung for the same total over the sampled rungs as ``counts_k``.

    Parameters
    ----------
    rho1_k : array_like, shape (K,)
        Measured autocorrelation across one round of ``counts_k[k]`` trajectories (NaN: not
        measured; such a rung keeps its count).
    counts_k : array_like of int, shape (K,)
        The counts the measurement ran with.
    sampled : array_like of bool, shape (K,)
        Rungs whose counts may change (not the prior rung, which draws exactly).
    lo, hi : int
        Bounds on each new count (``1 <= lo <= hi``).

    Returns
    -------
    ndarray of int64, shape (K,)
        ``m_k`` proportional to ``counts_k / -log(rho1_k)`` (``rho1`` clipped into
        :data:`RHO_RANGE`), within ``[lo, hi]``, summing over the re-allocated rungs to what
        ``counts_k`` sums to there (as near as the bounds allow), rounded by largest remainder.
    """
    rho = np.asarray(rho1_k, dtype=np.float64)
    counts = np.asarray(counts_k, dtype=np.int64)
    free = np.asarray(sampled, dtype=bool) & np.isfinite(rho)
    if not (1 <= lo <= hi):
        raise ConfigError(f"local budget bounds [{lo}, {hi}]; expected 1 <= lo <= hi")
    out = counts.copy()
    if not free.any():
        return out
    total = int(counts[free].sum())
    total = min(max(total, lo * int(free.sum())), hi * int(free.sum()))
    r = np.clip(rho[free], *RHO_RANGE)
    weight = counts[free] / -np.log(r)
    share = _water_fill(weight, float(total), float(lo), float(hi))
    out[free] = _round_to_total(share, total, lo, hi)
    return out


def _water_fill(weight: FloatArray, total: float, lo: float, hi: float) -> FloatArray:
    """``c * weight`` clipped into [lo, hi], with c such that the sum is ``total`` (bisection
    on c: the clipped sum increases with it)."""
    def filled(c: float) -> FloatArray:
        return np.clip(c * weight, lo, hi)

    c_lo, c_hi = 0.0, 1.0
    while filled(c_hi).sum() < total and c_hi < 1e300:
        c_hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (c_lo + c_hi)
        c_lo, c_hi = (mid, c_hi) if filled(mid).sum() < total else (c_lo, mid)
    return filled(c_hi)


def _round_to_total(share: FloatArray, total: int, lo: int, hi: int) -> IntArray:
    """Integers within [lo, hi] near ``share`` summing to ``total``: the floors, then one more
    to the largest remainders (ties: the lower slot)."""
    base = np.clip(np.floor(share).astype(np.int64), lo, hi)
    left = total - int(base.sum())
    order = np.argsort(-(share - base), kind="stable")
    for i in order:
        if left <= 0:
            break
        if base[i] < hi:
            base[i] += 1
            left -= 1
    return base


def describe(counts_k: Any, sampled: Any) -> str:
    """The counts of the sampled rungs, for a log line: ``2-9 trajectories (median 4)``."""
    c = np.asarray(counts_k)[np.asarray(sampled, dtype=bool)]
    if c.size == 0:
        return "no sampled rung"
    return (f"{int(c.min())}-{int(c.max())} trajectories per swap round "
            f"(median {math.floor(float(np.median(c)))}, total {int(c.sum())})")


__all__ = ["COLUMNS", "RHO_RANGE", "allocate", "describe", "lag1_sums", "rho1"]
