"""The R-operator (kernels/mlp_hessian) on regression networks: squared error, tanh and logistic
hidden units, one to three hidden layers.

References independent of the code under test: the compiled closed form of one hidden layer
(kernels/mlp_regression_hessian, itself checked against a complex step in
tests/kernels/test_mlp_regression_hessian.py), and Richardson central differences of a gradient written
here in NumPy (forward and backward pass from the chain rule).
"""

from __future__ import annotations

from itertools import pairwise

import numba
import numpy as np
import pytest

from thermonet.architectures.mlp import MLP
from thermonet.architectures.regression import RegressionMLP
from thermonet.evidence.laplace.curvature import hessian, hvp, resolve_method
from thermonet.kernels import mlp as k
from thermonet.kernels import mlp_hessian as krop
from thermonet.kernels import mlp_regression_hessian as krh


def _numpy_grad(theta, widths, tanh, x, y, *, logistic_out=False):
    """Gradient of the data term by backpropagation in NumPy: half the summed squared error
    for float targets ``y`` (n, K), the softmax cross-entropy for int labels ``y`` (n,)."""
    layers, pos = [], 0
    for n_in, n_out in pairwise(widths):
        w = theta[pos:pos + n_out * n_in].reshape(n_out, n_in)
        pos += n_out * n_in
        layers.append((w, theta[pos:pos + n_out]))
        pos += n_out
    acts, derivs = [x], []
    for i, (w, b) in enumerate(layers):
        z = acts[-1] @ w.T + b
        if i < len(layers) - 1 and tanh:
            a = np.tanh(z)
            derivs.append(1 - a * a)
        elif i < len(layers) - 1 or logistic_out:
            a = 1 / (1 + np.exp(-z))
            derivs.append(a * (1 - a))
        else:
            a = z
            derivs.append(np.ones_like(z))
        acts.append(a)
    s = acts[-1]
    if y.ndim == 2:
        delta = s - y
    else:
        p = np.exp(s - s.max(axis=1, keepdims=True))
        delta = p / p.sum(axis=1, keepdims=True)
        delta[np.arange(len(y)), y] -= 1
    delta = delta * derivs[-1]
    grads = []
    for i in range(len(layers) - 1, -1, -1):
        grads.append((delta.T @ acts[i], delta.sum(axis=0)))
        if i > 0:
            delta = (delta @ layers[i][0]) * derivs[i - 1]
    return np.concatenate([np.concatenate([gw.ravel(), gb]) for gw, gb in reversed(grads)])


def _richardson_hessian(theta, *args, **kw):
    """``(4 D(h/2) - D(h)) / 3`` column by column, ``D(h)`` the central difference of
    :func:`_numpy_grad` (error O(h^4) ~ 1e-12 plus rounding ~ eps |g| / h ~ 1e-13)."""
    d = theta.shape[0]
    out = np.empty((d, d))

    def diff(j, h):
        e = np.zeros(d)
        e[j] = h
        return (_numpy_grad(theta + e, *args, **kw) - _numpy_grad(theta - e, *args, **kw)) / (
            2 * h)

    for j in range(d):
        out[:, j] = (4 * diff(j, 5e-4) - diff(j, 1e-3)) / 3
    return out


def _regression(seed, hidden, act, n_out, n=53, block=16):
    rng = np.random.default_rng(seed)
    arch = RegressionMLP(3, hidden, n_out, hidden_activation=act)
    x = rng.normal(size=(n, 3))
    # targets unrelated to the network: large residuals, so the terms of the Hessian in the
    # residuals times the units' second derivatives (where tanh and logistic differ) matter
    y = rng.normal(size=(n, n_out))
    pot = arch.potential(x=x, y=y, block=block)
    pot.set_hyperparameters(rng.uniform(0.3, 3.0, arch.initial_hyper().shape[0]), 1.0)
    theta = rng.normal(0, 0.8, arch.n_params)
    return arch, pot, theta


@pytest.mark.parametrize("act", ["tanh", "logistic"])
@pytest.mark.parametrize("n_out", [1, 2])
def test_rop_equals_the_closed_form_for_one_hidden_layer(act, n_out):
    arch, pot, theta = _regression(1 + (act == "tanh") + 2 * n_out, [5], act, n_out)
    d = arch.n_params
    assert pot.hessian_method == "analytic"
    closed = np.empty((d, d))
    krh.hessian(theta, (3, 5, n_out, act == "tanh", False), pot.x, pot.y, 1.0, np.zeros(d),
                closed)
    scale = np.abs(closed).max()
    # the R-operator's columns (basis directions: the sparse forward path), over 4 row blocks
    rop = krop.hvp(theta, (arch.widths, arch.act, pot.x, pot.y, 16), np.eye(d), 1)
    assert np.abs(rop - closed).max() <= 1e-12 * scale
    # dense directions (the matrix-product path) through the potential: tau H + diag(prec)
    v = np.random.default_rng(3).normal(size=(4, d))
    full = pot.hessian(theta)
    assert np.abs(pot.hvp(theta, v) - v @ full.T).max() <= 1e-12 * np.abs(full).max() * d
    assert np.abs(full - (pot.tau * closed + np.diag(pot.prec))).max() <= 1e-13 * (
        pot.tau * scale)


