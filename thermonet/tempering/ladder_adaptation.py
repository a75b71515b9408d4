"""Placing the rungs of a ladder so that every adjacent pair swaps equally often.

For a pair of rungs ``beta_j > beta_{j+1}`` the swap rejection rate ``r_j`` measured in a
warm-up round estimates the local communication barrier between them; the cumulative barrier
``Lambda(beta)`` (0 at the hot end, ``Lambda = sum_j r_j`` at the cold end) is then
interpolated monotonically, and the rungs are re-placed at equal increments of it (Syed,
Bouchard-Côté, Deligiannidis & Doucet 2022, Alg. 4 and Sec. 5.1). For a fixed number of rungs
this equalises the rejection rates, which maximises the round-trip rate of non-reversible
parallel tempering, ``1 / (2 + 2 Lambda)`` in the limit of many rungs.

Anchors: the coldest and the hottest rung never move; neither does any rung listed in
``anchors`` (e.g. ``T = 1``, so that the free energy at the posterior's own temperature stays
available). Each segment between anchors keeps its number of rungs and is equalised alone.

References
----------
S. Syed, A. Bouchard-Côté, G. Deligiannidis & A. Doucet, "Non-reversible parallel tempering: a
scalable highly parallel MCMC scheme", JRSS B 84 (2022) 321, Alg. 4.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import numpy as np

from thermonet.errors import ConfigError
from thermonet.types import FloatArray


def rejection_rates(attempted: FloatArray, accepted: FloatArray) -> FloatArray:
    """Per-pair rejection rates ``1 - accepted/attempted`` (pairs never attempted: 1)."""
    att = np.asarray(attempted, dtype=np.float64)
    acc = np.asarray(accepted, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(att > 0, 1.0 - acc / np.maximum(att, 1.0), 1.0)
    return np.clip(rate, 0.0, 1.0)


def cumulative_barrier(beta_k: FloatArray, rejection_j: FloatArray) -> FloatArray:
    """``Lambda`` at each rung, in slot order (slot 0 the coldest): the sum of the rejection
    rates of the pairs between the hottest rung and this one (0 at the hottest rung)."""
    beta = np.asarray(beta_k, dtype=np.float64)
    r = np.asarray(rejection_j, dtype=np.float64)
    if r.shape != (beta.size - 1,):
        raise ConfigError(f"{r.size} rejection rates for {beta.size} rungs; expected "
                          f"{beta.size - 1}")
    lam = np.zeros(beta.size)
    # walk from the hot end (last slot) down to the cold end (slot 0)
    lam[:-1] = np.cumsum(r[::-1])[::-1]
    return lam


def equalised_betas(beta_k: FloatArray, rejection_j: FloatArray,
                    anchors: Iterable[int] = ()) -> FloatArray:
    """New inverse temperatures, slot order kept, with equal barrier increments per pair.

    ``Lambda(beta)`` is the piecewise-linear interpolation of :func:`cumulative_barrier` over
    the current rungs; each segment between anchors (and the two ends) gets its rungs at equal
    steps of ``Lambda``. A segment whose barrier is 0 keeps its rungs.
    """
    beta = np.asarray(beta_k, dtype=np.float64)
    if np.any(np.diff(beta) >= 0):
        raise ConfigError("inverse temperatures must decrease along the slots")
    lam = cumulative_barrier(beta, rejection_j)
    fixed = sorted({0, beta.size - 1, *(int(a) for a in anchors)})
    out = beta.copy()
    # np.interp needs ascending x: Lambda decreases along the slots, so reverse
    lam_up, beta_up = lam[::-1], beta[::-1]
    for a, b in itertools.pairwise(fixed):
        if b - a < 2 or lam[a] == lam[b]:
            continue
        targets = np.linspace(lam[a], lam[b], b - a + 1)[1:-1]
        out[a + 1:b] = _inverse_interp(targets, lam_up, beta_up)
    return out


def _inverse_interp(targets: FloatArray, lam_up: FloatArray, beta_up: FloatArray) -> FloatArray:
    """The beta at which the piecewise-linear Lambda(beta) takes each target value (Lambda is
    non-decreasing in beta; flat stretches resolve to their first point)."""
    lam_strict, idx = np.unique(lam_up, return_index=True)
    return np.interp(targets, lam_strict, beta_up[idx])


__all__ = ["cumulative_barrier", "equalised_betas", "rejection_rates"]
