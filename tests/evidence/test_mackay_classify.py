"""MacKay's classification framework (thermonet.evidence.mackay.classify) against answers
computed independently: a two-parameter logistic regression, whose evidence integral is done
by quadrature on a grid and whose logit is exactly Gaussian under the Gaussian posterior, and
softmax networks of the ``mlp`` architecture (exact Hessians against differences of the
gradient, the re-estimation's fixed-point equations)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.optimize
from scipy.special import expit, log_expit

from thermonet.api import Potential
from thermonet.errors import ConfigError
from thermonet.evidence.laplace.curvature import hessian as dense_hessian
from thermonet.evidence.mackay.classify import (
    GaussianPriorClassifier,
    mackay_classifier,
    moderated_outputs,
)
from thermonet.evidence.mackay.framework import evaluate_at, reestimate
from thermonet.registry import get_architecture


class Logistic2(Potential):
    """``-ln p(D|w)`` of logistic regression ``P(t=1|x) = sigmoid(x . w)``, two weights."""

    hessian_method = "analytic"

    def __init__(self, phi, t):
        self.phi, self.t = np.asarray(phi, float), np.asarray(t, float)
        self.n_params, self.n_data = self.phi.shape[1], self.phi.shape[0]

    def energy(self, theta):
        a = self.phi @ np.asarray(theta)
        return float(-np.sum(self.t * log_expit(a) + (1 - self.t) * log_expit(-a)))

    def energy_and_grad(self, theta, grad_out=None):
        a = self.phi @ np.asarray(theta)
        return self.energy(theta), self.phi.T @ (expit(a) - self.t)

    def hessian(self, theta, **_):
        p = expit(self.phi @ np.asarray(theta))
        return (self.phi * (p * (1 - p))[:, None]).T @ self.phi

    def logits(self, theta, x=None):
        x = self.phi if x is None else np.asarray(x, float)
        return (x @ np.asarray(theta))[:, None]


def _logistic_problem(n=200, seed=0):
    rng = np.random.default_rng(seed)
    phi = rng.normal(size=(n, 2))
    t = (rng.uniform(size=n) < expit(phi @ np.array([1.5, -1.0]))).astype(float)
    base = Logistic2(phi, t)
    return base, GaussianPriorClassifier(base, {"w": slice(0, 2)})


def _log_evidence_by_quadrature(base, alpha, w_mp, cov, n=161):
    """``ln int p(D|w) N(w; 0, I/alpha) dw`` on an n x n grid spanning +-9 posterior
    standard deviations along the posterior's principal axes (the trapezoid rule, spectrally
    accurate for this smooth, rapidly decaying integrand)."""
    lam, u = np.linalg.eigh(cov)
    s = np.linspace(-9, 9, n)
    f = np.empty((n, n))
    for i, si in enumerate(s):
        z = np.stack([np.full(n, si), s], 1) * np.sqrt(lam)
        w = w_mp + z @ u.T
        a = base.phi @ w.T
        f[i] = (np.sum(base.t[:, None] * log_expit(a) + (1 - base.t[:, None]) * log_expit(-a),
                       0) + math.log(alpha / (2 * math.pi)) - 0.5 * alpha * np.sum(w ** 2, 1))
    m = f.max()
    integral = np.trapezoid(np.trapezoid(np.exp(f - m), s, axis=1), s)
    return m + math.log(integral * math.sqrt(np.prod(lam)))


def test_logistic_evidence_and_hessian_against_independent_computation():
    base, pot = _logistic_problem()
    alpha = 0.8
    r = evaluate_at(pot, np.zeros(2), [alpha])
    # w_MP and A computed independently of the framework
    obj = lambda w: base.energy(w) + 0.5 * alpha * w @ w              # noqa: E731
    w_ref = scipy.optimize.minimize(obj, np.zeros(2), method="BFGS", tol=1e-12).x
    assert np.allclose(r.theta, w_ref, atol=1e-7)
    a_ref = base.hessian(r.theta) + alpha * np.eye(2)
    assert np.allclose(np.sort(np.linalg.eigvalsh(a_ref)), r.eigenvalues, rtol=1e-9)
    assert r.log_likelihood == pytest.approx(-base.energy(r.theta), rel=1e-12)
    assert not r.beta_estimated
    # the Gaussian approximation against the integral itself: the Laplace error of a
    # 2-parameter logistic likelihood of 200 cases is O(1/N); measured -7.2e-3 nats here (-2.2e-3 at 4N)
    exact = _log_evidence_by_quadrature(base, alpha, r.theta, np.linalg.inv(a_ref))
    assert abs(r.log_evidence_fixed - exact) < 0.01
    # and the error falls as the data grow (the same cases four times: 1/N scaling)
    base4 = Logistic2(np.tile(base.phi, (4, 1)), np.tile(base.t, 4))
    pot4 = GaussianPriorClassifier(base4, {"w": slice(0, 2)})
    r4 = evaluate_at(pot4, np.zeros(2), [alpha])
    a4 = base4.hessian(r4.theta) + alpha * np.eye(2)
    exact4 = _log_evidence_by_quadrature(base4, alpha, r4.theta, np.linalg.inv(a4))
    assert abs(r4.log_evidence_fixed - exact4) < 0.5 * abs(r.log_evidence_fixed - exact)


def test_logistic_reestimation_reaches_its_fixed_point():
    base, pot = _logistic_problem(seed=1)
    r = reestimate(pot, np.zeros(2), [1.0], tol=1e-9)
    assert r.converged
    cov = r.covariance()
    gamma = 2 - r.alpha[0] * np.trace(cov)
    assert r.gamma == pytest.approx(gamma, rel=1e-9)
    assert r.alpha[0] == pytest.approx(gamma / float(r.theta @ r.theta), rel=1e-6)


def test_moderated_output_against_exact_gaussian_average():
    base, pot = _logistic_problem(seed=2)
    r = evaluate_at(pot, np.zeros(2), [0.5])
    x = np.array([[0.3, 0.2], [2.0, -1.0], [-3.0, 4.0], [0.0, 0.0]])
    p, s2 = moderated_outputs(r, pot, x)
    cov = np.linalg.inv(base.hessian(r.theta) + 0.5 * np.eye(2))
    s2_ref = np.einsum("ni,ij,nj->n", x, cov, x)
    assert np.allclose(s2[:, 0], s2_ref, rtol=1e-8)
    m = x @ r.theta
    # the exact average int sigmoid(a) N(a; m, s^2) da (the logit is exactly Gaussian here)
    a, wts = np.polynomial.hermite_e.hermegauss(80)
    exact = np.array([np.sum(wts * expit(mi + math.sqrt(si) * a)) / math.sqrt(2 * math.pi)
                      for mi, si in zip(m, s2_ref, strict=True)])
    # MacKay's probit approximation errs by less than 0.03 for every m, s^2 (the grid below:
    # largest error 0.027, at s ~ 3)
    assert np.max(np.abs(p[:, 0] - exact)) < 0.03
    grid_m, grid_s = np.meshgrid(np.linspace(-6, 6, 61), np.linspace(0, 30, 61))
    approx = expit(grid_m / np.sqrt(1 + math.pi * grid_s ** 2 / 8))
    quad = np.sum(wts * expit(grid_m[..., None] + grid_s[..., None] * a), -1) / math.sqrt(
        2 * math.pi)
    assert np.max(np.abs(approx - quad)) < 0.03
    # the Monte-Carlo average, within 5 standard errors of the exact one
    pm, _ = moderated_outputs(r, pot, x, method="mc", n_samples=20000, seed=3)
    se = np.sqrt(np.maximum(exact * (1 - exact), 1e-12) / 20000)
    assert np.all(np.abs(pm[:, 0] - exact) < 5 * se + 1e-12)
    with pytest.raises(ConfigError, match="method"):
        moderated_outputs(r, pot, x, method="exact")


def _softmax_data(n=90, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2))
    # three sectors around (0.8, -0.5): the biases are needed (around the origin they would
    # not be, and their weight decays would grow without bound)
    y = (np.arctan2(x[:, 1] + 0.5, x[:, 0] - 0.8) // (2 * np.pi / 3)).astype(np.int64) % 3
    # 20 % of the labels random: separable data would send the weights (alpha -> 0) to infinity
    flip = rng.uniform(size=n) < 0.2
    y[flip] = rng.integers(0, 3, int(flip.sum()))
    return SimpleNamespace(x=x, y=y)


@pytest.mark.parametrize("activation", ["tanh", "logistic"])
def test_classifier_hessian_is_exact(activation):
    data = _softmax_data()
    arch = get_architecture("mlp", n_inputs=2, hidden=[4], n_outputs=3,
                            hidden_activation=activation)
    pot = GaussianPriorClassifier(arch.potential(data), arch.param_groups())
    pot.set_hyperparameters([0.5, 2.0, 1.5, 3.0], 1.0)
    theta = np.random.default_rng(1).normal(0, 0.8, pot.n_params)
    exact = dense_hessian(pot, theta)
    fd = dense_hessian(pot, theta, method="fd")
    assert np.max(np.abs(exact - fd)) <= 1e-7 * np.max(np.abs(exact))
    assert np.allclose(np.diag(exact) - np.diag(dense_hessian(pot.base, theta)), pot.prec)


def test_softmax_network_reestimation_fixed_point_and_terms():
    data = _softmax_data()
    arch = get_architecture("mlp", n_inputs=2, hidden=[3], n_outputs=3,
                            hidden_activation="tanh")
    # one group per layer (weights and biases): with separate bias groups the output biases
    # (three softmax inputs, two degrees of freedom) are pruned here, alpha -> infinity
    d = arch.n_params
    groups = {"layer1": np.arange(0, 9), "layer2": np.arange(9, d)}
    r = mackay_classifier(arch, data, seed=0, tol=1e-7, max_iter=300, groups=groups)
    assert r.converged
    pot = GaussianPriorClassifier(arch.potential(data), groups)
    pot.set_hyperparameters(r.alpha, 1.0)
    cov = r.covariance()
    for c, idx in enumerate(groups.values()):
        gamma_c = idx.size - r.alpha[c] * np.trace(cov[np.ix_(idx, idx)])
        assert r.gamma_groups[c] == pytest.approx(gamma_c, rel=1e-8)
        assert r.alpha[c] == pytest.approx(gamma_c / float(np.sum(r.theta[idx] ** 2)),
                                           rel=1e-5)
    # eq. (7) = -M(w_MP) + sum ln(prec)/2 - ln det A / 2
    ref = (-pot.energy(r.theta) + 0.5 * float(np.sum(np.log(pot.prec)))
           - 0.5 * float(np.sum(np.log(r.eigenvalues))))
    assert r.log_evidence_fixed == pytest.approx(ref, rel=1e-10)
    assert r.log_symmetry == pytest.approx(math.log(6 * 8))
    p, _ = moderated_outputs(r, pot, data.x[:5])
    assert np.allclose(p.sum(1), 1.0)
    raw = np.exp(pot.outputs(r.theta, data.x[:5]))
    raw /= raw.sum(1, keepdims=True)
    # moderation pulls every probability towards uniform: the largest never grows
    assert np.all(p.max(1) <= raw.max(1) + 1e-12)


def test_bad_groups_are_refused():
    data = _softmax_data(n=10)
    arch = get_architecture("mlp", n_inputs=2, hidden=[2], n_outputs=3)
    base = arch.potential(data)
    with pytest.raises(ConfigError, match="in no weight group"):
        GaussianPriorClassifier(base, {"w": slice(0, 3)})
    with pytest.raises(ConfigError, match="overlaps"):
        GaussianPriorClassifier(base, {"a": slice(0, 9), "b": slice(5, base.n_params)})
    with pytest.raises(ConfigError, match="alpha0"):
        mackay_classifier(arch, data, alpha0=-1.0)


@pytest.mark.slow
def test_gauss_newton_curvature_is_j_lambda_j_and_positive_definite():
    data = _softmax_data()
    arch = get_architecture("mlp", n_inputs=2, hidden=[3], n_outputs=3,
                            hidden_activation="tanh")
    groups = arch.param_groups()
    pot = GaussianPriorClassifier(arch.potential(data), groups, curvature="gauss-newton")
    pot.set_hyperparameters(np.full(len(groups), 0.3), 1.0)
    theta = np.random.default_rng(4).normal(0, 0.8, pot.n_params)
    gn = pot.hessian(theta)
    # independent: the logits' Jacobian by central differences (own step), the softmax
    # Hessian of each case, summed case by case
    d = pot.n_params
    jac = np.empty((len(data.y), 3, d))
    for i in range(d):
        e = np.zeros(d)
        e[i] = 1e-4
        jac[:, :, i] = (pot.outputs(theta + e) - pot.outputs(theta - e)) / 2e-4
    z = pot.outputs(theta)
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    ref = np.diag(pot.prec.copy())
    for n in range(len(data.y)):
        ref += jac[n].T @ (np.diag(p[n]) - np.outer(p[n], p[n])) @ jac[n]
    assert np.allclose(gn, ref, rtol=1e-6, atol=1e-8 * np.max(np.abs(ref)))
    assert np.linalg.eigvalsh(gn - np.diag(pot.prec)).min() > -1e-8 * np.max(np.abs(gn))
    # it differs from the exact Hessian by the residual term only: equal at no point here
    exact = GaussianPriorClassifier(arch.potential(data), groups)
    exact.set_hyperparameters(np.full(len(groups), 0.3), 1.0)
    assert not np.allclose(exact.hessian(theta), gn, rtol=1e-3)
    r = mackay_classifier(arch, data, seed=0, tol=1e-6, max_iter=200, curvature="gauss-newton",
                          groups={"layer1": np.arange(0, 9),
                                  "layer2": np.arange(9, arch.n_params)})
    assert r.positive_definite and math.isfinite(r.log_evidence)
    with pytest.raises(ConfigError, match="expected one of"):
        GaussianPriorClassifier(arch.potential(data), groups, curvature="fisher")


def _two_class_line(n=8, seed=0):
    """Two softmax classes on 1-D inputs, no hidden layer: ``W`` (2 x 1) and ``b`` (2)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 1))
    y = (rng.uniform(size=n) < expit(2.0 * x[:, 0] + 0.5)).astype(np.int64)
    return SimpleNamespace(x=x, y=y)


