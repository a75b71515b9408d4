"""Stochastic dynamics (``thermonet_langevin.sd``): exactness on analytic targets, replica exchange,
reproducibility and settings.

Statistical assertions use fixed seeds and compare with exact values in units of the
estimator's own error bar (batch means over the correlated chain): |estimate - exact| < 4 sigma.
"""

from __future__ import annotations

import ast
import copy
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate

from thermonet import registry
from thermonet.api.settings import build_config
from thermonet.errors import ConfigError
from thermonet.priors import BoxPrior
from thermonet.samplers.hmc import HMC
from thermonet.stats import batch_means
from thermonet.tempering import Ladder, ReplicaExchange, make_scheme
from thermonet.testsystems import DoubleWell, Flat, Gaussian, GaussianMixture
from thermonet_langevin import StochasticDynamics, StochasticDynamicsConfig

Z = 4.0  # tolerance in standard errors
SRC = Path(__file__).resolve().parents[1] / "src" / "thermonet_langevin"


def _chain(sampler, theta0, n, seed, burn=500, adapt=True):
    """``n`` updates after ``burn``; returns positions, energies, kinetic energies, infos."""
    rng = np.random.default_rng(seed)
    st = sampler.init(theta0, rng=rng)
    if adapt:
        st = sampler.adapt(st, rng, factor=0.5)
        st = sampler.adapt(st, rng, factor=0.9)
    thetas, energies, kinetic, infos = [], [], [], []
    for i in range(n + burn):
        st, info = sampler.step(st, rng)
        if i >= burn:
            thetas.append(st.theta.copy())
            energies.append(st.energy)
            kinetic.append(info.kinetic_energy)
            infos.append(info)
    return np.array(thetas), np.array(energies), np.array(kinetic), infos


def _close(samples, exact, z=Z):
    m, err = batch_means(samples)
    assert abs(m - exact) < z * err, f"{m} ± {err} vs exact {exact}"
    return m, err


# --- exact targets ---------------------------------------------------------------------------

@pytest.mark.parametrize("temperature", [0.2, 5.0])
def test_gaussian_energy_and_variances_at_two_temperatures(temperature):
    """<E> = d T / 2, var(w_i) = T / k_i, and the momenta are in equilibrium, <K> = d T / 2;
    masses m_i = sqrt(k_i) exercise the mass option."""
    k = np.array([1.0, 3.0, 10.0, 30.0])
    arch = Gaussian(n=4, stiffness=k, centre=[1.0, -2.0, 0.0, 0.5])
    s = StochasticDynamics(arch.potential(), temperature=temperature, masses=np.sqrt(k),
                           step_size=0.3, persistence=0.9)
    thetas, energies, kinetic, infos = _chain(s, arch.centre, 30000, seed=1)
    _close(energies, 4 * temperature / 2)
    _close(kinetic, 4 * temperature / 2)
    for i in range(4):
        _close((thetas[:, i] - arch.centre[i]) ** 2, temperature / k[i])
    acc = np.mean([inf.is_accepted for inf in infos])
    assert 0.75 < acc < 1.0
    assert all(inf.n_steps == 1 for inf in infos)                  # L = 1 by default


@pytest.mark.slow
def test_double_well_against_quadrature():
    """1-D double well in the box |w| < 3 at T = 0.4 (barrier 2.5 T), with L = 2."""
    arch = DoubleWell(n=1, height=1.0, prior_scale=6.0)
    prior = BoxPrior.for_architecture(arch)
    temperature = 0.4
    s = StochasticDynamics(arch.potential(), prior=prior, temperature=temperature,
                           step_size=0.15, n_leapfrog=2, persistence=0.95)
    thetas, _, _, _ = _chain(s, np.array([1.0]), 60000, seed=3)
    w = thetas[:, 0]

    def expect(f):
        def weight(x):
            return math.exp(-(x * x - 1) ** 2 / temperature)
        num = integrate.quad(lambda x: f(x) * weight(x), -3, 3, points=[-1, 0, 1])[0]
        return num / integrate.quad(weight, -3, 3, points=[-1, 0, 1])[0]

    _close(w**2, expect(lambda x: x * x))
    _close(w**4, expect(lambda x: x**4))
    _close(np.abs(w) < 0.5, expect(lambda x: float(abs(x) < 0.5)))
    _close(w > 0, 0.5)                                              # it crosses the barrier


