"""MacKay's evidence framework (thermonet.evidence.mackay.framework) against closed forms.

A linear-Gaussian model goes through the same code as the networks (the same potential
interface; its Hessian by the same finite differences of the gradient, exact here up to
rounding since the energy is quadratic). For it the Gaussian approximation is exact:
``ln P(D|alpha, beta) = sum_k ln N(y_k; 0, I/beta + Phi Lambda_k^-1 Phi^T)``, the fixed point of
the re-estimation is the maximiser of that function, and the predictive is exactly Gaussian.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.optimize

from thermonet.api import Potential
from thermonet.api.hyper import GammaPrior, HyperGroup, HyperModel
from thermonet.architectures.regression import RegressionMLP
from thermonet.errors import ConfigError
from thermonet.evidence.mackay.framework import (
    evaluate_at,
    log_symmetry_factor,
    mackay_evidence,
    predictive,
    reestimate,
)

_PRIOR = GammaPrior(1.0, 1.0)   # unused by the framework (it only reads the groups)


class LinearGaussian(Potential):
    """``f_k(x) = x . W_k`` for K outputs; parameters ``w = W.ravel()`` (K rows of d)."""

    def __init__(self, phi, y, groups, fixed_prec, unknown_noise=True):
        self.phi, self.y = np.asarray(phi, float), np.asarray(y, float)
        self.d, self.k = self.phi.shape[1], self.y.shape[1]
        self.n_params = self.d * self.k
        self.n_residuals = self.y.size
        self.groups = [(np.asarray(i), float(s)) for i, s in groups]
        self.fixed_prec = np.asarray(fixed_prec, float)   # NaN where a group decides
        self.unknown_noise = unknown_noise
        self.tau, self.prec = 1.0, np.where(np.isnan(self.fixed_prec), 1.0, self.fixed_prec)

    def hyper_model(self):
        return HyperModel(tuple(HyperGroup(f"g{c}", i, _PRIOR, s)
                                for c, (i, s) in enumerate(self.groups)),
                          _PRIOR if self.unknown_noise else None, self.n_residuals)

    def set_hyperparameters(self, hyper, scale):
        self.prec = np.where(np.isnan(self.fixed_prec), 0.0, self.fixed_prec) * scale
        for c, (i, s) in enumerate(self.groups):
            self.prec[i] = scale * s * hyper[c]
        if self.unknown_noise:
            self.tau = float(hyper[-1])

    def outputs(self, theta, x=None):
        x = self.phi if x is None else np.asarray(x, float)
        return x @ np.asarray(theta).reshape(self.k, self.d).T

    def half_sse(self, theta):
        return 0.5 * float(np.sum((self.outputs(theta) - self.y) ** 2))

    def _energy(self, th, r):
        return (self.tau * (0.5 * float(np.sum(r ** 2)))
                + 0.5 * self.n_residuals * math.log(2 * math.pi / self.tau)
                + 0.5 * float(np.sum(self.prec * th ** 2)))

    def energy(self, theta):
        th = np.asarray(theta)
        return self._energy(th, self.outputs(th) - self.y)

    def energy_and_grad(self, theta, grad_out=None):
        th = np.asarray(theta)
        r = self.outputs(th) - self.y
        g = (self.tau * (r.T @ self.phi)).ravel() + self.prec * th
        if grad_out is not None:
            grad_out[:] = g
            g = grad_out
        return self._energy(th, r), g


def _problem(seed=0, n=40, d=5, k=2, unknown_noise=True):
    rng = np.random.default_rng(seed)
    phi = rng.normal(size=(n, d))
    w = rng.normal(size=(k, d)) * np.array([2.0, 1.5, 0.3, 0.2, 0.1])[:d]
    y = phi @ w.T + 0.3 * rng.normal(size=(n, k))
    # group 0: the first three weights of each output (scale 1); group 1: the next weight of
    # each output (scale 3); the last weight of each output has a fixed precision 0.5
    idx = np.arange(d * k).reshape(k, d)
    fixed = np.full(d * k, np.nan)
    fixed[idx[:, d - 1]] = 0.5
    groups = [(idx[:, :3].ravel(), 1.0), (idx[:, 3:d - 1].ravel(), 3.0)]
    return LinearGaussian(phi, y, groups, fixed, unknown_noise)


def _exact_log_evidence(pot, hyper):
    pot.set_hyperparameters(hyper, 1.0)
    prec = pot.prec.reshape(pot.k, pot.d)
    out = 0.0
    for j in range(pot.k):
        c = np.eye(pot.phi.shape[0]) / pot.tau + (pot.phi / prec[j]) @ pot.phi.T
        sign, logdet = np.linalg.slogdet(c)
        out += -0.5 * (logdet + pot.y[:, j] @ np.linalg.solve(c, pot.y[:, j])
                       + pot.phi.shape[0] * math.log(2 * math.pi))
    return out


def _exact_posterior(pot, hyper):
    """Block-diagonal posterior: mean (k, d) and covariance per output (k, d, d)."""
    pot.set_hyperparameters(hyper, 1.0)
    prec = pot.prec.reshape(pot.k, pot.d)
    covs = np.array([np.linalg.inv(pot.tau * pot.phi.T @ pot.phi + np.diag(prec[j]))
                     for j in range(pot.k)])
    means = np.array([pot.tau * covs[j] @ pot.phi.T @ pot.y[:, j] for j in range(pot.k)])
    return means, covs


def test_evidence_at_fixed_hyperparameters_is_the_exact_gaussian_integral():
    pot = _problem()
    hyper = [0.7, 2.0, 5.0]
    r = evaluate_at(pot, np.zeros(pot.n_params), hyper)
    assert r.log_evidence_fixed == pytest.approx(_exact_log_evidence(pot, hyper), abs=1e-7)
    means, covs = _exact_posterior(pot, hyper)
    np.testing.assert_allclose(r.theta, means.ravel(), atol=1e-9)
    diag = np.concatenate([np.diag(c) for c in covs])
    prec = pot.prec
    np.testing.assert_allclose(r.gamma, np.sum(1 - prec * diag), rtol=1e-9)
    # gamma_c = k_c - alpha_c s_c Tr_c(A^-1), from the exact covariance
    i0 = pot.groups[0][0]
    np.testing.assert_allclose(r.gamma_groups[0], i0.size - hyper[0] * diag[i0].sum(),
                               rtol=1e-9)
    # the terms: best-fit likelihood and the Occam factor of w
    resid = pot.outputs(r.theta) - pot.y
    assert r.log_likelihood == pytest.approx(
        -0.5 * hyper[2] * np.sum(resid ** 2) - 0.5 * resid.size * math.log(2 * math.pi / 5.0),
        abs=1e-9)


def test_reestimation_reaches_the_maximum_of_the_exact_evidence():
    pot = _problem(seed=1)
    r = reestimate(pot, np.zeros(pot.n_params), [1.0, 1.0, 1.0], tol=1e-10)
    assert r.converged and r.positive_definite
    res = scipy.optimize.minimize(lambda lh: -_exact_log_evidence(pot, np.exp(lh)),
                                  np.zeros(3), method="Nelder-Mead",
                                  options={"xatol": 1e-10, "fatol": 1e-13, "maxiter": 20000})
    np.testing.assert_allclose(np.log([*r.alpha, r.beta]), res.x, atol=1e-4)
    assert r.log_evidence_fixed == pytest.approx(-res.fun, abs=1e-8)
    # the fixed-point equations themselves (MacKay eq. 8, per group)
    np.testing.assert_allclose(2 * r.alpha * r.e_w, r.gamma_groups, rtol=1e-8)
    assert 2 * r.beta * r.e_d == pytest.approx(r.n_residuals - r.gamma, rel=1e-8)
    # the Occam factors of the hyperparameters: MacKay's Gaussian widths, as documented
    want = sum(0.5 * math.log(2 * math.pi * 2 / g) for g in r.gamma_groups)
    want += 0.5 * math.log(2 * math.pi * 2 / (r.n_residuals - r.gamma))
    assert r.log_occam_hyper == pytest.approx(want, abs=1e-12)
    assert r.log_evidence == pytest.approx(r.log_evidence_fixed + want, abs=1e-12)


def test_known_noise_keeps_beta_and_reaches_the_exact_maximum_over_alpha():
    pot = _problem(seed=2, unknown_noise=False)
    pot.tau = 9.0
    r = reestimate(pot, np.zeros(pot.n_params), [1.0, 1.0], tol=1e-10)
    assert r.beta == 9.0 and not r.beta_estimated
    res = scipy.optimize.minimize(lambda la: -_exact_log_evidence(pot, np.exp(la)),
                                  np.zeros(2), method="Nelder-Mead",
                                  options={"xatol": 1e-10, "fatol": 1e-13, "maxiter": 20000})
    np.testing.assert_allclose(np.log(r.alpha), res.x, atol=1e-4)


def test_predictive_matches_the_exact_gaussian():
    pot = _problem(seed=3)
    hyper = [0.5, 3.0, 8.0]
    r = evaluate_at(pot, np.zeros(pot.n_params), hyper)
    x = np.random.default_rng(9).normal(size=(7, pot.d))
    mean, var = predictive(r, pot, x)
    means, covs = _exact_posterior(pot, hyper)
    np.testing.assert_allclose(mean, x @ means.T, atol=1e-9)
    want = np.stack([np.einsum("ni,ij,nj->n", x, covs[j], x) for j in range(pot.k)], 1)
    np.testing.assert_allclose(var, want + 1 / 8.0, rtol=1e-7)


@pytest.mark.parametrize("activation", ["tanh", "logistic"])
def test_symmetry_factor_counts_the_function_preserving_transformations(activation):
    """Enumerate every permutation and sign flip of H = 3 hidden units: the distinct
    parameter vectors that leave the network function unchanged number exp(log_symmetry)."""
    arch = RegressionMLP(n_inputs=2, hidden=[3], n_outputs=2, hidden_activation=activation)
    rng = np.random.default_rng(4)
    theta = rng.normal(size=arch.n_params)
    x = rng.normal(size=(11, 2))
    f0 = arch.predict(theta, x)
    w1 = theta[:6].reshape(3, 2)
    b1, w2, b2 = theta[6:9], theta[9:15].reshape(2, 3), theta[15:]
    same = set()
    for perm in itertools.permutations(range(3)):
        for signs in itertools.product([1.0, -1.0], repeat=3):
            s = np.array(signs)
            t = np.concatenate([(s[:, None] * w1[list(perm)]).ravel(), s * b1[list(perm)],
                                (w2[:, list(perm)] * s).ravel(), b2])
            if np.allclose(arch.predict(t, x), f0, atol=1e-12):
                same.add(tuple(np.round(t, 12)))
    assert len(same) == round(math.exp(log_symmetry_factor([3], activation)))


def test_robot_arm_network_reaches_the_fixed_point():
    from thermonet.data import load_data

    split = load_data("robot-arm")
    arch = RegressionMLP(n_inputs=2, hidden=[2], n_outputs=2)
    r = mackay_evidence(arch, split.train, seed=0)
    assert r.converged and r.positive_definite
    np.testing.assert_allclose(2 * r.alpha * r.e_w, r.gamma_groups, rtol=1e-5)
    assert 2 * r.beta * r.e_d == pytest.approx(r.n_residuals - r.gamma, rel=1e-5)
    assert np.all((r.gamma_groups > 0) & (r.gamma_groups <= [4, 2, 4]))
    assert r.log_symmetry == pytest.approx(math.log(2 * 4))
    # the evidence terms add up, and eq. (7) equals -M(w_MP) + sum ln prec_i / 2 - ln det A/2
    pot = arch.potential(split.train)
    pot.set_hyperparameters([*r.alpha, r.beta], 1.0)
    direct = (-pot.energy(r.theta) + 0.5 * np.sum(np.log(pot.prec))
              - 0.5 * np.sum(np.log(r.eigenvalues)))
    assert r.log_evidence_fixed == pytest.approx(direct, abs=1e-8)


def test_bad_settings_are_refused_in_one_line():
    pot = _problem()
    for call in (lambda: reestimate(pot, np.zeros(3)),
                 lambda: reestimate(pot, np.zeros(pot.n_params), [1.0, -1.0, 1.0]),
                 lambda: reestimate(pot, np.zeros(pot.n_params), max_iter=0),
                 lambda: log_symmetry_factor([3], "relu"),
                 lambda: mackay_evidence(RegressionMLP(hierarchical=False), None),
                 lambda: mackay_evidence(RegressionMLP(hierarchical=True,
                                                       parameterisation="scale"), None)):
        with pytest.raises(ConfigError) as err:
            call()
        assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="use parameterisation = \"direct\""):
        mackay_evidence(RegressionMLP(hierarchical=True, parameterisation="scale"), None)


def test_parse_hidden_and_the_command(tmp_path):
    import json

    from click.testing import CliRunner

    from thermonet.cli import main
    from thermonet.evidence.mackay.sweep import parse_hidden

    assert parse_hidden("1-3,5") == [1, 2, 3, 5]
    for bad in ("0-2", "a", ""):
        with pytest.raises(ConfigError):
            parse_hidden(bad)
    res = CliRunner().invoke(main, ["mackay", "--hidden", "1", "--restarts", "1",
                                    "--max-iter", "3", "--json", "--plot",
                                    str(tmp_path / "f.png"), "--out",
                                    str(tmp_path / "rows.json")])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    saved = json.loads((tmp_path / "rows.json").read_text())
    assert saved["rows"] == out["rows"] and saved["hessian"] == "auto"
    (row,) = out["rows"]
    assert row["hidden"] == 1 and row["log_symmetry"] == pytest.approx(math.log(2))
    assert row["log_evidence"] == pytest.approx(
        row["log_likelihood"] + row["log_occam_w"] + row["log_occam_hyper"]
        + row["log_symmetry"], abs=1e-9)
    assert (tmp_path / "f.png").stat().st_size > 0
    bad = CliRunner().invoke(main, ["mackay", "--hidden", "x"])
    assert bad.exit_code == 1 and "expected e.g. '1-10'" in bad.output


def test_exact_and_difference_hessians_give_the_same_evidence():
    from thermonet.data import load_data

    split = load_data("robot-arm")
    arch = RegressionMLP(n_inputs=2, hidden=[3], n_outputs=2)
    hyper = [2.0, 1.0, 0.5, 300.0]
    theta0 = np.random.default_rng(2).normal(0, 0.5, arch.n_params)
    exact = evaluate_at(arch.potential(split.train), theta0, hyper)
    # started at that minimum (from theta0 the two minimisers, trust-region Newton and
    # L-BFGS, may reach permuted copies), the difference Hessian finds the same point and
    # the evidence agrees to the differences' O(h^4) error in ln det A
    fd = evaluate_at(arch.potential(split.train), exact.theta, hyper, hessian_method="fd")
    np.testing.assert_allclose(exact.theta, fd.theta, atol=1e-5)
    assert exact.log_evidence == pytest.approx(fd.log_evidence, abs=1e-5)
    with pytest.raises(ConfigError, match="rop"):
        evaluate_at(arch.potential(split.train), theta0, hyper, hessian_method="rop")


def test_hmc_predictive_equals_the_gaussian_one_for_a_linear_model():
    """For a model linear in its weights the posterior at fixed hyperparameters is exactly
    Gaussian: HMC's predictive moments must match the framework's within their MC errors."""
    from thermonet.evidence.mackay.hmc import sampled_predictive

    pot = _problem(seed=5)
    r = reestimate(pot, np.zeros(pot.n_params), [1.0, 1.0, 1.0], tol=1e-8)
    x = np.random.default_rng(6).normal(size=(5, pot.d))
    mean, var = predictive(r, pot, x)
    s = sampled_predictive(r, pot, x, n_draws=3000, seed=1)
    assert s.acceptance > 0.5
    assert np.all(np.abs(s.mean - mean) < 4.5 * s.mean_se)
    assert np.all(np.abs(s.var - var) < 4.5 * s.var_se)
    # the errors are small enough for the comparison to mean something
    assert np.all(s.var_se < 0.1 * (var - 1 / r.beta))
    with pytest.raises(ConfigError, match="n_draws"):
        sampled_predictive(r, pot, x, n_draws=10)


def test_sweep_plot_adds_a_zoom_panel_for_a_wide_evidence_range(tmp_path):
    from matplotlib.image import imread

    from thermonet.evidence.mackay.sweep import SweepRow
    from thermonet.plotting.mackay import plot_mackay_sweep

    def row(h, ev, err, conv=True):
        return SweepRow(h, 0, ev, ev, 0.0, 0.0, 0.0, 1.0, [1.0], 0.1, err, err, 1, conv, 0.1)

    narrow = [row(1, -10.0, 1.0), row(2, 5.0, 0.5)]
    wide = [row(1, -300.0, 1.0), row(2, 100.0, 0.01), row(3, 110.0, 0.009, False)]
    one = imread(plot_mackay_sweep(narrow, tmp_path / "one.png"))
    two = imread(plot_mackay_sweep(wide, tmp_path / "two.png"))
    # the second panel widens the figure (6.4 -> 11 inches at the same height)
    assert two.shape[1] / two.shape[0] > 1.5 * one.shape[1] / one.shape[0]


@pytest.mark.slow
def test_thermodynamic_integration_confirms_the_exact_gaussian_evidence():
    """On a linear-Gaussian model the framework's eq. (7) is exact, so TI of the same integral
    (with the prior's normalisation) must agree within its own error bar."""
    from thermonet.evidence.mackay.versus_ti import ti_cross_check
    from thermonet.evidence.ti.config import TIConfig

    pot = _problem()
    r = reestimate(pot, np.zeros(pot.n_params), [1.0, 1.0, 1.0], tol=1e-10)
    assert r.log_evidence_fixed == pytest.approx(_exact_log_evidence(pot, [*r.alpha, r.beta]),
                                                 abs=1e-9)
    for whiten in (True, False):
        c = ti_cross_check(r, pot, config=TIConfig(n_bridges=12, n_samples=150), seed=1,
                           whiten=whiten)
        assert c.laplace == r.log_evidence_fixed and 0 < c.ti_error < 0.1
        assert abs(c.z) < 4.0, (whiten, c)
    with pytest.raises(ConfigError, match="box_sigmas"):
        ti_cross_check(r, pot, box_sigmas=-1.0)