@pytest.mark.parametrize("act", ["tanh", "logistic"])
@pytest.mark.parametrize("n_out", [1, 2])
@pytest.mark.parametrize("hidden", [[5, 4], [4, 3, 3]])
def test_deep_regression_hessian_equals_numpy_differences(hidden, act, n_out):
    seed = len(hidden) + 3 * (act == "tanh") + 7 * n_out
    arch, pot, theta = _regression(seed, hidden, act, n_out)
    d = arch.n_params
    assert pot.hessian_method == "rop" and resolve_method(pot) == "rop"
    info = {}
    h = hessian(pot, theta, symmetrise=False, info=info)
    assert info["hessian_method"] == "rop"
    ref_s = _richardson_hessian(theta, arch.widths, act == "tanh", pot.x, pot.y)
    ref = pot.tau * ref_s + np.diag(pot.prec)
    scale = np.abs(ref).max()
    # the differences' error (O(h^4) and rounding, above) is far below 1e-7 of the scale
    assert np.abs(h - ref).max() <= 1e-7 * scale
    # exact products give a Hessian symmetric to rounding (differences would not, to 1e-10)
    assert info["asymmetry"] <= 1e-14
    # the residual terms are a large part of H (so a wrong phi''/phi' would fail the above):
    # at targets equal to the outputs they vanish
    fit = arch.potential(x=pot.x, y=pot.outputs(theta), block=16)
    fit.tau = pot.tau
    fit.prec[:] = pot.prec
    assert np.abs(fit.hessian(theta) - h).max() >= 0.05 * scale
    # dense directions and subsets agree with the matrix
    v = np.random.default_rng(seed).normal(size=(3, d))
    np.testing.assert_allclose(hvp(pot, theta, v), v @ h.T, rtol=0,
                               atol=1e-13 * scale * d)
    idx = [d - 1, 0, 5, 2]
    assert np.array_equal(pot.hessian(theta, index=idx), h[np.ix_(idx, idx)])


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs 2 Numba threads")
@pytest.mark.parametrize("act", ["tanh", "logistic"])
def test_rop_is_bitwise_thread_and_column_block_independent(act):
    arch, pot, theta = _regression(11, [6, 5], act, 2, n=70, block=16)
    h1 = pot.hessian(theta, threads=1)
    assert np.array_equal(pot.hessian(theta, threads=2), h1)
    assert np.array_equal(pot.hessian(theta, threads=2, column_block=7), h1)
    v = np.random.default_rng(0).normal(size=(5, arch.n_params))
    assert np.array_equal(pot.hvp(theta, v, threads=2), pot.hvp(theta, v, threads=1))


@pytest.mark.parametrize("out_act", [k.LINEAR, k.LOGISTIC])
def test_rop_with_tanh_hidden_units_and_the_cross_entropy(out_act):
    """The kernel's tanh units with int labels: the activation and output bits of the code
    are read separately (tanh | logistic output = 3)."""
    rng = np.random.default_rng(5 + out_act)
    arch = MLP(3, (4, 3), 3, "logistic" if out_act else "linear", hidden_activation="tanh")
    x = rng.normal(size=(41, 3))
    y = rng.integers(0, 3, 41)
    theta = rng.normal(0, 0.8, arch.n_params)
    d = arch.n_params
    got = krop.hvp(theta, (arch.widths, arch.out_act, x, y, 16), np.eye(d), 1)
    ref = _richardson_hessian(theta, arch.widths, True, x, y, logistic_out=bool(out_act))
    assert np.abs(got - ref).max() <= 1e-7 * np.abs(ref).max()


def test_scale_factor_networks_keep_differences():
    rng = np.random.default_rng(2)
    arch = RegressionMLP(2, [4, 3], 1, parameterisation="scale")
    pot = arch.potential(x=rng.normal(size=(20, 2)), y=rng.normal(size=(20, 1)))
    assert resolve_method(pot) == "fd"
    theta = arch.initial_draw(rng)
    h = hessian(pot, theta)
    assert h.shape == (arch.n_params,) * 2 and np.all(np.isfinite(h))


@pytest.mark.slow
def test_mackay_evidence_of_a_two_hidden_layer_robot_arm_network():
    from thermonet.data import load_data
    from thermonet.evidence.mackay.framework import evaluate_at, mackay_evidence

    split = load_data("robot-arm")
    arch = RegressionMLP(n_inputs=2, hidden=[4, 4], n_outputs=2)
    assert resolve_method(arch.potential(split.train)) == "rop"
    r = mackay_evidence(arch, split.train, seed=0, hessian_method="rop")
    assert r.converged and r.positive_definite
    # the difference Hessian from the same minimum: the same point, and the same evidence to
    # the differences' error in ln det A (measured 2e-5 here); an R-operator Hessian wrong in
    # any term would move ln det A by far more
    hyper = [*r.alpha, r.beta]
    exact = evaluate_at(arch.potential(split.train), r.theta, hyper, hessian_method="rop")
    fd = evaluate_at(arch.potential(split.train), r.theta, hyper, hessian_method="fd")
    np.testing.assert_allclose(exact.theta, fd.theta, atol=1e-5)
    assert exact.log_evidence == pytest.approx(fd.log_evidence, abs=1e-4)
    assert exact.log_evidence + r.log_symmetry == pytest.approx(r.log_evidence, abs=1e-6)
    # MacKay's fixed point alpha_c = gamma_c / (2 E_W,c) with the exact gamma: this A spans
    # 11 decades (largest eigenvalue 2.7e8, smallest 0.05), and the update once floored the
    # eigenvalues at 1e-9 of the largest even where A is positive definite (gamma off by 8 %)
    np.testing.assert_allclose(r.gamma_groups, 2.0 * r.alpha * r.e_w, rtol=2e-3)
