"""Neal (1993)'s scale-factor parameterisation: the energy is the direct model's posterior in
new coordinates (checked against an independent NumPy energy with its Jacobian), its
gradient against finite differences, and its chain against the direct model's Gibbs chain on
a tiny problem (predictive means, log precisions and the data fit within error bars)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from thermonet.architectures.regression import RegressionMLP
from thermonet.errors import ConfigError
from thermonet.samplers.hmc_gibbs import GibbsHMC

X = np.linspace(-2.0, 2.0, 6)[:, None]
Y = np.sin(X) + 0.1 * np.array([[0.3], [-1.1], [0.4], [0.9], [-0.2], [0.6]])


def numpy_energy(arch, q, tau, t):
    """-ln [p(D|w,tau)^(1/T) p(w|prec) p(prec)] x T at w(q), in the (v, u) coordinates:
    the direct model's density times the Jacobian |dw/dv| |dprec/du|."""
    n_in, h = int(arch.widths[0]), int(arch.widths[1])
    nw = arch.n_params - 3
    v, u = q[:nw], q[nw:]
    prec = np.exp(u)
    w1s, b1s, w2s = 1 / np.sqrt(prec[0]), 1 / np.sqrt(prec[1]), 1 / np.sqrt(h * prec[2])
    w1 = v[:h * n_in].reshape(h, n_in) * w1s
    b1 = v[h * n_in:h * n_in + h] * b1s
    w2 = v[h * n_in + h:h * n_in + 2 * h].reshape(1, h) * w2s
    b2 = v[-1:]
    f = np.tanh(X @ w1.T + b1) @ w2.T + b2
    lik = tau * 0.5 * np.sum((f - Y) ** 2) + 0.5 * Y.size * math.log(2 * math.pi / tau)
    a, b = arch.hyperprior.gamma_shape, arch.hyperprior.gamma_rate
    w = np.concatenate([w1.ravel(), b1, w2.ravel()])
    sds = np.concatenate([np.full(h * n_in, w1s), np.full(h, b1s), np.full(h, w2s)])
    log_prior_w = np.sum(-0.5 * (w / sds) ** 2 - np.log(sds) - 0.5 * math.log(2 * math.pi))
    log_prior_w += -0.5 * (b2[0] / 100) ** 2 - math.log(100) - 0.5 * math.log(2 * math.pi)
    log_prior_h = np.sum(a * math.log(b) - math.lgamma(a) + (a - 1) * u - b * prec)
    log_jac = np.sum(np.log(sds)) + np.sum(u)          # dw/dv, then dprec/du = e^u
    return lik - t * (log_prior_w + log_prior_h + log_jac)


@pytest.mark.parametrize("t", [1.0, 2.5])
def test_energy_is_the_direct_posterior_in_new_coordinates(rng, t):
    arch = RegressionMLP(1, [3], 1, noise_std=0.2, parameterisation="scale")
    pot = arch.potential(x=X, y=Y)
    pot.set_hyperparameters([], t)
    for _ in range(3):
        q = rng.normal(size=arch.n_params)
        e1 = pot.energy(q)
        e2 = numpy_energy(arch, q, 25.0, t)
        # equal up to the normalising constants the energy drops: N(0,1) of every v (the
        # output bias's N(0, 100^2)) and the three Gamma densities
        a, b = arch.hyperprior.gamma_shape, arch.hyperprior.gamma_rate
        const = t * (0.5 * (arch.n_params - 3) * math.log(2 * math.pi) + math.log(100.0)
                     + 3 * (math.lgamma(a) - a * math.log(b)))
        assert e1 == pytest.approx(e2 - const, rel=1e-10, abs=1e-9)