class _NoNegation(StochasticDynamics):
    """A broken variant that keeps the momentum on rejection (not exact)."""

    def step(self, state, rng):
        prop = self.propose(state, rng)
        if prop.info.is_accepted:
            return self.State(prop.theta, prop.energy, prop.grad, prop.momentum,
                              state.step_size), prop.info
        return state._replace(momentum=prop.momentum_start), prop.info


@pytest.mark.parametrize("wall", ["endpoint", "reflect"])
def test_flat_box_gives_uniform_marginals(wall):
    """Uniform in the box |w_i| < 1 with highly persistent momenta: with "endpoint" walls every
    bounce off a wall is a rejection with momentum negation."""
    arch = Flat(n=2, prior_scale=2.0)
    prior = BoxPrior.for_architecture(arch)
    s = StochasticDynamics(arch.potential(), prior=prior, step_size=0.1, persistence=0.98,
                           wall=wall)
    thetas, _, kinetic, infos = _chain(s, np.zeros(2), 30000, seed=2, adapt=False)
    assert np.all(np.abs(thetas) < 1)
    _close(kinetic, 2 * 1.0 / 2)
    for i in range(2):
        _close(thetas[:, i], 0.0)
        _close(thetas[:, i] ** 2, 1.0 / 3.0)                         # E[w^2] of U(-1, 1)
        _close(np.abs(thetas[:, i]) > 0.8, 0.2)                      # no pile-up at the walls
    if wall == "endpoint":
        assert any(not inf.in_box for inf in infos)
    else:
        assert all(inf.in_box for inf in infos) and sum(inf.n_reflections for inf in infos) > 0


def test_momentum_negation_is_what_makes_it_exact():
    """The same flat-box check fails badly without the negation on rejection: walkers stick to
    the walls. (It shows the uniformity test above has the power to see the difference.)"""
    arch = Flat(n=2, prior_scale=2.0)
    prior = BoxPrior.for_architecture(arch)
    s = _NoNegation(arch.potential(), prior=prior, step_size=0.1, persistence=0.98)
    thetas, _, _, _ = _chain(s, np.zeros(2), 30000, seed=2, adapt=False)
    m, err = batch_means(np.abs(thetas[:, 0]) > 0.8)
    assert m - 0.2 > 10 * err, (m, err)


def test_rejection_negates_the_refreshed_momentum():
    arch = Gaussian(n=3, stiffness=1.0)
    s = StochasticDynamics(arch.potential(), prior=BoxPrior(np.full(3, 2.0)), step_size=5.0,
                           persistence=0.7)                          # leaves the box |w| < 1
    rng = np.random.default_rng(11)
    st = s.init(np.zeros(3), rng=rng)
    for _ in range(5):
        twin = copy.deepcopy(rng)
        p_start = s.propose(st, twin).momentum_start
        new, info = s.step(st, rng)
        assert not info.is_accepted and not info.in_box
        assert np.array_equal(new.momentum, -p_start)
        assert np.array_equal(new.theta, st.theta) and new.energy == st.energy
        st = new


def test_nan_energy_is_a_rejected_divergence():
    class NanBeyondOne(Gaussian):
        def potential(self, data=None, **options):
            base = super().potential()

            class P(type(base)):
                def energy_and_grad(self, theta, grad_out=None):
                    e, g = super().energy_and_grad(theta, grad_out)
                    return (float("nan") if abs(theta[0]) > 1 else e), g

            return P(base.k, base.mu)

    arch = NanBeyondOne(n=1, stiffness=0.1)
    s = StochasticDynamics(arch.potential(), step_size=0.5, n_leapfrog=3, persistence=0.9)
    _, _, _, infos = _chain(s, np.array([0.0]), 500, seed=4, burn=0, adapt=False)
    div = [inf for inf in infos if inf.is_divergent]
    assert div and not any(inf.is_accepted for inf in div)
    assert any(inf.is_accepted for inf in infos)


