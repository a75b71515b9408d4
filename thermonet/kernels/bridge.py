"""Compiled HMC trajectory on a thermodynamic-integration bridge of the built-in MLP.

``J_λ(w) = E0 + (1-λ)(E(w) - E0) + λ Σ_i k_i (w_i - w0_i)²/2`` with ``E`` the MLP's summed
cross-entropy: the same velocity-Verlet scheme, walls and status codes as
:func:`thermonet.kernels.leapfrog.mlp_trajectory`, with the gradient of E mixed with the
reference's in the same pass. One MLP gradient evaluation per step and no Python in the loop
(the Python bridge costs ~5-10% over the raw gradient at N = 500; see docs/performance.md).
"""

from __future__ import annotations

import math

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


def _make_bridge_trajectory(reflect):
    def mlp_bridge_trajectory(theta, p, grad, inv_mass, step, n_steps, half_width, runaway,
                              lam, w0, k, e0, widths, out_act, x, y, block, work, partial,
                              gbase):
        j = np.nan
        e = np.nan
        n_ref = 0
        if not reflect:
            bounds, im_r, hw_r = lf.runs(inv_mass, half_width, lf.MAX_RUNS)
        lf.kick(p, grad, 0.5 * step)
        if reflect:
            n_ref += lf.drift_reflect(theta, p, inv_mass, step, half_width)
        elif lf.drift_check(theta, p, inv_mass, step, half_width, runaway):
            return j, e, 1, lf.RUNAWAY, n_ref
        for s in range(n_steps):
            e = mlp.loss_and_grad(theta, widths, out_act, x, y, block, work, partial, gbase)
            q = bridge_mix(theta, gbase, lam, w0, k, grad)
            j = e0 + (1.0 - lam) * (e - e0) + lam * q
            if not math.isfinite(j):
                return j, e, s + 1, lf.NON_FINITE, n_ref
            if s == n_steps - 1:
                lf.kick(p, grad, 0.5 * step)
            elif reflect:
                lf.kick(p, grad, step)
                n_ref += lf.drift_reflect(theta, p, inv_mass, step, half_width)
            elif lf.kick_drift_runaway(theta, p, grad, inv_mass, step, half_width, runaway,
                                       bounds, im_r, hw_r):
                return j, e, s + 2, lf.RUNAWAY, n_ref
        return j, e, n_steps, lf.OK, n_ref

    return mlp_bridge_trajectory


#: :func:`mlp_bridge_trajectory` compiled for each wall mode
#: (:func:`thermonet.kernels.leapfrog.by_wall`)
MLP_BRIDGE_TRAJECTORY = lf.by_wall(_make_bridge_trajectory)


def mlp_bridge_trajectory(theta, p, grad, inv_mass, step, n_steps, wall, half_width, runaway,
                          lam, w0, k, e0, widths, out_act, x, y, block, work, partial, gbase):
    """``n_steps`` velocity-Verlet steps on ``J_λ`` of the MLP; ``grad`` holds dJ/dθ on entry.

    Arguments as :func:`thermonet.kernels.leapfrog.mlp_trajectory` (float64 only), plus
    ``lam``, the reference ``w0``, ``k``, ``e0``, and ``gbase`` (n_params,) scratch for dE/dθ.

    Returns
    -------
    (J, E, n_done, status, n_reflections)
        ``J_λ`` and the MLP energy ``E`` at the end point (from the last gradient evaluation).
    """
    return lf.for_wall(MLP_BRIDGE_TRAJECTORY, wall)(
        theta, p, grad, inv_mass, step, n_steps, half_width, runaway, lam, w0, k, e0, widths,
        out_act, x, y, block, work, partial, gbase)


@kernel
def quadratic(theta, w0, k):
    """``Σ k_i (theta_i - w0_i)²/2``, summed in the same order as :func:`bridge_mix`."""
    q = 0.0
    for i in range(theta.shape[0]):
        d = theta[i] - w0[i]
        kd = k[i] * d
        q += kd * d
    return 0.5 * q
