"""Gibbs updates of the hyperparameters: conditionals against the analytic Gamma posteriors
(including the temperature), and the joint chain on a model whose hyperparameter marginal is
known exactly."""

from __future__ import annotations

import math

import numpy as np
import pytest

from thermonet.architectures.regression import RegressionMLP
from thermonet.samplers.hmc_gibbs import GibbsHMC


@pytest.mark.parametrize("t", [1.0, 3.0])
def test_noise_and_group_conditionals_match_the_gamma_posterior(rng, t):
    arch = RegressionMLP(2, [4], 2)
    x = rng.uniform(-2, 2, size=(30, 2))
    y = rng.normal(size=(30, 2))
    pot = arch.potential(x=x, y=y)
    s = GibbsHMC(pot, temperature=t)
    theta = rng.normal(size=arch.n_params)
    state = s.init(theta)
    # independent sufficient statistics: residuals from a NumPy forward pass
    w1 = theta[:8].reshape(4, 2)
    b1 = theta[8:12]
    w2 = theta[12:20].reshape(2, 4)
    b2 = theta[20:22]
    f = np.tanh(x @ w1.T + b1) @ w2.T + b2
    sse = float(np.sum((f - y) ** 2))
    hm = s.hyper_model
    a0, r0 = 0.25, 0.25 / 400.0                     # Neal's vague width 0.05, shape 0.5
    expect = [(a0 + 4, r0 + 0.5 * np.sum(w1 ** 2)),  # 8 input-hidden weights
              (a0 + 2, r0 + 0.5 * np.sum(b1 ** 2)),  # 4 hidden biases
              (a0 + 4, r0 + 0.5 * 4 * np.sum(w2 ** 2)),   # precision scaled by H = 4
              (a0 + 60 / (2 * t), r0 + sse / (2 * t))]    # noise, at temperature T
    assert hm.names() == ["layer1.weight", "layer1.bias", "layer2.weight", "noise"]
    n = 4000
    draws = np.array([s.gibbs(theta, state.hyper, rng) for _ in range(n)])
    for j, (a, r) in enumerate(expect):
        mean, var = a / r, a / r ** 2
        # the sample mean's error bar sqrt(var/n); the sample variance's ~ var sqrt((2 + 6/a)/n)
        assert abs(draws[:, j].mean() - mean) < 4.5 * math.sqrt(var / n), j
        assert abs(draws[:, j].var() - var) < 4.5 * var * math.sqrt((2 + 6 / a) / n), j


def test_joint_chain_recovers_the_hyperprior_without_data():
    """With no data the posterior is the prior: prec ~ Gamma(4, 4) (width 1, Neal shape 8) and,
    given prec, each weight ~ N(0, 1/prec); so E[prec] = 1 and E[w^2] = E[1/prec] = 4/3 (with
    finite variance, so batch means give an honest error bar). The chain alternates HMC on the
    weights with Gibbs on the precisions."""
    arch = RegressionMLP(1, [1], 1, noise_std=1.0, hyper_width=1.0, hyper_shape=8.0)
    pot = arch.potential(x=np.empty((0, 1)), y=np.empty((0, 1)))
    s = GibbsHMC(pot, step_size=0.3, n_leapfrog=10, step_size_jitter=0.5)
    rng = np.random.default_rng(7)
    state = s.init(np.full(arch.n_params, 0.5))
    hyp, w2 = [], []
    for _ in range(20000):
        state, _ = s.step(state, rng)
        hyp.append(state.hyper[0])                 # the input-hidden weight's precision
        w2.append(state.theta[0] ** 2)
    hyp, w2 = np.array(hyp[500:]), np.array(w2[500:])

    def bm(v, nb=50):
        b = v[: len(v) // nb * nb].reshape(nb, -1).mean(axis=1)
        return b.mean(), b.std(ddof=1) / math.sqrt(nb)

    m, se = bm(hyp)
    assert abs(m - 1.0) < 4.5 * se
    m, se = bm(w2)
    assert abs(m - 4.0 / 3.0) < 4.5 * se