def test_persistence_zero_is_hmc_bit_for_bit():
    """alpha = 0 resamples the momenta fully: the chain is thermonet's HMC chain, bit for bit
    (same draws in the same order), here on a double well in a box with rejections at the
    walls; so it samples HMC's distribution."""
    arch = DoubleWell(n=2, height=1.0, prior_scale=3.0)
    prior = BoxPrior.for_architecture(arch)
    for n_leapfrog in (1, 4):
        kw = dict(prior=prior, temperature=0.8, n_leapfrog=n_leapfrog, step_size=0.4)
        sd = StochasticDynamics(arch.potential(), persistence=0.0, **kw)
        hmc = HMC(arch.potential(), **kw)
        r_sd, r_hmc = np.random.default_rng(5), np.random.default_rng(5)
        a, b = sd.init(np.ones(2)), hmc.init(np.ones(2))
        n_acc = n_out = 0
        for _ in range(3000):
            a, ia = sd.step(a, r_sd)
            b, ib = hmc.step(b, r_hmc)
            assert np.array_equal(a.theta, b.theta) and a.energy == b.energy
            assert ia.is_accepted == ib.is_accepted
            assert ia.log_accept_ratio == ib.log_accept_ratio
            n_acc += ia.is_accepted
            n_out += not ia.in_box
        assert 0 < n_acc < 3000 and n_out > 0


# --- replica exchange ------------------------------------------------------------------------

def test_take_configuration_rescales_momenta_and_keeps_step_size():
    arch = Gaussian(n=3)
    cold = StochasticDynamics(arch.potential(), temperature=0.5, step_size=0.1)
    hot = StochasticDynamics(arch.potential(), temperature=2.0, step_size=0.4)
    rng = np.random.default_rng(12)
    s_cold = cold.init(rng.normal(size=3), rng=rng)
    s_hot = hot.init(rng.normal(size=3), rng=rng)._replace(step_size=0.4)
    new_cold = cold.take_configuration(s_cold, s_hot, hot.temperature)
    new_hot = hot.take_configuration(s_hot, s_cold, cold.temperature)
    assert np.array_equal(new_cold.theta, s_hot.theta) and new_cold.energy == s_hot.energy
    assert new_cold.step_size == 0.1 and new_hot.step_size == 0.4
    np.testing.assert_allclose(new_cold.momentum, s_hot.momentum * 0.5, rtol=1e-15)
    np.testing.assert_allclose(new_hot.momentum, s_cold.momentum * 2.0, rtol=1e-15)
    # K / T (the kinetic factor of the joint target) is unchanged: the swap rule on E is exact
    k = [np.sum(p**2) / 2 for p in (s_cold.momentum, s_hot.momentum, new_cold.momentum,
                                     new_hot.momentum)]
    assert k[0] / 0.5 + k[1] / 2.0 == pytest.approx(k[2] / 0.5 + k[3] / 2.0, rel=1e-14)
    # an involution: swapping back restores both states
    back_cold = cold.take_configuration(new_cold, new_hot, hot.temperature)
    np.testing.assert_allclose(back_cold.momentum, s_cold.momentum, rtol=1e-15)
    assert np.array_equal(back_cold.theta, s_cold.theta)


def _mixture_run(workers=1, n_iter=3000, seed=8):
    arch = GaussianMixture(means=[[-4.0], [4.0]], widths=[0.5, 0.5], weights=[0.3, 0.7],
                           prior_scale=20.0)
    cls = registry.load("sampler", "thermonet_langevin.sd")
    re = ReplicaExchange(cls, arch.potential(), Ladder.geometric(t_min=0.5, t_max=40.0, n=6),
                         prior=BoxPrior.for_architecture(arch), n_trajectories=5,
                         sampler_config=cls.Config(step_size=0.3, persistence=0.9,
                                                   wall="reflect"),
                         workers=workers, swap=make_scheme("random-pairs"))
    streams = re.make_streams(seed)
    st = re.init(np.array([-4.0]))
    xs, infos = [], []
    for it in range(n_iter):
        st, info = re.step(st, streams)
        infos.append(info)
        if it >= 200:
            xs.append([sl.theta[0] for sl in st.slots])
    return arch, re, st, np.array(xs), infos


