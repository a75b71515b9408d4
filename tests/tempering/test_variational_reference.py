"""Parallel tempering with a variational reference (two legs joined at the target): the swap
rule keeps the joint distribution by enumeration, every rung is sampled exactly on a Gaussian
and a mixture, the variational leg's log Z equals the exact one, the reference is fitted in
warm-up and frozen, and the chain is bit-exact on resume and for any number of workers."""

from __future__ import annotations

import copy
import itertools
import math

import numpy as np
import pytest

from thermonet.analysis.free_energy import free_energies, variational_log_z
from thermonet.errors import ConfigError
from thermonet.priors import BoxPrior
from thermonet.samplers.hmc import HMC
from thermonet.stats import batch_means
from thermonet.tempering import Ladder
from thermonet.tempering.reference import GaussianReference, PathPotential
from thermonet.tempering.ring import VariationalRing, fit_reference
from thermonet.tempering.swaps import swap_log_acceptance
from thermonet.testsystems import Gaussian, GaussianMixture

Z = 4.5  # tolerance in standard errors
K = np.array([1.0, 2.0, 4.0, 8.0])
T_MIN = 0.2
PATH = (1.0, 0.75, 0.5, 0.25, 0.0)
OFF = GaussianReference(np.full(4, 0.5), np.full(4, 2.0))   # deliberately off the target


def _ring(reference=OFF, *, workers=1, path=PATH, ladder=None):
    arch = Gaussian(4, stiffness=list(K), prior_scale=16.0)
    prior = BoxPrior.for_architecture(arch)
    ladder = Ladder.geometric(T_MIN, 3.0, 5).with_prior_rung() if ladder is None else ladder
    ring = VariationalRing(HMC, arch.potential(), ladder,
                           reference, path, prior=prior, workers=workers,
                           sampler_config=HMC.Config(n_leapfrog=6, step_size=0.2))
    return ring, arch, prior


def _path_moments(b, ref=OFF):
    """Mean and variance of each coordinate under q^(1-b) exp(-b E/T_min) (box far away)."""
    a = (1 - b) / ref.scale ** 2
    c = b * K / T_MIN
    return a * ref.mean / (a + c), 1.0 / (a + c)


def _path_log_z(b, ref=OFF):
    """log ∫ q^(1-b) exp(-b E/T_min) dw, exactly (a product of Gaussian integrals)."""
    a = (1 - b) / ref.scale ** 2
    c = b * K / T_MIN
    log_norm = np.log(ref.scale * math.sqrt(2 * math.pi))
    return float(np.sum(-(1 - b) * log_norm + 0.5 * np.log(2 * math.pi / (a + c))
                        - 0.5 * a * c / (a + c) * ref.mean ** 2))


@pytest.fixture(scope="module")
def gaussian_trace():
    ring, arch, prior = _ring()
    streams = ring.make_streams(11)
    st = ring.burn_in(arch.initial_draw, streams, blocks=(20,))
    rows = []
    for i in range(1, 5001):
        st, info = ring.step(st, streams, iteration=i)
        if i > 200:
            rows.append((info.fixed.energy_k, info.fixed.swap_energy_k,
                         info.variational.swap_energy_k,
                         np.array([s.theta for s in st.variational.slots])))
    return ring, arch, prior, rows


# --- the swap rule ------------------------------------------------------------------------------

