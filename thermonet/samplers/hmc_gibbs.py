"""HMC for the weights, Gibbs sampling for the hyperparameters, persistent momenta.

The scheme of Neal (1996) and Rasmussen (1996, Sec. 2.2): each transition

1. draws every hyperparameter of the potential's :meth:`hyper_model` (group precisions, noise
   precision) from its exact Gamma conditional given the weights, at the sampler's temperature,
   and a three-level prior's top-level mean by one slice update
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

Step sizes per group (``step_size_scaling = "prior"``) or per noise level (``"noise"``)
-------------------------------------------------------------------------------------
Neal's heuristic (Neal 1996, Sec. 3.5; his FBM software): the step for a weight of group g is
``dt_g = step_size * sigma_g``, ``sigma_g = 1/sqrt(scale_g prec_g)`` the group's current prior
width, so ``step_size`` is a global factor in units of the prior widths. Leapfrog with steps
``dt sigma_i`` is leapfrog with step dt and masses ``m_i = 1/sigma_i^2`` (Neal 2011, Sec.
4.1), which is how it is done here: the masses are ``m_i = m0_i scale_g prec_g`` (m0 the
configured masses; parameters outside every group keep m0), set after each Gibbs update, so
they change only *between* trajectories, never within one. ``"noise"`` does the same with
masses ``m_i = m0_i tau`` (every step ``step_size / sqrt(tau)``): when the likelihood dominates,
its curvature grows with the noise precision tau, and a dt frozen at warm-up freezes the chain
once tau has grown (the robot arm with 3 hidden units, docs/results.md).

Why that is exact. Write the momenta in standard form ``u = p / sqrt(m(h) T)``. The target is
``p(w, h | D, T) N(u; 0, I)``: u is independent of (w, h) and its law does not involve h.
The Gibbs update of h given w therefore leaves it invariant *if u is carried unchanged*,
i.e. ``p <- p sqrt(m(h_new)/m(h_old))``; the partial refresh keeps ``N(u; 0, I)``; and an HMC
trajectory at fixed h is reversible for ``p(w|h, D, T) N(p; 0, m(h) T)``, and the map p <-> u
at fixed h is linear with a constant Jacobian, which cancels in the Metropolis ratio. Were p
kept unchanged across a change of masses (not rescaled), the Gibbs conditional of h would have
to include the factor ``N(p; 0, m(h) T)``, which the Gamma conditionals ignore: the chain would
be biased unless the momenta were drawn afresh (``persistence = 0``).
``tests/samplers/test_regression_step_sizes.py`` checks both: the chain with rescaling keeps a known
hyperprior marginal, the one without does not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np

from thermonet.api import Proposal, as_theta, settings
from thermonet.api.hyper import (
    draw_gamma,
    group_conditional,
    noise_conditional,
    slice_top,
    top_conditional,
)
from thermonet.errors import ConfigError
from thermonet.kernels import leapfrog as lf
from thermonet.kernels import momenta as draw
from thermonet.samplers.hmc import HMC, HMCConfig, HMCInfo
from thermonet.samplers.windows import windowed_transition
from thermonet.types import FloatArray

STEP_SIZE_SCALINGS = ("none", "prior", "noise")


@dataclass(frozen=True)
class GibbsHMCConfig(HMCConfig):
    """Settings: those of :class:`~thermonet.samplers.hmc.HMCConfig`, plus the following.

    Attributes
    ----------
    persistence : float
        alpha in [0, 1): the momentum's share kept at each refresh (0.95 in Rasmussen 1996).
    fixed_hyper_transitions : int
        Transitions at the start with the hyperparameters held at their initial values.
    step_size_scaling : {"none", "prior", "noise"}
        "prior": the step of each weight group is ``step_size`` times the group's current
        prior width (Neal's heuristic; masses set between trajectories, module docstring);
        ``step_size`` is then a factor of order 0.01-0.3. "noise": every step is
        ``step_size`` times the current noise level ``1/sqrt(tau)`` (masses ``m0 tau``), so
        that dt follows the data term's curvature as the noise precision changes; needs an
        unknown noise level. "none" (default): one dt for all.
    """

    persistence: float = 0.0
    fixed_hyper_transitions: int = 0
    step_size_scaling: str = "none"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.step_size_scaling not in STEP_SIZE_SCALINGS:
            raise ConfigError(f"step_size_scaling = {self.step_size_scaling!r}; expected one "
                              f"of {STEP_SIZE_SCALINGS} (\"prior\": per-group steps "
                              "step_size x the group's prior width, Neal's heuristic; "
                              "\"noise\": steps step_size x the noise level)")
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
    recorded_fields: ClassVar[tuple[str, ...]] = ("hyper",)
    Config: ClassVar[type] = GibbsHMCConfig
    State: ClassVar[type] = GibbsHMCState
    Info: ClassVar[type] = HMCInfo

    def __init__(self, potential: Any, **kwargs: Any) -> None:
        super().__init__(potential, **kwargs)
        # this sampler sets the hyperparameters of its own copy of the potential
        self.potential = potential.copy()
        make = getattr(self.potential, "hyper_model", None)
        self.hyper_model = make() if make is not None else None
        #: the configured masses; with step_size_scaling = "prior" or "noise" the working
        #: masses are these times scale_g prec_g per group, or times tau (set by _apply)
        self.base_masses = self.masses.copy()
        hm = self.hyper_model
        mode = self.config.step_size_scaling
        self._scaling = mode if (
            hm is not None and ((mode == "prior" and len(hm.groups) > 0)
                                or (mode == "noise" and hm.noise is not None))) else "none"
        if mode == "noise" and self._scaling == "none":
            raise ConfigError("step_size_scaling = 'noise' needs an unknown noise level (a "
                              "noise precision among the hyperparameters); this model has "
                              "none: use 'prior' or 'none', or drop architecture.noise_std")

    def group_masses(self, hyper: FloatArray) -> FloatArray:
        """The masses for ``hyper``: with "prior", ``m0_i scale_g prec_g`` in group g
        (``m0_i`` elsewhere), so that the step of group g is ``step_size`` times its prior
        width; with "noise", ``m0_i tau`` for every parameter."""
        m = self.base_masses.copy()
        if self._scaling == "prior":
            assert self.hyper_model is not None
            for g, grp in enumerate(self.hyper_model.groups):
                m[grp.index] *= grp.scale * hyper[g]
        elif self._scaling == "noise":
            assert self.hyper_model is not None
            m *= hyper[len(self.hyper_model.groups)]
        return m

    def momentum_factor(self, old: FloatArray, new: FloatArray) -> Any:
        """``sqrt(m(new)/m(old))``: what carries the momenta across a change of masses from
        hyperparameters ``old`` to ``new`` (module docstring); 1 without scaling."""
        if self._scaling == "none":
            return 1.0
        return np.sqrt(self.group_masses(new) / self.group_masses(old))

    def _apply(self, hyper: FloatArray) -> None:
        if self.hyper_model is not None:
            self.potential.set_hyperparameters(hyper, self.temperature)
        if self._scaling != "none":
            self.set_masses(self.group_masses(hyper))

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

    def with_temperature(self, temperature: float) -> GibbsHMC:
        """The same sampler at another T (with the configured masses, not the working ones)."""
        return type(self)(self.potential, prior=self.prior, temperature=temperature,
                          masses=self.base_masses, config=self.config)

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
            a, b = group_conditional(hm.group_prior(i, out), w.size, float(np.dot(w, w)),
                                     grp.scale)
            out[i] = draw_gamma(a, b, rng)
        if hm.noise is not None:
            a, b = noise_conditional(hm.noise, hm.n_residuals,
                                     self.potential.half_sse(theta), self.temperature)
            out[len(hm.groups)] = draw_gamma(a, b, rng)
        for j, top in enumerate(hm.tops):
            i = hm.top_offset + j
            c, b, d = top_conditional(top, top.member_precisions(theta, out))
            out[i] = math.exp(slice_top(c, b, d, math.log(out[i]), rng))
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
        draw.momenta(rng, self.momentum_scale, self.inv_mass, noise)
        alpha = c.persistence
        carried = state.momentum
        if alpha > 0 and hyper is not state.hyper:
            carried = carried * self.momentum_factor(state.hyper, hyper)
        p = alpha * carried + math.sqrt(1.0 - alpha * alpha) * noise \
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

    def propose(self, state: Any, rng: np.random.Generator) -> Proposal:
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