@pytest.mark.slow
def test_replica_exchange_recovers_mixture_mode_weights():
    """Two well-separated modes (barrier ~ 32/T at T = 0.5): inside replica exchange the cold
    slots' mode weights match ``mode_weights(T)`` ∝ pi_j^(1/T) s_j."""
    arch, re, st, xs, infos = _mixture_run()
    assert isinstance(re.samplers[0], StochasticDynamics)
    assert sum(int(i.swap_accepted_k.sum()) for i in infos) > 1000
    for k in range(3):
        _close(xs[:, k] > 0, arch.mode_weights(re.temperatures[k])[1])


def test_replica_exchange_is_identical_for_one_and_two_workers():
    runs = [_mixture_run(workers=w, n_iter=150) for w in (1, 2)]
    (_, _, a, xa, ia), (_, _, b, xb, ib) = runs
    for sa, sb in zip(a.slots, b.slots, strict=True):
        assert np.array_equal(sa.theta, sb.theta) and sa.energy == sb.energy
        assert np.array_equal(sa.momentum, sb.momentum) and sa.step_size == sb.step_size
    for x, y in zip(ia, ib, strict=True):
        for fx, fy in zip(x, y, strict=True):
            assert np.array_equal(fx, fy)
    assert np.array_equal(xa, xb) and np.array_equal(a.replica_k, b.replica_k)
    assert sum(int(i.swap_accepted_k.sum()) for i in ia) > 0


# --- reproducibility -------------------------------------------------------------------------

def test_same_seed_same_chain_and_exact_resume():
    """Same seed, same chain; and a chain resumed from a stored (state, generator state) pair
    continues bit for bit: the momentum is part of the state."""
    arch = DoubleWell(n=3)
    s = StochasticDynamics(arch.potential(), temperature=0.5, step_size=0.2)

    def run(n, st=None, rng=None):
        rng = rng or np.random.default_rng(13)
        st = st or s.init(np.full(3, 0.5), rng=rng)
        out = []
        for _ in range(n):
            st, info = s.step(st, rng)
            out.append((st.theta.copy(), st.momentum.copy(), info))
        return out, st, rng

    full, _, _ = run(400)
    again, _, _ = run(400)
    first, st, rng = run(200)
    saved = copy.deepcopy((st, rng.bit_generator.state))
    resumed_st = saved[0]
    resumed_rng = np.random.default_rng()
    resumed_rng.bit_generator.state = saved[1]
    second, _, _ = run(200, resumed_st, resumed_rng)
    for (ta, pa, ia), (tb, pb, ib) in zip(full, again, strict=True):
        assert np.array_equal(ta, tb) and np.array_equal(pa, pb) and ia == ib
    for (ta, pa, ia), (tb, pb, ib) in zip(full, first + second, strict=True):
        assert np.array_equal(ta, tb) and np.array_equal(pa, pb) and ia == ib


@pytest.mark.parametrize("method", ["original", "dual-averaging"])
def test_step_size_adaptation_reaches_the_window(method):
    arch = Gaussian(n=20, stiffness=np.linspace(1, 50, 20))
    s = StochasticDynamics(arch.potential(), step_size=1e-3, adapt_method=method)
    rng = np.random.default_rng(14)
    st = s.init(np.zeros(20), rng=rng)
    for _ in range(300):                                             # reach typical positions
        st, _ = s.step(st, rng)
    st0 = st
    st = s.adapt(st, rng, factor=0.5)
    st = s.adapt(st, rng, factor=0.9)
    assert np.array_equal(st.theta, st0.theta) and np.array_equal(st.momentum, st0.momentum)
    n = 1000
    acc = np.mean([s.step(st, rng)[1].is_accepted for _ in range(n)])
    # window (0.85, 0.95) with the error of the measurement and of the adaptation's estimate
    assert 0.85 - Z * 0.05 < acc < 0.95 + Z * 0.05, (method, st.step_size, acc)
    assert st.step_size > 1e-2


