"""Regression energy/gradient and tanh hidden units against NumPy references and finite
differences."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests import reference as ref
from thermonet.architectures.mlp import MLP
from thermonet.architectures.regression import RegressionMLP
from thermonet.errors import DataError
from thermonet.kernels import elementwise as ew
from thermonet.kernels import leapfrog as lf


def _np_forward(theta, widths, x, tanh):
    layers = ref.unpack(np.asarray(theta, np.float64), widths)
    acts = [np.asarray(x, np.float64)]
    for i, (w, b) in enumerate(layers):
        z = acts[-1] @ w.T + b
        if i < len(layers) - 1:
            z = np.tanh(z) if tanh else ref.sigmoid(z)
        acts.append(z)
    return layers, acts


def _np_regression(theta, widths, x, y, tanh, tau, prec):
    """-ln p(D|w,tau) + sum prec w^2/2 and its gradient, by plain NumPy backpropagation."""
    layers, acts = _np_forward(theta, widths, x, tanh)
    r = acts[-1] - y
    n_res = r.size
    e = tau * 0.5 * np.sum(r * r) + 0.5 * n_res * math.log(2 * math.pi / tau)
    e += 0.5 * np.sum(prec * theta * theta)
    delta = tau * r
    grads = []
    for i in range(len(layers) - 1, -1, -1):
        w, _ = layers[i]
        grads.append((delta.T @ acts[i], delta.sum(axis=0)))
        if i > 0:
            a = acts[i]
            delta = (delta @ w) * ((1 - a * a) if tanh else a * (1 - a))
    g = np.concatenate([np.concatenate([gw.ravel(), gb]) for gw, gb in reversed(grads)])
    return e, g + prec * theta


def test_tanh_unit_matches_numpy():
    v = np.concatenate([np.linspace(-30, 30, 20001), [0.0, 1e-300, -1e-12, 400.0, -800.0]])
    z = v[None, :].copy()
    ew.tanh_inplace(z, np.zeros(v.size))
    # absolute error: a few ulp of 1 (the docstring's claim)
    assert np.max(np.abs(z[0] - np.tanh(v))) <= 4 * np.finfo(float).eps
    z = np.array([[np.nan, np.inf, -np.inf]])
    ew.tanh_inplace(z, np.zeros(3))
    assert np.isnan(z[0, 0]) and z[0, 1] == 1.0 and z[0, 2] == -1.0


@pytest.mark.parametrize("act", ["tanh", "logistic"])
@pytest.mark.parametrize("widths,n,block", [([2, 16, 2], 200, 512), ([3, 5, 4, 1], 37, 16),
                                            ([6, 8, 3], 300, 128)])
def test_regression_energy_and_grad_match_numpy(rng, act, widths, n, block):
    arch = RegressionMLP(widths[0], widths[1:-1], widths[-1], hidden_activation=act)
    x = rng.normal(size=(n, widths[0]))
    y = rng.normal(size=(n, widths[-1]))
    pot = arch.potential(x=x, y=y, block=block)
    hyper = rng.uniform(0.5, 3.0, arch.initial_hyper().size)
    pot.set_hyperparameters(hyper, 1.7)
    theta = rng.normal(size=arch.n_params)
    e, g = pot.energy_and_grad(theta)
    e_ref, g_ref = _np_regression(theta, widths, x, y, act == "tanh", pot.tau, pot.prec)
    assert e == pytest.approx(e_ref, rel=1e-12)
    np.testing.assert_allclose(g, g_ref, rtol=1e-10, atol=1e-12 * np.abs(g_ref).max())
    assert pot.energy(theta) == pytest.approx(e_ref, rel=1e-12)
    # the prior precisions are the groups' (times the scale 1.7), the output biases' fixed
    assert pot.tau == hyper[-1]
    assert np.all(pot.prec[-widths[-1]:] == 1.7 / 100.0 ** 2)
    np.testing.assert_allclose(pot.outputs(theta), _np_forward(theta, widths, x,
                                                                act == "tanh")[1][-1],
                               rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("act", ["tanh", "logistic"])
def test_regression_gradient_matches_finite_differences(rng, act):
    arch = RegressionMLP(2, [7], 2, hidden_activation=act, ard=True)
    x = rng.uniform(-2, 2, size=(50, 2))
    y = rng.normal(size=(50, 2))
    pot = arch.potential(x=x, y=y)
    pot.set_hyperparameters(rng.uniform(0.5, 3.0, arch.initial_hyper().size), 1.0)
    theta = rng.normal(size=arch.n_params)
    _, g = pot.energy_and_grad(theta)
    h = 1e-5
    fd = np.empty(arch.n_params)
    for i in range(arch.n_params):
        tp, tm = theta.copy(), theta.copy()
        tp[i] += h
        tm[i] -= h
        fd[i] = (pot.energy(tp) - pot.energy(tm)) / (2 * h)
    # truncation h^2 |E'''| and round-off eps |E|/h are both below 1e-6 at these sizes
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6)


def test_tanh_classifier_matches_numpy(rng):
    widths = [5, 6, 4, 3]
    arch = MLP(5, [6, 4], 3, hidden_activation="tanh")
    x = rng.normal(size=(90, 5))
    y = rng.integers(0, 3, size=90)
    theta = rng.normal(size=arch.n_params)
    pot = arch.potential(x=x, y=y, block=32)
    e, g = pot.energy_and_grad(theta)
    layers, acts = _np_forward(theta, widths, x, True)
    z = acts[-1]
    m = z.max(axis=1, keepdims=True)
    p = np.exp(z - m)
    s = p.sum(axis=1, keepdims=True)
    e_ref = float(np.sum((m + np.log(s))[:, 0] - z[np.arange(90), y]))
    assert e == pytest.approx(e_ref, rel=1e-12)
    h = 1e-6
    for i in rng.choice(arch.n_params, 12, replace=False):
        tp, tm = theta.copy(), theta.copy()
        tp[i] += h
        tm[i] -= h
        assert g[i] == pytest.approx((pot.energy(tp) - pot.energy(tm)) / (2 * h), abs=1e-6)
    assert pot.hessian_method is None            # the R-operator knows logistic units only


def test_compiled_trajectory_matches_python_leapfrog(rng):
    arch = RegressionMLP(2, [16], 2)
    x = rng.uniform(-2, 2, size=(200, 2))
    y = rng.normal(size=(200, 2))
    pot = arch.potential(x=x, y=y)
    pot.set_hyperparameters(rng.uniform(0.5, 30.0, arch.initial_hyper().size), 1.0)
    theta0 = 0.3 * rng.normal(size=arch.n_params)
    p0 = rng.normal(size=arch.n_params)
    inv_m = np.full(arch.n_params, 0.7)
    hw = np.full(arch.n_params, 1e8)
    _, g0 = pot.energy_and_grad(theta0)
    th, p, g = theta0.copy(), p0.copy(), g0.copy()
    e, n, status, _ = pot.trajectory(th, p, g, inv_m, 0.01, 25, lf.WALL_NONE, hw, 10.0)
    th2, p2 = theta0.copy(), p0.copy()
    g2 = g0.copy()
    for _ in range(25):                          # textbook leapfrog, one full step at a time
        p2 -= 0.005 * g2
        th2 += 0.01 * inv_m * p2
        e2, g2 = pot.energy_and_grad(th2)
        p2 -= 0.005 * g2
    assert (n, status) == (25, lf.OK)
    assert e == pytest.approx(e2, rel=1e-12)
    np.testing.assert_allclose(th, th2, rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(p, p2, rtol=1e-10, atol=1e-11)


@pytest.mark.parametrize("x,y,match", [
    (np.ones((4, 2)), np.ones((4, 3)), "targets have shape"),
    (np.ones((4, 3)), np.ones((4, 2)), "inputs have shape"),
    (np.ones((4, 2)), np.array([[1, 2], [np.nan, 0], [0, 0], [0, 0]]), "targets hold NaN"),
    (np.array([[np.inf, 0]] * 4), np.ones((4, 2)), "inputs hold NaN"),
])
def test_bad_regression_data_is_one_line_error(x, y, match):
    with pytest.raises(DataError, match=match) as err:
        RegressionMLP().potential(x=x, y=y)
    assert "\n" not in str(err.value)
