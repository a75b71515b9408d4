"""The Gaussian prior option: energy and gradient, and the distributions it produces."""

from __future__ import annotations

import numpy as np
import pytest

from thermonet import config as cfgmod
from thermonet.architectures.mlp import M1
from thermonet.errors import ConfigError
from thermonet.priors import GaussianPrior, PriorPotential
from thermonet.samplers.hmc import HMC
from thermonet.stats import batch_means
from thermonet.testsystems import Flat


def test_prior_potential_adds_energy_and_gradient(d50, rng):
    arch = M1()
    base = arch.potential(d50)
    gp = GaussianPrior.for_architecture(arch, {"weight": 0.5, "bias": 2.0})
    pot = PriorPotential(base, gp, scale=0.7)
    theta = arch.initial_draw(rng) * 5
    e, g = pot.energy_and_grad(theta)
    e0, g0 = base.energy_and_grad(theta)
    assert e == pytest.approx(e0 + 0.7 * np.sum(theta**2 / (2 * gp.std**2)), rel=1e-13)
    np.testing.assert_allclose(g, g0 + 0.7 * theta / gp.std**2, rtol=1e-12)
    i, h = 10_685, 1e-5
    tp, tm = theta.copy(), theta.copy()
    tp[i] += h
    tm[i] -= h
    assert g[i] == pytest.approx((pot.energy(tp) - pot.energy(tm)) / (2 * h), rel=1e-6)


@pytest.mark.parametrize("tempered", [True, False])
def test_flat_likelihood_with_gaussian_prior_samples_the_prior(tempered):
    """E = 0: tempered target N(0, T s^2); untempered (scale = T) target N(0, s^2)."""
    temperature, s = 4.0, 0.5
    arch = Flat(n=3)
    pot = PriorPotential(arch.potential(), GaussianPrior(np.full(3, s)),
                         scale=1.0 if tempered else temperature)
    hmc = HMC(pot, temperature=temperature, n_leapfrog=10, step_size=0.3)
    rng = np.random.default_rng(11)
    st = hmc.adapt(hmc.init(np.zeros(3)), rng, factor=0.5)
    w2 = []
    for _ in range(4000):
        st, _ = hmc.step(st, rng)
        w2.append(st.theta**2)
    w2 = np.array(w2)
    var = temperature * s**2 if tempered else s**2
    for i in range(3):
        m, err = batch_means(w2[:, i])
        assert abs(m - var) < 4 * err, (m, err, var)


def test_untempered_prior_with_replica_exchange_is_refused(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text("[prior]\ngaussian_std = 1.0\ngaussian_tempered = false\n"
                 "[ladder]\nn_temperatures = 2\nt_max = 2.0\n")
    with pytest.raises(ConfigError, match="cannot be used with replica exchange"):
        cfgmod.load(p)
    p.write_text("[prior]\ngaussian_std = -1.0\n")
    with pytest.raises(ConfigError, match="prior.gaussian_std = -1.0 is out of range"):
        cfgmod.load(p)


def test_runner_applies_the_prior(tmp_path):
    from thermonet.runner import Run, detach_log

    p = tmp_path / "c.toml"
    p.write_text('[data]\nname = "none"\n[architecture]\nname = "flat"\nn = 2\n'
                 "[prior]\ngaussian_std = 0.5\n[init]\nminimise = false\nburn_in = [2]\n"
                 '[sampler]\nname = "hmc"\nn_leapfrog = 5\n[run]\nn_iterations = 3\n')
    run = Run.create(cfgmod.load(p), tmp_path / "r").run(quiet=True)
    detach_log()
    assert isinstance(run.c.potential, PriorPotential)
    st = run.state.slots[0]
    assert st.energy == pytest.approx(np.sum(st.theta**2) / (2 * 0.25), rel=1e-12)


def test_gaussian_prior_with_the_default_minimising_initialisation_runs(tmp_path):
    """[prior] gaussian_std with the default [init] minimise = true: the minimiser receives the
    prior-wrapped potential (which must be a Potential) and lands on the prior's mode."""
    from thermonet.runner import Run, detach_log

    p = tmp_path / "c.toml"
    p.write_text('[data]\nname = "none"\n[architecture]\nname = "flat"\nn = 3\n'
                 "[prior]\ngaussian_std = 0.5\n[init]\nburn_in = []\n"
                 '[sampler]\nname = "hmc"\nn_leapfrog = 5\n[run]\nn_iterations = 2\n')
    cfg = cfgmod.load(p)
    assert cfg["init"]["minimise"] is True
    run = Run.create(cfg, tmp_path / "r").run(quiet=True)
    detach_log()
    assert isinstance(run.c.potential, PriorPotential)
    st = run.state.slots[0]
    assert np.isfinite(st.energy)
    assert st.energy == pytest.approx(np.sum(st.theta**2) / (2 * 0.25), rel=1e-12)


def test_prior_potential_is_a_potential_for_the_minimisers():
    from thermonet import registry
    from thermonet.api import Potential

    pot = PriorPotential(Flat(n=4).potential(), GaussianPrior(np.full(4, 0.5)))
    assert isinstance(pot, Potential)
    res = registry.load("minimiser", "rmin")().minimise(pot, np.full(4, 0.3))
    assert res.converged
    # the gradient theta / s^2 is below grad_tol, so |theta| < grad_tol * s^2
    np.testing.assert_array_less(np.abs(res.theta), res.max_abs_grad * 0.25 * (1 + 1e-12))
    np.testing.assert_array_less(res.max_abs_grad, 1e-4)
