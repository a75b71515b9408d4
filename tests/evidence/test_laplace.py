"""Laplace evidence: exact Hessians (R-operator), the box bound, SLQ, real data.

References used here are independent of the code under test: a complex-step Hessian of a
NumPy gradient, finite differences of the compiled gradient, closed-form Gaussian integrals,
numerical quadrature, and dense log-determinants.
"""

from __future__ import annotations

import json
import math
from itertools import pairwise

import numpy as np
import pytest
from scipy import integrate

from thermonet.api import Potential
from thermonet.architectures.mlp import MLP
from thermonet.errors import ConfigError
from thermonet.evidence._result import EvidenceResult
from thermonet.evidence.laplace.approximation import laplace_evidence, slq_trace
from thermonet.evidence.laplace.curvature import hessian, hvp
from thermonet.priors import BoxPrior, GaussianPrior, PriorPotential
from thermonet.testsystems import Gaussian

LOG2PI = math.log(2 * math.pi)


# ---------------------------------------------------------------------------------------------
# independent references
# ---------------------------------------------------------------------------------------------

def _complex_grad(theta, widths, x, y, logistic):
    """Backpropagation in complex arithmetic (analytic in theta), for the complex step."""
    layers, pos = [], 0
    for n_in, n_out in pairwise(widths):
        w = theta[pos:pos + n_out * n_in].reshape(n_out, n_in)
        pos += n_out * n_in
        layers.append((w, theta[pos:pos + n_out]))
        pos += n_out
    acts = [x.astype(complex)]
    for i, (w, b) in enumerate(layers):
        z = acts[-1] @ w.T + b
        acts.append(1 / (1 + np.exp(-z)) if (i < len(layers) - 1 or logistic) else z)
    s = acts[-1]
    p = np.exp(s - s.real.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    delta = p
    delta[np.arange(len(y)), y] -= 1
    if logistic:
        delta = delta * s * (1 - s)
    grads = []
    for i in range(len(layers) - 1, -1, -1):
        grads.append((delta.T @ acts[i], delta.sum(axis=0)))
        if i > 0:
            delta = (delta @ layers[i][0]) * acts[i] * (1 - acts[i])
    return np.concatenate([np.concatenate([gw.ravel(), gb]) for gw, gb in reversed(grads)])


def _complex_step_hessian(theta, widths, x, y, logistic):
    d, h = theta.size, 1e-30
    out = np.empty((d, d))
    for j in range(d):
        tc = theta.astype(complex)
        tc[j] += 1j * h
        out[:, j] = _complex_grad(tc, widths, x, y, logistic).imag / h
    return out


def _tiny(rng, output="linear", n=9, block=4):
    arch = MLP(5, (4, 3), 3, output)
    x = rng.normal(size=(n, 5))
    y = rng.integers(0, 3, n)
    pot = arch.potential(x=x, y=y, block=block)
    return arch, pot, x, y, rng.normal(scale=0.8, size=arch.n_params)


class Quadratic(Potential):
    """``E = E0 + ½ (w - c)^T K (w - c)``; optionally with its own ``hessian`` method."""

    def __init__(self, k, c, e0=0.0):
        self.k, self.c, self.e0 = np.asarray(k, float), np.asarray(c, float), float(e0)
        self.n_params = self.k.shape[0]

    def energy(self, theta):
        dv = np.asarray(theta) - self.c
        return self.e0 + 0.5 * float(dv @ self.k @ dv)

    def energy_and_grad(self, theta, grad_out=None):
        dv = np.asarray(theta) - self.c
        g = self.k @ dv
        if grad_out is not None:
            grad_out[:] = g
            g = grad_out
        return self.e0 + 0.5 * float(dv @ g), g


class QuadraticWithHessian(Quadratic):
    def hessian(self, theta):
        return self.k.copy()


class Quartic(Potential):
    """``E = sum_i (a_i w_i^2 / 2 + b w_i^4) + ½ c w_0 w_1`` (coupled for d = 2)."""

    def __init__(self, a, b, c=0.0):
        self.a, self.b, self.c = np.asarray(a, float), float(b), float(c)
        self.n_params = self.a.shape[0]

    def energy(self, theta):
        w = np.asarray(theta, float)
        e = float(np.sum(0.5 * self.a * w**2 + self.b * w**4))
        return e + (self.c * w[0] * w[1] if self.n_params > 1 else 0.0)

    def energy_and_grad(self, theta, grad_out=None):
        w = np.asarray(theta, float)
        g = self.a * w + 4 * self.b * w**3
        if self.n_params > 1:
            g[0] += self.c * w[1]
            g[1] += self.c * w[0]
        return self.energy(w), g


# ---------------------------------------------------------------------------------------------
# Hessians
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("output", ["linear", "logistic"])
@pytest.mark.slow
def test_rop_hessian_equals_complex_step_reference(rng, output):
    arch, pot, x, y, th = _tiny(rng, output)
    info = {}
    h = hessian(pot, th, info=info)
    ref = _complex_step_hessian(th, arch.widths, x, y, output == "logistic")
    assert info["hessian_method"] == "rop"
    assert info["asymmetry"] < 1e-14
    np.testing.assert_allclose(h, ref, rtol=0, atol=1e-13 * np.abs(ref).max())


def test_rop_hessian_matches_finite_differences_of_the_kernel_gradient(rng):
    arch, pot, _, _, th = _tiny(rng, "linear", n=20, block=7)
    h = hessian(pot, th)
    d, eps = arch.n_params, 1e-5
    fd = np.empty((d, d))
    for j in range(d):
        e = np.zeros(d)
        e[j] = eps
        fd[:, j] = (pot.energy_and_grad(th + e)[1] - pot.energy_and_grad(th - e)[1]) / (2 * eps)
    np.testing.assert_allclose(h, fd, rtol=0, atol=1e-8 * np.abs(h).max())
    # the generic scheme (Richardson central differences) on the same potential
    info = {}
    h_fd = hessian(pot, th, method="fd", info=info)
    assert info["hessian_method"] == "fd"
    np.testing.assert_allclose(h_fd, h, rtol=0, atol=1e-8 * np.abs(h).max())


def test_hvp_equals_dense_product_and_is_thread_independent(rng):
    arch, pot, x, y, th = _tiny(rng, "logistic", n=30, block=8)
    h = hessian(pot, th, symmetrise=False)
    v = rng.normal(size=(5, arch.n_params))
    hv = hvp(pot, th, v)
    np.testing.assert_allclose(hv, v @ h.T, rtol=0, atol=1e-13 * np.abs(hv).max())
    np.testing.assert_allclose(hvp(pot, th, v[0]), hv[0], rtol=0, atol=0)
    pot2 = arch.potential(x=x, y=y, block=8, threads=2)
    assert np.array_equal(hvp(pot2, th, v), hv)
    assert np.array_equal(hvp(pot, th, v, threads=2), hv)
    assert np.array_equal(hessian(pot2, th, column_block=7, symmetrise=False), h)
    idx = [3, 1, 17, 30]
    assert np.array_equal(hessian(pot, th, index=idx, symmetrise=False), h[np.ix_(idx, idx)])
    # with a Gaussian prior term: + diag(s / s_i^2), still exact (R-operator underneath)
    gp = GaussianPrior(rng.uniform(0.5, 2.0, arch.n_params))
    wrapped = PriorPotential(pot, gp, scale=0.3)
    info = {}
    hw = hessian(wrapped, th, symmetrise=False, info=info)
    assert info["hessian_method"] == "rop"
    np.testing.assert_allclose(hw, h + np.diag(0.3 / gp.std**2), rtol=0, atol=1e-15)
    np.testing.assert_allclose(hvp(wrapped, th, v), hv + 0.3 * v / gp.std**2, rtol=0,
                               atol=1e-13 * np.abs(hv).max())


def test_gaussian_testsystem_hessian_is_exact():
    g = Gaussian(4, stiffness=[0.5, 1.0, 2.0, 8.0], centre=0.3)
    pot = g.potential()
    info = {}
    h = hessian(pot, np.zeros(4), info=info)
    assert info["hessian_method"] == "analytic"
    assert np.array_equal(h, np.diag(g.stiffness))
    np.testing.assert_allclose(hessian(pot, np.ones(4), method="fd"), np.diag(g.stiffness),
                               rtol=0, atol=1e-9)
    # a Gaussian prior term adds s / s_i^2 on the diagonal
    prior = GaussianPrior(np.array([1.0, 2.0, 0.5, 4.0]))
    hp = hessian(PriorPotential(pot, prior, scale=0.7), np.zeros(4))
    assert np.allclose(hp, np.diag(g.stiffness + 0.7 / prior.std**2), rtol=1e-15, atol=0)


# ---------------------------------------------------------------------------------------------
# Laplace values
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cls", [Quadratic, QuadraticWithHessian])
@pytest.mark.parametrize("temperature", [1.0, 0.25, 3.0])
def test_laplace_is_exact_for_a_quadratic_far_from_the_box(rng, cls, temperature):
    d = 6
    q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    k = q @ np.diag([0.5, 1.0, 2.0, 3.0, 5.0, 11.0]) @ q.T
    c = rng.uniform(-0.2, 0.2, d)
    pot = cls(k, c, e0=4.5)
    prior = BoxPrior(np.full(d, 200.0))
    r = laplace_evidence(pot, c, prior, temperature)
    exact = (d / 2 * math.log(2 * math.pi * temperature)
             - 0.5 * np.linalg.slogdet(k)[1] - 4.5 / temperature)
    assert isinstance(r, EvidenceResult) and r.method == "laplace"
    assert r.log_integral == pytest.approx(exact, abs=1e-9)
    assert r.log_integral_error == 0.0
    assert r.log_volume == pytest.approx(d * math.log(200.0))
    assert r.log_evidence == pytest.approx(exact - d * math.log(200.0), abs=1e-9)
    assert r.details["n_bounded"] == 0 and r.details["n_negative"] == 0
    assert r.details["hessian_method"] == ("analytic" if cls is QuadraticWithHessian else "fd")
    assert r.details["log_integral_unbounded"] == pytest.approx(exact, abs=1e-9)
    # and SLQ agrees within its own error bar (d = 6 < n_steps: a complete Lanczos basis)
    s = laplace_evidence(pot, c, prior, temperature, method="slq", seed=3, n_probes=8)
    assert abs(s.log_integral - exact) <= max(4 * s.log_integral_error, 1e-9)


def test_gaussian_testsystem_laplace_equals_log_z():
    g = Gaussian(3, stiffness=[0.5, 2.0, 7.0], centre=[0.1, -0.2, 0.3], prior_scale=500.0)
    prior = BoxPrior.for_architecture(g)
    for t in (0.5, 1.0, 2.0):
        r = laplace_evidence(g.potential(), g.centre, prior, t)
        assert r.log_integral == pytest.approx(g.log_z(t), abs=1e-12)


def test_laplace_is_visibly_off_for_a_quartic_well_1d():
    a, b, t = 1.0, 0.5, 1.0
    pot = Quartic([a], b)
    prior = BoxPrior(np.array([20.0]))
    r = laplace_evidence(pot, np.zeros(1), prior, t)
    laplace = 0.5 * math.log(2 * math.pi * t / a)          # E0 = 0, H = a
    exact = math.log(integrate.quad(lambda w: math.exp(-(0.5 * a * w**2 + b * w**4) / t),
                                    -10, 10, epsabs=1e-13, epsrel=1e-13)[0])
    assert r.log_integral == pytest.approx(laplace, abs=1e-9)
    # the quartic term narrows the well: Laplace overestimates by ln(1.6668/1.2011) ~ 0.33
    assert r.log_integral - exact == pytest.approx(laplace - exact, abs=1e-9)
    assert 0.30 < r.log_integral - exact < 0.36


def test_laplace_is_visibly_off_for_a_coupled_quartic_well_2d():
    a, b, c, t = np.array([1.0, 2.0]), 0.3, 0.5, 0.7
    pot = Quartic(a, b, c)
    prior = BoxPrior(np.array([16.0, 16.0]))
    r = laplace_evidence(pot, np.zeros(2), prior, t)
    hess = np.array([[a[0], c], [c, a[1]]])
    laplace = LOG2PI + math.log(t) - 0.5 * np.linalg.slogdet(hess)[1]
    val, _ = integrate.dblquad(lambda w1, w0: math.exp(-pot.energy(np.array([w0, w1])) / t),
                               -8, 8, -8, 8, epsabs=1e-12, epsrel=1e-10)
    exact = math.log(val)
    assert r.log_integral == pytest.approx(laplace, abs=1e-8)
    assert r.log_integral - exact == pytest.approx(laplace - exact, abs=1e-7)
    assert r.log_integral - exact > 0.1


def test_scaled_bound_zero_negative_and_wide_directions(rng):
    # E = ½ w^T A w on 5 coordinates with A = S^-1 Q diag(mu) Q^T S^-1 on the first 4
    # (S = diag(sigma)), so that in the box's units y = w / sigma the Hessian has the known
    # eigenvalues mu = (40, 1e-4, 0, -1); the 5th coordinate is absent from E (zero row)
    q, _ = np.linalg.qr(rng.normal(size=(4, 4)))
    mu = np.array([40.0, 1e-4, 0.0, -1.0])
    sigma = np.array([3.0, 5.0, 7.0, 11.0, 13.0])
    a = np.zeros((5, 5))
    a[:4, :4] = (q @ np.diag(mu) @ q.T) / np.outer(sigma[:4], sigma[:4])
    pot = QuadraticWithHessian(a, np.zeros(5))
    prior = BoxPrior(sigma)
    for t in (1.0, 2.0):
        r = laplace_evidence(pot, np.zeros(5), prior, t)
        # 40 > 2 pi T: Gaussian; the others (1e-4 < 2 pi T, 0, negative) the unit width
        expected = np.sum(np.log(sigma)) + 0.5 * math.log(2 * math.pi * t / 40.0)
        assert r.log_integral == pytest.approx(expected, abs=1e-9)
        assert r.log_evidence <= -r.energy0 / t
        det = r.details
        assert det["bound"] == "scaled"
        assert det["n_flat"] == det["n_flat_zero_rows"] == 1
        assert det["n_bounded"] == 4 and det["n_unbounded"] == 1
        assert det["n_negative"] == 1
        assert det["n_small"] == 1
        assert math.isnan(det["log_integral_unbounded"])
    # a stiffer well: 2 pi T / 40 > 1 at T = 8, so that direction is bounded too
    r8 = laplace_evidence(pot, np.zeros(5), prior, 8.0)
    assert r8.details["n_bounded"] == 5
    assert r8.log_integral == pytest.approx(np.sum(np.log(sigma)), abs=1e-12)


def test_scaled_bound_on_a_diagonal_valley_against_quadrature():
    # E = k (w1 - w2)^2 / 4 in the square |w_i| < 1: flat along the diagonal. The scaled rule
    # gives the flat direction the cube's unit width (2 here), the true central section is the
    # diagonal, 2 sqrt(2) long: Laplace must be low by at most ln sqrt(2) (Ball's bound for one
    # unbounded direction, d - m = 1) and by about that much for a narrow valley
    k = 400.0
    a = 0.5 * k * np.array([[1.0, -1.0], [-1.0, 1.0]])
    pot = QuadraticWithHessian(a, np.zeros(2))
    prior = BoxPrior(np.array([2.0, 2.0]))
    r = laplace_evidence(pot, np.zeros(2), prior)
    assert r.details["n_bounded"] == 1 and r.details["n_unbounded"] == 1
    assert r.log_integral == pytest.approx(math.log(math.sqrt(2 * math.pi / k) * 2.0), abs=1e-9)
    # exact: the density of u = w1 - w2 over the square is (2 - |u|)
    val, _ = integrate.quad(lambda u: (2 - abs(u)) * math.exp(-k * u * u / 4), -2, 2,
                            points=[0.0], epsabs=1e-14, epsrel=1e-12)
    gap = math.log(val) - r.log_integral
    assert 0 < gap <= 0.5 * math.log(2.0)
    assert gap == pytest.approx(math.log((2 * math.sqrt(4 * math.pi / k) - 4 / k)
                                         / (2 * math.sqrt(2 * math.pi / k))), abs=1e-4)


def test_projected_and_scalar_bounds(rng):
    # E = ½ w^T A w with A = Q diag(lam) Q^T on 4 coordinates, lam = (4, 1e-4, 0, -1), and a
    # 5th coordinate absent from E
    q, _ = np.linalg.qr(rng.normal(size=(4, 4)))
    lam = np.array([4.0, 1e-4, 0.0, -1.0])
    a = np.zeros((5, 5))
    a[:4, :4] = q @ np.diag(lam) @ q.T
    sigma = np.array([3.0, 5.0, 7.0, 11.0, 13.0])
    pot = QuadraticWithHessian(a, np.zeros(5))
    prior = BoxPrior(sigma)
    r = laplace_evidence(pot, np.zeros(5), prior, 1.0, bound="projected")
    proj = np.abs(q).T @ sigma[:4]           # box extent along each eigenvector
    assert math.sqrt(2 * math.pi / 1e-4) > proj[1]        # the 1e-4 direction is wider
    expected = (0.5 * math.log(2 * math.pi / 4.0)
                + math.log(proj[1]) + math.log(proj[2]) + math.log(proj[3]) + math.log(13.0))
    assert r.log_integral == pytest.approx(expected, abs=1e-9)
    assert r.details["n_bounded"] == 4 and r.details["n_negative"] == 1
    # the scalar bound: every bounded direction gets one width b
    rs = laplace_evidence(pot, np.zeros(5), prior, 1.0, bound="scalar", box_width=6.0)
    assert rs.log_integral == pytest.approx(
        0.5 * math.log(2 * math.pi / 4.0) + 3 * math.log(6.0) + math.log(13.0), abs=1e-9)


# ---------------------------------------------------------------------------------------------
# SLQ
# ---------------------------------------------------------------------------------------------

def test_slq_log_det_of_a_random_spd_matrix_within_its_error_bar():
    rng = np.random.default_rng(11)
    d = 300
    q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    lam = np.exp(rng.uniform(np.log(0.05), np.log(20.0), d))
    a = (q * lam) @ q.T
    exact = np.linalg.slogdet(a)[1]
    mean, err, per = slq_trace(lambda v: v @ a, d, np.log, n_probes=40, n_steps=40, seed=5)
    assert per.shape == (40,)
    assert 0 < err < 0.02 * np.sum(np.abs(np.log(lam)))
    assert abs(mean - exact) < 4 * err
    # reproducible from the seed
    assert slq_trace(lambda v: v @ a, d, np.log, n_probes=40, n_steps=40, seed=5)[0] == mean


def test_slq_laplace_on_a_small_mlp_within_its_error_bar(rng):
    arch = MLP(6, (10,), 4)
    x = rng.normal(size=(40, 6))
    x[:, 2] = 0.0                                     # a blank input: 10 flat weights
    y = rng.integers(0, 4, 40)
    pot = arch.potential(x=x, y=y, block=16)
    prior = BoxPrior.for_architecture(arch)
    th = rng.uniform(-0.3, 0.3, arch.n_params)
    for bound in ("scaled", "scalar"):
        dense = laplace_evidence(pot, th, prior, method="dense", bound=bound)
        slq = laplace_evidence(pot, th, prior, method="slq", seed=2, n_probes=40, n_steps=40,
                               bound=bound)
        assert dense.details["n_flat"] == slq.details["n_flat"] == 10 + 11
        assert slq.details["hessian_method"] == "rop"
        assert 0 < dense.details["n_bounded"] - 21 < arch.n_params - 21
        # an informative error bar (a few per cent of the eigenvalue sum), within 4 sigma
        phi_sum = dense.log_integral + dense.energy0 - (prior.log_volume if bound == "scaled"
                                                        else 0.0)
        assert 0 < slq.log_integral_error < 0.05 * abs(phi_sum)
        assert abs(slq.log_integral - dense.log_integral) < 4 * slq.log_integral_error


# ---------------------------------------------------------------------------------------------
# real data, errors
# ---------------------------------------------------------------------------------------------

def test_constant_inputs_are_sheared_out_exactly(rng):
    # inputs 1 and 3 constant: E depends on w_o1, w_o3 only through s_o = b_o + .7 w_o1 - .4 w_o3,
    # so the evidence equals that of the network without those inputs (bias s_o) times the
    # box widths of the removed weights
    arch = MLP(4, (3,), 2)
    x = rng.normal(size=(12, 4))
    x[:, 1], x[:, 3] = 0.7, -0.4
    y = rng.integers(0, 2, 12)
    pot = arch.potential(x=x, y=y, block=5)
    prior = BoxPrior(rng.uniform(2.0, 9.0, arch.n_params))
    th = rng.uniform(-0.5, 0.5, arch.n_params)
    w1 = th[:12].reshape(3, 4)
    b1 = th[12:15]
    red = MLP(2, (3,), 2)
    th_r = np.concatenate([w1[:, [0, 2]].ravel(), b1 + 0.7 * w1[:, 1] - 0.4 * w1[:, 3], th[15:]])
    pot_r = red.potential(x=x[:, [0, 2]], y=y, block=5)
    flat = np.zeros(arch.n_params, bool)
    flat[:12] = np.tile([False, True, False, True], 3)
    prior_r = BoxPrior(prior.sigma[~flat])
    assert pot_r.energy(th_r) == pytest.approx(pot.energy(th), rel=1e-13)
    for bound in ("scaled", "projected", "scalar"):
        opts = {"bound": bound} if bound != "scalar" else {"bound": bound, "box_width": 4.0}
        full = laplace_evidence(pot, th, prior, **opts)
        reduced = laplace_evidence(pot_r, th_r, prior_r, **opts)
        assert full.details["n_flat_constant_inputs"] == 6
        assert full.details["n_flat_softmax_shift"] == reduced.details["n_flat_softmax_shift"] == 4
        assert full.details["n_flat"] == 10 and reduced.details["n_flat"] == 4
        assert full.log_integral == pytest.approx(
            reduced.log_integral + np.sum(np.log(prior.sigma[flat])), abs=1e-9)


def test_small_mlp_on_d50_symmetric_finite_and_constant_pixels(d50):
    arch = MLP(256, (6,), 10)
    pot = arch.potential(d50)
    prior = BoxPrior.for_architecture(arch)
    th = arch.initial_draw(np.random.default_rng(4))
    info = {}
    h = hessian(pot, th, symmetrise=False, info=info)
    assert np.all(np.isfinite(h))
    assert info["asymmetry"] < 1e-12
    x = np.asarray(d50.x)
    const = np.flatnonzero(np.all(x == x[0], axis=0))
    assert const.size == 63                                   # docs/data.md
    # a constant pixel's weight acts as c * (the unit's bias): its Hessian row is c times the
    # bias row
    bias0 = 256 * 6
    for o in (0, 5):
        for i in const[:3]:
            row, ref = h[o * 256 + i], x[0, i] * h[bias0 + o]
            np.testing.assert_allclose(row, ref, rtol=0, atol=1e-12 * np.abs(ref).max())
    # two columns against central differences of the compiled gradient
    for j in (3 * 256 + 100, arch.n_params - 2):
        e = np.zeros(arch.n_params)
        e[j] = 1e-5
        fd = (pot.energy_and_grad(th + e)[1] - pot.energy_and_grad(th - e)[1]) / 2e-5
        np.testing.assert_allclose(h[:, j], fd, rtol=0, atol=1e-6 * np.abs(h[:, j]).max())
    # the softmax is invariant under a common shift of every class's weights from one unit
    out0 = 257 * 6
    rows = h[out0:out0 + 60].reshape(10, 6, -1).sum(axis=0)
    assert np.abs(rows).max() < 1e-12 * np.abs(h).max()
    r = laplace_evidence(pot, th, prior)
    assert r.is_finite and math.isfinite(r.log_evidence)
    assert r.log_evidence <= -r.energy0
    assert r.details["n_flat_constant_inputs"] == 6 * 63
    assert r.details["n_flat"] == 6 * 63 + 7
    assert r.details["n_bounded"] >= r.details["n_flat"]
    assert r.energy0 == pytest.approx(pot.energy(th))
    back = json.loads(json.dumps(r.as_dict()))            # what `thermonet evidence` stores
    assert back["log_integral"] == r.log_integral
    assert back["details"]["n_bounded"] == r.details["n_bounded"]


def test_bad_inputs_give_one_line_errors(rng):
    g = Gaussian(2)
    pot = g.potential()
    prior = BoxPrior.for_architecture(g)
    cases = [
        ({"prior": GaussianPrior(np.ones(2))}, "BoxPrior"),
        ({"prior": BoxPrior(np.ones(3))}, "3 widths"),
        ({"theta0": np.array([0.0, 9.0])}, "outside the prior box"),
        ({"temperature": 0.0}, "temperature"),
        ({"method": "exact"}, "'exact'"),
        ({"n_probes": 3}, "unknown option"),
        ({"bound": "chord"}, "bound"),
        ({"method": "slq", "bound": "projected"}, "SLQ supports"),
    ]
    for kwargs, text in cases:
        args = {"potential": pot, "theta0": np.zeros(2), "prior": prior}
        args.update(kwargs)
        with pytest.raises(ConfigError, match=text) as err:
            laplace_evidence(**args)
        assert "\n" not in str(err.value)
    arch, *_ = _tiny(rng)
    with pytest.raises(ConfigError, match="float64"):
        hessian(arch.potential(x=np.ones((3, 5)), y=np.zeros(3, int), dtype=np.float32),
                np.zeros(arch.n_params))
    with pytest.raises(ConfigError, match="'rop'"):
        hessian(pot, np.zeros(2), method="rop")
    with pytest.raises(ConfigError, match="no closed-form Hessian"):
        hessian(Quartic([1.0], 0.1), np.zeros(1), method="analytic")
