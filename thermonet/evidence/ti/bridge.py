"""The bridge ``J_lambda = (1 - lambda) E + lambda Q`` between the potential and the reference,
and the HMC chain that samples it."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from thermonet.api import Potential
from thermonet.errors import ConfigError, ConvergenceError
from thermonet.evidence.ti.config import TIConfig
from thermonet.evidence.ti.reference import Reference
from thermonet.types import FloatArray


class BridgePotential(Potential):
    """``J_λ(w) = E0 + (1-λ)(E(w) - E0) + λ Σ k_i (w_i - w0_i)²/2`` around a base potential.

    ``λ`` is the mutable attribute :attr:`lam`. At λ = 0 the energy and gradient are exactly
    the base's; at λ = 1 the base is not evaluated (``J_1`` does not depend on it). Every
    evaluation stores the base energy at the evaluated point in :attr:`last_base_energy`
    (NaN at λ = 1) and is counted in :attr:`n_grad` (gradient evaluations of the base).
    """

    def __init__(self, base: Any, reference: Reference, lam: float = 0.0) -> None:
        if reference.n_params != base.n_params:
            raise ConfigError(f"reference has {reference.n_params} parameters; the potential "
                              f"has {base.n_params}")
        self.base = base
        self.n_params = int(base.n_params)
        self.set_reference(reference)
        self.lam = float(lam)
        self.last_base_energy = math.nan
        self.n_grad = 0
        self.n_energy = 0
        self._g = np.empty(self.n_params)
        self._d = np.empty(self.n_params)

    def set_reference(self, reference: Reference) -> None:
        self.reference = reference
        self.w0 = reference.w0
        self.k = reference.k
        self.e0 = reference.energy0

    def quadratic(self, theta: FloatArray) -> float:
        """``Σ k_i (w_i - w0_i)²/2``."""
        from thermonet.kernels import bridge as kb

        return float(kb.quadratic(np.ascontiguousarray(theta, dtype=np.float64), self.w0,
                                  self.k))

    def base_energy(self, theta: FloatArray) -> float:
        self.n_energy += 1
        return float(self.base.energy(theta))

    def dj_dlambda(self, theta: FloatArray, base_energy: float) -> float:
        """``Σ k_i (w_i - w0_i)²/2 - (E(w) - E0)``."""
        return self.quadratic(theta) - (base_energy - self.e0)

    def energy(self, theta: FloatArray) -> float:
        lam = self.lam
        if lam == 1.0:
            self.last_base_energy = math.nan
            return self.e0 + self.quadratic(theta)
        e = self.base_energy(theta)
        self.last_base_energy = e
        if lam == 0.0:
            return e
        return self.e0 + (1.0 - lam) * (e - self.e0) + lam * self.quadratic(theta)

    def energy_and_grad(self, theta: FloatArray, grad_out: FloatArray | None = None
                        ) -> tuple[float, FloatArray]:
        from thermonet.kernels import bridge as kb

        lam = self.lam
        if grad_out is None:
            grad_out = np.empty(self.n_params)
        if lam == 1.0:
            np.multiply(self.k, np.subtract(theta, self.w0, out=self._d), out=grad_out)
            self.last_base_energy = math.nan
            return self.e0 + self.quadratic(theta), grad_out
        self.n_grad += 1
        if lam == 0.0:
            e, g = self.base.energy_and_grad(theta, grad_out)
            if g is not grad_out:
                grad_out[:] = g
            self.last_base_energy = float(e)
            return float(e), grad_out
        e, g = self.base.energy_and_grad(theta, self._g)
        e = float(e)
        self.last_base_energy = e
        q = kb.bridge_mix(np.ascontiguousarray(theta, dtype=np.float64),
                          np.ascontiguousarray(g, dtype=np.float64), lam, self.w0, self.k,
                          grad_out)
        return self.e0 + (1.0 - lam) * (e - self.e0) + lam * q, grad_out

    def copy(self) -> BridgePotential:
        return BridgePotential(self.base.copy(), self.reference, self.lam)

    def trajectory(self, theta: FloatArray, p: FloatArray, grad: FloatArray,
                   inv_mass: FloatArray, step: float, n_steps: int, wall: int,
                   half_width: FloatArray, runaway: float,
                   precision: str = "float64") -> tuple[float, int, int, int]:
        """One HMC trajectory on ``J_λ``: at λ = 0 the base's own (compiled) trajectory; for
        a base with a compiled :meth:`~thermonet.api.Potential.bridge_trajectory` (the built-in
        MLP, float64) at 0 < λ < 1 that kernel; otherwise the generic Python loop over
        :meth:`energy_and_grad`."""
        if self.lam == 0.0 and isinstance(self.base, Potential) \
                and type(self.base).trajectory is not Potential.trajectory:
            e, n, status, n_ref = self.base.trajectory(theta, p, grad, inv_mass, step, n_steps,
                                                       wall, half_width, runaway, precision)
            self.n_grad += n
            self.last_base_energy = float(e)
            return e, n, status, n_ref
        if 0.0 < self.lam < 1.0 and isinstance(self.base, Potential):
            out = self.base.bridge_trajectory(theta, p, grad, inv_mass, step, n_steps, wall,
                                              half_width, runaway, self.lam, self.w0, self.k,
                                              self.e0, self._g)
            if out is not None:
                j, e, n, status, n_ref = out
                self.n_grad += n
                self.last_base_energy = e
                return j, n, status, n_ref
        return Potential.trajectory(self, theta, p, grad, inv_mass, step, n_steps, wall,
                                    half_width, runaway, precision)


def ti_sampler(bridge: BridgePotential, prior: Any, config: TIConfig, wall: str,
         with_box: bool) -> Any:
    """The chain's sampler: the registry's ``hmc`` with the TI settings (the bridge's
    trajectories and the step-size handling below rely on HMC's settings and state)."""
    from thermonet import registry

    step_max = float(np.median(prior.half_width))
    return registry.load("sampler", "hmc")(
        bridge, prior=prior if with_box else None, temperature=config.temperature,
        n_leapfrog=config.n_leapfrog, step_size=config.step_size, wall=wall,
        step_size_max=step_max)


class Chain:
    """An HMC chain on a bridge that also tracks the base energy at its current point."""

    def __init__(self, sampler: Any, bridge: BridgePotential, theta: FloatArray,
                 step_size: float, jitter: float = 0.0) -> None:
        self.sampler = sampler
        self.jitter = float(jitter)
        self.bridge = bridge
        self.state = sampler.init(theta, step_size)
        self.base_e = bridge.last_base_energy
        if math.isnan(self.base_e):
            self.base_e = bridge.base_energy(self.state.theta)
        self.n_accepted = 0
        self.n_reflections = 0
        self.n_divergent = 0

    def relambda(self, lam: float) -> None:
        """Move to another λ at the same point (energy and gradient recomputed)."""
        self.bridge.lam = float(lam)
        self.state = self.sampler.init(self.state.theta, self.state.step_size)
        if math.isnan(self.bridge.last_base_energy):
            self.base_e = self.bridge.base_energy(self.state.theta)
        else:
            self.base_e = self.bridge.last_base_energy
        if not math.isfinite(self.state.energy):
            raise ConvergenceError(f"J_λ is not finite ({self.state.energy}) at λ = {lam} at "
                                   "the current point; the potential returned NaN/inf there")

    def run(self, rng: np.random.Generator, n: int,
            record: Callable[[], None] | None = None) -> None:
        for _ in range(n):
            if self.jitter:
                dt = self.state.step_size
                jittered = self.state._replace(
                    step_size=dt * (1.0 + self.jitter * (2.0 * rng.random() - 1.0)))
                st, info = self.sampler.step(jittered, rng)
                self.state = st._replace(step_size=dt)
            else:
                self.state, info = self.sampler.step(self.state, rng)
            if info.is_accepted:
                self.n_accepted += 1
                e = self.bridge.last_base_energy
                self.base_e = e if not math.isnan(e) else self.bridge.base_energy(
                    self.state.theta)
            self.n_reflections += info.n_reflections
            self.n_divergent += bool(info.is_divergent)
            if record is not None:
                record()

    def reset_counters(self) -> None:
        self.n_accepted = self.n_reflections = self.n_divergent = 0

    def adapt(self, rng: np.random.Generator, factor: float) -> None:
        self.state = self.sampler.adapt(self.state, rng, factor=factor)
