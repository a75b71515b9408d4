"""The ELE expectation of restarts and round trips: the closed-form rate, a deterministic case
counted by hand, and the engine itself with a sampler that draws exactly from every rung."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pytest

from thermonet.analysis.ideal_exchange import (
    ideal_for_run,
    ideal_line,
    ideal_passages,
    random_pairs_bound,
    steady_round_trip_rate,
)
from thermonet.analysis.mixing import replica_passages, swap_barrier
from thermonet.api import Sampler
from thermonet.errors import ConfigError
from thermonet.tempering import (
    DeterministicEvenOdd,
    EvenOdd,
    Ladder,
    RandomPairs,
    ReplicaExchange,
)
from thermonet.testsystems import Gaussian

Z = 4.0  # tolerance in standard deviations of one run's count


class _State(NamedTuple):
    theta: np.ndarray
    energy: float
    step_size: float


class _Info(NamedTuple):
    is_accepted: bool


class ExactGaussian(Sampler):
    """Draws every transition exactly from exp(-|w|^2 / 2T): efficient local exploration by
    construction (the potential is the unit-stiffness Gaussian, E = |w|^2 / 2)."""

    name = "exact-gaussian"

    @dataclass(frozen=True)
    class Config:
        pass

    State = _State
    Info = _Info

    def init(self, theta0):
        theta = np.asarray(theta0, dtype=np.float64)
        return _State(theta, float(self.potential.energy(theta)), 1.0)

    def step(self, state, rng):
        theta = rng.standard_normal(state.theta.size) * math.sqrt(self.temperature)
        return _State(theta, float(self.potential.energy(theta)), 1.0), _Info(True)


class Flat(ExactGaussian):
    """Reports the energy 0 for every state, so every swap is accepted (r = 0)."""

    name = "flat"

    def init(self, theta0):
        return _State(np.asarray(theta0, dtype=np.float64), 0.0, 1.0)

    def step(self, state, rng):
        return _State(state.theta, 0.0, 1.0), _Info(True)


def _engine_run(swap, n_slots, n_iterations, dim=12, seed=3, sampler=ExactGaussian):
    arch = Gaussian(dim, stiffness=[1.0] * dim, prior_scale=1e6)
    temps = np.geomspace(0.05, 20.0, n_slots)
    re = ReplicaExchange(sampler, arch.potential(), Ladder.from_temperatures(temps),
                         swap=swap)
    streams = re.make_streams(seed)
    rng = np.random.default_rng(seed)
    state = re.init([rng.standard_normal(dim) * math.sqrt(t) for t in temps])
    reps, att, acc = [], [], []
    for it in range(1, n_iterations + 1):
        state, info = re.step(state, streams, iteration=it)
        reps.append(info.replica_k.copy())
        att.append(info.swap_attempted_k)
        acc.append(info.swap_accepted_k)
    return np.array(reps), swap_barrier(att, acc).rejection


def test_the_steady_rate_on_known_numbers():
    assert steady_round_trip_rate([0.0] * 7) == 0.5
    assert steady_round_trip_rate([0.5, 0.5]) == pytest.approx(1 / (2 + 2 * 2))
    assert steady_round_trip_rate([0.2, 1.0]) == 0.0
    assert math.isnan(steady_round_trip_rate([]))


def test_without_rejection_the_even_odd_flow_is_counted_exactly():
    """r = 0: every attempt succeeds, the process is deterministic (spread 0) and its count
    equals replica_passages on the same process built by hand."""
    n_slots, n_it = 6, 200
    rep, hist = np.arange(n_slots), []
    for it in range(1, n_it + 1):
        for j in range(it % 2, n_slots - 1, 2):
            rep[j], rep[j + 1] = rep[j + 1], rep[j]
        hist.append(rep.copy())
    p = replica_passages(np.array(hist))
    ideal = ideal_passages([0.0] * (n_slots - 1), n_it)
    assert ideal.restarts_sd == 0 and ideal.round_trips_sd == 0
    assert ideal.restarts == p.restarts.sum() and ideal.round_trips == p.round_trips.sum()
    assert ideal.round_trips > 0


def test_a_pair_that_never_accepts_allows_no_restart():
    ideal = ideal_passages([0.2, 1.0, 0.2], 500)
    assert ideal.restarts == 0 and ideal.round_trips == 0 and ideal.rate == 0.0


def test_long_runs_approach_the_steady_rate():
    """After the start-up (every replica first reaching an end) round trips accrue at
    1 / (2 + 2 sum r/(1-r)) per iteration (Syed et al. 2022, Thm. 3)."""
    r = np.array([0.3, 0.5, 0.2, 0.4, 0.35, 0.25, 0.45])
    short, long = ideal_passages(r, 4000), ideal_passages(r, 8000)
    rate = (long.round_trips - short.round_trips) / 4000
    err = math.hypot(long.round_trips_sd, short.round_trips_sd) / math.sqrt(64) / 4000
    assert abs(rate - steady_round_trip_rate(r)) < Z * err + 1e-9, (rate, err)


@pytest.mark.parametrize(("swap", "scheme", "n_slots"),
                         [(DeterministicEvenOdd(), "deo", 14), (EvenOdd(), "even-odd", 10)])
def test_the_engine_with_exact_local_moves_makes_the_expected_passages(swap, scheme, n_slots):
    """The engine with a sampler that draws every rung exactly (ELE by construction): its
    restarts and round trips are a draw from the distribution ideal_passages simulates."""
    n_it = 2500
    reps, rejection = _engine_run(swap, n_slots, n_it)
    p = replica_passages(reps)
    ideal = ideal_passages(rejection, n_it, scheme=scheme)
    assert ideal.round_trips > 20
    assert abs(p.restarts.sum() - ideal.restarts) < Z * ideal.restarts_sd, (p, ideal)
    assert abs(p.round_trips.sum() - ideal.round_trips) < Z * ideal.round_trips_sd, (p, ideal)


def test_random_pairs_without_rejection_match_the_engine():
    """r = 0: every attempt is accepted whatever the energies, so the independent-attempt
    model is the engine's own random-pairs process; their counts agree within the spread."""
    n_slots, n_it = 8, 3000
    reps, rejection = _engine_run(RandomPairs(), n_slots, n_it, sampler=Flat)
    assert np.all(rejection == 0.0)
    p = replica_passages(reps)
    bound = random_pairs_bound(rejection, n_it)
    assert bound.round_trips > 20 and math.isnan(bound.rate)
    assert abs(p.restarts.sum() - bound.restarts) < Z * bound.restarts_sd, (p, bound)
    assert abs(p.round_trips.sum() - bound.round_trips) < Z * bound.round_trips_sd, (p, bound)