@pytest.mark.parametrize("t", [1.0, 2.5])
def test_three_level_energy_is_the_direct_posterior_in_new_coordinates(rng, t):
    """ARD with Rasmussen's third level: the per-input log precisions are coordinates, with
    Gamma(ard_shape/2, rate ard_shape/(2 mu)) priors at the top level's mean mu. Energy
    differences between points against the direct model's energy plus SciPy's Gamma log
    densities and the Jacobian, at two values of mu."""
    x, y = rng.normal(size=(7, 3)), rng.normal(size=(7, 1))
    kw = dict(noise_std=0.3, ard=True, ard_levels=3, ard_shape=1.5, hyper_shape=3.0,
              hyper_width=0.5)
    arch = RegressionMLP(3, [2], 1, parameterisation="scale", **kw)
    direct = RegressionMLP(3, [2], 1, **kw).potential(x=x, y=y)
    pot = arch.potential(x=x, y=y)
    groups = arch.scale_groups()
    nw = arch.n_params - len(groups)
    assert [name for name, _, _ in groups][:3] == [f"layer1.weight.in{i}" for i in range(3)]
    for mu in (0.3, 40.0):
        pot.set_hyperparameters([mu], t)

        def reference(q):
            v, u = q[:nw], q[nw:]
            w = v.copy()
            log_jac = float(np.sum(u))                  # d prec/du = e^u
            for g, (_, idx, scale) in enumerate(groups):
                w[idx] = v[idx] / math.sqrt(scale * math.exp(u[g]))
                log_jac -= 0.5 * idx.size * math.log(scale * math.exp(u[g]))
            # the direct energy: -ln p(D|w) + T sum prec_i w_i^2/2 at prec = e^u
            direct.set_hyperparameters(np.r_[np.exp(u), mu], t)
            e = direct.energy(w)
            log_norm = 0.5 * sum(idx.size * math.log(scale * math.exp(u[g]))
                                 for g, (_, idx, scale) in enumerate(groups))
            shape = [0.75] * 3 + [1.5] * 2              # Neal's shape / 2
            rate = [0.75 / mu] * 3 + [1.5 / 4.0] * 2    # mean 1/0.5^2 = 4 off the top level
            log_h = sum(stats.gamma.logpdf(math.exp(u[g]), shape[g], scale=1 / rate[g])
                        for g in range(len(groups)))
            return e - t * (log_norm + log_h + log_jac)

        qs = [rng.normal(size=arch.n_params) for _ in range(4)]
        for q in qs[1:]:
            assert pot.energy(q) - pot.energy(qs[0]) == pytest.approx(
                reference(q) - reference(qs[0]), rel=1e-10, abs=1e-9)


@pytest.mark.parametrize("ard_levels", [None, 3])
def test_gradient_against_finite_differences(rng, ard_levels):
    kw = {} if ard_levels is None else {"ard": True, "ard_levels": ard_levels}
    arch = RegressionMLP(2, [4], 2, parameterisation="scale", hidden_activation="logistic",
                         **kw)
    pot = arch.potential(x=rng.normal(size=(9, 2)), y=rng.normal(size=(9, 2)))
    pot.set_hyperparameters([3.0] if ard_levels is None else [3.0, 0.4], 1.7)
    q = rng.normal(size=arch.n_params)
    e, g = pot.energy_and_grad(q)
    assert e == pytest.approx(pot.energy(q), rel=1e-13)
    h = 1e-6
    eye = np.eye(arch.n_params)
    fd = np.array([(pot.energy(q + h * eye[i]) - pot.energy(q - h * eye[i])) / (2 * h)
                   for i in range(arch.n_params)])
    assert np.allclose(g, fd, rtol=1e-6, atol=1e-6)


def test_overflowing_scale_is_a_rejected_energy_not_a_crash():
    arch = RegressionMLP(1, [2], 1, noise_std=0.2, parameterisation="scale")
    pot = arch.potential(x=X, y=Y)
    q = np.zeros(arch.n_params)
    q[-1] = 800.0
    e, g = pot.energy_and_grad(q)
    assert not math.isfinite(e)


def test_scale_needs_the_two_level_hierarchy():
    with pytest.raises(ConfigError, match="hierarchical = false; expected hierarchical = true"):
        RegressionMLP(2, [3], 1, parameterisation="scale", hierarchical=False)
    with pytest.raises(ConfigError, match="expected one of"):
        RegressionMLP(2, [3], 1, parameterisation="scales")


