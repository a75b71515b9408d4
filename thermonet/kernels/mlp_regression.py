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
``work`` is that module's scratch). Each network has its own compiled kernels
(:data:`SHALLOW`, :data:`BLOCKED`; :func:`kernels_for` picks them from ``act``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from thermonet.kernels import leapfrog as lf
from thermonet.kernels import mlp
from thermonet.kernels import mlp_shallow as shallow
from thermonet.kernels.jit import kernel


class RegressionModel(NamedTuple):
    """The network, its data and the terms of ``E(w)``: the ``model`` of :func:`energy`,
    :func:`energy_and_grad` and :func:`trajectory` (kernels take ``tuple(model)``; the first
    seven fields are the ``net`` of :func:`data_loss_and_grad`)."""

    widths: np.ndarray
    act: int
    x: np.ndarray
    y: np.ndarray
    block: int
    work: np.ndarray
    partial: np.ndarray
    tau: float
    prec: np.ndarray
    const: float


@kernel
def data_loss_and_grad(theta, net, grad):
    """``S(w)`` and its gradient (to ``grad``) by the kernel ``act`` selects; ``net`` is
    ``(widths, act, x, y, block, work, partial)``."""
    widths, act, x, y, block, work, partial = net
    if act & shallow.FEATURE_MAJOR:
        return shallow.loss_and_grad(theta, widths, act, x, y, block, work, grad)
    return mlp.loss_and_grad(theta, (widths, act, x, y, block), work, partial, grad)


@kernel
def prior_term(theta, prec):
    """``sum_i prec_i theta_i^2 / 2`` in float64."""
    e = 0.0
    for i in range(theta.shape[0]):
        e += 0.5 * prec[i] * theta[i] * theta[i]
    return e


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


# Each network kernel has its own energy, gradient and trajectory kernels: a runtime test of
# ``act`` would compile both networks into every caller, and a run uses one (the shallow
# network alone is about 7 CPU s of a cold start, docs/performance.md).

@kernel
def _half_sse_blocked(theta, widths, act, x, y, block, work):
    return mlp.loss(theta, (widths, act, x, y, block), work)


@kernel
def _energy_blocked(theta, model):
    widths, act, x, y, block, work, _, tau, prec, const = model
    s = mlp.loss(theta, (widths, act, x, y, block), work)
    return tau * s + const + prior_term(theta, prec)


@kernel
def _energy_shallow(theta, model):
    widths, act, x, y, block, work, _, tau, prec, const = model
    s = shallow.loss(theta, widths, act, x, y, block, work)
    return tau * s + const + prior_term(theta, prec)


# ``(E, E)``: the gradient contract of the trajectory kernels
# (:func:`thermonet.kernels.leapfrog.trajectory_kernels`), and ``energy_and_grad`` from Python
# (its first element); one kernel for both, not a wrapper around a second one, which cost
# about 1.5 CPU s more to compile

@kernel
def _gradient_blocked(theta, grad, model):
    widths, act, x, y, block, work, partial, tau, prec, const = model
    s = mlp.loss_and_grad(theta, (widths, act, x, y, block), work, partial, grad)
    e = tau * s + const + _add_prior(theta, grad, tau, prec)
    return e, e


@kernel
def _gradient_shallow(theta, grad, model):
    widths, act, x, y, block, work, _, tau, prec, const = model
    s = shallow.loss_and_grad(theta, widths, act, x, y, block, work, grad)
    e = tau * s + const + _add_prior(theta, grad, tau, prec)
    return e, e


def _half_sse_shallow(theta, widths, act, x, y, block, work):
    # S(w) through the gradient kernel, which a run compiles anyway, with tau = 1, no prior
    # and no constant: its energy is then S(w) bit for bit as the forward kernel sums it (the
    # same residuals, added in the same order). A forward-only kernel was one more compile at
    # a first run (about 4 CPU s); the gradient costs a few forward passes, once per Gibbs
    # update against a trajectory's hundreds.
    scratch = np.empty(theta.shape[0])
    model = (widths, act, x, y, block, work, scratch, 1.0, np.zeros(theta.shape[0]), 0.0)
    return _gradient_shallow(theta, scratch, model)[0]


class NetworkKernels(NamedTuple):
    """The compiled kernels of one network kernel: ``energy(theta, model)``,
    ``gradient(theta, grad, model) -> (E, E)`` (the gradient to ``grad``),
    ``half_sse(theta, widths, act, x, y, block, work)`` and the trajectory per wall mode
    (:func:`thermonet.kernels.leapfrog.for_wall`)."""

    energy: Any
    gradient: Any
    half_sse: Any
    trajectory: dict[int, Any]


BLOCKED = NetworkKernels(_energy_blocked, _gradient_blocked, _half_sse_blocked,
                         lf.trajectory_kernels("regression_trajectory", _gradient_blocked))
SHALLOW = NetworkKernels(_energy_shallow, _gradient_shallow, _half_sse_shallow,
                         lf.trajectory_kernels("regression_trajectory_shallow",
                                               _gradient_shallow))


def kernels_for(act: int) -> NetworkKernels:
    """:data:`SHALLOW` if ``act`` carries :data:`thermonet.kernels.mlp_shallow.FEATURE_MAJOR`,
    else :data:`BLOCKED`."""
    return SHALLOW if act & shallow.FEATURE_MAJOR else BLOCKED


def energy(theta, model):
    """``E(w)`` above (float64); NaN or inf if the forward pass overflowed."""
    return kernels_for(model[1]).energy(theta, tuple(model))


def energy_and_grad(theta, grad, model):
    """``E(w)`` and its gradient (written to ``grad``)."""
    return kernels_for(model[1]).gradient(theta, grad, tuple(model))[0]


def half_sse(theta, widths, act, x, y, block, work):
    """``S(w) = sum |f - y|^2 / 2`` alone (the noise precision's sufficient statistic)."""
    return kernels_for(act).half_sse(theta, widths, act, x, y, block, work)


def trajectory(theta, p, grad, dyn, wall, model):
    """``dyn.n_steps`` velocity-Verlet steps on ``E(w)``, in place, one gradient per step.

    Arguments and return value as :func:`thermonet.kernels.leapfrog.mlp_trajectory` (float64
    only, serial), with ``model`` a :class:`RegressionModel`.
    """
    kernels = kernels_for(model[1]).trajectory
    e, _, n_done, status, n_ref = lf.for_wall(kernels, wall)(theta, p, grad, tuple(dyn),
                                                             tuple(model))
    return e, n_done, status, n_ref
