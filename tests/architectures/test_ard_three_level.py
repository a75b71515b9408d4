"""Rasmussen (1996)'s three-level ARD prior: the top-level conditional against the prior times
the Gamma densities, the slice update against an exact generalised-inverse-Gaussian draw
(SciPy), the members' Gamma conditionals, and a joint chain without data whose hyperparameter
marginals are the known priors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from thermonet.api.hyper import GammaPrior, TopLevel, slice_top, top_conditional
from thermonet.architectures.regression import RegressionMLP
from thermonet.errors import ConfigError
from thermonet.samplers.hmc_gibbs import GibbsHMC

TOP = TopLevel("t", (0, 1, 2), GammaPrior(0.5, 1.0), 0.5)
PRECS = np.array([0.3, 2.0, 11.0])


def test_top_conditional_is_prior_times_member_densities():
    """ln p(u|r) differences against GammaPrior.log_density (normalised Gamma densities)."""
    c, b, d = top_conditional(TOP, PRECS)

    def direct(u):
        mu = math.exp(u)
        members = sum(GammaPrior(1 / math.sqrt(mu), TOP.unit_shape).log_density(r)
                      for r in PRECS)
        return TOP.prior.log_density(mu) + u + members      # + u: Jacobian of mu = e^u

    def formula(u):
        return c * u - b * math.exp(u) - d * math.exp(-u)

    for u in (-2.0, 0.3, 1.7, 4.0):
        assert direct(u) - direct(0.0) == pytest.approx(formula(u) - formula(0.0), abs=1e-10)


def gig(c, b, d):
    """mu with density mu^(c-1) exp(-b mu - d/mu): SciPy's geninvgauss, rescaled."""
    return stats.geninvgauss(c, 2 * math.sqrt(b * d), scale=math.sqrt(d / b))


@pytest.mark.parametrize("precs", [PRECS, np.full(6, 1e-3), np.full(2, 40.0)])
def test_slice_update_keeps_the_exact_conditional(precs):
    """Start from exact draws; one slice update each must leave their law unchanged."""
    top = TopLevel("t", tuple(range(precs.size)), GammaPrior(0.5, 1.0), 0.5)
    c, b, d = top_conditional(top, precs)
    law = gig(c, b, d)
    rng = np.random.default_rng(5)
    n = 4000
    start = law.rvs(size=n, random_state=rng)
    out = np.exp([slice_top(c, b, d, math.log(m), rng) for m in start])
    lo, hi = law.ppf(0.1), law.ppf(0.9)
    for q, frac in ((lo, 0.1), (hi, 0.9)):            # binomial error bars of the fractions
        assert abs(np.mean(out < q) - frac) < 4.5 * math.sqrt(frac * (1 - frac) / n)
    logs = np.log(out)
    mean, sd = law.expect(np.log), math.sqrt(law.expect(lambda x: np.log(x) ** 2)
                                             - law.expect(np.log) ** 2)
    assert abs(logs.mean() - mean) < 4.5 * sd / math.sqrt(n)
    assert np.mean(out != start) > 0.99               # it moves


def test_members_are_drawn_with_the_top_level_mean(rng):
    arch = RegressionMLP(3, [4], 1, ard=True, ard_levels=3, noise_std=0.1)
    pot = arch.potential(x=rng.normal(size=(10, 3)), y=rng.normal(size=(10, 1)))
    s = GibbsHMC(pot)
    hm = s.hyper_model
    assert hm.names() == ["layer1.weight.in0", "layer1.weight.in1", "layer1.weight.in2",
                          "layer1.bias", "layer2.weight", "layer1.weight.ard"]
    theta = rng.normal(size=arch.n_params)
    hyper = arch.initial_hyper()
    hyper[-1] = 7.0                                    # the top level's mean precision
    n = 4000
    draws = np.array([s.gibbs(theta, hyper, rng) for _ in range(n)])
    w1 = theta[:12].reshape(4, 3)
    a = 0.5 * 0.5                                      # ard_shape 0.5: Gamma shape 0.25
    for i in range(3):
        shape, rate = a + 2, a / 7.0 + 0.5 * np.sum(w1[:, i] ** 2)
        mean, var = shape / rate, shape / rate ** 2
        assert abs(draws[:, i].mean() - mean) < 4.5 * math.sqrt(var / n), i
    # the other groups keep their own hyperprior (width 0.05, shape 0.5)
    b1 = theta[12:16]
    shape, rate = 0.25 + 2, 0.25 / 400 + 0.5 * np.sum(b1 ** 2)
    assert abs(draws[:, 3].mean() - shape / rate) < 4.5 * math.sqrt(shape / rate ** 2 / n)


