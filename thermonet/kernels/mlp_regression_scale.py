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


@kernel
def energy_and_grad(q, n_w, group_of, group_scale, v_prec, a, b, temperature, widths, act,
                    x, y, block, work, partial, w, gw, f, grad, tau, const):
    """``E(q)`` of the module docstring and its gradient (written to ``grad``).

    ``w``, ``gw`` (shape ``(n_w,)``) and ``f`` (shape ``(n_groups,)``) are scratch; on return
    they hold ``w(q)``, ``tau dS/dw`` and the group factors.
    """
    weights(q, n_w, group_of, group_scale, f, w)
    s = kr.data_loss_and_grad(w, widths, act, x, y, block, work, partial, gw)
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


def _make_trajectory(reflect):
    def trajectory(q, p, grad, inv_mass, step, n_steps, half_width, runaway,
                   n_w, group_of, group_scale, v_prec, a, b, temperature,
                   widths, act, x, y, block, work, partial, w, gw, f, tau, const):
        e = math.nan
        n_ref = 0
        if not reflect:
            bounds, im_r, hw_r = lf.runs(inv_mass, half_width, lf.MAX_RUNS)
        lf.kick(p, grad, 0.5 * step)
        if reflect:
            n_ref += lf.drift_reflect(q, p, inv_mass, step, half_width)
        elif lf.drift_check(q, p, inv_mass, step, half_width, runaway):
            return e, 1, lf.RUNAWAY, n_ref
        for s in range(n_steps):
            e = energy_and_grad(q, n_w, group_of, group_scale, v_prec, a, b, temperature,
                                widths, act, x, y, block, work, partial, w, gw, f, grad, tau,
                                const)
            if not math.isfinite(e):
                return e, s + 1, lf.NON_FINITE, n_ref
            if s == n_steps - 1:
                lf.kick(p, grad, 0.5 * step)
            elif reflect:
                lf.kick(p, grad, step)
                n_ref += lf.drift_reflect(q, p, inv_mass, step, half_width)
            elif lf.kick_drift_runaway(q, p, grad, inv_mass, step, half_width, runaway,
                                       bounds, im_r, hw_r):
                return e, s + 2, lf.RUNAWAY, n_ref
        return e, n_steps, lf.OK, n_ref

    return trajectory


#: :func:`trajectory` compiled for each wall mode (:func:`thermonet.kernels.leapfrog.by_wall`)
TRAJECTORY = lf.by_wall(_make_trajectory)


def trajectory(q, p, grad, inv_mass, step, n_steps, wall, half_width, runaway,
               n_w, group_of, group_scale, v_prec, a, b, temperature,
               widths, act, x, y, block, work, partial, w, gw, f, tau, const):
    """``n_steps`` velocity-Verlet steps on ``E(q)``, in place, one gradient per step.

    Arguments and return value as :func:`thermonet.kernels.leapfrog.mlp_trajectory` (float64
    only, serial), plus those of :func:`energy_and_grad` after ``runaway``. The steps, walls,
    runaway test and status codes are those of
    :func:`thermonet.kernels.mlp_regression.trajectory`; each wall mode is its own compiled
    kernel.
    """
    return lf.for_wall(TRAJECTORY, wall)(
        q, p, grad, inv_mass, step, n_steps, half_width, runaway, n_w, group_of, group_scale,
        v_prec, a, b, temperature, widths, act, x, y, block, work, partial, w, gw, f, tau,
        const)
