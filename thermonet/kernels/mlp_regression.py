"""Regression MLPs with Gaussian noise and Gaussian weight priors: energy, gradient, trajectory.

The energy a sampler sees (Neal 1993 eqs. 2 and 7, MacKay 1992):

    E(w) = tau * S(w) + c + sum_i prec_i w_i^2 / 2,    S(w) = sum_n |f(x_n, w) - y_n|^2 / 2

with ``tau`` the noise precision (1/sigma^2), ``c = (N K / 2) ln(2 pi / tau)`` the Gaussian's
normalising constant for N cases of K outputs (so ``tau S + c = -ln p(D|w, tau)`` exactly), and
``prec_i`` the per-parameter prior precisions *already multiplied by the caller's scale* (the
temperature T when only the likelihood is tempered: ``exp(-E/T)`` is then
``p(D|w)^(1/T) p(w|prec)``). The network part is :func:`thermonet.kernels.mlp.loss_and_grad`
with real-valued targets; ``widths`` and ``act`` as there (``act`` may carry
:data:`thermonet.kernels.mlp.HIDDEN_TANH`). With the bit
:data:`thermonet.kernels.mlp_shallow.FEATURE_MAJOR` in ``act`` the network has one hidden
layer, ``x`` and ``y`` are stored feature-major (shapes ``(n_in, n)`` and ``(n_out, n)``) and
the network part is :mod:`thermonet.kernels.mlp_shallow`'s (``partial`` is then unused,
``work`` is that module's scratch).
"""

from __future__ import annotations

import math

from thermonet.kernels import leapfrog as lf
from thermonet.kernels import mlp
from thermonet.kernels import mlp_shallow as shallow
from thermonet.kernels.jit import kernel


@kernel
def data_loss(theta, widths, act, x, y, block, work):
    """``S(w)`` by the kernel ``act`` selects (module docstring)."""
    if act & shallow.FEATURE_MAJOR:
        return shallow.loss(theta, widths, act, x, y, block, work)
    return mlp.loss(theta, widths, act, x, y, block, work)


@kernel
def data_loss_and_grad(theta, widths, act, x, y, block, work, partial, grad):
    """``S(w)`` and its gradient (to ``grad``) by the kernel ``act`` selects."""
    if act & shallow.FEATURE_MAJOR:
        return shallow.loss_and_grad(theta, widths, act, x, y, block, work, grad)
    return mlp.loss_and_grad(theta, widths, act, x, y, block, work, partial, grad)


@kernel
def prior_term(theta, prec):
    """``sum_i prec_i theta_i^2 / 2`` in float64."""
    e = 0.0
    for i in range(theta.shape[0]):
        e += 0.5 * prec[i] * theta[i] * theta[i]
    return e


@kernel
def _energy_blocked(theta, widths, act, x, y, block, work, tau, prec, const):
    return tau * mlp.loss(theta, widths, act, x, y, block, work) + const + prior_term(theta, prec)


@kernel
def _energy_shallow(theta, widths, act, x, y, block, work, tau, prec, const):
    return (tau * shallow.loss(theta, widths, act, x, y, block, work) + const
            + prior_term(theta, prec))


def energy(theta, widths, act, x, y, block, work, tau, prec, const):
    """``E(w)`` above (float64); NaN or inf if the forward pass overflowed.

    This and :func:`energy_and_grad` and :func:`half_sse` choose the network kernel ``act``
    selects here, in Python, so that only that one is compiled (a first robot-arm run compiled
    both, about 7 CPU seconds more); compiled callers use :func:`data_loss_and_grad`."""
    kernel_ = _energy_shallow if act & shallow.FEATURE_MAJOR else _energy_blocked
    return kernel_(theta, widths, act, x, y, block, work, tau, prec, const)


@kernel
def _add_prior(theta, grad, tau, prec):
    """``grad <- tau grad + prec theta``; returns the prior term ``sum prec theta^2 / 2``."""
    ep = 0.0
    for i in range(theta.shape[0]):
        t = theta[i]
        pt = prec[i] * t
        ep += 0.5 * pt * t
        grad[i] = tau * grad[i] + pt
    return ep


@kernel
def energy_and_grad_blocked(theta, widths, act, x, y, block, work, partial, grad, tau, prec,
                            const):
    """:func:`energy_and_grad` with the blocked kernel (:mod:`thermonet.kernels.mlp`) only."""
    s = mlp.loss_and_grad(theta, widths, act, x, y, block, work, partial, grad)
    return tau * s + const + _add_prior(theta, grad, tau, prec)