def chain(arch, n, seed, x=X, y=Y):
    """Predictive means at two inputs, every group's log precision, the three-level mean's
    log (if any) and S(w), per transition after a tenth discarded."""
    pot = arch.potential(x=x, y=y)
    s = GibbsHMC(pot, step_size=0.05, n_leapfrog=15, step_size_jitter=0.5,
                 adapt_method="fixed")
    rng = np.random.default_rng(seed)
    state = s.init(arch.initial_draw(rng))
    xs = np.array([[-1.0, 0.3], [0.5, -0.8]])[:, :x.shape[1]]
    n_g = len(arch.scale_groups())
    rows = []
    for _ in range(n):
        state, _ = s.step(state, rng)
        if arch.scaled:
            logp = state.theta[-n_g:]
        else:
            logp = np.log(state.hyper[:n_g])
        top = [math.log(state.hyper[-1])] if arch.top is not None else []
        f = arch.predict(state.theta, xs)[:, 0]
        rows.append([*f, *logp, *top, s.potential.half_sse(state.theta)])
    return np.array(rows[n // 10:])


def batch_means(v, nb=40):
    b = v[: len(v) // nb * nb].reshape(nb, -1, v.shape[1]).mean(axis=1)
    return b.mean(axis=0), b.std(axis=0, ddof=1) / math.sqrt(nb)


@pytest.mark.slow
def test_same_posterior_as_the_direct_parameterisation():
    """Predictive means at two inputs, the three log precisions and S(w): the scale-factor
    chain (HMC on everything) and the direct chain (HMC on w, Gibbs on the precisions)
    agree within 4.5 combined batch-means standard errors."""
    kw = dict(noise_std=0.1, hyper_width=1.0, hyper_shape=6.0)
    direct = chain(RegressionMLP(1, [2], 1, **kw), 12000, 1)
    scaled = chain(RegressionMLP(1, [2], 1, parameterisation="scale", **kw), 12000, 2)
    m1, se1 = batch_means(direct)
    m2, se2 = batch_means(scaled)
    z = np.abs(m1 - m2) / np.sqrt(se1 ** 2 + se2 ** 2)
    assert np.all(z < 4.5), (m1, m2, z)
    assert np.all(np.isfinite(se1)) and np.all(se1 > 0)


def test_three_level_top_mean_is_slice_sampled_from_the_scale_factors():
    """The sampler's Gibbs step for the top level's mean uses the members' precisions
    e^u from the state's coordinates: one slice update of top_conditional at those."""
    from thermonet.api.hyper import slice_top, top_conditional

    arch = RegressionMLP(3, [2], 1, noise_std=0.3, ard=True, ard_levels=3,
                         parameterisation="scale")
    s = GibbsHMC(arch.potential(x=np.zeros((4, 3)), y=np.zeros((4, 1))))
    (top,) = s.hyper_model.tops
    q = np.zeros(arch.n_params)
    nw = arch.n_params - len(arch.scale_groups())
    q[nw:] = [-1.0, 0.5, 2.0, 7.0, -3.0]        # three inputs, the biases, the outputs
    assert top.log_index == (nw, nw + 1, nw + 2)
    rng1, rng2 = np.random.default_rng(4), np.random.default_rng(4)
    got = s.gibbs(q, np.array([2.5]), rng1)
    c, b, d = top_conditional(top, np.exp([-1.0, 0.5, 2.0]))
    assert got[0] == math.exp(slice_top(c, b, d, math.log(2.5), rng2))


@pytest.mark.slow
def test_three_level_same_posterior_as_the_direct_parameterisation():
    """ARD with the third level on a 2-2-1 net: predictive means, the four log precisions,
    the top level's log mean and S(w) agree between the scale-factor chain (HMC on the
    weights and the per-input log precisions, slice updates of the mean) and the direct
    chain (Gibbs on every precision) within 4.5 combined batch-means standard errors."""
    x = np.column_stack([X[:, 0], np.cos(2.0 * X[:, 0])])
    kw = dict(noise_std=0.1, hyper_width=1.0, hyper_shape=6.0, ard=True, ard_levels=3,
              ard_shape=6.0, ard_top_shape=6.0)
    direct = chain(RegressionMLP(2, [2], 1, **kw), 12000, 1, x=x)
    scaled = chain(RegressionMLP(2, [2], 1, parameterisation="scale", **kw), 12000, 2, x=x)
    m1, se1 = batch_means(direct)
    m2, se2 = batch_means(scaled)
    z = np.abs(m1 - m2) / np.sqrt(se1 ** 2 + se2 ** 2)
    assert np.all(z < 4.5), (m1, m2, z)
    assert np.all(np.isfinite(se1)) and np.all(se1 > 0) and np.all(se2 > 0)


def test_robot_arm_energy_is_the_direct_energy_plus_the_log_precisions_terms(rng):
    """On the robot arm's 2-16-2 tanh network with unknown noise and vague hyperpriors, at
    random states: E_scale(v, u) = E_direct(w(v, u) | prec = e^u, tau) + T sum_g (b e^u_g -
    a u_g), the identity that makes the two parameterisations one posterior (the chains of
    the two settle at different places on a slowly mixing ridge: docs/regression.md)."""
    from thermonet.data import load_data

    train = load_data("robot-arm").train
    kw = dict(hidden_activation="tanh", hierarchical=True, hyper_width=0.05, hyper_shape=0.5,
              noise_width=0.05, noise_shape=0.5)
    scaled = RegressionMLP(2, [16], 2, parameterisation="scale", **kw).potential(train)
    direct = RegressionMLP(2, [16], 2, **kw).potential(train)
    a, b = scaled.a.copy(), scaled.b.copy()
    assert np.allclose(a, 0.25) and np.allclose(b, 0.5 * 0.05 ** 2 / 2)   # alpha/2, alpha s^2/2
    for t in (1.0, 2.5):
        for _ in range(3):
            q = rng.normal(size=scaled.n_params) * 0.5
            q[-3:] = rng.normal(size=3)
            tau = float(np.exp(rng.normal(6.0, 0.5)))
            scaled.set_hyperparameters([tau], t)
            direct.set_hyperparameters(np.r_[np.exp(q[-3:]), tau], t)
            u = q[-3:]
            expected = direct.energy(scaled.weights(q)) + t * np.sum(b * np.exp(u) - a * u)
            assert scaled.energy(q) == pytest.approx(expected, rel=1e-12, abs=1e-9)