def test_ring_sweeps_keep_the_joint_distribution_by_enumeration():
    """Four discrete states, one of them outside the box (density 0 at every rung but q's); a
    ring q (b = 0), b = 0.5, target | target (T_min), T = 2.5, prior. Each DEO sweep with the
    ring's rule (W = E/T_min - R on the variational leg, +inf outside the box; acceptance 1
    across the join) keeps prod_r pi_r, each pi_r written from its own definition."""
    t_min = 0.5
    energy = np.array([0.0, 0.7, 1.9, np.nan])     # the last state is outside the box
    ref = np.array([1.1, 0.3, 2.0, 0.4])           # R = -log q, finite everywhere
    inside = ~np.isnan(energy)
    b_var = [0.0, 0.5, 1.0]                        # ring positions 0, 1, 2
    beta_fix = [1 / t_min, 0.4, 0.0]               # ring positions 3, 4, 5

    def log_pi(r, s):
        if r < 3:
            b = b_var[r]
            if b == 0.0:
                return -ref[s]
            return -(1 - b) * ref[s] - b * energy[s] / t_min if inside[s] else -math.inf
        return -beta_fix[r - 3] * energy[s] if inside[s] else -math.inf

    def u(r, s):                                   # what the ring's rule multiplies
        if r < 3:
            return energy[s] / t_min - ref[s] if inside[s] else math.inf
        return energy[s]

    def coef(r):
        return b_var[r] if r < 3 else beta_fix[r - 3]

    n = energy.size
    states = list(itertools.product(range(n), repeat=6))
    index = {s: i for i, s in enumerate(states)}
    pi = np.array([math.exp(sum(log_pi(r, s[r]) for r in range(6))) for s in states])
    pi /= pi.sum()
    for pairs in ([0, 2, 4], [1, 3]):
        after = np.zeros(len(states))
        for s in states:
            if pi[index[s]] == 0:
                continue
            dist = {s: 1.0}
            for r in pairs:
                new: dict[tuple[int, ...], float] = {}
                for t, p in dist.items():
                    if r == 2:                     # the join
                        a = 1.0
                    else:
                        la = swap_log_acceptance(coef(r), coef(r + 1), u(r, t[r]),
                                                 u(r + 1, t[r + 1]))
                        a = 0.0 if math.isnan(la) else min(1.0, math.exp(min(la, 0.0)))
                    sw = list(t)
                    sw[r], sw[r + 1] = t[r + 1], t[r]
                    new[tuple(sw)] = new.get(tuple(sw), 0.0) + p * a
                    new[t] = new.get(t, 0.0) + p * (1 - a)
                dist = new
            for t, p in dist.items():
                after[index[t]] += p * pi[index[s]]
        np.testing.assert_allclose(after, pi, atol=1e-15)


def test_path_potential_is_the_interpolation_with_its_gradient():
    arch = Gaussian(4, stiffness=list(K))
    theta = np.array([0.3, -1.2, 0.8, 2.0])
    pot = PathPotential(arch.potential(), OFF, 0.3, T_MIN)
    z = (theta - OFF.mean) / OFF.scale
    r = 0.5 * z @ z + np.sum(np.log(OFF.scale)) + 2 * math.log(2 * math.pi)
    e = 0.5 * np.sum(K * theta ** 2)
    v, g = pot.energy_and_grad(theta)
    assert v == pytest.approx(0.7 * r + 0.3 * e / T_MIN, rel=1e-14)
    np.testing.assert_allclose(g, 0.7 * z / OFF.scale + 0.3 * K * theta / T_MIN, rtol=1e-14)
    assert pot.energy(theta) == pytest.approx(v, rel=1e-14)


@pytest.mark.parametrize("hidden", ["logistic", "tanh"])
@pytest.mark.parametrize("wall", [0, 1], ids=["endpoint", "reflect"])
@pytest.mark.parametrize("b", [1.0, 0.37])
def test_the_compiled_path_trajectory_is_the_python_loop_to_rounding(b, wall, hidden):
    """The MLP's compiled trajectory (its own at b = 1, its TI bridge in between, momenta
    scaled by T_min) against the generic loop over energy_and_grad; tanh networks have no
    bridge kernel and take the loop itself, so their result is the same bit for bit. (Without
    walls the loop stops where a truncated q's R turns infinite and the bridge continues the
    Gaussian, so that case keeps its trajectory inside a wider box.)"""
    from thermonet.api import Potential
    from thermonet.architectures.mlp import MLP

    arch = MLP(n_inputs=3, hidden=(4,), n_outputs=3, hidden_activation=hidden)
    rng = np.random.default_rng(0)
    pot = arch.potential(x=rng.normal(size=(9, 3)), y=rng.integers(0, 3, 9))
    n = arch.n_params
    half = np.full(n, 0.8 if wall == 1 else 3.0)
    ref = GaussianReference(rng.normal(size=n) * 0.2, rng.uniform(0.2, 0.5, n), half)
    theta0, p0 = rng.uniform(-0.7, 0.7, n), rng.normal(size=n)
    inv_mass = rng.uniform(0.5, 2.0, n)
    out = []
    for compiled in (True, False):
        path = PathPotential(pot, ref, b, T_MIN)
        th, p = theta0.copy(), p0.copy()
        _, g = path.energy_and_grad(th)
        g = g.copy()
        run = path.trajectory if compiled else (
            lambda *a, path=path: Potential.trajectory(path, *a))
        res = run(th, p, g, inv_mass, 0.02, 40, wall, half, 10.0)
        out.append((res, th, p, g))
    (r1, t1, p1, g1), (r2, t2, p2, g2) = out
    assert r1[1:] == r2[1:] and r1[2] == 0
    if wall == 1:
        assert r1[3] > 0 and np.all(np.abs(t1) <= half)
    if hidden == "tanh" and b < 1:
        assert r1[0] == r2[0] and np.array_equal(t1, t2) and np.array_equal(g1, g2)
    # rounding only: scaling p by T_min and back, and the bridge's summation order, differ
    # from the loop by an ulp or so per step; over these 40 steps the largest difference in
    # any output is 5e-15 (a few hundred times under the bounds below), while a wrong
    # stiffness, centre or scaling changes the trajectory at first order
    assert r1[0] == pytest.approx(r2[0], rel=1e-12)
    np.testing.assert_allclose(t1, t2, rtol=0, atol=1e-12)
    np.testing.assert_allclose(p1, p2, rtol=1e-12, atol=1e-12)
    v, g = PathPotential(pot, ref, b, T_MIN).energy_and_grad(t1)
    assert r1[0] == pytest.approx(v, rel=1e-13)
    np.testing.assert_allclose(g1, g, rtol=1e-12, atol=1e-12)


