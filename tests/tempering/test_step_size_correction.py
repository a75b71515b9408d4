"""The warm-up's measured step-size correction: the arithmetic of the acceptance law, and on a
Gaussian ladder a correction that brings every rung's production acceptance to the target."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from thermonet.api.adaptation import CORRECTION_MAX, corrected_step_size, law_order
from thermonet.errors import ConfigError
from thermonet.priors import BoxPrior
from thermonet.samplers.hmc import HMC
from thermonet.tempering import DeterministicEvenOdd, Ladder, ReplicaExchange
from thermonet.tempering.warmup import WarmUp
from thermonet.testsystems import Gaussian

PHI = statistics.NormalDist()


def _law(dt: float, c: float) -> float:
    return 2.0 * PHI.cdf(-c * dt * dt)


@pytest.mark.parametrize("dt,c,target", [(0.4, 3.0, 0.65), (0.05, 900.0, 0.8),
                                         (1.3, 0.2, 0.3)])
def test_a_rate_on_the_law_is_corrected_to_the_target_exactly(dt, c, target):
    exact = math.sqrt(-PHI.inv_cdf(target / 2.0) / c)
    if not 1 / CORRECTION_MAX < exact / dt < CORRECTION_MAX:
        pytest.skip("outside the bounded step")
    assert corrected_step_size(dt, _law(dt, c), target, 10**6) == pytest.approx(exact,
                                                                                 rel=1e-12)


def test_a_rung_that_accepted_all_or_nothing_moves_by_a_bounded_step():
    # no acceptance in 200 transitions counts as half of one: a finite step down
    half = math.sqrt(PHI.inv_cdf(0.65 / 2) / PHI.inv_cdf(0.5 / 200 / 2))
    assert corrected_step_size(0.1, 0.0, 0.65, 200) == pytest.approx(0.1 * half, rel=1e-12)
    # everything accepted: the law would multiply dt by ~12; the step is bounded
    assert corrected_step_size(0.1, 1.0, 0.65, 200) == pytest.approx(0.1 * CORRECTION_MAX)
    assert corrected_step_size(0.1, 1e-300, 0.65, 1e300) == pytest.approx(
        0.1 / CORRECTION_MAX)
    # rate at the target: unchanged
    assert corrected_step_size(0.1, 0.65, 0.65, 200) == pytest.approx(0.1, rel=1e-14)
    with pytest.raises(ConfigError, match="target acceptance"):
        corrected_step_size(0.1, 0.5, 1.0, 200)


@pytest.mark.parametrize("p", [1.5, 2.0, 3.7])
def test_the_order_through_two_points_on_a_law_is_the_laws(p):
    c, n = 40.0, 10**9
    pts = [(dt, 2.0 * PHI.cdf(-c * dt**p), n) for dt in (0.1, 0.16)]
    assert law_order(*pts) == pytest.approx(p, rel=1e-9)
    # a corrected dt with that order lands on the target exactly
    exact = (-PHI.inv_cdf(0.65 / 2) / c) ** (1 / p)
    assert corrected_step_size(0.16, pts[1][1], 0.65, n, order=p) == pytest.approx(exact,
                                                                                  rel=1e-9)


def test_the_order_falls_back_where_two_points_cannot_give_it():
    a = 2.0 * PHI.cdf(-0.5)
    assert law_order((0.1, a, 100), (0.105, 0.5, 100)) == 2.0      # points too close
    assert law_order((0.1, 0.9, 100), (0.2, 0.95, 100)) == 2.0      # rate rose with dt
    assert law_order((0.1, 0.9, 100), (0.2, 0.95, 100), default=3.0) == 3.0


def _engine(dt: float) -> tuple[ReplicaExchange, np.ndarray]:
    # 60 directions whose stiffness spans a factor 30: a high-dimensional target whose
    # acceptance follows the law only approximately (the law is asymptotic)
    n = 60
    arch = Gaussian(n, stiffness=list(np.geomspace(1.0, 30.0, n)), prior_scale=400.0)
    ladder = Ladder([0.5, 1.0, 2.0, 4.0])
    cfg = HMC.Config(n_leapfrog=8, step_size=dt, step_size_jitter=0.2, adapt_method="chain",
                     target_accept=0.65)
    engine = ReplicaExchange(HMC, arch.potential(), ladder, prior=BoxPrior.for_architecture(arch),
                             swap=DeterministicEvenOdd(), sampler_config=cfg)
    rng = np.random.default_rng(3)
    theta = rng.normal(size=(4, n)) / np.sqrt(arch.stiffness)
    return engine, theta


def _production_rates(engine, state, streams, n, first):
    accepted = np.zeros(engine.n_slots)
    for i in range(first, first + n):
        state, info = engine.step(state, streams, iteration=i)
        accepted += info.n_accepted_k
    return accepted / n


def test_the_correction_brings_every_rung_to_the_target():
    """Started with one dt for all four rungs, far off the target (acceptance > 0.9 at every
    rung), two rounds of 800 iterations of measurement and correction leave every rung's
    acceptance over the next 1500 iterations within 4 standard errors of 0.65, the error of
    the last round's binomial measurement (which sets dt) and of the production rate's."""
    engine, theta = _engine(0.1)
    streams = engine.make_streams(7)
    state = engine.init(theta)
    before = _production_rates(engine, state, streams, 400, 1)
    assert np.all(before > 0.9)
    warm = WarmUp(engine, retune_iterations=800, retune_rounds=2)
    ws = warm.start(400)
    state, ws = warm.run(state, streams, ws)
    assert ws.finished and [r["round"] for r in ws.records] == [1, 2]
    assert ws.iteration - 400 == warm.planned_iterations == 1600
    n_prod = 1500
    after = _production_rates(engine, state, streams, n_prod, ws.iteration + 1)
    a = 0.65
    sd = math.sqrt(a * (1 - a) / 800 + a * (1 - a) / n_prod)
    assert np.all(np.abs(after - a) < 4 * sd), (after, 4 * sd)


def test_a_whole_warm_up_runs_the_iterations_it_announces():
    """Ladder rounds of 4 and 8, 5 mass iterations, two correction rounds of 3: the engine's
    clock advances by the 28 iterations that ``thermonet run`` announces before it starts."""
    engine, theta = _engine(0.1)
    streams = engine.make_streams(5)
    warm = WarmUp(engine, rounds=2, first_length=4, mass_iterations=5, retune_iterations=3,
                  retune_rounds=2)
    ws = warm.start(10)
    _, ws = warm.run(engine.init(theta), streams, ws)
    assert ws.finished and ws.iteration - 10 == warm.planned_iterations == 4 + 8 + 5 + 2 * 3
