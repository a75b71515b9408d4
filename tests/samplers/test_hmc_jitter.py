"""HMC step-size / trajectory-length jitter and dt adaptation along the chain ("chain").

Figures these tests rely on (resonance, acceptance) are measured by
``benchmarks/hmc_mixing.py`` and tabulated in docs/samplers.md.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from thermonet.api import adaptation
from thermonet.errors import ConfigError
from thermonet.samplers.hmc import HMC
from thermonet.stats import batch_means
from thermonet.stats import integrated_autocorrelation_time as tau_int
from thermonet.testing import check_sampler
from thermonet.testsystems import Gaussian


def _chain(s: HMC, state, rng, n: int):
    e, th, acc = np.empty(n), np.empty((n, state.theta.shape[0])), np.empty(n)
    for t in range(n):
        state, info = s.step(state, rng)
        e[t], th[t] = state.energy, state.theta
        acc[t] = adaptation.acceptance_probability(info.log_accept_ratio)
    return state, e, th, acc


# --- settings and the random stream --------------------------------------------------------

@pytest.mark.parametrize("bad", [{"step_size_jitter": 1.0}, {"step_size_jitter": -0.1},
                                 {"n_leapfrog_jitter": 1.5}, {"target_accept": 1.0},
                                 {"warmup_transitions": 0}, {"adapt_method": "stan"}])
def test_bad_settings_are_refused(bad):
    with pytest.raises(ConfigError):
        HMC(Gaussian(n=2).potential(), **bad)


def test_jitter_draws_documented_uniforms_in_order():
    """momenta (n normals), accept uniform, dt uniform, L uniform: nothing else."""
    n, dt, n_leapfrog = 3, 0.2, 10
    s = HMC(Gaussian(n=n).potential(), n_leapfrog=n_leapfrog, step_size=dt,
            step_size_jitter=0.3, n_leapfrog_jitter=0.5)
    state = s.init(np.full(n, 0.1))
    rng = np.random.default_rng(5)
    _, info = s.step(state, rng)
    ref = np.random.default_rng(5)
    ref.standard_normal(n)
    ref.random()
    u_dt, u_l = ref.random(), ref.random()
    assert info.step_size == pytest.approx(dt * (1 + 0.3 * (2 * u_dt - 1)), rel=1e-15)
    assert info.n_steps == 5 + int(u_l * 6)
    assert rng.random() == ref.random()            # the generators are in the same state


def test_jitter_off_draws_like_the_plain_sampler():
    pot = Gaussian(n=3).potential()
    a = HMC(pot, n_leapfrog=5, step_size=0.3)
    b = HMC(pot, n_leapfrog=5, step_size=0.3, step_size_jitter=0.0, n_leapfrog_jitter=0.0)
    ra, rb = np.random.default_rng(1), np.random.default_rng(1)
    sa, sb = a.init(np.full(3, 0.2)), b.init(np.full(3, 0.2))
    for _ in range(50):
        sa, _ = a.step(sa, ra)
        sb, _ = b.step(sb, rb)
    assert np.array_equal(sa.theta, sb.theta) and ra.random() == rb.random()


def test_jitter_ranges_cover_the_documented_intervals():
    s = HMC(Gaussian(n=1).potential(), n_leapfrog=10, step_size=1.0, step_size_jitter=0.2,
            n_leapfrog_jitter=0.35)
    rng = np.random.default_rng(0)
    draws = [s.trajectory_length(1.0, rng) for _ in range(4000)]
    dts = np.array([d[0] for d in draws])
    lengths = {d[1] for d in draws}
    assert 0.8 <= dts.min() < 0.81 and 1.19 < dts.max() <= 1.2
    assert abs(dts.mean() - 1.0) < 0.01
    assert lengths == set(range(7, 11))            # ceil(0.65 * 10) = 7 .. 10
    full = HMC(Gaussian(n=1).potential(), n_leapfrog=4, n_leapfrog_jitter=1.0)
    assert {full.trajectory_length(1.0, rng)[1] for _ in range(500)} == {1, 2, 3, 4}


def test_same_seed_same_chain_with_jitter():
    s = HMC(Gaussian(n=4, stiffness=[1, 2, 3, 4]).potential(), n_leapfrog=8, step_size=0.3,
            step_size_jitter=0.5, n_leapfrog_jitter=1.0)
    runs = [_chain(s, s.init(np.full(4, 0.3)), np.random.default_rng(9), 300) for _ in range(2)]
    assert np.array_equal(runs[0][1], runs[1][1]) and np.array_equal(runs[0][2], runs[1][2])


# --- exactness -----------------------------------------------------------------------------

def test_jitter_keeps_the_gaussian_exact():
    """<E> = n T/2 and var(w_i) = T/k_i with both jitters on (stiffness 1..100, 10-D)."""
    n, temperature = 10, 0.5
    k = np.geomspace(1.0, 100.0, n)
    s = HMC(Gaussian(n, stiffness=list(k)).potential(), temperature=temperature,
            n_leapfrog=10, step_size=0.12, step_size_jitter=0.5, n_leapfrog_jitter=0.7)
    rng = np.random.default_rng(21)
    state, _, _, _ = _chain(s, s.init(np.zeros(n)), rng, 500)
    _, e, th, _ = _chain(s, state, rng, 30000)
    mean, sem = batch_means(e)
    assert abs(mean - n * temperature / 2) < 5 * sem
    for i in range(n):
        m2, se2 = batch_means(th[:, i] ** 2)
        assert abs(m2 - temperature / k[i]) < 5 * se2, i


# --- resonance ----------------------------------------------------------------------------

@pytest.mark.parametrize("opts", [{"step_size_jitter": 0.2}, {"n_leapfrog_jitter": 0.5}])
@pytest.mark.slow
def test_jitter_breaks_the_equal_frequency_resonance(opts):
    """Unit stiffness, unit masses: one frequency; L = 10 at dt = 0.9 nearly closes an orbit."""
    pot = Gaussian(10).potential()
    rng0 = np.random.default_rng(4)
    start = HMC(pot).init(rng0.standard_normal(10), step_size=0.9)
    taus = {}
    for name, extra in (("plain", {}), ("jitter", opts)):
        s = HMC(pot, n_leapfrog=10, **extra)
        _, e, _, _ = _chain(s, start, np.random.default_rng(8), 20000)
        taus[name] = tau_int(e)
    # measured: 206 plain, 4.0 (dt jitter 0.2) and 4.3 (L jitter 0.5)
    assert taus["plain"] > 50                       # the resonance is there ...
    assert taus["jitter"] < taus["plain"] / 10      # ... and jitter removes it


# --- adaptation along the chain -----------------------------------------------------------

def test_warmup_windows_follow_stan():
    assert adaptation.warmup_windows(1000) == [75, 25, 50, 100, 200, 500, 50]
    assert adaptation.warmup_windows(200) == [75, 25, 50, 50]
    assert adaptation.warmup_windows(100) == [15, 75, 10]
    for n in range(0, 700, 7):
        assert sum(adaptation.warmup_windows(n)) == n


def test_dual_averaging_state_is_plain_and_resumable():
    """Stopping warm-up, storing the state as plain numbers and resuming changes nothing."""
    n = 5
    s = HMC(Gaussian(n, stiffness=[1, 2, 4, 8, 16]).potential(), n_leapfrog=6,
            step_size=0.1, step_size_jitter=0.2)
    st0 = s.init(np.full(n, 0.2))

    def run(split: bool):
        rng = np.random.default_rng(2)
        st, da = st0, s.warmup_start(st0)
        for t in range(60):
            if split and t == 30:
                stored = [float(x) for x in da]         # what a checkpoint would hold
                da = adaptation.DualAveraging(*stored[:4], int(stored[4]), stored[5])
            st, da, _ = s.warmup_step(st, da, rng)
        return st, da

    (a, da_a), (b, da_b) = run(False), run(True)
    assert all(isinstance(x, (int, float)) for x in da_a)
    assert np.array_equal(a.theta, b.theta) and da_a == da_b


@pytest.mark.parametrize("n, temperature, target", [(50, 1.0, 0.65), (50, 10.0, 0.65),
                                                    (10, 0.1, 0.8)])
def test_chain_adaptation_hits_its_target(n, temperature, target):
    """After the engine's burn-in sequence (3 adapt calls), the mean acceptance probability of
    the production chain at the frozen dt is within 0.05 of ``target_accept``."""
    k = np.geomspace(1.0, 100.0, n)
    s = HMC(Gaussian(n, stiffness=list(k)).potential(), temperature=temperature,
            n_leapfrog=10, step_size=0.1, adapt_method="chain", target_accept=target,
            step_size_jitter=0.2)
    rng = np.random.default_rng(3)
    state = s.init(rng.uniform(-1, 1, n) / np.sqrt(k))
    for block in (20, 80, 0):
        state = s.adapt(state, rng)
        for _ in range(block):
            state, _ = s.step(state, rng)
    dt = state.step_size
    state, _, _, acc = _chain(s, state, rng, 3000)
    assert state.step_size == dt                    # frozen after warm-up
    assert abs(acc.mean() - target) < 0.05, acc.mean()


def test_frozen_dt_after_chain_warmup_is_exact():
    n, temperature = 10, 2.0
    k = np.geomspace(1.0, 100.0, n)
    s = HMC(Gaussian(n, stiffness=list(k)).potential(), temperature=temperature,
            n_leapfrog=10, adapt_method="chain", step_size_jitter=0.2)
    rng = np.random.default_rng(17)
    state = s.warm_up(s.init(np.full(n, 0.1)), rng, 600)
    assert math.isfinite(state.step_size) and state.step_size > 0
    _, e, _, _ = _chain(s, state, rng, 30000)
    mean, sem = batch_means(e)
    assert abs(mean - n * temperature / 2) < 5 * sem


@pytest.mark.parametrize("settings", [
    {"step_size_jitter": 0.3, "n_leapfrog": 10},
    {"n_leapfrog_jitter": 1.0, "n_leapfrog": 10},
    {"adapt_method": "chain", "step_size_jitter": 0.2, "n_leapfrog_jitter": 0.5,
     "n_leapfrog": 10, "warmup_transitions": 300},
])
def test_conformance_kit_accepts_the_new_settings(settings):
    check_sampler(HMC, settings)