# --- exactness ----------------------------------------------------------------------------------

def test_every_rung_of_both_legs_is_sampled_exactly_on_a_gaussian(gaussian_trace):
    """Fixed leg: <E> = n T / 2 (box far away) and sum k a^2 / 6 at the prior rung; variational
    leg: the mean and variance of every coordinate at every b (q's own at b = 0)."""
    ring, _, _, rows = gaussian_trace
    e = np.array([r[0] for r in rows])
    for j, t in enumerate(ring.fixed.temperatures[:-1]):
        m, err = batch_means(e[:, j])
        assert abs(m - 2.0 * t) < Z * err, (t, m, err)
    m, err = batch_means(e[:, -1])
    assert abs(m - K.sum() * 64.0 / 6) < Z * err
    theta = np.array([r[3] for r in rows])                  # (n, K_v, 4)
    for k, b in enumerate(ring.path):
        mean, var = _path_moments(b)
        for i in range(4):
            m, err = batch_means(theta[:, k, i])
            assert abs(m - mean[i]) < Z * err, (b, i, m, mean[i], err)
            m, err = batch_means((theta[:, k, i] - mean[i]) ** 2)
            assert abs(m - var[i]) < Z * err, (b, i, m, var[i], err)


def test_the_variational_leg_gives_the_exact_log_z_along_its_path(gaussian_trace):
    ring, arch, prior, rows = gaussian_trace
    w = np.array([r[2] for r in rows])
    with np.errstate(invalid="ignore", over="ignore"):
        fe = free_energies(ring.path, w)
    for k, b in enumerate(ring.path[:-1]):
        exact = _path_log_z(b)                              # minus log Z(0) = 0
        assert abs(fe.log_z_ss_k[k] - exact) < Z * fe.log_z_ss_err_k[k], (b, fe.log_z_ss_k[k],
                                                                          exact)
    # both legs' log Z(T_min), the evidence bookkeeping included, against the exact number
    lz, err = variational_log_z(ring.path, w, log_normaliser=OFF.log_normaliser,
                                log_volume=prior.log_volume)
    exact = arch.log_z(T_MIN) - prior.log_volume
    assert abs(lz - exact) < Z * err, (lz, exact, err)
    fixed = free_energies(ring.fixed.beta_k, np.array([r[1] for r in rows]))
    assert abs(fixed.log_z_ss_k[0] - exact) < Z * fixed.log_z_ss_err_k[0]
    both = math.hypot(err, fixed.log_z_ss_err_k[0])
    assert abs(lz - fixed.log_z_ss_k[0]) < Z * both


