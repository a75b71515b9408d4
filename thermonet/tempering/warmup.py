"""The warm-up of a replica-exchange run: ladder adaptation in rounds, then a frozen ladder.

Round r runs ``first_length * 2**r`` iterations of the engine on the current ladder, measures
each pair's swap rejection rate, and moves the rungs to equalise it
(:func:`thermonet.tempering.ladder_adaptation.equalised_betas`); the slots keep their
configurations and re-tune their step sizes at the new temperatures. After the last round the
ladder is frozen, so production is an exact Markov chain with fixed temperatures. Each round's
ladder, rejection rates and barrier estimate ``Lambda = sum_j r_j`` are returned for the run's
record. The warm-up draws only from the run's own streams, so it is reproducible from the seed.

References
----------
S. Syed, A. Bouchard-Côté, G. Deligiannidis & A. Doucet, JRSS B 84 (2022) 321, Alg. 4.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from thermonet.tempering.exchange import ReplicaExchange, REState, Streams
from thermonet.tempering.ladder import Ladder
from thermonet.tempering.ladder_adaptation import equalised_betas, rejection_rates


def anchor_slots(ladder: Ladder, temperatures: Sequence[float]) -> list[int]:
    """The slots of ``ladder`` at the given temperatures (matched to 1e-12 relative)."""
    t = ladder.temperature_k
    return [int(np.flatnonzero(np.isclose(t, float(a), rtol=1e-12, atol=0.0))[0])
            for a in temperatures]


def adapt_ladder(engine: ReplicaExchange, state: REState, streams: Streams, *, rounds: int,
                 first_length: int, anchors: Sequence[float] = (),
                 adapt_factor: float = 0.9) -> tuple[REState, list[dict[str, Any]]]:
    """Run ``rounds`` rounds of ladder adaptation on ``engine`` (its ladder is changed in
    place); return the state at the end and one record per round."""
    fixed = anchor_slots(engine.ladder, anchors)
    records: list[dict[str, Any]] = []
    iteration = 0
    length = int(first_length)
    for r in range(int(rounds)):
        attempted = np.zeros(engine.n_slots - 1)
        accepted = np.zeros(engine.n_slots - 1)
        for _ in range(length):
            iteration += 1
            state, info = engine.step(state, streams, iteration=iteration)
            attempted += info.swap_attempted_k
            accepted += info.swap_accepted_k
        rejection = rejection_rates(attempted, accepted)
        records.append({"round": r + 1, "iterations": length,
                        "temperatures": [float(t) for t in engine.ladder.temperature_k],
                        "rejection": [float(x) for x in rejection],
                        "barrier": float(rejection.sum())})
        beta = equalised_betas(engine.ladder.beta_k, rejection, fixed)
        with np.errstate(divide="ignore"):
            engine.set_ladder(Ladder(1.0 / beta))
        state = engine.adapt(state, streams, factor=adapt_factor)
        length *= 2
    return state, records


def adapt_masses(engine: ReplicaExchange, state: REState, streams: Streams, *,
                 n_iterations: int, first_iteration: int = 1,
                 adapt_factor: float = 0.9) -> REState:
    """Estimate a diagonal mass matrix per rung from ``n_iterations`` iterations and install it.

    The masses of rung k are the inverse of the variances of the parameters sampled there,
    regularised towards 1 as Stan does (``var_reg = n/(n+5) var + 1e-3 * 5/(n+5)``), so that
    HMC's momenta match each direction's scale at that temperature (the layers of M(3) differ
    in scale by an order of magnitude, and the spread grows with T). The step sizes are then
    re-tuned. Like the ladder, the masses are frozen before production.
    """
    n = int(n_iterations)
    k = engine.n_slots
    total = np.zeros((k, engine.potential.n_params))
    total_sq = np.zeros_like(total)
    iteration = int(first_iteration) - 1
    for _ in range(n):
        iteration += 1
        state, _ = engine.step(state, streams, iteration=iteration)
        theta = np.stack([s.theta for s in state.slots])
        total += theta
        total_sq += theta * theta
    mean = total / n
    var = np.maximum(total_sq / n - mean * mean, 0.0) * n / max(n - 1, 1)
    reg = (n / (n + 5.0)) * var + 1e-3 * (5.0 / (n + 5.0))
    engine.set_masses(list(1.0 / reg))
    return engine.adapt(state, streams, factor=adapt_factor)


__all__ = ["adapt_ladder", "adapt_masses", "anchor_slots"]
