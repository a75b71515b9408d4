"""Analytic test potentials with known thermodynamics, as data-free architectures.

They enter through the same contract as the networks (``thermonet.architectures``), so a
sampler, a replica-exchange run or an evidence calculation can be checked against exact
results, and users can sample their own potential the same way.

====================  ============================================  ========================
name                  E(w)                                          exact at temperature T
====================  ============================================  ========================
``gaussian``          sum k_i (w_i - mu_i)^2 / 2                    <E> = d T / 2,
                                                                    var w_i = T / k_i,
                                                                    log Z = sum ln sqrt(2 pi
                                                                    T / k_i)
``flat``              0 (with a box prior: uniform)                 uniform marginals
``double_well``       sum h (w_i^2 - 1)^2                           1-D quadrature
``gaussian_mixture``  -ln sum_j pi_j exp(-|w - mu_j|^2 / (2 s_j^2)) mode weights (well
                                                                    separated): ∝ pi_j^(1/T)
                                                                    s_j^d; at T = 1 the
                                                                    log integral over a box
                                                                    exactly (erf)
====================  ============================================  ========================
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from thermonet.api import Architecture, Potential
from thermonet.errors import ConfigError
from thermonet.types import FloatArray, IntArray


def _vec(value: Any, n: int, what: str) -> FloatArray:
    arr = np.ascontiguousarray(np.broadcast_to(np.asarray(value, dtype=np.float64), (n,)))
    if not np.all(np.isfinite(arr)):
        raise ConfigError(f"{what} must be finite numbers")
    return arr.copy()


class _DataFree(Architecture):
    """Common part of the analytic targets: no data, fan-in 1 (box half-width = c/2)."""

    uses_data: ClassVar[bool] = False

    def __init__(self, n: int = 2, prior_scale: float | None = None) -> None:
        if not (isinstance(n, (int, np.integer)) and n >= 1):
            raise ConfigError(f"n = {n!r}; expected a positive integer number of dimensions")
        self._n = int(n)
        self.prior_scale = 10.0 if prior_scale is None else float(prior_scale)
        if not self.prior_scale > 0:
            raise ConfigError(f"prior_scale = {prior_scale}; expected > 0")

    @property
    def default_prior_scale(self) -> float:  # type: ignore[override]
        """``c``: the box is ``|w_i| < c/2`` (fan-in 1); 10 unless given."""
        return self.prior_scale

    @property
    def n_params(self) -> int:
        return self._n

    def fan_in(self) -> IntArray:
        return np.ones(self._n, dtype=np.int64)


class GaussianPotential(Potential):
    """``E = sum k_i (w_i - mu_i)^2 / 2``."""

    def __init__(self, stiffness: FloatArray, centre: FloatArray) -> None:
        self.k = stiffness
        self.mu = centre
        self.n_params = stiffness.shape[0]

    def energy(self, theta: FloatArray) -> float:
        d = np.asarray(theta, dtype=np.float64) - self.mu
        return float(0.5 * np.dot(self.k * d, d))

    def energy_and_grad(self, theta: FloatArray, grad_out: FloatArray | None = None
                        ) -> tuple[float, FloatArray]:
        d = np.asarray(theta, dtype=np.float64) - self.mu
        g = self.k * d
        if grad_out is None:
            grad_out = g
        else:
            grad_out[:] = g
        return float(0.5 * np.dot(g, d)), grad_out

    #: the Hessian is known in closed form
    hessian_method = "analytic"

    def hvp(self, theta: FloatArray, v_kp: FloatArray, *, threads: int | None = None
            ) -> FloatArray:
        return np.asarray(v_kp, dtype=np.float64) @ self.hessian(theta).T

    def hessian(self, theta: FloatArray, *, index: Any = None, column_block: int = 128,
                threads: int | None = None) -> FloatArray:
        h = np.diag(np.asarray(self.k, dtype=np.float64))
        if index is not None:
            idx = np.asarray(index, dtype=np.int64)
            h = np.ascontiguousarray(h[np.ix_(idx, idx)])
        return h


class Gaussian(_DataFree):
    """Independent Gaussian wells ``E = sum k_i (w_i - mu_i)^2 / 2``."""

    name: ClassVar[str] = "gaussian"

    def __init__(self, n: int = 2, stiffness: float | Sequence[float] = 1.0,
                 centre: float | Sequence[float] = 0.0, prior_scale: float | None = None
                 ) -> None:
        super().__init__(n, prior_scale)
        self.stiffness = _vec(stiffness, self._n, "stiffness")
        if np.any(self.stiffness <= 0):
            raise ConfigError("stiffness must be positive")
        self.centre = _vec(centre, self._n, "centre")

    def potential(self, data: Any = None, **options: Any) -> GaussianPotential:
        return GaussianPotential(self.stiffness, self.centre)

    def log_z(self, temperature: float) -> float:
        """``ln ∫ exp(-E/T) dw`` over all of R^n."""
        return float(np.sum(0.5 * np.log(2 * np.pi * temperature / self.stiffness)))


class FlatPotential(Potential):
    """``E = 0``: with a box prior, the uniform distribution on the box."""

    def __init__(self, n: int) -> None:
        self.n_params = n

    def energy(self, theta: FloatArray) -> float:
        return 0.0

    def energy_and_grad(self, theta: FloatArray, grad_out: FloatArray | None = None
                        ) -> tuple[float, FloatArray]:
        if grad_out is None:
            grad_out = np.zeros(self.n_params)
        else:
            grad_out[:] = 0.0
        return 0.0, grad_out

    #: the Hessian is known in closed form
    hessian_method = "analytic"

    def hvp(self, theta: FloatArray, v_kp: FloatArray, *, threads: int | None = None
            ) -> FloatArray:
        return np.asarray(v_kp, dtype=np.float64) @ self.hessian(theta).T

    def hessian(self, theta: FloatArray, *, index: Any = None, column_block: int = 128,
                threads: int | None = None) -> FloatArray:
        h = np.zeros((self.n_params, self.n_params))
        if index is not None:
            idx = np.asarray(index, dtype=np.int64)
            h = np.ascontiguousarray(h[np.ix_(idx, idx)])
        return h


class Flat(_DataFree):
    """``E = 0``: with a box prior, the uniform distribution on the box."""

    name: ClassVar[str] = "flat"

    def potential(self, data: Any = None, **options: Any) -> FlatPotential:
        return FlatPotential(self._n)


class DoubleWellPotential(Potential):
    """``E = sum h (w_i^2 - 1)^2``: a double well in every coordinate."""

    def __init__(self, n: int, height: float) -> None:
        self.n_params = n
        self.h = height

    def energy(self, theta: FloatArray) -> float:
        w = np.asarray(theta, dtype=np.float64)
        return float(np.sum(self.h * (w * w - 1.0) ** 2))

    def energy_and_grad(self, theta: FloatArray, grad_out: FloatArray | None = None
                        ) -> tuple[float, FloatArray]:
        w = np.asarray(theta, dtype=np.float64)
        s = w * w - 1.0
        g = 4.0 * self.h * w * s
        if grad_out is None:
            grad_out = g
        else:
            grad_out[:] = g
        return float(np.sum(self.h * s * s)), grad_out


class DoubleWell(_DataFree):
    """``E = sum h (w_i^2 - 1)^2``: minima at ±1, barrier h at 0."""

    name: ClassVar[str] = "double_well"

    def __init__(self, n: int = 1, height: float = 1.0, prior_scale: float | None = None
                 ) -> None:
        super().__init__(n, prior_scale)
        if not height > 0:
            raise ConfigError(f"height = {height}; expected > 0")
        self.height = float(height)

    def potential(self, data: Any = None, **options: Any) -> DoubleWellPotential:
        return DoubleWellPotential(self._n, self.height)


class MixturePotential(Potential):
    """``E = -ln sum_j pi_j exp(-|w - mu_j|^2 / (2 s_j^2))``: a Gaussian mixture."""

    def __init__(self, means: FloatArray, widths: FloatArray, weights: FloatArray) -> None:
        self.means = means            # (J, n)
        self.inv_var = 1.0 / widths**2  # (J,)
        self.log_w = np.log(weights)  # (J,)
        self.n_params = means.shape[1]

    def _terms(self, theta: FloatArray) -> tuple[FloatArray, FloatArray]:
        d = np.asarray(theta, dtype=np.float64)[None, :] - self.means      # (J, n)
        a = self.log_w - 0.5 * self.inv_var * (d * d).sum(axis=1)            # (J,)
        return a, d

    def energy(self, theta: FloatArray) -> float:
        a, _ = self._terms(theta)
        m = a.max()
        return float(-(m + np.log(np.exp(a - m).sum())))

    def energy_and_grad(self, theta: FloatArray, grad_out: FloatArray | None = None
                        ) -> tuple[float, FloatArray]:
        a, d = self._terms(theta)
        m = a.max()
        r = np.exp(a - m)
        s = r.sum()
        r /= s
        g = (r * self.inv_var) @ d
        if grad_out is None:
            grad_out = g
        else:
            grad_out[:] = g
        return float(-(m + np.log(s))), grad_out


class GaussianMixture(_DataFree):
    """Isotropic Gaussian mixture ``E = -ln sum_j pi_j exp(-|w - mu_j|^2 / (2 s_j^2))``.

    Parameters
    ----------
    means : (J, n) nested sequence
    widths : J numbers (s_j)
    weights : J positive numbers (pi_j, normalised here)
    """

    name: ClassVar[str] = "gaussian_mixture"

    def __init__(self, means: Sequence[Sequence[float]] = ((-4.0,), (4.0,)),
                 widths: Sequence[float] | float = 0.5,
                 weights: Sequence[float] | None = None,
                 prior_scale: float | None = None) -> None:
        mu = np.atleast_2d(np.asarray(means, dtype=np.float64))
        super().__init__(mu.shape[1], prior_scale)
        j = mu.shape[0]
        self.means = np.ascontiguousarray(mu)
        self.widths = _vec(widths, j, "widths")
        w = np.ones(j) if weights is None else _vec(weights, j, "weights")
        if np.any(self.widths <= 0) or np.any(w <= 0):
            raise ConfigError("mixture widths and weights must be positive")
        self.weights = w / w.sum()

    def potential(self, data: Any = None, **options: Any) -> MixturePotential:
        return MixturePotential(self.means, self.widths, self.weights)

    def mode_weights(self, temperature: float) -> FloatArray:
        """Probability of each mode at temperature T, for well-separated modes:
        ``∝ pi_j^(1/T) s_j^n`` (each mode's Gaussian integral of ``exp(-E/T)``)."""
        logw = np.log(self.weights) / temperature + self.n_params * np.log(self.widths)
        logw -= logw.max()
        w = np.exp(logw)
        return w / w.sum()

    def component_log_integrals(self, half_width: float | Sequence[float] | None = None
                                ) -> FloatArray:
        """``ln [pi_j ∫_box exp(-|w - mu_j|^2 / (2 s_j^2)) dw]`` for every component j, exactly
        (a product of erf differences), over the box ``|w_i| < a_i`` (default: the prior box,
        ``a_i = prior_scale / 2``). For well-separated components this is the integral of
        ``exp(-E)`` over the basin of mode j: what thermodynamic integration from that mode
        measures."""
        a = _vec(self.prior_scale / 2 if half_width is None else half_width, self._n,
                 "half_width")
        out = np.log(self.weights)
        for j, s in enumerate(self.widths):
            for i in range(self._n):
                lo, hi = (-a[i] - self.means[j, i]) / s, (a[i] - self.means[j, i]) / s
                mass = 0.5 * (math.erf(hi / math.sqrt(2.0)) - math.erf(lo / math.sqrt(2.0)))
                out[j] += math.log(s * math.sqrt(2 * math.pi) * mass)
        return out

    def log_integral(self, half_width: float | Sequence[float] | None = None) -> float:
        """``ln ∫_box exp(-E(w)) dw`` at T = 1, exactly: the log-sum-exp of
        :meth:`component_log_integrals` (``exp(-E)`` is the sum of the components)."""
        c = self.component_log_integrals(half_width)
        m = float(c.max())
        return m + math.log(float(np.exp(c - m).sum()))