def test_adaptation_started_near_a_barrier_top_stays_stable():
    """Adapting dt at a point of negative curvature (between the top of a double well's barrier
    and a well) must not return a dt that is unstable in the wells: the acceptance is measured
    along a side chain, not from that one position (a fixed-position estimate gave dt = 3
    and 0.1% acceptance here)."""
    arch = DoubleWell(n=2, prior_scale=6.0)
    for temperature in (0.0136, 0.1):
        s = StochasticDynamics(arch.potential(), prior=BoxPrior.for_architecture(arch),
                               temperature=temperature, step_size=0.01, wall="reflect",
                               persistence=0.99)
        rng = np.random.default_rng(1)
        st = s.adapt(s.init(np.array([0.3, -0.3])), rng, factor=0.1)
        acc = 0
        for _ in range(500):
            st, info = s.step(st, rng)
            acc += info.is_accepted
        assert acc / 500 > 0.7, (temperature, st.step_size, acc / 500)


# --- settings and the plugin contract ---------------------------------------------------------

@pytest.mark.parametrize("bad,match", [
    ({"step_size": 0.0}, "step_size = 0.0"), ({"step_size": float("nan")}, "expected dt > 0"),
    ({"n_leapfrog": 0}, "n_leapfrog = 0"), ({"n_leapfrog": 1.5}, "n_leapfrog = 1.5"),
    ({"persistence": 1.0}, "persistence = 1.0"), ({"persistence": -0.1}, "persistence = -0.1"),
    ({"persistence": "0.9"}, "persistence = '0.9'"),
    ({"wall": "bounce"}, "wall = 'bounce'"), ({"runaway": 1.0}, "runaway = 1.0"),
    ({"precision": "half"}, "precision = 'half'"),
    ({"accept_window": (0.95, 0.85)}, "0 < low < high < 1"),
    ({"accept_window": 0.9}, "accept_window = 0.9"),
    ({"adapt_method": "nuts"}, "adapt_method = 'nuts'"),
    ({"adapt_trajectories": 0}, "adapt_trajectories = 0"),
    ({"step_size_max": -1.0}, "step_size_max = -1.0"),
    ({"persistance": 0.9}, "did you mean 'persistence'"),
])
def test_config_errors_name_key_and_value(bad, match):
    with pytest.raises(ConfigError, match=match):
        StochasticDynamics(Gaussian(n=1).potential(), **bad)


def test_config_errors_inside_replica_exchange():
    cls = registry.load("sampler", "thermonet_langevin.sd")
    with pytest.raises(ConfigError, match="persistence = 1.5"):
        build_config(cls.Config, {"persistence": 1.5}, "thermonet_langevin.sd")
    with pytest.raises(ConfigError, match="did you mean 'n_leapfrog'"):
        build_config(cls.Config, {"n_leapfog": 2}, "thermonet_langevin.sd")
    with pytest.raises(ConfigError, match="adaptation factor = 1.5"):
        s = StochasticDynamics(Gaussian(n=1).potential())
        s.adapt(s.init(np.zeros(1)), np.random.default_rng(0), factor=1.5)


def test_defaults_and_config_object():
    c = StochasticDynamicsConfig()
    assert (c.n_leapfrog, c.persistence, c.wall) == (1, 0.9, "endpoint")
    s = StochasticDynamics(Gaussian(n=2).potential(), config=c, temperature=2.0)
    st = s.init(np.zeros(2))
    assert np.array_equal(st.momentum, np.zeros(2)) and st.step_size == c.step_size
    assert s.with_temperature(3.0).config is c
    with pytest.raises(ConfigError, match="initial momentum"):
        s.init(np.zeros(2), momentum=[1.0, np.inf])


def test_plugin_imports_only_the_plugin_api():
    allowed = ("thermonet.api", "thermonet.kernels", "thermonet.errors", "thermonet.types")
    for path in SRC.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                if name == "thermonet" or name.startswith("thermonet."):
                    assert name.startswith(allowed), f"{path.name} imports {name}"


def test_keeps_the_sampler_contract():
    from thermonet.testing import check_sampler
    from thermonet_langevin import StochasticDynamics

    check_sampler(StochasticDynamics)
    check_sampler(StochasticDynamics, {"persistence": 0.0, "n_leapfrog": 3})
