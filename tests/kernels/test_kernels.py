"""MLP energy/gradient kernels against an independent NumPy backprop and finite differences."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests import reference as ref
from thermonet.architectures.mlp import M1, M3, MLP, M3Star
from thermonet.kernels import mlp as k

ARCHS = [M1, M3, M3Star]


def _random_problem(rng, widths, n):
    x = rng.normal(size=(n, widths[0]))
    y = rng.integers(0, widths[-1], size=n)
    return x, y


@pytest.mark.parametrize("widths,logistic", [
    ([256, 40, 10], False), ([256, 40, 40, 40, 10], False), ([256, 40, 40, 40, 10], True),
    ([7, 10], False),                 # no hidden layer: softmax regression
    ([3, 5, 2], True), ([12, 1, 3, 4], False)])
@pytest.mark.parametrize("n", [1, 37, 256, 700])
def test_energy_and_grad_match_numpy_reference(rng, widths, logistic, n):
    arch = MLP(widths[0], widths[1:-1], widths[-1], "logistic" if logistic else "linear")
    x, y = _random_problem(rng, widths, n)
    theta = rng.uniform(-1.5, 1.5, arch.n_params)
    pot = arch.potential(x=x, y=y)
    e, g = pot.energy_and_grad(theta)
    e_ref, g_ref = ref.energy_and_grad(theta, widths, x, y, logistic)
    assert e == pytest.approx(e_ref, rel=1e-12)
    np.testing.assert_allclose(g, g_ref, rtol=1e-9, atol=1e-12 * np.abs(g_ref).max())
    assert pot.energy(theta) == pytest.approx(e_ref, rel=1e-12)


@pytest.mark.parametrize("arch_cls", ARCHS)
def test_gradient_matches_central_differences_on_mnist(arch_cls, d50, rng):
    """Central differences on the paper's D50, at a standard initial draw, for every layer."""
    arch = arch_cls()
    pot = arch.potential(d50)
    theta = arch.initial_draw(rng) * 3.0
    _, g = pot.energy_and_grad(theta)
    h = 1e-5
    # a few parameters from every weight and bias group
    idx = np.concatenate([rng.choice(np.arange(sl.start, sl.stop), size=min(6, sl.stop - sl.start),
                                     replace=False) for sl in arch.param_groups().values()])
    fd = np.empty(idx.size)
    for j, i in enumerate(idx):
        tp, tm = theta.copy(), theta.copy()
        tp[i] += h
        tm[i] -= h
        fd[j] = (pot.energy(tp) - pot.energy(tm)) / (2 * h)
    # truncation error ~ h^2 |E'''|, round-off ~ eps |E| / h: both far below 1e-6 here
    np.testing.assert_allclose(g[idx], fd, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_serial_and_threaded_kernels_are_bitwise_identical(rng):
    arch = M3()
    x, y = _random_problem(rng, [256, 10], 1000)      # 4 blocks, the last one partial
    theta = arch.initial_draw(rng)
    e1, g1 = arch.potential(x=x, y=y, threads=1).energy_and_grad(theta)
    e2, g2 = arch.potential(x=x, y=y, threads=2).energy_and_grad(theta)
    assert e1 == e2
    assert np.array_equal(g1, g2)


@pytest.mark.slow
def test_batched_kernels_equal_one_at_a_time(rng):
    arch = M1()
    x, y = _random_problem(rng, [256, 10], 300)
    theta_kp = np.stack([arch.initial_draw(rng) for _ in range(5)])
    for threads in (1, 2):
        pot = arch.potential(x=x, y=y, threads=threads)
        e_k, g_kp = pot.energy_and_grad_batch(theta_kp)
        for i in range(5):
            e, g = pot.energy_and_grad(theta_kp[i])
            assert e_k[i] == e
            assert np.array_equal(g_kp[i], g)
        np.testing.assert_array_equal(pot.energy_batch(theta_kp), [pot.energy(t) for t in theta_kp])


def test_zero_parameters_give_uniform_prediction(d500):
    """w = 0: every class has probability 1/10, E = N ln 10, and on a class-balanced set the
    gradient vanishes exactly (softmax - one-hot sums to zero per class)."""
    for arch in (M1(), M3(), M3Star()):
        pot = arch.potential(d500)
        e, g = pot.energy_and_grad(np.zeros(arch.n_params))
        assert e == pytest.approx(500 * math.log(10), rel=1e-13)
        assert np.max(np.abs(g)) < 1e-10


def test_output_bias_only_gives_closed_form_energy(d50, rng):
    """With every weight zero, the logits are the output biases b: E = -sum_n log softmax(b)_y."""
    arch = M3()
    theta = np.zeros(arch.n_params)
    b = rng.normal(size=10)
    theta[-10:] = b
    logp = b - (b.max() + np.log(np.exp(b - b.max()).sum()))
    expected = -np.sum(logp[d50.y])
    assert arch.potential(d50).energy(theta) == pytest.approx(expected, rel=1e-13)


def test_logistic_output_energy_bounded_below(d50, rng):
    """M(3*): logits lie in (0, 1), so E/N >= -log(e/(e+9)) = 1.4612 for any w (paper Sec. 3.1)."""
    bound = -math.log(math.e / (math.e + 9))
    assert bound == pytest.approx(1.4612, abs=1e-4)
    arch = M3Star()
    pot = arch.potential(d50)
    for scale in (1.0, 30.0, 1000.0):
        theta = rng.uniform(-scale, scale, arch.n_params)
        assert pot.energy(theta) / len(d50.y) > bound
    # The linear-output M(3) with the same w can go below it (no capacity limit).
    lin = M3().potential(d50)
    assert min(lin.energy(rng.uniform(-30, 30, arch.n_params)) for _ in range(3)) >= 0.0


def test_non_finite_parameters_give_non_finite_energy_not_an_exception(rng):
    arch = M3()
    x, y = _random_problem(rng, [256, 10], 20)
    pot = arch.potential(x=x, y=y)
    theta = arch.initial_draw(rng)
    bad = theta.copy()
    bad[5] = np.nan
    assert not np.isfinite(pot.energy(bad))
    e, g = pot.energy_and_grad(bad)
    assert not np.isfinite(e)
    huge = theta.copy()
    huge[-20:-10] = 1e308                # output weights: logits overflow to inf
    assert not np.isfinite(pot.energy(huge))
    e, _ = pot.energy_and_grad(huge)
    assert not np.isfinite(e)


def test_large_logits_stay_finite_by_log_sum_exp(rng):
    """Logits of order 1e3 overflow a naive exp; the max-shifted log-sum-exp does not."""
    arch = MLP(4, (), 3)
    x = np.eye(4)[:3]
    y = np.array([0, 1, 2])
    theta = np.zeros(arch.n_params)
    theta[:12] = 1000.0 * rng.normal(size=12)
    e, g = arch.potential(x=x, y=y).energy_and_grad(theta)
    e_ref, g_ref = ref.energy_and_grad(theta, [4, 3], x, y)
    assert np.isfinite(e) and e == pytest.approx(e_ref, rel=1e-12)
    np.testing.assert_allclose(g, g_ref, rtol=1e-12, atol=1e-12)


def test_empty_data_set_has_zero_energy_and_gradient():
    arch = MLP(5, (3,), 2)
    pot = arch.potential(x=np.empty((0, 5)), y=np.empty(0, dtype=np.int64))
    e, g = pot.energy_and_grad(np.ones(arch.n_params))
    assert e == 0.0 and not g.any()


def test_float32_potential_is_close_to_float64(rng, d500):
    arch = M3()
    theta = arch.initial_draw(rng) * 5
    e64, g64 = arch.potential(d500).energy_and_grad(theta)
    e32, g32 = arch.potential(d500, dtype=np.float32).energy_and_grad(theta)
    assert g32.dtype == np.float32
    assert isinstance(e32, float)
    # float32 forward pass: relative error of order 1e-7 per operation, summed over 500 points
    assert abs(e32 - e64) < 1e-5 * abs(e64)
    assert np.max(np.abs(g32 - g64)) < 1e-4 * np.max(np.abs(g64))
    assert abs(e32 - e64) > 0.0          # it really ran in float32


def test_predict_logits_match_reference(rng):
    widths = [256, 40, 40, 40, 10]
    x, _ = _random_problem(rng, widths, 300)
    for arch in (M3(), M3Star()):
        theta = arch.initial_draw(rng) * 4
        p = arch.predict_proba(theta, x)
        z = ref.logits(theta, widths, x, arch.out_act == k.LOGISTIC)
        p_ref = np.exp(z - z.max(1, keepdims=True))
        p_ref /= p_ref.sum(1, keepdims=True)
        np.testing.assert_allclose(p, p_ref, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("widths,logistic", [
    ([256, 40, 40, 40, 10], False), ([256, 40, 40, 40, 10], True), ([7, 10], False),
    ([12, 1, 3, 4], False)])
@pytest.mark.parametrize("n", [37, 300])
def test_loss_and_kick_puts_the_gradient_into_the_momenta(rng, widths, logistic, n):
    """``loss_and_kick`` gives the energy of ``loss_and_grad`` bit for bit and
    ``p - kick * gradient``: bitwise with ``np.dot``, to the rounding of MKL's accumulating
    product otherwise. With one block (n = 37) the gradient never reaches ``grad`` (left
    NaN: the direct path ran); with several blocks it is computed there and used."""
    from thermonet.kernels.matmul import blas

    arch = MLP(widths[0], widths[1:-1], widths[-1], "logistic" if logistic else "linear")
    x, y = _random_problem(rng, widths, n)
    theta = rng.uniform(-1.5, 1.5, arch.n_params)
    w = np.asarray(arch.widths)
    work = np.empty(k.work_size(w, 256))
    partial = np.empty(arch.n_params)
    g = np.empty(arch.n_params)
    e = k.loss_and_grad(theta, (w, arch.out_act, x, y, 256), work, partial, g)
    p0 = rng.normal(size=arch.n_params)
    for kick in (0.0371, 0.0):
        p = p0.copy()
        grad = np.full(arch.n_params, np.nan)
        ek = k.loss_and_kick(theta, (w, arch.out_act, x, y, 256), work, partial, grad, p, kick)
        assert ek == e
        want = p0 - kick * g
        if blas.BACKEND == "numpy" or n > 256 or kick == 0.0:
            assert np.array_equal(p, want)
        else:
            # one rounding of p + (-kick) * product instead of two (measured: <= 0.4 eps)
            scale = np.abs(p0).max() + kick * np.abs(g).max()
            np.testing.assert_allclose(p, want, rtol=0, atol=4 * np.finfo(float).eps * scale)
        if n > 256:
            assert np.array_equal(grad, g)
        else:
            assert np.isnan(grad).all()


def test_loss_and_kick_in_float32_updates_float64_momenta(rng):
    """Float32 kernels with float64 momenta (mixed precision) take the general path: the
    float32 gradient in ``grad``, then ``p - kick * grad`` in float64, bit for bit."""
    arch = M3()
    x, y = _random_problem(rng, [256, 10], 37)
    x = x.astype(np.float32)
    theta = arch.initial_draw(rng).astype(np.float32)
    w = np.asarray(arch.widths)
    work = np.empty(k.work_size(w, 256), np.float32)
    partial = np.empty(arch.n_params, np.float32)
    g = np.empty(arch.n_params, np.float32)
    e = k.loss_and_grad(theta, (w, arch.out_act, x, y, 256), work, partial, g)
    p0 = rng.normal(size=arch.n_params)
    p = p0.copy()
    grad = np.full(arch.n_params, np.nan, np.float32)
    assert k.loss_and_kick(theta, (w, arch.out_act, x, y, 256), work, partial, grad, p,
                           0.03) == e
    assert np.array_equal(grad, g)
    assert np.array_equal(p, p0 - 0.03 * g.astype(np.float64))


def test_kernels_compose_inside_user_kernels(rng):
    """A plugin's own @kernel can call the MLP kernels by name (composition contract)."""
    from thermonet.kernels.jit import kernel

    @kernel
    def two_energies(theta_a, theta_b, widths, out_act, x, y, block, work):
        return (k.loss(theta_a, (widths, out_act, x, y, block), work)
                + k.loss(theta_b, (widths, out_act, x, y, block), work))

    arch = M1()
    x, y = _random_problem(rng, [256, 10], 50)
    a, b = arch.initial_draw(rng), arch.initial_draw(rng)
    work = np.empty(k.work_size(arch.widths, 256))
    pot = arch.potential(x=x, y=y)
    assert two_energies(a, b, arch.widths, arch.out_act, x, y, 256, work) == pytest.approx(
        pot.energy(a) + pot.energy(b), rel=1e-14)
