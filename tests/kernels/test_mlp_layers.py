"""A narrow first layer computed from the inputs transposed (``thermonet.kernels.mlp_layers``).

``z.T = W @ x.T`` forms every element as the same chain of fused multiply-adds as ``z = x @
W.T``, so with thermonet's own products the energy, the gradient, the kicked momenta and whole
trajectories are the same bits with and without the transposed inputs. Other backends round
the two orientations differently: there the comparison is to 1e-12.
"""

from __future__ import annotations

import numpy as np
import pytest

from thermonet.architectures.mlp import MLP, MLPPotential
from thermonet.kernels import leapfrog as lf
from thermonet.kernels import mlp as k
from thermonet.kernels import mlp_layers as layers
from thermonet.kernels.matmul import blas


def _same(a, b):
    if str(blas.BACKEND) == "own":
        np.testing.assert_array_equal(a, b)
    else:
        # the orientations differ only in the rounding of 20-term dot products (a few ulp,
        # ~1e-15 relative) carried through a network of O(1) weights: 1e-12 is that bound
        # with a wide margin, not a measured pass
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def _problem(n_rows, hidden, seed=0):
    rng = np.random.default_rng(seed)
    arch = MLP(n_inputs=20, hidden=hidden, n_outputs=4)
    x = rng.normal(size=(n_rows, 20))
    y = rng.integers(0, 4, n_rows)
    theta = 0.3 * rng.normal(size=arch.n_params)
    return arch, x, y, theta


def test_transposed_blocks_hold_each_blocks_rows_transposed():
    x = np.arange(300 * 7, dtype=np.float64).reshape(300, 7)
    xt = layers.transposed_blocks(x, 128)
    assert xt.shape == (300 * 7,)
    for r0, r1 in ((0, 128), (128, 256), (256, 300)):
        np.testing.assert_array_equal(xt[r0 * 7:r1 * 7].reshape(7, r1 - r0), x[r0:r1].T)


@pytest.mark.parametrize("hidden", [[12], [12, 5]])
@pytest.mark.parametrize("n_rows", [50, 300])   # one block; three, the last partial
def test_energy_and_gradient_are_those_of_the_plain_orientation(hidden, n_rows):
    arch, x, y, theta = _problem(n_rows, hidden)
    widths = np.asarray(arch.widths, dtype=np.int64)
    code = k.activation_code(0)
    results = []
    for xt in (np.empty(0), layers.transposed_blocks(x, 128)):
        work = np.full(k.work_size(widths, 128), np.nan)    # nothing left from the other
        net = (widths, code, x, y, 128, xt)
        grad = np.empty_like(theta)
        e = k.loss_and_grad(theta, net, work, np.empty_like(theta), grad)
        p = np.linspace(-1.0, 1.0, theta.shape[0])
        e_kick = k.loss_and_kick(theta, net, work, np.empty_like(theta), np.empty_like(theta),
                                 p, 0.01)
        results.append((e, k.loss(theta, net, work), grad, e_kick, p))
    for plain, transposed in zip(*results, strict=True):
        _same(np.asarray(transposed), np.asarray(plain))


def test_a_trajectory_is_the_same_with_the_transposed_inputs():
    """The compiled trajectory with its fused kick (one block, float64), 20 steps."""
    arch, x, y, theta0 = _problem(50, [12])
    widths = np.asarray(arch.widths, dtype=np.int64)
    n = theta0.shape[0]
    dyn = lf.Dynamics(np.ones(n), 0.02, 20, np.full(n, 1e3), np.inf)
    ends = []
    for xt in (np.empty(0), layers.transposed_blocks(x, 128)):
        theta, grad = theta0.copy(), np.empty(n)
        work, partial = np.full(k.work_size(widths, 128), np.nan), np.empty(n)
        k.loss_and_grad(theta, (widths, k.activation_code(0), x, y, 128, xt), work, partial,
                        grad)
        p = np.random.default_rng(1).normal(size=n)
        model = lf.MLPModel(widths, k.activation_code(0), x, y, 128, xt, work, partial, theta,
                            grad, False)
        e, n_done, status, _ = lf.mlp_trajectory(theta, p, grad, dyn, lf.WALL_NONE, model)
        assert n_done == 20 and status == lf.OK
        ends.append((e, theta, p, grad))
    for plain, transposed in zip(*ends, strict=True):
        _same(np.asarray(transposed), np.asarray(plain))


def test_the_potential_transposes_a_narrow_first_layer_only():
    """``MLPPotential`` carries the transposed inputs when the rule says so, and its energy
    and gradient are those of the plain orientation."""
    arch, x, y, theta = _problem(130, [12])
    pot = MLPPotential(arch, x, y)
    e, g = pot.energy_and_grad(theta)
    assert pot.model.xt.size == (x.size if layers.transposes_data(pot.model.widths, np.float64)
                                 else 0)
    widths = np.asarray(arch.widths, dtype=np.int64)
    work = np.full(k.work_size(widths, pot.block), np.nan)
    g_plain = np.empty_like(theta)
    e_plain = k.loss_and_grad(theta, (widths, pot.model.out_act, x, y, pot.block, np.empty(0)),
                              work, np.empty_like(theta), g_plain)
    _same(np.array([e, pot.energy(theta)]), np.array([e_plain, e_plain]))
    _same(g, g_plain)
    wide = MLPPotential(MLP(n_inputs=20, hidden=[40], n_outputs=4), x, y)
    wide.energy(0.1 * np.ones(wide.n_params))
    assert wide.model.xt.size == 0          # forty units fill the own products' tiles
