"""Compiled HMC trajectory on a thermodynamic-integration bridge of the built-in MLP.

``J_λ(w) = E0 + (1-λ)(E(w) - E0) + λ Σ_i k_i (w_i - w0_i)²/2`` with ``E`` the MLP's summed
cross-entropy: the same velocity-Verlet scheme, walls and status codes as
:func:`thermonet.kernels.leapfrog.mlp_trajectory`, with the gradient of E mixed with the
reference's in the same pass. One MLP gradient evaluation per step and no Python in the loop
(the Python bridge costs ~5-10% over the raw gradient at N = 500; see docs/performance.md).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from thermonet.kernels import leapfrog as lf
from thermonet.kernels import mlp
from thermonet.kernels.jit import kernel


@kernel
def bridge_mix(theta, gbase, lam, w0, k, grad):
    """``grad = (1-λ) gbase + λ k ⊙ (theta - w0)``; returns ``Σ k_i (theta_i - w0_i)²/2``."""
    q = 0.0
    a = 1.0 - lam
    for i in range(theta.shape[0]):
        d = theta[i] - w0[i]
        kd = k[i] * d
        q += kd * d
        grad[i] = a * gbase[i] + lam * kd
    return 0.5 * q


class BridgeModel(NamedTuple):
    """The arguments of :func:`mlp_bridge_trajectory` after ``wall``."""

    lam: float
    #: the reference: its centre, its diagonal stiffness and its energy ``E0``
    w0: np.ndarray
    k: np.ndarray
    e0: float
    #: the MLP and its data (float64), as in :func:`thermonet.kernels.mlp.loss_and_grad`
    widths: np.ndarray
    out_act: int
    x: np.ndarray
    y: np.ndarray
    block: int
    work: np.ndarray
    partial: np.ndarray
    #: scratch for dE/dtheta, shape ``(n_params,)``
    gbase: np.ndarray


@kernel
def _bridge_gradient(theta, grad, model):
    """dJ/dθ into ``grad``; returns ``(J_λ, E)``."""
    lam, w0, k, e0, widths, out_act, x, y, block, work, partial, gbase = model
    e = mlp.loss_and_grad(theta, (widths, out_act, x, y, block), work, partial, gbase)
    q = bridge_mix(theta, gbase, lam, w0, k, grad)
    return e0 + (1.0 - lam) * (e - e0) + lam * q, e


#: :func:`mlp_bridge_trajectory` compiled for each wall mode
#: (:func:`thermonet.kernels.leapfrog.trajectory_kernels`)
MLP_BRIDGE_TRAJECTORY = lf.trajectory_kernels("mlp_bridge_trajectory", _bridge_gradient)


def mlp_bridge_trajectory(theta, p, grad, dyn, wall, model):
    """``dyn.n_steps`` velocity-Verlet steps on ``J_λ`` of the MLP; ``grad`` holds dJ/dθ on
    entry.

    Arguments as :func:`thermonet.kernels.leapfrog.mlp_trajectory` (float64 only), with
    ``model`` a :class:`BridgeModel`.

    Returns
    -------
    (J, E, n_done, status, n_reflections)
        ``J_λ`` and the MLP energy ``E`` at the end point (from the last gradient evaluation).
    """
    return lf.for_wall(MLP_BRIDGE_TRAJECTORY, wall)(theta, p, grad, tuple(dyn), tuple(model))


@kernel
def quadratic(theta, w0, k):
    """``Σ k_i (theta_i - w0_i)²/2``, summed in the same order as :func:`bridge_mix`."""
    q = 0.0
    for i in range(theta.shape[0]):
        d = theta[i] - w0[i]
        kd = k[i] * d
        q += kd * d
    return 0.5 * q