def energy_and_grad(theta, widths, act, x, y, block, work, partial, grad, tau, prec, const):
    """``E(w)`` and its gradient (written to ``grad``), by the kernel ``act`` selects."""
    kernel_ = (energy_and_grad_shallow if act & shallow.FEATURE_MAJOR
               else energy_and_grad_blocked)
    return kernel_(theta, widths, act, x, y, block, work, partial, grad, tau, prec, const)


@kernel
def energy_and_grad_shallow(theta, widths, act, x, y, block, work, partial, grad, tau, prec,
                            const):
    """:func:`energy_and_grad` with the shallow kernel only (the same bits; without the
    blocked kernel's code a trajectory's step is about 7 % faster, docs/performance.md)."""
    s = shallow.loss_and_grad(theta, widths, act, x, y, block, work, grad)
    return tau * s + const + _add_prior(theta, grad, tau, prec)


def half_sse(theta, widths, act, x, y, block, work):
    """``S(w) = sum |f - y|^2 / 2`` alone (the noise precision's sufficient statistic)."""
    loss = shallow.loss if act & shallow.FEATURE_MAJOR else mlp.loss
    return loss(theta, widths, act, x, y, block, work)


def _make_trajectory(reflect, feature_major):
    def trajectory(theta, p, grad, inv_mass, step, n_steps, half_width, runaway, widths, act,
                   x, y, block, work, partial, tau, prec, const):
        e = math.nan
        n_ref = 0
        if not reflect:
            bounds, im_r, hw_r = lf.runs(inv_mass, half_width, lf.MAX_RUNS)
        lf.kick(p, grad, 0.5 * step)
        if reflect:
            n_ref += lf.drift_reflect(theta, p, inv_mass, step, half_width)
        elif lf.drift_check(theta, p, inv_mass, step, half_width, runaway):
            return e, 1, lf.RUNAWAY, n_ref
        for s in range(n_steps):
            if feature_major:
                e = energy_and_grad_shallow(theta, widths, act, x, y, block, work, partial, grad,
                                            tau, prec, const)
            else:
                e = energy_and_grad_blocked(theta, widths, act, x, y, block, work, partial, grad,
                                            tau, prec, const)
            if not math.isfinite(e):
                return e, s + 1, lf.NON_FINITE, n_ref
            if s == n_steps - 1:
                lf.kick(p, grad, 0.5 * step)
            elif reflect:
                lf.kick(p, grad, step)
                n_ref += lf.drift_reflect(theta, p, inv_mass, step, half_width)
            elif lf.kick_drift_runaway(theta, p, grad, inv_mass, step, half_width, runaway,
                                       bounds, im_r, hw_r):
                return e, s + 2, lf.RUNAWAY, n_ref
        return e, n_steps, lf.OK, n_ref

    return trajectory


def _make_blocked(reflect):
    return _make_trajectory(reflect, False)


def _make_shallow(reflect):
    f = _make_trajectory(reflect, True)
    # its own name, so that its kernels and cache files are not the blocked ones'
    f.__name__ = f.__qualname__ = "trajectory_shallow"
    return f


#: :func:`trajectory` compiled for each wall mode (:func:`thermonet.kernels.leapfrog.by_wall`),
#: with the network kernel ``act`` selects fixed at compile time (a closure constant)
TRAJECTORY = lf.by_wall(_make_blocked)
TRAJECTORY_SHALLOW = lf.by_wall(_make_shallow)


def trajectory(theta, p, grad, inv_mass, step, n_steps, wall, half_width, runaway,
               widths, act, x, y, block, work, partial, tau, prec, const):
    """``n_steps`` velocity-Verlet steps on ``E(w)``, in place, one gradient per step.

    Arguments and return value as :func:`thermonet.kernels.leapfrog.mlp_trajectory` (float64
    only, serial), plus ``tau``, ``prec`` and ``const`` of ``E(w)``.
    """
    kernels = TRAJECTORY_SHALLOW if act & shallow.FEATURE_MAJOR else TRAJECTORY
    return lf.for_wall(kernels, wall)(
        theta, p, grad, inv_mass, step, n_steps, half_width, runaway, widths, act, x, y, block,
        work, partial, tau, prec, const)
