"""The compiled exact Hessian of one-hidden-layer networks (kernels/mlp_regression_hessian)
against two independent computations: the complex-step derivative of a NumPy gradient
(written here from the chain rule, exact to rounding: no subtraction), and central
differences of the compiled analytic gradient."""

from __future__ import annotations

import numpy as np
import pytest

from thermonet.architectures.regression import RegressionMLP
from thermonet.evidence.laplace.curvature import hessian as dense_hessian
from thermonet.evidence.laplace.curvature import resolve_method
from thermonet.kernels import mlp_regression_hessian as krh


def _numpy_grad(theta, ni, nh, no, tanh, x, t, softmax):
    """Gradient of the data term by backpropagation in NumPy (works on complex theta)."""
    w1 = theta[:nh * ni].reshape(nh, ni)
    b1 = theta[nh * ni:nh * ni + nh]
    o = nh * ni + nh
    w2 = theta[o:o + no * nh].reshape(no, nh)
    b2 = theta[o + no * nh:]
    z = x @ w1.T + b1
    if tanh:
        a = np.tanh(z)
        da = 1 - a ** 2
    else:
        a = 1 / (1 + np.exp(-z))
        da = a * (1 - a)
    f = a @ w2.T + b2
    if softmax:
        e = np.exp(f - f.real.max(axis=1, keepdims=True))
        r = e / e.sum(axis=1, keepdims=True) - t
    else:
        r = f - t
    dz = (r @ w2) * da
    return np.concatenate([(dz.T @ x).ravel(), dz.sum(0), (r.T @ a).ravel(), r.sum(0)])


def _complex_step_hessian(theta, *args):
    d = theta.shape[0]
    h = 1e-30
    out = np.empty((d, d))
    for j in range(d):
        tc = theta.astype(complex)
        tc[j] += 1j * h
        out[:, j] = _numpy_grad(tc, *args).imag / h
    return out


def _case(seed, ni, nh, no, n, softmax):
    rng = np.random.default_rng(seed)
    d = int(krh.n_params(ni, nh, no))
    theta = rng.normal(0, 0.8, d)
    x = rng.normal(size=(n, ni))
    if softmax:
        t = np.eye(no)[rng.integers(0, no, n)]
    else:
        t = rng.normal(size=(n, no))
    return theta, x, t


@pytest.mark.parametrize("tanh", [True, False])
@pytest.mark.parametrize("softmax", [False, True])
def test_kernel_equals_complex_step_of_numpy_gradient(tanh, softmax):
    # n = 150 > CHUNK, so a full and a partial chunk of rows are both exercised
    ni, nh, no, n = 3, 5, 3, 150
    theta, x, t = _case(1 + tanh + 2 * softmax, ni, nh, no, n, softmax)
    d = theta.shape[0]
    prec = np.linspace(0.1, 2.0, d)
    out = np.empty((d, d))
    krh.hessian(theta, (ni, nh, no, tanh, softmax), x, t, 1.7, prec, out)
    ref = 1.7 * _complex_step_hessian(theta, ni, nh, no, tanh, x, t, softmax) + np.diag(prec)
    assert np.max(np.abs(out - ref)) <= 1e-11 * np.max(np.abs(ref))
    assert np.max(np.abs(out - out.T)) <= 1e-13 * np.max(np.abs(ref))


def test_kernel_energy_is_the_data_term():
    ni, nh, no, n = 2, 4, 3, 70
    for softmax in (False, True):
        theta, x, t = _case(5, ni, nh, no, n, softmax)
        d = theta.shape[0]
        e = krh.hessian(theta, (ni, nh, no, True, softmax), x, t, 1.0, np.zeros(d),
                        np.empty((d, d)))
        w1, b1 = theta[:8].reshape(4, 2), theta[8:12]
        w2, b2 = theta[12:24].reshape(3, 4), theta[24:]
        f = np.tanh(x @ w1.T + b1) @ w2.T + b2
        if softmax:
            ref = float(np.sum(np.log(np.exp(f).sum(1)) - (f * t).sum(1)))
        else:
            ref = 0.5 * float(np.sum((f - t) ** 2))
        assert e == pytest.approx(ref, rel=1e-13)


@pytest.mark.parametrize("activation", ["tanh", "logistic"])
def test_potential_hessian_equals_differences_of_the_compiled_gradient(activation):
    rng = np.random.default_rng(3)
    arch = RegressionMLP(n_inputs=2, hidden=[6], n_outputs=2, hidden_activation=activation)
    x = rng.uniform(-2, 2, size=(90, 2))
    y = np.column_stack([np.sin(x[:, 0]), np.cos(x[:, 1])])
    pot = arch.potential(x=x, y=y)
    pot.set_hyperparameters([2.0, 0.5, 3.0, 40.0], 1.0)
    theta = rng.normal(0, 0.7, pot.n_params)
    assert resolve_method(pot) == "analytic"
    info: dict = {}
    exact = dense_hessian(pot, theta, info=info)
    assert info["hessian_method"] == "analytic"
    fd = dense_hessian(pot, theta, method="fd")
    # Richardson-extrapolated central differences: error O(h^4) with h = 1e-3 max(1, |w|)
    assert np.max(np.abs(exact - fd)) <= 1e-7 * np.max(np.abs(exact))
    idx = np.array([0, 5, 13, pot.n_params - 1])
    sub = pot.hessian(theta, index=idx)
    assert np.array_equal(sub, pot.hessian(theta)[np.ix_(idx, idx)])


def test_deeper_networks_use_the_r_operator():
    # checked against differences in tests/kernels/test_rop_regression.py
    arch = RegressionMLP(n_inputs=2, hidden=[3, 3], n_outputs=1)
    pot = arch.potential(x=np.zeros((4, 2)), y=np.zeros(4))
    assert pot.hessian_method == "rop"
    assert resolve_method(pot) == "rop"


def test_non_finite_network_gives_non_finite_hessian_not_an_error():
    ni, nh, no = 2, 3, 1
    theta, x, t = _case(0, ni, nh, no, 5, False)
    theta[-1] = np.inf
    d = theta.shape[0]
    out = np.empty((d, d))
    e = krh.hessian(theta, (ni, nh, no, True, False), x, t, 1.0, np.zeros(d), out)
    assert not np.isfinite(e)