def test_joint_chain_recovers_the_top_level_prior_without_data():
    """No data: the posterior is the prior. Top mean mu ~ Gamma(shape 4, rate 4) (width 1,
    Neal shape 8), each input's precision r_i | mu ~ Gamma(4, 4/mu); so E[mu] = 1,
    E[r_i] = E[mu] = 1, and E[1/mu] = 4/3."""
    arch = RegressionMLP(2, [1], 1, noise_std=1.0, hyper_width=1.0, hyper_shape=8.0,
                         ard=True, ard_levels=3, ard_shape=8.0, ard_top_shape=8.0)
    pot = arch.potential(x=np.empty((0, 2)), y=np.empty((0, 1)))
    s = GibbsHMC(pot, step_size=0.3, n_leapfrog=10, step_size_jitter=0.5)
    rng = np.random.default_rng(3)
    state = s.init(np.full(arch.n_params, 0.5))
    rows = []
    for _ in range(20000):
        state, _ = s.step(state, rng)
        rows.append(state.hyper.copy())
    h = np.array(rows[500:])
    top, r0 = h[:, -1], h[:, 0]

    def bm(v, nb=50):
        b = v[: len(v) // nb * nb].reshape(nb, -1).mean(axis=1)
        return b.mean(), b.std(ddof=1) / math.sqrt(nb)

    for values, want in ((top, 1.0), (r0, 1.0), (1.0 / top, 4.0 / 3.0)):
        m, se = bm(values)
        assert abs(m - want) < 4.5 * se, (m, want, se)


def test_three_levels_need_ard_and_a_hierarchy():
    with pytest.raises(ConfigError, match="needs ard = true"):
        RegressionMLP(2, [3], 1, ard_levels=3)
    with pytest.raises(ConfigError, match="expected 2"):
        RegressionMLP(2, [3], 1, ard=True, ard_levels=4)
    arch = RegressionMLP(2, [3], 1, ard=True, ard_levels=3)
    assert arch.initial_hyper().size == 2 + 2 + 1 + 1       # inputs, bias, output, noise, top


@pytest.mark.parametrize("extra", [
    {"architecture.ard": True, "architecture.ard_levels": 3},
    {"architecture.parameterisation": "scale"},
    {"architecture.ard": True, "architecture.ard_levels": 3,
     "architecture.parameterisation": "scale"},
], ids=["ard3", "scale", "scale-ard3"])
def test_runs_resume_bit_for_bit(tmp_path, extra):
    """A run with the top level (or the scale factors, or both) in its state resumes bit for
    bit, and the top level moved (its slice update ran)."""
    from tests.runner.test_regression_runner import ARM
    from tests.runs import assert_same, tree
    from thermonet import config as cfgmod
    from thermonet.io import checkpoint as ckpt
    from thermonet.runner import Run, detach_log

    cfg_path = tmp_path / "arm.toml"
    cfg_path.write_text(ARM)
    straight, half = tmp_path / "straight", tmp_path / "half"
    Run.create(cfgmod.load(cfg_path, extra), straight).run()
    Run.create(cfgmod.load(cfg_path, {**extra, "run.n_iterations": 4}), half).run()
    detach_log()
    Run.open(half, n_iterations=8).run()
    detach_log()
    assert_same(tree(straight), tree(half))
    hyper = ckpt.read_checkpoint(straight).slots["hyper"]
    if "architecture.parameterisation" in extra and "architecture.ard_levels" in extra:
        assert hyper.shape == (2, 2)                  # the noise and the top level
        assert not np.allclose(hyper[:, -1], 1.0)
    elif "architecture.ard_levels" in extra:
        assert hyper.shape == (2, 2 + 2 + 1 + 1)     # 2 inputs, bias, output, noise, top
        assert not np.allclose(hyper[:, -1], 1.0)
    else:
        assert hyper.shape == (2, 1)                  # only the noise: the scales are in theta