def _exact_predictive(data, alpha, xs, m=601):
    """``P(y=1|x, D)`` at fixed ``alpha = (alpha_W, alpha_b)`` by quadrature. The likelihood
    depends only on ``u = w_1 - w_0`` and ``c = b_1 - b_0``, independent ``N(0, 2/alpha)``
    a priori; the integrand on an m x m grid over +-12 prior standard deviations (the
    posterior is narrower; doubling m changes the result by < 1e-12)."""
    su, sc = math.sqrt(2 / alpha[0]), math.sqrt(2 / alpha[1])
    u, c = np.meshgrid(np.linspace(-12 * su, 12 * su, m), np.linspace(-12 * sc, 12 * sc, m),
                       indexing="ij")
    a = u[..., None] * data.x[:, 0] + c[..., None]
    log_post = (np.sum(np.where(data.y == 1, log_expit(a), log_expit(-a)), -1)
                - u ** 2 / (2 * su ** 2) - c ** 2 / (2 * sc ** 2))
    w = np.exp(log_post - log_post.max())
    return np.sum(w[..., None] * expit(u[..., None] * xs[:, 0] + c[..., None]), (0, 1)) / w.sum()


@pytest.mark.slow
def test_hmc_class_probabilities_equal_the_exact_posterior_predictive():
    """HMC's predictive (thermonet.evidence.mackay.hmc) against 2-D quadrature of the true
    posterior, and the Gaussian approximation's measured error against both."""
    from thermonet.evidence.mackay.hmc import sampled_class_probabilities

    data = _two_class_line()
    arch = get_architecture("mlp", n_inputs=1, hidden=[], n_outputs=2)
    pot = GaussianPriorClassifier(arch.potential(data), arch.param_groups())
    # the layout the quadrature assumes: theta = (w_0, w_1, b_0, b_1)
    assert np.allclose(pot.outputs(np.array([1.0, 2.0, 3.0, 4.0]), np.ones((1, 1))), [[4, 6]])
    alpha = [0.5, 2.0]                       # different, so that a swap would show
    r = evaluate_at(pot, np.zeros(4), alpha)
    xs = np.array([[-3.0], [-1.0], [0.0], [0.7], [2.5]])
    exact = _exact_predictive(data, alpha, xs)
    s = sampled_class_probabilities(r, pot, xs, n_draws=4000, seed=1)
    assert s.acceptance > 0.5
    assert np.allclose(s.p.sum(1), 1.0)
    # measured: within 1.5 se at every input (se 0.0012-0.0026)
    assert np.all(np.abs(s.p[:, 1] - exact) < 4.5 * s.p_se[:, 1])
    assert np.all(s.p_se < 0.005)
    # the test can tell: the exact predictive at alpha / 2 is 42 se away at x = 0.7
    wrong = _exact_predictive(data, [alpha[0] / 2, alpha[1] / 2], xs)
    assert np.max(np.abs(s.p[:, 1] - wrong) / s.p_se[:, 1]) > 10
    # one basin (the posterior is log-concave): the white distance averages d = 4 under the
    # Gaussian; measured 4.13
    assert abs(s.white_sq.mean() - 4.0) < 1.0
    # the logit difference is linear in w, so the linearised ("mc") output is the exact
    # average under N(w_MP, A^-1): its error is the Gaussian approximation's alone. With 8
    # cases it is 0.030 at most (the true posterior is skewed towards the steeper slopes the
    # nearly separable data allow, the predictive sharper than the Gaussian's); HMC resolves it
    pm, s2 = moderated_outputs(r, pot, xs, method="mc", n_samples=200000, seed=3)
    err = np.max(np.abs(pm[:, 1] - exact))
    assert err > 10 * np.max(s.p_se)
    assert np.max(np.abs(pm[:, 1] - s.p[:, 1]) / s.p_se[:, 1]) > 4.5
    # ... and it falls as O(1/N): the same cases four times (measured 0.011)
    data4 = SimpleNamespace(x=np.tile(data.x, (4, 1)), y=np.tile(data.y, 4))
    pot4 = GaussianPriorClassifier(arch.potential(data4), arch.param_groups())
    r4 = evaluate_at(pot4, np.zeros(4), alpha)
    pm4, _ = moderated_outputs(r4, pot4, xs, method="mc", n_samples=200000, seed=3)
    assert np.max(np.abs(pm4[:, 1] - _exact_predictive(data4, alpha, xs))) < 0.5 * err
    # the two-class branch: s^2 of the logit difference is v^T A^-1 v with v = d(a_1 - a_0)/dw
    # (A built here), and MacKay's probit is within its 0.03 of the Gaussian average (0.013)
    v = np.stack([-xs[:, 0], xs[:, 0], -np.ones(5), np.ones(5)], 1)
    vd = np.stack([-data.x[:, 0], data.x[:, 0], -np.ones(8), np.ones(8)], 1)
    q = expit(vd @ r.theta)
    a_ref = (vd * (q * (1 - q))[:, None]).T @ vd + np.diag([alpha[0]] * 2 + [alpha[1]] * 2)
    assert np.allclose(s2[:, 0], np.einsum("ni,ij,nj->n", v, np.linalg.inv(a_ref), v),
                       rtol=1e-6)
    pp, _ = moderated_outputs(r, pot, xs)
    assert np.max(np.abs(pp[:, 1] - pm[:, 1])) < 0.03
    with pytest.raises(ConfigError, match="n_draws"):
        sampled_class_probabilities(r, pot, xs, n_draws=10)
