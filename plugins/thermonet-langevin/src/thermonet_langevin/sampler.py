"""Stochastic dynamics with partial momentum refresh, made exact (generalised HMC).

Neal (1993, Sec. 2.3) samples ``exp(-H/T)``, ``H = E(w) + sum p_i^2 / 2 m_i``, by alternating
leapfrog steps with a partial refresh of the momenta (his eq. 16),

    p <- alpha p + sqrt(1 - alpha^2) xi,        xi_i ~ N(0, m_i T),

which leaves the Gaussian ``N(0, m T)`` invariant. With ``alpha`` close to 1 the momentum
persists over many steps, so the walker keeps moving in one direction instead of diffusing
(the "random walk" of Langevin dynamics is suppressed), at one gradient per update. Uncorrected,
the discretised dynamics is biased at finite step size. Horowitz (1991, "A generalized guided
Monte Carlo algorithm") removes the bias: each update is

1. the partial refresh above (``alpha = persistence``);
2. ``L = n_leapfrog`` velocity-Verlet steps from ``(w, p)`` to ``(w', p')``;
3. a Metropolis test: accept ``(w', p')`` with probability ``min(1, exp(-(H' - H)/T))`` if
   ``w'`` is inside the prior box; otherwise stay at ``w`` **with the momentum negated**,
   ``p <- -p``.

Why the negation: step 2 + 3 is Metropolis-Hastings with the deterministic proposal
``(w, p) -> (w', -p')``, an involution (leapfrog is reversible) that preserves volume, followed
by the flip ``p -> -p``, which leaves ``N(0, m T)`` invariant. On acceptance the two sign
changes cancel and the walker keeps moving forward; on rejection only the flip remains, so the
walker reverses. Both pieces leave ``exp(-E/T) prior(w) N(p; 0, m T)`` invariant, and so does
the refresh: the chain is exact for any ``alpha`` in [0, 1), any step size and any L. Keeping
``p`` instead of ``-p`` on rejection would bias the chain whenever ``alpha > 0``. With
``alpha = 0`` the refresh is a full resampling and the update is exactly the paper's HMC
(Algorithm 1); this implementation then draws the same random numbers in the same order as
``thermonet``'s built-in HMC and produces the same chain bit for bit.

A non-finite energy, or a trajectory beyond ``runaway`` box half-widths (``wall =
"endpoint"``), is a rejected, recorded divergence (never an exception). Both criteria are
symmetric under time reversal of the trajectory, so rejecting on them keeps detailed balance.

References
----------
R. M. Neal, "Bayesian learning via stochastic dynamics", NIPS 5 (1993), Sec. 2.3.
A. M. Horowitz, Phys. Lett. B 268, 247 (1991).
R. M. Neal, "MCMC using Hamiltonian dynamics", Handbook of MCMC (2011), Sec. 5.3 (partial
momentum refreshment) and Sec. 5.1 (walls).
Y. Sugita and Y. Okamoto, Chem. Phys. Lett. 314, 141 (1999) (momentum rescaling on exchange).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np

from thermonet.api import Sampler, adaptation, as_theta
from thermonet.errors import ConfigError
from thermonet.kernels import leapfrog as lf
from thermonet.types import FloatArray

WALLS = {"endpoint": lf.WALL_NONE, "reflect": lf.WALL_REFLECT}
PRECISIONS = ("float64", "mixed")
ADAPT_METHODS = ("original", "dual-averaging")


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and \
        math.isfinite(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


@dataclass(frozen=True)
class StochasticDynamicsConfig:
    """Settings of :class:`StochasticDynamics`.

    Attributes
    ----------
    step_size : float
        Initial dt (0.1).
    n_leapfrog : int
        L, velocity-Verlet steps per update (1: Neal's stochastic dynamics, one gradient per
        update; larger L gives longer trajectories between Metropolis tests).
    persistence : float
        alpha in ``p <- alpha p + sqrt(1 - alpha^2) xi``, in [0, 1) (0.9). 0 is plain HMC;
        Neal (1993) used 0.999. The momentum decorrelates after about ``1 / (1 - alpha^2)``
        updates, i.e. over a time ``~ L dt / (1 - alpha^2)``.
    wall : {"endpoint", "reflect"}
        "endpoint": unbounded dynamics, a proposal outside the box is rejected (and the
        momentum negated, so the walker bounces off the wall). "reflect": momenta are reflected
        at the walls inside the trajectory (Neal 2011, Sec. 5.1).
    runaway : float
        With "endpoint", a trajectory reaching ``runaway`` box half-widths stops early and is
        rejected as divergent (10).
    precision : {"float64", "mixed"}
        "mixed": float32 gradients drive the dynamics, the end-point energy entering the
        Metropolis test is recomputed in float64 (only potentials with a float32 path benefit).
    accept_window : tuple of float
        Target acceptance range of the step-size adaptation ((0.85, 0.95)). Higher than HMC's
        (0.6, 0.7): every rejection reverses the momentum and undoes the persistence, so
        stochastic dynamics wants rare rejections (Neal 1993 aimed at about 10%).
    adapt_method : {"original", "dual-averaging"}
        "original": the multiplicative bracket search of thermonet's HMC (the paper code's
        ``UpdateDt``). "dual-averaging": Nesterov dual averaging (Hoffman & Gelman 2014).
    adapt_trajectories : int
        Updates per acceptance estimate of "original" (50; an update is cheap, L = 1), or a
        fifth of the number of dual-averaging updates. Both methods measure the acceptance on
        a discarded side chain of the sampler's own dynamics.
    adapt_max_rounds : int
        Cap on the rounds of the "original" search (200).
    step_size_max : float or None
        Upper bound of dt; None: the median box half-width, or unbounded without a box.
    """

    step_size: float = 0.1
    n_leapfrog: int = 1
    persistence: float = 0.9
    wall: str = "endpoint"
    runaway: float = 10.0
    precision: str = "float64"
    accept_window: tuple[float, float] = (0.85, 0.95)
    adapt_method: str = "original"
    adapt_trajectories: int = 50
    adapt_max_rounds: int = 200
    step_size_max: float | None = None

    def __post_init__(self) -> None:
        if not (_is_real(self.step_size) and self.step_size > 0):
            raise ConfigError(f"step_size = {self.step_size!r}; expected dt > 0")
        if not (_is_int(self.n_leapfrog) and self.n_leapfrog >= 1):
            raise ConfigError(f"n_leapfrog = {self.n_leapfrog!r}; expected an integer >= 1")
        if not (_is_real(self.persistence) and 0 <= self.persistence < 1):
            raise ConfigError(f"persistence = {self.persistence!r}; expected alpha with "
                              "0 <= alpha < 1 (0 is plain HMC; Neal 1993 used 0.999)")
        if self.wall not in WALLS:
            raise ConfigError(f"wall = {self.wall!r}; expected one of {sorted(WALLS)}")
        if not (_is_real(self.runaway) and self.runaway > 1):
            raise ConfigError(f"runaway = {self.runaway!r}; expected a factor > 1")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"precision = {self.precision!r}; expected one of {PRECISIONS}")
        try:
            lo, hi = self.accept_window
            ok = _is_real(lo) and _is_real(hi) and 0 < lo < hi < 1
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise ConfigError(f"accept_window = {self.accept_window!r}; expected "
                              "0 < low < high < 1, e.g. (0.85, 0.95)")
        object.__setattr__(self, "accept_window", (float(lo), float(hi)))
        if self.adapt_method not in ADAPT_METHODS:
            raise ConfigError(f"adapt_method = {self.adapt_method!r}; expected one of "
                              f"{ADAPT_METHODS}")
        for key in ("adapt_trajectories", "adapt_max_rounds"):
            value = getattr(self, key)
            if not (_is_int(value) and value >= 1):
                raise ConfigError(f"{key} = {value!r}; expected an integer >= 1")
        if self.step_size_max is not None and not (_is_real(self.step_size_max)
                                                   and self.step_size_max > 0):
            raise ConfigError(f"step_size_max = {self.step_size_max!r}; expected > 0 or None")


class StochasticDynamicsState(NamedTuple):
    """Everything the next update needs; resuming from it (and the generator's state) continues
    the chain bit for bit."""

    theta: FloatArray        #: (n_params,) position
    energy: float            #: E(theta), untempered, summed over the data
    grad: FloatArray         #: (n_params,) dE/dtheta at theta
    momentum: FloatArray     #: (n_params,) persistent momentum p, ~ N(0, m T) in equilibrium
    step_size: float         #: dt (adapted)


class StochasticDynamicsInfo(NamedTuple):
    """Diagnostics of one update."""

    is_accepted: bool
    log_accept_ratio: float  #: -ΔH/T (-inf when the end point is outside the box)
    energy_change: float     #: ΔH = H' - H of the proposal (after the refresh)
    energy_before: float     #: E at the start
    energy_after: float      #: E of the proposal
    is_divergent: bool       #: non-finite energy, or ran beyond the runaway guard
    in_box: bool             #: proposal inside the prior box
    n_steps: int             #: leapfrog steps done (< L if stopped early)
    n_reflections: int       #: wall reflections (wall = "reflect")
    step_size: float         #: dt used
    kinetic_energy: float    #: sum p^2 / 2m of the state's momentum after the update


class StochasticDynamicsProposal(NamedTuple):
    """What :meth:`StochasticDynamics.propose` returns: the fields of
    :class:`thermonet.api.Proposal`, then the momenta."""

    theta: FloatArray        #: (n_params,) the proposed position
    energy: float            #: E there
    grad: FloatArray         #: (n_params,) dE/dtheta there
    info: StochasticDynamicsInfo
    log_u: float             #: log of the uniform draw the decision compared with
    momentum: FloatArray     #: (n_params,) the momentum at the end of the trajectory
    momentum_start: FloatArray  #: (n_params,) the refreshed momentum it started from


class StochasticDynamics(Sampler):
    """Neal's (1993) stochastic dynamics, made exact as Horowitz's generalised HMC.

    One update at temperature T: partial refresh ``p <- alpha p + sqrt(1 - alpha^2) xi``,
    ``xi ~ N(0, m T)``; ``n_leapfrog`` velocity-Verlet steps; accept with probability
    ``min(1, exp(-ΔH/T))`` if the end point is inside the box, else keep the position and
    negate the momentum. Exact for ``exp(-E/T) prior(w)`` (see the module docstring).

    The state carries the momentum, so a chain resumes exactly from its state. :meth:`init`
    starts from ``p = 0`` unless momenta or a generator are given; the momentum distribution
    then relaxes to ``N(0, m T)`` as ``1 - alpha^(2n)`` after n updates, a burn-in like any other.
    """

    name: ClassVar[str] = "thermonet_langevin.sd"
    api_version: ClassVar[int] = 2
    Config: ClassVar[type] = StochasticDynamicsConfig
    State: ClassVar[type] = StochasticDynamicsState
    Info: ClassVar[type] = StochasticDynamicsInfo

    def __init__(self, potential: Any, *, prior: Any = None, temperature: float = 1.0,
                 masses: Any = None, config: Any = None, **settings: Any) -> None:
        super().__init__(potential, prior=prior, temperature=temperature, masses=masses,
                         config=config, **settings)
        c = self.config
        self._wall = WALLS[c.wall]
        self._mixed = c.precision == "mixed"

    # -- the Markov kernel ------------------------------------------------------------------

    def init(self, theta0: FloatArray, step_size: float | None = None,
             momentum: FloatArray | None = None,
             rng: np.random.Generator | None = None) -> StochasticDynamicsState:
        """State at ``theta0`` (energy and gradient evaluated once).

        The momentum is ``momentum`` if given, else a draw from ``N(0, m T)`` with ``rng`` if
        given, else zero (deterministic; replica exchange calls ``init(theta0)``).
        """
        n = self.potential.n_params
        theta = as_theta(theta0, n).copy()
        e, g = self.potential.energy_and_grad(theta)
        dt = self.config.step_size if step_size is None else float(step_size)
        if momentum is not None:
            p = np.array(momentum, dtype=np.float64).reshape(-1)
            if p.shape != (n,) or not np.all(np.isfinite(p)):
                raise ConfigError(f"initial momentum has shape {np.shape(momentum)} or is not "
                                  f"finite; expected {n} finite numbers")
        elif rng is not None:
            p = rng.standard_normal(n) * self.momentum_scale
        else:
            p = np.zeros(n)
        grad = np.ascontiguousarray(g, dtype=np.float64)
        return StochasticDynamicsState(theta, float(e), grad, np.ascontiguousarray(p), dt)

    def refresh(self, momentum: FloatArray, xi: FloatArray, persistence: float) -> FloatArray:
        """``alpha p + sqrt(1 - alpha^2) xi sqrt(m T)`` for standard normals ``xi``."""
        fresh = xi * self.momentum_scale
        if persistence == 0.0:
            return fresh                 # exactly HMC's draw, also if p were not finite
        return persistence * momentum + math.sqrt(1.0 - persistence * persistence) * fresh

    def propose(self, state: StochasticDynamicsState, rng: np.random.Generator
                ) -> StochasticDynamicsProposal:
        """Refresh and one trajectory from ``state``; the Metropolis decision is made.

        Returns a :class:`StochasticDynamicsProposal`: the proposal, the momentum at its end
        and the refreshed momentum it started from. Draws exactly
        ``n_params`` standard normals and then one uniform from ``rng`` (the order of HMC).
        """
        n = state.theta.shape[0]
        p0 = self.refresh(state.momentum, rng.standard_normal(n), self.config.persistence)
        log_u = math.log(rng.random())
        theta = state.theta.copy()
        grad = state.grad.copy()
        p = p0.copy()
        k0 = float(lf.kinetic(p0, self.inv_mass))
        e1, n_done, status, n_ref = self.potential.trajectory(
            theta, p, grad, self.inv_mass, state.step_size, self.config.n_leapfrog, self._wall,
            self.half_width, self.config.runaway, "float32" if self._mixed else "float64")
        divergent = status != lf.OK
        if self._mixed and not divergent:
            e1 = self.potential.energy(theta)        # the Metropolis test on float64 energies
        in_box = self.prior is None or self._wall == lf.WALL_REFLECT or bool(
            np.all(np.abs(theta) < self.half_width))
        k1 = math.nan
        if divergent or not math.isfinite(e1):
            divergent = True
            d_h = math.inf if not math.isnan(e1) else math.nan
            log_a = -math.inf
        else:
            k1 = float(lf.kinetic(p, self.inv_mass))
            d_h = (e1 + k1) - (state.energy + k0)
            log_a = -d_h / self.temperature if in_box else -math.inf
            if math.isnan(log_a):
                log_a, divergent = -math.inf, True
        accepted = bool(log_u < log_a)
        info = StochasticDynamicsInfo(accepted, float(log_a), float(d_h), state.energy,
                                      float(e1), divergent, in_box, int(n_done), int(n_ref),
                                      state.step_size, k1 if accepted else k0)
        return StochasticDynamicsProposal(theta, float(e1), grad, info, log_u, p, p0)

    def step(self, state: StochasticDynamicsState, rng: np.random.Generator
             ) -> tuple[StochasticDynamicsState, StochasticDynamicsInfo]:
        """One update: refresh, trajectory, Metropolis test; momentum negated on rejection."""
        prop = self.propose(state, rng)
        if prop.info.is_accepted:
            return StochasticDynamicsState(prop.theta, prop.energy, prop.grad, prop.momentum,
                                           state.step_size), prop.info
        return state._replace(momentum=np.negative(prop.momentum_start)), prop.info

    # -- replica exchange -------------------------------------------------------------------

    def take_configuration(self, state: StochasticDynamicsState,
                           donor: StochasticDynamicsState,
                           donor_temperature: float) -> StochasticDynamicsState:
        """The donor's configuration with its momentum rescaled by ``sqrt(T / T_donor)``; this
        slot keeps its step size.

        Why this is exact. Replica exchange samples the product over slots k of
        ``exp(-E(w_k)/T_k) prior(w_k) N(p_k; 0, m T_k)``. An exchange of slots j and k applies
        the map ``S: (w_j, p_j, w_k, p_k) -> (w_k, sqrt(T_j/T_k) p_k, w_j, sqrt(T_k/T_j) p_j)``.
        S is an involution (applying it twice restores every component), its Jacobian
        determinant is ``(T_j/T_k)^(n/2) (T_k/T_j)^(n/2) = 1``, and it leaves the Gaussian
        factors unchanged, since ``p_j^2 / (2 m T_j) = (T_k/T_j) p_j^2 / (2 m T_k)``. A
        Metropolis-Hastings move with a deterministic, volume-preserving involution as proposal
        accepts with the ratio of target densities, which is therefore exactly
        ``exp((1/T_j - 1/T_k)(E_j - E_k))``, the rule ``ReplicaExchangeHMC`` applies. So the
        joint chain on (positions, momenta) stays exact, and a momentum in equilibrium at
        ``T_donor`` arrives in equilibrium at T.

        Handing the momenta over unscaled would not be exact: the joint density would change
        by ``exp(-(K_j - K_k)(1/T_k - 1/T_j))`` (K the kinetic energies), which the energy-only
        swap rule ignores, so the hot replica's large momenta would overheat the cold slot.
        Keeping this slot's own momentum
        would also be exact (momenta are independent of positions in the target) but throws
        away the walker's direction of motion, the point of persistence; resampling is not
        possible here without a random stream. Rescaling keeps the direction (as the velocity
        rescaling of replica-exchange molecular dynamics, Sugita & Okamoto 1999).
        """
        scale = math.sqrt(self.temperature / float(donor_temperature))
        return donor._replace(momentum=donor.momentum * scale, step_size=state.step_size)

    # -- step-size adaptation ---------------------------------------------------------------

    def acceptance_rate(self, state: StochasticDynamicsState, rng: np.random.Generator,
                        n: int) -> float:
        """Fraction of ``n`` updates accepted on a side chain started at ``state`` (this
        sampler's own dynamics, persistent momenta; the side chain is discarded)."""
        return self.side_chain(state, rng, n)[0]

    def side_chain(self, state: StochasticDynamicsState, rng: np.random.Generator, n: int
                    ) -> tuple[float, StochasticDynamicsState]:
        accepted = 0
        for _ in range(n):
            state, info = self.step(state, rng)
            accepted += info.is_accepted
        return accepted / n, state

    def adapt(self, state: StochasticDynamicsState, rng: np.random.Generator,
              factor: float = 0.9, **options: Any) -> StochasticDynamicsState:
        """Return ``state`` with a step size tuned to ``accept_window``.

        Uses extra updates on a side chain that is discarded: position and momentum of
        ``state`` are unchanged. ``factor`` is the "original" method's multiplicative step
        (0.1 coarse, 0.9 fine).
        """
        if self.config.adapt_method == "dual-averaging":
            dt = dual_averaging(self, state, rng)
        else:
            dt = bracket_search(self, state, rng, factor)
        return state._replace(step_size=dt)


def bracket_search(sampler: StochasticDynamics, state: StochasticDynamicsState,
                   rng: np.random.Generator, factor: float) -> float:
    """Thermonet's bracket search (:func:`thermonet.api.adaptation.bracket_search`), with the
    acceptance measured along a side chain.

    Unlike HMC's search, which starts every trial trajectory at the current state, the updates
    run on a side chain started at ``state`` and continued from round to round (then
    discarded). With one leapfrog step per update the acceptance from a single position says
    little about the typical set: started near a barrier top (negative curvature), the
    fixed-state estimate accepts a dt that is unstable in the wells, and the chain then sits
    at ~0% acceptance. The side chain averages over the positions the dynamics visits.
    """
    c = sampler.config
    side = state

    def rate_at(dt: float) -> float:
        nonlocal side
        rate, side = sampler.side_chain(side._replace(step_size=dt), rng, c.adapt_trajectories)
        return rate

    return adaptation.bracket_search(rate_at, state.step_size, c.accept_window, factor=factor,
                                     max_rounds=c.adapt_max_rounds,
                                     step_size_max=sampler.step_size_max)


def dual_averaging(sampler: StochasticDynamics, state: StochasticDynamicsState,
                   rng: np.random.Generator) -> float:
    """Dual averaging (:func:`thermonet.api.adaptation.dual_averaging`) over
    ``5 * adapt_trajectories`` updates of the sampler's own dynamics (persistent momenta) on
    a side chain started at ``state``; the side chain is discarded.
    """
    c = sampler.config
    side = state

    def advance(dt: float) -> float:
        nonlocal side
        side, info = sampler.step(side._replace(step_size=dt), rng)
        return adaptation.acceptance_probability(info.log_accept_ratio)

    return adaptation.dual_averaging(advance, state.step_size, 0.5 * sum(c.accept_window),
                                     5 * c.adapt_trajectories,
                                     step_size_max=sampler.step_size_max)