@pytest.mark.slow
def test_a_mixture_target_gets_its_mode_weights_and_log_z_through_the_variational_leg():
    """Two modes 8 apart (a barrier of ~32 at T = 1): a wide q from moment matching carries
    replicas between them. Both target rungs hold the exact mode weight, and the variational
    leg's log Z is the mixture's exact box integral."""
    arch = GaussianMixture(means=[[-4.0], [4.0]], widths=[0.5, 0.5], weights=[0.3, 0.7],
                           prior_scale=20.0)
    prior = BoxPrior.for_architecture(arch)
    ref = GaussianReference(np.array([0.0]), np.array([4.0]), np.array([10.0]))  # in the box
    ring = VariationalRing(HMC, arch.potential(), Ladder.geometric(1.0, 30.0, 6).with_prior_rung(),
                           ref, np.linspace(1.0, 0.0, 7), prior=prior, n_trajectories=2,
                           sampler_config=HMC.Config(n_leapfrog=10, step_size=0.2))
    streams = ring.make_streams(5)
    st = ring.init(np.array([-4.0]))
    xs, ws = [], []
    for i in range(1, 6001):
        st, info = ring.step(st, streams, iteration=i)
        if i > 500:
            xs.append([st.fixed.slots[0].theta[0], st.variational.slots[0].theta[0]])
            ws.append(info.variational.swap_energy_k)
    xs = np.array(xs)
    weight = arch.mode_weights(1.0)[1]
    for k in range(2):
        m, err = batch_means(xs[:, k] > 0)
        assert abs(m - weight) < Z * err, (k, m, weight, err)
    lz, err = variational_log_z(ring.path, np.array(ws), log_volume=0.0)
    assert abs(lz - arch.log_integral()) < Z * err, (lz, arch.log_integral(), err)


def test_a_box_truncated_reference_is_normalised_and_drawn_exactly():
    """q = N(1.5, 2^2) truncated to |w| < 3: exp(-R) integrates to 1 over the box (trapezoid on
    a fine grid), is +inf outside, and 20,000 draws have the truncated mean and variance from
    the same quadrature (tolerance: Z standard errors of iid draws)."""
    q = GaussianReference(np.array([1.5]), np.array([2.0]), np.array([3.0]))
    xs = np.linspace(-3.0 + 1e-12, 3.0 - 1e-12, 6001)
    dens = np.exp(-np.array([q.energy(np.array([x])) for x in xs]))
    assert np.trapezoid(dens, xs) == pytest.approx(1.0, abs=1e-6)
    mean = np.trapezoid(xs * dens, xs)
    var = np.trapezoid((xs - mean) ** 2 * dens, xs)
    assert q.energy(np.array([3.0])) == math.inf and q.energy(np.array([-3.2])) == math.inf
    rng = np.random.default_rng(4)
    draws = np.array([q.sample(rng)[0] for _ in range(20_000)])
    assert np.all(np.abs(draws) < 3.0)
    se = math.sqrt(var / draws.size)
    assert abs(draws.mean() - mean) < Z * se
    se_var = math.sqrt(np.mean(((draws - mean) ** 2 - var) ** 2) / draws.size)
    assert abs(np.mean((draws - mean) ** 2) - var) < Z * se_var
    assert GaussianReference.from_dict(q.to_dict()) == q
    fitted = GaussianReference.fit(np.array([[0.0], [1.0], [2.0]]), np.array([3.0]))
    np.testing.assert_array_equal(fitted.half_width, [3.0])


# --- warm-up: fit, then freeze ------------------------------------------------------------------

def test_moment_matching_is_the_sample_mean_and_deviation():
    x = np.random.default_rng(3).normal([1.0, -2.0, 0.0], [0.5, 2.0, 1e-9], size=(50, 3))
    q = GaussianReference.fit(x)
    np.testing.assert_array_equal(q.mean, x.mean(axis=0))
    s = x.std(axis=0, ddof=1)
    np.testing.assert_array_equal(q.scale, [s[0], s[1], 1e-6 * s[1]])   # the floor
    assert GaussianReference.from_dict(q.to_dict()) == q
    draw = q.sample(np.random.default_rng(0))
    z = (draw - q.mean) / q.scale
    assert q.energy(draw) == pytest.approx(0.5 * z @ z + np.sum(np.log(q.scale))
                                           + 1.5 * math.log(2 * math.pi), rel=1e-14)


