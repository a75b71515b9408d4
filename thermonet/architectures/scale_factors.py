"""Neal (1993)'s scale-factor parameterisation of the hierarchical regression network.

Neal (1993, Sec. 3) fixed every weight's prior width at one and multiplied each weight by a
scale factor of its category, the scale factors being part of the state HMC moves. Here the
state is ``q = (v, u)``: unit-variance weights v (one per weight) and, per group g, the log
precision ``u_g = ln prec_g``; the network's weights are

    w_i = v_i / sqrt(scale_g exp(u_g))     (i in group g; the output biases: w_i = v_i).

Changing variables from the direct model (w, prec) with ``prec_g ~ Gamma(alpha/2, rate
alpha/(2 mu))`` and ``w_i | prec ~ N(0, 1/(scale_g prec_g))``, the Jacobian of ``w(v)`` cancels
the Gaussian's normalisation and that of ``prec = e^u`` adds ``e^u``, so

    E(q) = L(w(q)) + T [ sum_i pv_i v_i^2 / 2 + sum_g (b e^{u_g} - a u_g) ],

``L = -ln p(D|w, tau)``, ``a = alpha/2``, ``b = alpha/(2 mu)``, ``pv_i`` = 1 (grouped
weights) or ``1/output_bias_std^2``; ``exp(-E/T)`` is then exactly the direct model's
``p(D|w,tau)^(1/T) p(w|prec) p(prec)`` in the new coordinates: the same posterior, sampled
without Gibbs steps for the group precisions (the noise precision, if unknown, is still a
Gibbs-sampled hyperparameter). Gradient:

    dE/dv_i = f_i dL/dw_i + T pv_i v_i,   f_i = dw_i/dv_i,
    dE/du_g = -1/2 sum_{i in g} w_i dL/dw_i + T (b e^{u_g} - a).

Three-level ARD (Rasmussen 1996, Sec. 2.1): the per-input precisions are then Gamma with
Neal's shape ``ard_shape`` and a common mean m, so their terms have ``a = ard_shape/2`` and
``b = ard_shape/(2 m)``. The mean m stays a hyperparameter: the sampler slice-samples it
given the members' precisions ``e^{u_g}`` (:func:`thermonet.api.hyper.top_conditional`; the
Jacobian ``e^u`` does not involve m, so the conditional is that of the direct model), and
:meth:`ScaleFactorPotential.set_hyperparameters` puts the new ``b`` into the energy.

:meth:`ScaleFactorPotential.energy_and_grad` evaluates the map and the chain rule in NumPy
around the direct network's compiled gradient; :meth:`ScaleFactorPotential.trajectory` runs
the whole leapfrog trajectory in one compiled call
(:mod:`thermonet.kernels.mlp_regression_scale`), which the tests check against the NumPy
gradient driven step by step.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from thermonet.api import Potential, as_theta
from thermonet.api.hyper import GammaPrior, HyperModel
from thermonet.errors import ConfigError
from thermonet.kernels import mlp_regression_scale as ks
from thermonet.kernels.leapfrog import Dynamics
from thermonet.types import FloatArray


def scale_factors(group_index: list[Any], group_scale: FloatArray, n_weights: int,
                  u: FloatArray) -> FloatArray:
    """``dw_i/dv_i`` for log precisions ``u``: ``1/sqrt(scale_g e^{u_g})`` in group g, 1 for
    the weights outside every group. An overflowing ``e^u`` gives a factor 0 and an infinite
    prior energy (a rejected proposal), never an exception."""
    f = np.ones(n_weights)
    with np.errstate(over="ignore", divide="ignore"):
        for g, idx in enumerate(group_index):
            f[idx] = 1.0 / np.sqrt(group_scale[g] * np.exp(u[g]))
    return f


class ScaleFactorPotential(Potential):
    """``E(v, u)`` of the module docstring; ``inner`` is the direct network's potential with
    its prior term switched off (it gives ``L(w)`` and ``dL/dw``)."""

    def __init__(self, arch: Any, inner: Any) -> None:
        self.arch = arch
        self.inner = inner
        self.inner.prec[:] = 0.0
        groups = arch.scale_groups()
        self.n_weights = int(inner.n_params)
        self.n_params = self.n_weights + len(groups)
        self.group_index = [idx for _, idx, _ in groups]
        self.group_scale = np.array([s for _, _, s in groups], dtype=np.float64)
        #: group of each weight, -1 outside every group (the compiled trajectory's map)
        self.group_of = np.full(self.n_weights, -1, dtype=np.int64)
        for g, idx in enumerate(self.group_index):
            self.group_of[idx] = g
        #: Gamma shape and rate of each group's precision (set_hyperparameters updates those
        #: under a three-level prior)
        self.a = np.full(len(groups), arch.hyperprior.gamma_shape)
        self.b = np.full(len(groups), arch.hyperprior.gamma_rate)
        self.v_prec = np.ones(self.n_weights)
        self.v_prec[arch.output_bias_index] = 1.0 / arch.output_bias_std ** 2
        self.x, self.y = inner.x, inner.y
        self.n_data, self.n_residuals = inner.n_data, inner.n_residuals
        self.temperature = 1.0
        self._grad_w = np.empty(self.n_weights)
        # scratch of the compiled trajectory
        self._work = np.empty(inner.work_length)
        self._partial = np.empty(self.n_weights)
        self._w = np.empty(self.n_weights)
        self._gw = np.empty(self.n_weights)
        self._f = np.empty(len(groups))
        top = arch.top
        self._top_members = list(top.members) if top is not None else []
        self._top_shape = top.unit_shape if top is not None else 0.0
        if top is not None:
            self.set_top_mean(1.0 / arch.weight_std ** 2)

    # -- the map q -> w ----------------------------------------------------------------------

    def factors(self, u: FloatArray) -> FloatArray:
        """``f_i = dw_i/dv_i``: ``1/sqrt(scale_g e^{u_g})`` in group g, 1 elsewhere."""
        return scale_factors(self.group_index, self.group_scale, self.n_weights, u)

    def weights(self, q: FloatArray) -> FloatArray:
        """The network's weights ``w(q)``."""
        q = as_theta(q, self.n_params, finite=False)
        return np.ascontiguousarray(q[:self.n_weights] * self.factors(q[self.n_weights:]))

    def group_widths(self, q_batch: FloatArray) -> tuple[list[str], FloatArray]:
        """The weight groups' names and, per row of ``q_batch`` (states, shape (n, n_params)),
        each group's width ``1/sqrt(prec_g) = exp(-u_g/2)``: what ``thermonet analyse``
        reports as the group's hyperparameter for the direct parameterisation."""
        q = np.asarray(q_batch, dtype=np.float64).reshape(-1, self.n_params)
        names = [name for name, _, _ in self.arch.scale_groups()]
        return names, np.exp(-0.5 * q[:, self.n_weights:self.n_weights + len(names)])

    # -- hyperparameters: the noise precision and a three-level prior's top mean -------------

    def hyper_model(self) -> HyperModel:
        """No groups (their precisions are in q): the noise precision if unknown, then the
        three-level prior's mean, whose members' log precisions are coordinates of q."""
        return self.arch.hyper_model(self.n_residuals)

    def set_top_mean(self, mean: float) -> None:
        """The three-level prior's mean precision: its members' Gamma rates."""
        prior = GammaPrior(1.0 / math.sqrt(mean), self._top_shape)
        self.a[self._top_members] = prior.gamma_shape
        self.b[self._top_members] = prior.gamma_rate

    def set_hyperparameters(self, hyper: Any, scale: float) -> None:
        """The noise precision (if unknown), the top level's mean (three-level ARD) and the
        temperature T of the prior term."""
        h = np.asarray(hyper, dtype=np.float64)
        unknown = self.arch.noise_prior is not None
        want = int(unknown) + (self.arch.top is not None)
        if h.shape != (want,) or not np.all(np.isfinite(h)) or np.any(h <= 0):
            raise ConfigError(f"hyperparameters {h!r}; expected {want} positive finite "
                              "precisions (the noise precision if unknown, then the "
                              "three-level prior's mean)")
        tau = float(h[0]) if unknown else 1.0 / float(self.arch.noise_std) ** 2
        self.inner.tau = tau
        self.inner.const = 0.5 * self.n_residuals * math.log(2.0 * math.pi / tau)
        if self.arch.top is not None:
            self.set_top_mean(float(h[-1]))
        self.temperature = float(scale)

    def half_sse(self, q: FloatArray) -> float:
        return float(self.inner.half_sse(self.weights(q)))

    def likelihood_energy(self, q: FloatArray) -> float:
        return float(self.inner.likelihood_energy(self.weights(q)))

    # -- the Potential contract --------------------------------------------------------------

    def _prior(self, v: FloatArray, u: FloatArray) -> float:
        with np.errstate(over="ignore"):
            return float(0.5 * np.dot(self.v_prec * v, v)
                         + np.sum(self.b * np.exp(u) - self.a * u))

    def energy(self, q: FloatArray) -> float:
        q = as_theta(q, self.n_params, finite=False)
        v, u = q[:self.n_weights], q[self.n_weights:]
        nll = float(self.inner.energy(self.weights(q)))
        return nll + self.temperature * self._prior(v, u)

    def energy_and_grad(self, q: FloatArray, grad_out: FloatArray | None = None
                        ) -> tuple[float, FloatArray]:
        q = as_theta(q, self.n_params, finite=False)
        if grad_out is None:
            grad_out = np.empty(self.n_params)
        v, u = q[:self.n_weights], q[self.n_weights:]
        f = self.factors(u)
        w = np.ascontiguousarray(v * f)
        nll, gw = self.inner.energy_and_grad(w, self._grad_w)
        t = self.temperature
        # far out (a rejected proposal) the products may overflow: inf/NaN, never a warning
        with np.errstate(over="ignore", invalid="ignore"):
            grad_out[:self.n_weights] = f * gw + t * self.v_prec * v
            for g, idx in enumerate(self.group_index):
                grad_out[self.n_weights + g] = (-0.5 * float(np.dot(w[idx], gw[idx]))
                                                + t * (self.b[g] * np.exp(u[g]) - self.a[g]))
        return float(nll) + t * self._prior(v, u), grad_out

    def trajectory(self, theta: FloatArray, p: FloatArray, grad: FloatArray,
                   inv_mass: FloatArray, step: float, n_steps: int, wall: int,
                   half_width: FloatArray, runaway: float,
                   precision: str = "float64") -> tuple[float, int, int, int]:
        """The whole trajectory in one compiled call (float64; ``precision`` is ignored)."""
        inner = self.inner
        model = ks.ScaleModel(
            self.n_weights, self.group_of, self.group_scale, self.v_prec, self.a, self.b,
            self.temperature, self.arch.widths, inner.kact, inner.kx, inner.ky, inner.block,
            self._work, self._partial, self._w, self._gw, self._f, inner.tau, inner.const)
        e, n, status, n_ref = ks.trajectory(
            theta, p, grad, Dynamics(inv_mass, step, n_steps, half_width, runaway), wall, model)
        return float(e), int(n), int(status), int(n_ref)

    def copy(self) -> ScaleFactorPotential:
        out = ScaleFactorPotential(self.arch, self.inner.copy())
        out.inner.tau, out.inner.const = self.inner.tau, self.inner.const
        out.a[:], out.b[:] = self.a, self.b
        out.temperature = self.temperature
        return out

    def outputs(self, q: FloatArray, x: Any = None) -> FloatArray:
        return np.asarray(self.inner.outputs(self.weights(q), x))
