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

The trajectory runs through the :class:`~thermonet.api.Potential` default (one compiled
gradient call of the direct network per leapfrog step).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from thermonet.api import Potential, as_theta
from thermonet.api.hyper import HyperModel
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
        self.group_scale = np.array([s for _, _, s in groups])
        self.a = arch.hyperprior.gamma_shape
        self.b = arch.hyperprior.gamma_rate
        self.v_prec = np.ones(self.n_weights)
        self.v_prec[arch.output_bias_index] = 1.0 / arch.output_bias_std ** 2
        self.x, self.y = inner.x, inner.y
        self.n_data, self.n_residuals = inner.n_data, inner.n_residuals
        self.temperature = 1.0
        self._grad_w = np.empty(self.n_weights)

    # -- the map q -> w ----------------------------------------------------------------------

    def factors(self, u: FloatArray) -> FloatArray:
        """``f_i = dw_i/dv_i``: ``1/sqrt(scale_g e^{u_g})`` in group g, 1 elsewhere."""
        return scale_factors(self.group_index, self.group_scale, self.n_weights, u)

    def weights(self, q: FloatArray) -> FloatArray:
        """The network's weights ``w(q)``."""
        q = as_theta(q, self.n_params, finite=False)
        return np.ascontiguousarray(q[:self.n_weights] * self.factors(q[self.n_weights:]))

    # -- hyperparameters: only the noise precision (the group precisions are in q) ----------

    def hyper_model(self) -> HyperModel:
        return HyperModel((), self.arch.noise_prior, self.n_residuals)

    def set_hyperparameters(self, hyper: Any, scale: float) -> None:
        """The noise precision (if unknown) and the temperature T of the prior term."""
        h = np.asarray(hyper, dtype=np.float64)
        tau = float(h[0]) if self.arch.noise_prior is not None else \
            1.0 / float(self.arch.noise_std) ** 2
        if not (math.isfinite(tau) and tau > 0):
            from thermonet.errors import ConfigError

            raise ConfigError(f"noise precision {tau!r}; expected a positive finite number")
        self.inner.tau = tau
        self.inner.const = 0.5 * self.n_residuals * math.log(2.0 * math.pi / tau)
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
                                                + t * (self.b * np.exp(u[g]) - self.a))
        return float(nll) + t * self._prior(v, u), grad_out

    def copy(self) -> ScaleFactorPotential:
        out = ScaleFactorPotential(self.arch, self.inner.copy())
        out.inner.tau, out.inner.const = self.inner.tau, self.inner.const
        out.temperature = self.temperature
        return out

    def outputs(self, q: FloatArray, x: Any = None) -> FloatArray:
        return np.asarray(self.inner.outputs(self.weights(q), x))
