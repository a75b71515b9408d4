"""The regression MLP in Neal (1993)'s scale-factor coordinates: energy, gradient, trajectory.

The state is ``q = (v, u)``: ``n_w`` unit-variance weights v, then one log precision ``u_g``
per group. Weight i of group ``g = group_of[i]`` is ``w_i = v_i f_g`` with
``f_g = 1/sqrt(scale_g e^{u_g})``; a weight outside every group (``group_of[i] < 0``, the
output biases) is ``w_i = v_i``. The energy and its gradient
(:mod:`thermonet.architectures.scale_factors` derives them) are

    E(q) = tau S(w) + c + T [ sum_i pv_i v_i^2 / 2 + sum_g (b_g e^{u_g} - a_g u_g) ],
    dE/dv_i = f_g tau dS/dw_i + T pv_i v_i,
    dE/du_g = -1/2 sum_{i in g} w_i tau dS/dw_i + T (b_g e^{u_g} - a_g),

with ``S`` the half sum of squared residuals
(:func:`thermonet.kernels.mlp_regression.data_loss_and_grad`), ``tau`` the noise precision
and ``c`` the Gaussian's normalising constant (:mod:`thermonet.kernels.mlp_regression`).
``a_g``, ``b_g`` are the Gamma shape and rate of group g's precision, one pair per group
(under a three-level prior they depend on the top level's mean).

An overflowing ``e^{u_g}`` makes ``f_g = 0`` and the energy infinite; an underflowing one makes
``f_g`` infinite and the network's output NaN: either way a non-finite energy, which ends a
trajectory with status ``NON_FINITE`` (a rejected proposal), never an exception.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from thermonet.kernels import leapfrog as lf
from thermonet.kernels import mlp_regression as kr
from thermonet.kernels.jit import kernel


@kernel
def weights(q, n_w, group_of, group_scale, f, w):
    """``w(q)`` into ``w`` (shape ``(n_w,)``), the group factors ``f_g`` into ``f``."""
    n_g = group_scale.shape[0]
    for g in range(n_g):
        f[g] = 1.0 / math.sqrt(group_scale[g] * math.exp(q[n_w + g]))
    for i in range(n_w):
        g = group_of[i]
        w[i] = q[i] * f[g] if g >= 0 else q[i]


class ScaleModel(NamedTuple):
    """The ``model`` of :func:`energy_and_grad` and :func:`trajectory` (kernels take
    ``tuple(model)``)."""

    #: the number of weights; weight i's group (-1: none); the groups' prior scales
    n_w: int
    group_of: np.ndarray
    group_scale: np.ndarray
    #: the weights' prior precisions at unit group precision (``pv``)
    v_prec: np.ndarray
    #: the groups' Gamma shapes and rates
    a: np.ndarray
    b: np.ndarray
    temperature: float
    #: the network and its data, the ``net`` of
    #: :func:`thermonet.kernels.mlp_regression.data_loss_and_grad`
    widths: np.ndarray
    act: int
    x: np.ndarray
    y: np.ndarray
    block: int
    work: np.ndarray
    partial: np.ndarray
    #: scratch, shapes ``(n_w,)``, ``(n_w,)`` and ``(n_groups,)``; on return from
    #: :func:`energy_and_grad` they hold ``w(q)``, ``tau dS/dw`` and the group factors
    w: np.ndarray
    gw: np.ndarray
    f: np.ndarray
    tau: float
    const: float


@kernel
def energy_and_grad(q, grad, model):
    """``E(q)`` of the module docstring and its gradient (written to ``grad``)."""
    (n_w, group_of, group_scale, v_prec, a, b, temperature, widths, act, x, y, block, work,
     partial, w, gw, f, tau, const) = model
    weights(q, n_w, group_of, group_scale, f, w)
    s = kr.data_loss_and_grad(w, (widths, act, x, y, block, work, partial), gw)
    n_g = group_scale.shape[0]
    for g in range(n_g):
        grad[n_w + g] = 0.0
    ev = 0.0
    for i in range(n_w):
        d = tau * gw[i]
        gw[i] = d
        pv = v_prec[i] * q[i]
        ev += 0.5 * pv * q[i]
        g = group_of[i]
        if g >= 0:
            grad[i] = f[g] * d + temperature * pv
            grad[n_w + g] += w[i] * d
        else:
            grad[i] = d + temperature * pv
    eu = 0.0
    for g in range(n_g):
        ug = q[n_w + g]
        be = b[g] * math.exp(ug)
        eu += be - a[g] * ug
        grad[n_w + g] = -0.5 * grad[n_w + g] + temperature * (be - a[g])
    return tau * s + const + temperature * (ev + eu)


# the trajectories' gradient contract, inlined into them (not a kernel compiled on its own)
@kernel(inline=True)
def _gradient(q, grad, model):
    e = energy_and_grad(q, grad, model)
    return e, e


#: :func:`trajectory` compiled for each wall mode
#: (:func:`thermonet.kernels.leapfrog.trajectory_kernels`)
TRAJECTORY = lf.trajectory_kernels("scale_trajectory", _gradient)


def trajectory(q, p, grad, dyn, wall, model):
    """``dyn.n_steps`` velocity-Verlet steps on ``E(q)``, in place, one gradient per step.

    Arguments and return value as :func:`thermonet.kernels.leapfrog.mlp_trajectory` (float64
    only, serial), with ``model`` a :class:`ScaleModel`; each wall mode is its own compiled
    kernel.
    """
    e, _, n_done, status, n_ref = lf.for_wall(TRAJECTORY, wall)(q, p, grad, tuple(dyn),
                                                                tuple(model))
    return e, n_done, status, n_ref
