"""Per-group step sizes from the current hyperparameters (Neal's heuristic, hmc-gibbs
``step_size_scaling = "prior"``): the masses are the groups' precisions, set between
trajectories, with the persistent momenta carried across each change (module docstring of
thermonet.samplers.hmc_gibbs). Checked on the model whose posterior is known exactly (no
data: prec ~ Gamma(4, 4), w | prec ~ N(0, 1/prec), so E[prec] = 1, E[w^2] = 4/3)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from thermonet.architectures.regression import RegressionMLP
from thermonet.errors import ConfigError
from thermonet.samplers.hmc_gibbs import GibbsHMC

N = 10000


def _model():
    arch = RegressionMLP(1, [1], 1, noise_std=1.0, hyper_width=1.0, hyper_shape=8.0)
    return arch, arch.potential(x=np.empty((0, 1)), y=np.empty((0, 1)))


def _chain(sampler, n, seed):
    rng = np.random.default_rng(seed)
    state = sampler.init(np.full(sampler.potential.n_params, 0.5))
    hyp, w2 = np.empty((n, state.hyper.size)), np.empty((n, 3))
    for i in range(n):
        state, _ = sampler.step(state, rng)
        hyp[i], w2[i] = state.hyper, state.theta[:3] ** 2
    return hyp[300:], w2[300:]


def _bm(v, nb=40):
    b = v[: len(v) // nb * nb].reshape(nb, -1).mean(axis=1)
    return b.mean(), b.std(ddof=1) / math.sqrt(nb)


def test_masses_are_the_group_precisions_and_change_between_trajectories():
    arch, pot = _model()
    s = GibbsHMC(pot, step_size=0.3, n_leapfrog=5, step_size_scaling="prior",
                 masses=np.full(arch.n_params, 2.0))
    groups = s.hyper_model.groups
    assert [g.name for g in groups] == ["layer1.weight", "layer1.bias", "layer2.weight"]
    h = np.array([0.5, 3.0, 7.0])
    m = s.group_masses(h)
    # m0 = 2 times scale_g prec_g (the output weight's precision is scaled by H = 1); the
    # output bias is in no group and keeps m0
    assert np.array_equal(m, [2 * 0.5, 2 * 3.0, 2 * 7.0, 2.0])
    f = s.momentum_factor(np.array([1.0, 1.0, 1.0]), h)
    assert np.allclose(f, [math.sqrt(0.5), math.sqrt(3.0), math.sqrt(7.0), 1.0], rtol=1e-15)
    rng = np.random.default_rng(1)
    state = s.init(np.full(arch.n_params, 0.5))
    for _ in range(3):
        state, _ = s.step(state, rng)
        # the trajectory just run used the masses of the state's hyperparameters
        assert np.array_equal(s.masses, s.group_masses(state.hyper))
        assert np.array_equal(s.inv_mass, 1.0 / s.masses)
    plain = GibbsHMC(pot, step_size=0.3, n_leapfrog=5)
    assert np.array_equal(plain.group_masses(h), np.ones(arch.n_params))
    with pytest.raises(ConfigError, match="step_size_scaling = 'data'"):
        GibbsHMC(pot, step_size_scaling="data")


def test_per_group_steps_with_persistence_keep_the_posterior():
    _, pot = _model()
    s = GibbsHMC(pot, step_size=0.3, n_leapfrog=5, step_size_jitter=0.5, persistence=0.9,
                 step_size_scaling="prior")
    hyp, w2 = _chain(s, N, 7)
    for j in range(3):
        m, se = _bm(hyp[:, j])
        assert abs(m - 1.0) < 4.5 * se, (j, m, se)
        m, se = _bm(w2[:, j])
        assert abs(m - 4.0 / 3.0) < 4.5 * se, (j, m, se)


def test_momenta_not_carried_across_the_mass_change_bias_the_chain():
    """The same chain with the momenta kept as they are when the masses change (the invalid
    variant): the precisions' means fall well below 1 (about 0.93 with 20000 transitions,
    11 standard errors), so the test above has the power to see the difference."""
    _, pot = _model()
    s = GibbsHMC(pot, step_size=0.3, n_leapfrog=5, step_size_jitter=0.5, persistence=0.9,
                 step_size_scaling="prior")
    s.momentum_factor = lambda old, new: 1.0            # type: ignore[method-assign]
    hyp, _ = _chain(s, N, 7)
    z = [(_bm(hyp[:, j])[0] - 1.0) / _bm(hyp[:, j])[1] for j in range(3)]
    assert min(z) < -6.0, z


def _noise_model():
    """As _model, with an unknown noise level whose prior is also Gamma(4, 4) (no data: the
    posterior is the prior, E[tau] = 1)."""
    arch = RegressionMLP(1, [1], 1, noise_width=1.0, noise_shape=8.0, hyper_width=1.0,
                         hyper_shape=8.0)
    return arch, arch.potential(x=np.empty((0, 1)), y=np.empty((0, 1)))


def test_steps_per_noise_level_keep_the_posterior():
    arch, pot = _noise_model()
    s = GibbsHMC(pot, step_size=0.3, n_leapfrog=5, step_size_jitter=0.5, persistence=0.9,
                 step_size_scaling="noise", masses=np.full(arch.n_params, 2.0))
    h = np.array([0.5, 3.0, 7.0, 2.5])                  # three groups, then the noise
    assert np.array_equal(s.group_masses(h), np.full(arch.n_params, 2.0 * 2.5))
    assert np.allclose(s.momentum_factor(np.array([1.0, 1.0, 1.0, 4.0]), h),
                       math.sqrt(2.5 / 4.0), rtol=1e-15)
    hyp, w2 = _chain(s, N, 11)
    for j in range(4):                                  # the precisions and the noise's
        m, se = _bm(hyp[:, j])
        assert abs(m - 1.0) < 4.5 * se, (j, m, se)
    for j in range(3):
        m, se = _bm(w2[:, j])
        assert abs(m - 4.0 / 3.0) < 4.5 * se, (j, m, se)


def test_noise_steps_need_an_unknown_noise_level():
    _, pot = _model()                                   # noise_std = 1: no noise precision
    with pytest.raises(ConfigError, match="'noise' needs an unknown noise level"):
        GibbsHMC(pot, step_size_scaling="noise")