def test_random_pairs_bound_exceeds_the_engine_with_exact_local_moves():
    """With rejections, attempts within an iteration share the energies (a pair drawn twice
    tends to swap back): the engine with exact local moves makes fewer passages than the
    independent-attempt model, which is therefore an upper bound."""
    n_slots, n_it = 8, 3000
    reps, rejection = _engine_run(RandomPairs(), n_slots, n_it)
    assert 0.1 < rejection.mean() < 0.9
    p = replica_passages(reps)
    bound = random_pairs_bound(rejection, n_it)
    assert p.round_trips.sum() < bound.round_trips, (p, bound)
    assert p.restarts.sum() < bound.restarts, (p, bound)
    assert random_pairs_bound([0.2, 1.0, 0.2], 300).round_trips == 0
    with pytest.raises(ConfigError, match=r"expected numbers in \[0, 1\]"):
        random_pairs_bound([0.3, -0.1], 10)


def test_run_settings_choose_the_scheme_and_bad_input_is_refused():
    r = [0.3] * 5
    assert ideal_for_run(r, 100, {"swap_scheme": "deo"}).rate == steady_round_trip_rate(r)
    assert math.isnan(ideal_for_run(r, 100, {"swap_scheme": "even-odd"}).rate)
    assert ideal_for_run(r, 100, {"swap_scheme": "random-pairs"}) is None
    assert ideal_for_run([0.3, math.nan], 100, {"swap_scheme": "deo"}) is None
    assert ideal_for_run([], 100, {}) is None
    assert ideal_for_run(r, 100, {"swap_scheme": "someone-elses"}) is None
    with pytest.raises(ConfigError, match=r"expected numbers in \[0, 1\]"):
        ideal_passages([0.3, 1.5], 10)
    with pytest.raises(ConfigError, match="one attempt per replica"):
        ideal_passages(r, 10, scheme="random-pairs")
    line = ideal_line(0, 0, ideal_passages(r, 400).to_dict())
    assert "efficiency 0.00" in line

