"""Regression energy/gradient and tanh hidden units against NumPy references and finite
differences."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests import reference as ref
from thermonet.architectures.mlp import MLP
from thermonet.architectures.regression import RegressionMLP
from thermonet.architectures.regression_potential import choose_kernel
from thermonet.errors import ConfigError, DataError
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


@pytest.mark.parametrize("kernel", ["auto", "blocked", "shallow"])
@pytest.mark.parametrize("act", ["tanh", "logistic"])
@pytest.mark.parametrize("widths,n,block", [([2, 16, 2], 200, 512), ([3, 5, 4, 1], 37, 16),
                                            ([6, 8, 3], 300, 128), ([1, 9, 1], 13, 512),
                                            ([3, 7, 4], 61, 512), ([2, 5, 6], 45, 16)])
def test_regression_energy_and_grad_match_numpy(rng, kernel, act, widths, n, block):
    # the shapes cover the shallow kernel's special passes: one input or output (no middle
    # pass), three or more (middle passes), and N not a multiple of its 8 lanes
    if kernel == "shallow" and len(widths) != 3:
        pytest.skip("the shallow kernel has one hidden layer")
    arch = RegressionMLP(widths[0], widths[1:-1], widths[-1], hidden_activation=act,
                         kernel=kernel)
    x = rng.normal(size=(n, widths[0]))
    y = rng.normal(size=(n, widths[-1]))
    pot = arch.potential(x=x, y=y, block=block)
    assert pot.kernel == (kernel if kernel != "auto" else
                          "shallow" if len(widths) == 3 and widths[0] + widths[-1] <= 12
                          else "blocked")
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


@pytest.mark.parametrize("kernel", ["blocked", "shallow"])
@pytest.mark.parametrize("act", ["tanh", "logistic"])
def test_regression_gradient_matches_finite_differences(rng, act, kernel):
    arch = RegressionMLP(2, [7], 2, hidden_activation=act, ard=True, kernel=kernel)
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


@pytest.mark.parametrize("kernel", ["blocked", "shallow"])
@pytest.mark.slow
def test_compiled_trajectory_matches_python_leapfrog(rng, kernel):
    arch = RegressionMLP(2, [16], 2, kernel=kernel)
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


def test_the_two_kernels_agree_to_rounding_and_each_repeats_bit_for_bit(rng):
    x = rng.uniform(-2, 2, size=(203, 2))
    y = rng.normal(size=(203, 2))
    pots = {k: RegressionMLP(2, [16], 2, kernel=k).potential(x=x, y=y)
            for k in ("blocked", "shallow")}
    theta = rng.normal(size=pots["blocked"].n_params)
    out = {k: pot.energy_and_grad(theta) for k, pot in pots.items()}
    (e_b, g_b), (e_s, g_s) = out["blocked"], out["shallow"]
    assert e_s == pytest.approx(e_b, rel=1e-13)
    np.testing.assert_allclose(g_s, g_b, rtol=0, atol=1e-13 * np.abs(g_b).max())
    # a copy of the potential (as every replica gets) runs the same kernel, to the bit
    again = pots["shallow"].copy()
    assert again.kernel == "shallow"
    e2, g2 = again.energy_and_grad(theta)
    assert e2 == e_s and np.array_equal(g2, g_s)


@pytest.mark.parametrize("kernel", ["blocked", "shallow"])
def test_a_non_finite_network_is_a_non_finite_energy(rng, kernel):
    pot = RegressionMLP(2, [5], 2, kernel=kernel).potential(
        x=rng.normal(size=(20, 2)), y=rng.normal(size=(20, 2)))
    theta = rng.normal(size=pot.n_params)
    assert math.isfinite(pot.half_sse(theta))
    # S(w) alone, the network's part: the prior term would make E non-finite by itself
    bad = theta.copy()
    bad[3] = np.nan                      # an input weight: every output is NaN
    assert math.isnan(pot.half_sse(bad))
    e, _ = pot.energy_and_grad(bad)      # no exception: a rejected proposal
    assert not math.isfinite(e)
    bad = theta.copy()
    bad[22] = 1e200                      # an output weight: the residuals' squares overflow
    assert pot.half_sse(bad) == math.inf


def test_auto_picks_the_shallow_kernel_for_small_one_layer_nets():
    assert choose_kernel([2, 16, 2], "auto") == "shallow"           # the robot arm
    assert choose_kernel([8, 256, 4], "auto") == "shallow"
    assert choose_kernel([2, 16, 10], "auto") == "shallow"         # inputs + outputs <= 12
    assert choose_kernel([32, 16, 2], "auto") == "shallow"         # 512 weights, 2 outputs
    assert choose_kernel([128, 8, 4], "auto") == "shallow"         # 1024 weights, 4 outputs
    assert choose_kernel([32, 64, 1], "auto") == "blocked"         # 2048 input weights
    assert choose_kernel([9, 16, 5], "auto") == "blocked"          # 5 outputs and 9 inputs
    assert choose_kernel([8, 64, 10], "auto") == "blocked"         # inputs + outputs > 12
    assert choose_kernel([2, 16, 16, 2], "auto") == "blocked"      # two hidden layers
    assert choose_kernel([2, 16, 16, 2], "blocked") == "blocked"
    assert choose_kernel([64, 16, 2], "shallow") == "shallow"      # asked for: obeyed


@pytest.mark.parametrize("kwargs,match", [
    ({"kernel": "fast"}, "architecture.kernel = 'fast'; expected one of"),
    ({"kernel": "shallow", "hidden": [4, 4]}, "expected one hidden layer"),
])
def test_bad_kernel_option_is_one_line_error(kwargs, match):
    with pytest.raises(ConfigError, match=match) as err:
        RegressionMLP(**kwargs)
    assert "\n" not in str(err.value)


def test_shallow_half_sse_is_the_forward_sum_bit_for_bit(rng):
    """S(w) of the shallow kernel comes from its gradient kernel (no forward-only kernel to
    compile at a first run): exactly what the forward kernel sums, and NumPy's S(w)."""
    from thermonet.kernels import mlp_regression as kr

    for act in ("tanh", "logistic"):
        arch = RegressionMLP(3, [9], 2, hidden_activation=act, kernel="shallow")
        x = rng.normal(size=(37, 3))
        y = rng.normal(size=(37, 2))
        pot = arch.potential(x=x, y=y, block=16)
        theta = 0.5 * rng.normal(size=pot.n_params)
        s = pot.half_sse(theta)
        n = pot.n_params
        model = (arch.widths, pot.kact, pot.kx, pot.ky, pot.block, np.empty(pot.work_length),
                 np.empty(n), 1.0, np.zeros(n), 0.0)
        assert s == kr.SHALLOW.energy(theta, model)        # the forward kernel's sum
        _, acts = _np_forward(theta, arch.widths, x, act == "tanh")
        assert s == pytest.approx(0.5 * np.sum((acts[-1] - y) ** 2), rel=1e-12)


def test_shallow_half_sse_loads_no_forward_kernel(tmp_path):
    """A fresh process that evaluates S(w) of the shallow kernel neither compiles nor loads the
    forward-only kernel (``mlp_shallow.loss``)."""
    import os
    import subprocess
    import sys

    code = (
        "import numpy as np\n"
        "from thermonet.architectures.regression import RegressionMLP\n"
        "from thermonet.kernels import mlp_shallow\n"
        "rng = np.random.default_rng(1)\n"
        "pot = RegressionMLP(2, [6], 2, kernel='shallow').potential(x=rng.normal(size=(20, 2)),"
        " y=rng.normal(size=(20, 2)))\n"
        "assert pot.half_sse(0.3 * rng.normal(size=pot.n_params)) > 0\n"
        "print(len(mlp_shallow.loss.signatures))\n")
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ), capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout) == 0
