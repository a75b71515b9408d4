"""HMC for the weights, Gibbs sampling for the hyperparameters, persistent momenta.

The scheme of Neal (1996) and Rasmussen (1996, Sec. 2.2): each transition

1. draws every hyperparameter of the potential's :meth:`hyper_model` (group precisions, noise
   precision) from its exact Gamma conditional given the weights, at the sampler's temperature
   (:mod:`thermonet.api.hyper`; skipped during the first ``fixed_hyper_transitions``
   transitions, Rasmussen's initial phase with the hyperparameters held fixed);
2. refreshes the momenta partially, ``p <- alpha p + sqrt(1 - alpha^2) n`` with
   ``n ~ N(0, m T)`` (Horowitz 1991; ``alpha = persistence``, 0: a full refresh);
3. runs one HMC trajectory on the weights, with accept/reject windows if ``window > 1``
   (:mod:`thermonet.samplers.windows`); on rejection the momenta are negated, so that with
   persistence the chain stays exact.

Each step leaves ``p(w, p, h | D, T) ∝ p(D|w,h)^(1/T) p(w|h) p(h) N(p; 0, mT)`` invariant.
The state carries the momenta and hyperparameters, so a resumed run continues bit for bit.
For a potential without :meth:`hyper_model` the sampler is HMC with persistence and windows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np

from thermonet.api import as_theta, settings
from thermonet.api.hyper import draw_gamma, group_conditional, noise_conditional
from thermonet.kernels import leapfrog as lf
from thermonet.samplers.hmc import HMC, HMCConfig, HMCInfo
from thermonet.samplers.windows import windowed_transition
from thermonet.types import FloatArray


@dataclass(frozen=True)
class GibbsHMCConfig(HMCConfig):
    """Settings: those of :class:`~thermonet.samplers.hmc.HMCConfig`, plus the following.

    Attributes
    ----------
    persistence : float
        alpha in [0, 1): the momentum's share kept at each refresh (0.95 in Rasmussen 1996).
    fixed_hyper_transitions : int
        Transitions at the start with the hyperparameters held at their initial values.
    """

    persistence: float = 0.0
    fixed_hyper_transitions: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        settings.check_real(self, "hmc-gibbs", "persistence", lo=0.0, lo_open=False, hi=1.0,
                            expected="a number in [0, 1), e.g. 0.95")
        settings.check_int(self, "hmc-gibbs", "fixed_hyper_transitions", minimum=0,
                           expected="an integer >= 0")


class GibbsHMCState(NamedTuple):
    """Everything the next transition needs (checkpointed field by field)."""

    theta: FloatArray        #: (n_params,) weights
    energy: float            #: E(theta) at the current hyperparameters
    grad: FloatArray         #: dE/dtheta
    step_size: float         #: dt
    momentum: FloatArray     #: (n_params,) persistent momenta
    hyper: FloatArray        #: hyperparameters in the order of hyper_model().names()
    n_done: int              #: transitions done (for fixed_hyper_transitions)


class GibbsHMC(HMC):
    """HMC with Gibbs-sampled hyperparameters, persistence and windows (module docstring)."""

    name: ClassVar[str] = "hmc-gibbs"
    Config: ClassVar[type] = GibbsHMCConfig
    State: ClassVar[type] = GibbsHMCState
    Info: ClassVar[type] = HMCInfo

    def __init__(self, potential: Any, **kwargs: Any) -> None:
        super().__init__(potential, **kwargs)
        # this sampler sets the hyperparameters of its own copy of the potential
        self.potential = potential.copy()
        hm = getattr(self.potential, "hyper_model", None)
        self.hyper_model = hm() if hm is not None else None

    def _apply(self, hyper: FloatArray) -> None:
        if self.hyper_model is not None:
            self.potential.set_hyperparameters(hyper, self.temperature)

    def init(self, theta0: FloatArray, step_size: float | None = None,  # type: ignore[override]
             hyper: Any = None) -> GibbsHMCState:
        """State at ``theta0`` with the potential's initial hyperparameters (or ``hyper``) and
        zero momenta (the first refresh then draws them afresh times sqrt(1 - alpha^2))."""
        theta = as_theta(theta0, self.potential.n_params).copy()
        if self.hyper_model is None:
            h = np.empty(0)
        elif hyper is None:
            h = np.asarray(self.potential.arch.initial_hyper(), dtype=np.float64)
        else:
            h = np.array(hyper, dtype=np.float64)
        self._apply(h)
        e, g = self.potential.energy_and_grad(theta)
        dt = self.config.step_size if step_size is None else float(step_size)
        n = theta.shape[0]
        return GibbsHMCState(theta, float(e), np.array(g, dtype=np.float64), dt,
                             np.zeros(n), h, 0)

    def gibbs(self, theta: FloatArray, hyper: FloatArray, rng: np.random.Generator
              ) -> FloatArray:
        """Hyperparameters drawn from their conditionals given ``theta`` (groups in order,
        then the noise precision)."""
        hm = self.hyper_model
        out = hyper.copy()
        if hm is None:
            return out
        for i, grp in enumerate(hm.groups):
            w = theta[grp.index]
            a, b = group_conditional(grp.prior, w.size, float(np.dot(w, w)), grp.scale)
            out[i] = draw_gamma(a, b, rng)
        if hm.noise is not None:
            a, b = noise_conditional(hm.noise, hm.n_residuals,
                                     self.potential.half_sse(theta), self.temperature)
            out[len(hm.groups)] = draw_gamma(a, b, rng)
        return out

    def step(self, state: GibbsHMCState, rng: np.random.Generator  # type: ignore[override]
             ) -> tuple[GibbsHMCState, HMCInfo]:
        c = self.config
        hyper = state.hyper
        energy, grad = state.energy, state.grad
        if self.hyper_model is not None and state.n_done >= c.fixed_hyper_transitions:
            hyper = self.gibbs(state.theta, state.hyper, rng)
        self._apply(hyper)
        if hyper is not state.hyper:
            e, g = self.potential.energy_and_grad(state.theta)
            energy, grad = float(e), np.array(g)
        n = state.theta.shape[0]
        noise = np.empty(n)
        lf.draw_momenta(rng, self._p_scale, self.inv_mass, noise)
        alpha = c.persistence
        p = alpha * state.momentum + math.sqrt(1.0 - alpha * alpha) * noise \
            if alpha > 0 else noise
        dt, n_leapfrog = self.trajectory_length(state.step_size, rng)
        if c.window > 1:
            theta, e1, g1, p1, accepted, log_a, done = windowed_transition(
                self, state.theta, energy, grad, p, dt, n_leapfrog, c.window, rng)
            divergent = not math.isfinite(e1)
            d_h = e1 - energy
        else:
            theta, p1, g1 = state.theta.copy(), p.copy(), grad.copy()
            k0 = float(lf.kinetic(p, self.inv_mass))
            e1, done, status, _ = self.potential.trajectory(
                theta, p1, g1, self.inv_mass, dt, n_leapfrog, self._wall, self.half_width,
                c.runaway)
            divergent = status != lf.OK or not math.isfinite(e1)
            in_box = self._wall == lf.WALL_REFLECT or not lf.beyond(theta, self.half_width, 1.0)
            d_h = math.inf if divergent else (e1 + float(lf.kinetic(p1, self.inv_mass))) - (
                energy + k0)
            log_a = -d_h / self.temperature if in_box and not divergent else -math.inf
            accepted = bool(math.log(rng.random()) < log_a)
            if not accepted:
                theta, e1, g1, p1 = state.theta, energy, grad, -p
        info = HMCInfo(bool(accepted), float(log_a), float(d_h), energy, float(e1),
                       bool(divergent), True, int(done), 0, dt)
        new = GibbsHMCState(theta, float(e1), g1, state.step_size, p1, hyper,
                            int(state.n_done) + 1)
        return new, info

    def propose(self, state: Any, rng: np.random.Generator) -> Any:
        """HMC's proposal at the state's hyperparameters (used by step-size adaptation)."""
        hyper = getattr(state, "hyper", None)
        if hyper is not None:
            self._apply(hyper)
        return super().propose(state, rng)

    def state_energy(self, state: Any) -> float:
        """``E(theta)`` at the state's hyperparameters and this sampler's temperature."""
        self._apply(state.hyper)
        return float(self.potential.energy(state.theta))

    def swap_energy(self, state: Any) -> float:
        """The likelihood energy ``-ln p(D|w, tau)`` at the state's noise precision: the only
        term the temperature divides (module docstring of :mod:`thermonet.api.hyper`). Without
        hyperparameters, the whole energy."""
        if self.hyper_model is None:
            return float(state.energy)
        self._apply(state.hyper)
        return float(self.potential.likelihood_energy(state.theta))

    def take_configuration(self, state: Any, donor: Any, donor_temperature: float) -> Any:
        """The donor's configuration: weights and hyperparameters travel together, the momenta
        rescaled by sqrt(T/T_donor) (so ``p^2/(m T)`` is unchanged and the swap's Jacobians
        cancel). The energy and gradient are recomputed here, because the prior term of ``E``
        is multiplied by the slot's temperature; this slot keeps its step size and count."""
        f = math.sqrt(self.temperature / donor_temperature)
        out = donor._replace(step_size=state.step_size, momentum=donor.momentum * f,
                             n_done=state.n_done)
        if self.hyper_model is None:
            return out
        self._apply(donor.hyper)
        e, g = self.potential.energy_and_grad(donor.theta)
        return out._replace(energy=float(e), grad=np.array(g, dtype=np.float64))
