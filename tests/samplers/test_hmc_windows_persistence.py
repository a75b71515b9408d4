"""Windowed acceptance (Neal 1994) and momentum persistence (Horowitz 1991) keep the target:
moments of an analytic Gaussian at T = 1 and T = 2, with error bars from batch means."""

from __future__ import annotations

import numpy as np
import pytest

from thermonet.errors import ConfigError
from thermonet.samplers.hmc import HMC
from thermonet.samplers.hmc_gibbs import GibbsHMC
from thermonet.testsystems import Gaussian

STIFF = np.array([1.0, 4.0, 25.0])


def _batch_mean_se(x, n_batches=40):
    b = x[: len(x) // n_batches * n_batches].reshape(n_batches, -1).mean(axis=1)
    return b.mean(), b.std(ddof=1) / np.sqrt(n_batches)


def _check_moments(chain, t):
    """Each coordinate's mean 0 and E[w^2] = T/k, within 4.5 batch-means standard errors."""
    for i, k in enumerate(STIFF):
        m, se = _batch_mean_se(chain[:, i])
        assert abs(m) < 4.5 * se + 1e-12, (i, m, se)
        m2, se2 = _batch_mean_se(chain[:, i] ** 2)
        assert abs(m2 - t / k) < 4.5 * se2, (i, m2, t / k, se2)


def _run(sampler, n, seed):
    rng = np.random.default_rng(seed)
    state = sampler.init(np.full(3, 0.1))
    out = np.empty((n, 3))
    acc = 0
    for j in range(n):
        state, info = sampler.step(state, rng)
        out[j] = state.theta
        acc += info.is_accepted
    return out, acc / n


@pytest.mark.parametrize("t", [1.0, 2.0])
def test_windowed_hmc_keeps_the_gaussian(t):
    pot = Gaussian(3, STIFF).potential()
    # a step size near the stability limit 2/sqrt(25) = 0.4, where windows matter
    s = HMC(pot, temperature=t, step_size=0.33, n_leapfrog=12, window=4)
    chain, acc = _run(s, 8000, 11)
    assert 0.3 < acc < 1.0
    _check_moments(chain[200:], t)


@pytest.mark.parametrize("t,window", [(1.0, 0), (2.0, 3)])
def test_persistent_momenta_keep_the_gaussian(t, window):
    pot = Gaussian(3, STIFF).potential()
    s = GibbsHMC(pot, temperature=t, step_size=0.3, n_leapfrog=3, persistence=0.9,
                 window=window)
    chain, acc = _run(s, 12000, 5)
    assert 0.3 < acc < 1.0
    _check_moments(chain[200:], t)


def test_window_of_one_state_is_the_metropolis_test():
    """W = 1: the windows are the start and the end point, ln(F_A/F_R) = -dH/T, and an
    accepted transition lands exactly on the end point of the ordinary trajectory."""
    from thermonet.kernels import leapfrog as lf
    from thermonet.samplers.windows import windowed_transition

    pot = Gaussian(3, STIFF).potential()
    s = HMC(pot, temperature=1.5, step_size=0.1, n_leapfrog=7, window=1)
    theta0 = np.array([0.3, -0.2, 0.1])
    e0, g0 = pot.energy_and_grad(theta0)
    p0 = np.array([0.5, 1.0, -2.0])
    th, p, g = theta0.copy(), p0.copy(), g0.copy()
    e1, *_ = pot.trajectory(th, p, g, s.inv_mass, 0.1, 7, s._wall, s.half_width, 10.0)
    d_h = e1 + lf.kinetic(p, s.inv_mass) - e0 - lf.kinetic(p0, s.inv_mass)
    for seed in range(20):
        out = windowed_transition(s, theta0, e0, g0, p0, 0.1, 7, 1,
                                  np.random.default_rng(seed))
        theta, e, _, p_out, accepted, log_r, _ = out
        assert log_r == pytest.approx(-d_h / 1.5, rel=1e-10, abs=1e-13)
        if accepted:
            np.testing.assert_array_equal(theta, th)
            np.testing.assert_array_equal(p_out, p)
        else:                                  # stays, with the momentum negated
            np.testing.assert_array_equal(theta, theta0)
            np.testing.assert_array_equal(p_out, -p0)


def test_bad_options_are_refused():
    pot = Gaussian(3, STIFF).potential()
    with pytest.raises(ConfigError, match="persistence"):
        GibbsHMC(pot, persistence=1.0)
    with pytest.raises(ConfigError, match="window"):
        HMC(pot, window=-1)