def test_the_warm_up_fits_q_to_the_target_and_production_keeps_it_frozen():
    ring, arch, _ = _ring()
    streams = ring.make_streams(2)
    st = ring.burn_in(arch.initial_draw, streams, blocks=(20,))
    ring, st, records = fit_reference(ring, st, streams, rounds=3, iterations=150)
    assert len(records) == 3
    assert ring.reference == GaussianReference.from_dict(records[-1]["reference"])
    # the fitted q is close to the target N(0, T_min/k), so its leg's barrier collapses
    # (a deterministic consequence checked loosely: the off-centre start's barrier is several)
    assert records[-1]["barrier_variational"] < 0.5 * records[0]["barrier_variational"]
    assert records[-1]["barrier_variational"] < records[-1]["barrier_fixed"]
    frozen = ring.reference
    for i in range(451, 551):
        st, _ = ring.step(st, streams, iteration=i)
    assert ring.reference is frozen
    assert ring.path[0] == 1.0 and ring.path[-1] == 0.0


# --- reproducibility ----------------------------------------------------------------------------

def _run(workers, stop=200, saved=None):
    """Burn in, two fit rounds, production to ``stop``; or, from ``saved`` (q, the path, the
    fixed leg's temperatures, the state, the streams' states, the next iteration), a ring
    rebuilt from those data alone and continued to ``stop``."""
    if saved is None:
        ring, arch, _ = _ring(workers=workers)
        streams = ring.make_streams(7)
        st = ring.burn_in(arch.initial_draw, streams, blocks=(10,))
        ring, st, _ = fit_reference(ring, st, streams, rounds=2, iterations=40)
        first = 81
    else:
        ref, path, temps, st, stream_states, first = saved
        ring, _, _ = _ring(GaussianReference.from_dict(ref), workers=workers, path=path,
                           ladder=Ladder.from_temperatures(temps))
        streams = ring.make_streams(0)
        for g, s in zip(streams.all(), stream_states, strict=True):
            g.bit_generator.state = s
    for i in range(first, stop + 1):
        st, info = ring.step(st, streams, iteration=i)
    return ring, st, streams, info


def test_a_resumed_ring_continues_bit_for_bit_and_workers_do_not_matter():
    ring, st, _, info = _run(1)
    ring2, st2, _, info2 = _run(2)
    for a, b in zip(st.fixed.slots + st.variational.slots,
                    st2.fixed.slots + st2.variational.slots, strict=True):
        np.testing.assert_array_equal(a.theta, b.theta)
    np.testing.assert_array_equal(st.replica_r, st2.replica_r)
    # stop at 140, keep q, the path, the state and the streams, rebuild, continue to 200
    ring_a, st_a, streams_a, _ = _run(1, stop=140)
    saved = (ring_a.reference.to_dict(), list(ring_a.path), list(ring_a.fixed.temperatures),
             copy.deepcopy(st_a), [g.bit_generator.state for g in streams_a.all()], 141)
    _, st_b, _, info_b = _run(1, saved=saved)
    for a, b in zip(st.fixed.slots + st.variational.slots,
                    st_b.fixed.slots + st_b.variational.slots, strict=True):
        np.testing.assert_array_equal(a.theta, b.theta)
        assert a.energy == b.energy and a.step_size == b.step_size
    np.testing.assert_array_equal(info.variational.swap_energy_k,
                                  info_b.variational.swap_energy_k)


# --- errors -------------------------------------------------------------------------------------

def test_errors_are_one_line():
    arch = Gaussian(4, stiffness=list(K), prior_scale=16.0)
    prior = BoxPrior.for_architecture(arch)
    with pytest.raises(ConfigError, match="needs a prior rung"):
        VariationalRing(HMC, arch.potential(), Ladder.geometric(0.2, 3.0, 3), OFF, PATH,
                        prior=prior)
    with pytest.raises(ConfigError, match="descending list from 1"):
        VariationalRing(HMC, arch.potential(), Ladder.geometric(0.2, 3.0, 3).with_prior_rung(),
                        OFF, (1.0, 0.5, 0.6, 0.0), prior=prior)
    with pytest.raises(ConfigError, match="the reference has 2 parameters"):
        VariationalRing(HMC, arch.potential(), Ladder.geometric(0.2, 3.0, 3).with_prior_rung(),
                        GaussianReference(np.zeros(2), np.ones(2)), PATH, prior=prior)
    with pytest.raises(ConfigError, match=">= 2 samples"):
        GaussianReference.fit(np.zeros((1, 3)))
    with pytest.raises(ConfigError, match="of its mass in the box along weight 1"):
        GaussianReference(np.zeros(2), np.array([1.0, 0.1]), np.array([1.0, 1e-5]))
    with pytest.raises(ConfigError, match="scale"):
        GaussianReference(np.zeros(2), np.array([1.0, 0.0]))
