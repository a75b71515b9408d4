"""Hamiltonian Monte Carlo at temperature T: the paper's Algorithm 1.

References
----------
Baldock & Marzari, arXiv:1904.04154, Alg. 1 and Sec. 3.3.1; R. M. Neal, "MCMC using
Hamiltonian dynamics", Handbook of MCMC (2011), Secs. 5.1 (walls) and 4.2 (step sizes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np

from thermonet.api import HMCTransition, Proposal, Sampler, adaptation, as_theta, settings
from thermonet.errors import ConfigError
from thermonet.kernels import leapfrog as lf
from thermonet.kernels import momenta as draw
from thermonet.samplers.windows import windowed_transition
from thermonet.types import FloatArray

WALLS = {"endpoint": lf.WALL_NONE, "reflect": lf.WALL_REFLECT}
PRECISIONS = ("float64", "mixed")
ADAPT_METHODS = ("original", "dual-averaging", "chain", "fixed")


@dataclass(frozen=True)
class HMCConfig:
    """Settings of :class:`HMC` (defaults: the paper's and its code's).

    Attributes
    ----------
    n_leapfrog : int
        L, velocity-Verlet steps per trajectory (100).
    step_size : float
        Initial dt (0.1, the original ``dt_initial``).
    wall : {"endpoint", "reflect"}
        "endpoint" (the paper): unbounded dynamics, a proposal whose end point is outside the
        box is rejected. "reflect": momenta are reflected at the walls inside the trajectory
        (Neal 2011 Sec. 5.1), so trajectories never leave the box.
    runaway : float
        With "endpoint", a trajectory reaching ``runaway`` box half-widths stops early and is
        rejected as divergent (10, the original code's guard).
    precision : {"float64", "mixed"}
        "mixed": float32 gradients drive the dynamics, the end-point energy that enters the
        accept/reject decision is recomputed in float64. Only potentials with a float32 path
        (the built-in MLP) benefit; others run in float64.
    accept_window : tuple of float
        Target acceptance range of the step-size adaptation ((0.6, 0.7), the paper's).
    adapt_method : {"original", "dual-averaging", "chain"}
        "original": the paper code's multiplicative bracket search (Baldock & Marzari's released
        code). "dual-averaging": Nesterov dual averaging as in Stan/NumPyro (Hoffman & Gelman
        2014) on a discarded side chain. "chain": dual averaging on the chain's own
        transitions, in Stan's windows (:meth:`HMC.warm_up`); ``adapt`` then *moves* the chain
        by ``warmup_transitions`` transitions, so use it for warm-up only (``adapt_every = 0``)
        and the frozen dt keeps production exact. "fixed": no adaptation, dt stays at
        ``step_size`` (for a set-up whose dt is known, e.g. Rasmussen's recipe on the robot arm,
        where the initial phase's acceptance says nothing about the later one's).
    adapt_trajectories : int
        Trajectories per acceptance estimate of the "original" method (10), or the number of
        dual-averaging trajectories (x 5).
    adapt_max_rounds : int
        Cap on the rounds of the "original" search (the original code had none).
    step_size_max : float or None
        Upper bound of dt; None: the median box half-width (the original ``dt_max``), or
        unbounded without a box.
    step_size_jitter : float
        j in [0, 1): each trajectory uses ``dt * u``, ``u ~ U(1 - j, 1 + j)`` (0: fixed dt).
        Breaks the resonance of a fixed ``L dt`` with the target's periods (Neal 2011,
        Sec. 4.2); exact because u is drawn independently of the state.
    n_leapfrog_jitter : float
        j in [0, 1]: each trajectory runs L' steps, L' uniform on
        ``[max(1, ceil((1 - j) L)), L]`` (0: always L).
    target_accept : float
        Target mean acceptance probability of the "chain" method (0.65).
    warmup_transitions : int
        Chain transitions per ``adapt`` call of the "chain" method (200).
    window : int
        W > 1: accept/reject windows of W states (Neal 1994; :mod:`thermonet.samplers.windows`),
        the accepted state drawn from a window of the trajectory's last W states, the
        rejected one from its first W. 0 or 1 (default): the end point only (Algorithm 1).
        W is capped at (L + 1)/2 for each trajectory.
    """

    n_leapfrog: int = 100
    step_size: float = 0.1
    wall: str = "endpoint"
    runaway: float = 10.0
    precision: str = "float64"
    accept_window: tuple[float, float] = (0.6, 0.7)
    adapt_method: str = "original"
    adapt_trajectories: int = 10
    adapt_max_rounds: int = 200
    step_size_max: float | None = None
    step_size_jitter: float = 0.0
    n_leapfrog_jitter: float = 0.0
    target_accept: float = 0.65
    warmup_transitions: int = 200
    window: int = 0

    def __post_init__(self) -> None:
        if not (isinstance(self.n_leapfrog, (int, np.integer)) and self.n_leapfrog >= 1):
            raise ConfigError(f"n_leapfrog = {self.n_leapfrog!r}; expected an integer >= 1")
        if not (np.isfinite(self.step_size) and self.step_size > 0):
            raise ConfigError(f"step_size = {self.step_size!r}; expected dt > 0")
        if self.wall not in WALLS:
            raise ConfigError(f"wall = {self.wall!r}; expected one of {sorted(WALLS)}")
        if not self.runaway > 1:
            raise ConfigError(f"runaway = {self.runaway!r}; expected a factor > 1")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"precision = {self.precision!r}; expected one of {PRECISIONS}")
        window = self.accept_window
        if (not isinstance(window, (tuple, list)) or len(window) != 2
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                           for v in window)):
            raise ConfigError(f"accept_window = {window!r}; expected two numbers "
                              "0 < low < high < 1, e.g. accept_window = [0.6, 0.7]")
        lo, hi = window
        if not 0 < lo < hi < 1:
            raise ConfigError(f"accept_window = {tuple(self.accept_window)}; expected "
                              "0 < low < high < 1, e.g. (0.6, 0.7)")
        object.__setattr__(self, "accept_window", (float(lo), float(hi)))
        if self.adapt_method not in ADAPT_METHODS:
            raise ConfigError(f"adapt_method = {self.adapt_method!r}; expected one of "
                              f"{ADAPT_METHODS}")
        if self.adapt_trajectories < 1 or self.adapt_max_rounds < 1:
            raise ConfigError("adapt_trajectories and adapt_max_rounds must be >= 1")
        if self.step_size_max is not None and not self.step_size_max > 0:
            raise ConfigError(f"step_size_max = {self.step_size_max!r}; expected > 0 or None")
        settings.check_real(self, "hmc", "step_size_jitter", lo=0.0, lo_open=False, hi=1.0,
                            expected="a number in [0, 1)")
        settings.check_real(self, "hmc", "n_leapfrog_jitter", lo=0.0, lo_open=False, hi=1.0,
                            hi_open=False, expected="a number in [0, 1]")
        settings.check_real(self, "hmc", "target_accept", lo=0.0, hi=1.0,
                            expected="a probability in (0, 1), e.g. 0.65")
        settings.check_int(self, "hmc", "warmup_transitions", minimum=1,
                           expected="an integer >= 1")
        settings.check_int(self, "hmc", "window", minimum=0,
                           expected="an integer >= 0 (0 or 1: no windows)")


class HMCState(NamedTuple):
    """Everything the next HMC step needs."""

    theta: FloatArray        #: (n_params,) position
    energy: float            #: E(theta), untempered, summed over the data
    grad: FloatArray         #: (n_params,) dE/dtheta at theta
    step_size: float         #: dt (adapted)


class HMCInfo(NamedTuple):
    """Diagnostics of one HMC transition."""

    is_accepted: bool
    log_accept_ratio: float  #: -ΔH/T (-inf when the end point is outside the box)
    energy_change: float     #: ΔH = H_n - H_0 of the proposal
    energy_before: float     #: E at the start
    energy_after: float      #: E of the proposal
    is_divergent: bool       #: non-finite energy, or ran beyond the runaway guard
    in_box: bool             #: proposal inside the prior box
    n_steps: int             #: leapfrog steps done (< L if stopped early)
    n_reflections: int       #: wall reflections (wall = "reflect")
    step_size: float         #: dt used


class HMC(Sampler):
    """Hamiltonian Monte Carlo (paper Algorithm 1) at temperature T.

    Momenta ``p ~ N(0, m T)``; L velocity-Verlet steps of length dt on E; accept with
    probability ``min(1, exp(-(H_n - H_0)/T))``, ``H = E + sum p^2/2m``, if the end point is
    strictly inside the box. A proposal with a non-finite energy, or that runs beyond
    ``runaway`` box widths, is a rejected, recorded divergence, never an exception.
    """

    name: ClassVar[str] = "hmc"
    Config: ClassVar[type] = HMCConfig
    State: ClassVar[type] = HMCState
    Info: ClassVar[type] = HMCInfo

    def __init__(self, potential: Any, *, prior: Any = None, temperature: float = 1.0,
                 masses: Any = None, config: Any = None, **settings: Any) -> None:
        super().__init__(potential, prior=prior, temperature=temperature, masses=masses,
                         config=config, **settings)
        c = self.config
        self._wall = WALLS[c.wall]
        self._mixed = c.precision == "mixed"

    # -- the Markov kernel ------------------------------------------------------------------

    def init(self, theta0: FloatArray, step_size: float | None = None) -> HMCState:
        """State at ``theta0`` (energy and gradient evaluated once)."""
        theta = as_theta(theta0, self.potential.n_params).copy()
        e, g = self.potential.energy_and_grad(theta)
        dt = self.config.step_size if step_size is None else float(step_size)
        return HMCState(theta, float(e), np.ascontiguousarray(g, dtype=np.float64), dt)

    def propose(self, state: HMCState, rng: np.random.Generator) -> Proposal:
        """One trajectory from ``state``; returns the proposal and the uniform draw.

        Returns a :class:`~thermonet.api.Proposal` ``(theta, energy, grad, info, log_u)``;
        ``info.is_accepted`` is already decided. Draws from ``rng``, in this order:
        ``n_params`` normals (momenta), one uniform (accept/reject), one uniform if
        ``step_size_jitter`` > 0 and one uniform if ``n_leapfrog_jitter`` > 0; with both at 0
        the stream is the unjittered sampler's.
        """
        n = state.theta.shape[0]
        if isinstance(rng, np.random.Generator):
            # the same normals and generator state as the NumPy line below, no temporaries
            p = np.empty(n)
            k0 = draw.momenta(rng, self.momentum_scale, self.inv_mass, p)
        else:
            p = rng.standard_normal(n) * self.momentum_scale
            k0 = float(lf.kinetic(p, self.inv_mass))
        log_u = math.log(rng.random())
        dt, n_leapfrog = self.trajectory_length(state.step_size, rng)
        theta = state.theta.copy()
        grad = state.grad.copy()
        e1, n_done, status, n_ref = self.potential.trajectory(
            theta, p, grad, self.inv_mass, dt, n_leapfrog, self._wall,
            self.half_width, self.config.runaway, "float32" if self._mixed else "float64")
        divergent = status != lf.OK
        if self._mixed and not divergent:
            e1 = self.potential.energy(theta)        # accept/reject only on float64 energies
        in_box = self.prior is None or self._wall == lf.WALL_REFLECT or not lf.beyond(
            theta, self.half_width, 1.0)
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
        info = HMCInfo(accepted, float(log_a), float(d_h), state.energy, float(e1), divergent,
                       in_box, int(n_done), int(n_ref), dt)
        return Proposal(theta, float(e1), grad, info, log_u)

    def hmc_transition(self) -> HMCTransition | None:
        """:meth:`step` as data (no accept/reject windows), for engines that run it
        themselves; None with windows."""
        c = self.config
        if c.window > 1:
            return None
        return HMCTransition(c.n_leapfrog, c.step_size_jitter, c.n_leapfrog_jitter,
                             self._wall == lf.WALL_REFLECT, c.runaway, self._mixed,
                             self.temperature, self.inv_mass, self.half_width, HMCState)

    def trajectory_length(self, step_size: float, rng: np.random.Generator
                          ) -> tuple[float, int]:
        """The ``(dt, L)`` of one trajectory after the configured jitter (draws from ``rng``).

        The draws depend on nothing but ``rng``, so each (dt, L) is a fixed, reversible,
        volume-preserving map and the Metropolis test stays exact per draw.
        """
        c = self.config
        dt, n = step_size, c.n_leapfrog
        if c.step_size_jitter > 0:
            dt = step_size * (1.0 + c.step_size_jitter * (2.0 * rng.random() - 1.0))
        if c.n_leapfrog_jitter > 0:
            lo = max(1, math.ceil((1.0 - c.n_leapfrog_jitter) * n - 1e-9))
            n = lo + min(int(rng.random() * (n - lo + 1)), n - lo)
        return dt, n

    def step(self, state: HMCState, rng: np.random.Generator) -> tuple[HMCState, HMCInfo]:
        """One HMC transition (Algorithm 1), with windows if ``window`` > 1."""
        if self.config.window > 1:
            return self.windowed_step(state, rng)
        prop = self.propose(state, rng)
        if prop.info.is_accepted:
            return HMCState(prop.theta, prop.energy, prop.grad, state.step_size), prop.info
        return state, prop.info

    def windowed_step(self, state: HMCState, rng: np.random.Generator
                      ) -> tuple[HMCState, HMCInfo]:
        """One transition with accept/reject windows (Neal 1994). Draws from ``rng``: the
        momenta, the jitter draws (if any), then the window's three uniforms."""
        n = state.theta.shape[0]
        p = np.empty(n)
        draw.momenta(rng, self.momentum_scale, self.inv_mass, p)
        dt, n_leapfrog = self.trajectory_length(state.step_size, rng)
        theta, e1, grad, _, accepted, log_r, done = windowed_transition(
            self, state.theta, state.energy, state.grad, p, dt, n_leapfrog, self.config.window,
            rng)
        divergent = not math.isfinite(e1)
        info = HMCInfo(accepted, log_r, e1 - state.energy, state.energy, e1, divergent, True,
                       done, 0, dt)
        return HMCState(theta, e1, grad, state.step_size), info

    # -- step-size adaptation ---------------------------------------------------------------

    def acceptance_rate(self, state: HMCState, rng: np.random.Generator, n: int) -> float:
        """Fraction of ``n`` extra trajectories from ``state`` that would be accepted."""
        return sum(self.propose(state, rng).info.is_accepted for _ in range(n)) / n

    def adapt(self, state: HMCState, rng: np.random.Generator, factor: float = 0.9,
              **options: Any) -> HMCState:
        """Return ``state`` with a step size tuned to the acceptance window.

        Uses extra trajectories that are not part of the chain: the position is unchanged,
        except with ``adapt_method = "chain"``, which runs :meth:`warm_up` and returns the
        chain's state after it. ``factor`` is the "original" method's multiplicative step (0.1
        coarse, 0.9 fine).
        """
        if self.config.adapt_method == "fixed":
            return state
        if self.config.adapt_method == "chain":
            return self.warm_up(state, rng, self.config.warmup_transitions)
        if self.config.adapt_method == "dual-averaging":
            dt = dual_averaging(self, state, rng)
        else:
            dt = bracket_search(self, state, rng, factor)
        return state._replace(step_size=dt)

    def correct_step_size(self, state: HMCState,
                          measured: Sequence[tuple[float, float, float]]) -> HMCState:
        """``state`` with dt moved towards the target acceptance (``target_accept`` for the
        dual-averaging methods, the window's centre for "original") from the last measured
        rate (:func:`thermonet.api.adaptation.corrected_step_size`), with the law's order
        fitted through the last two rounds where they allow it
        (:func:`~thermonet.api.adaptation.law_order`, else 2); unchanged with
        ``adapt_method = "fixed"``."""
        c = self.config
        if c.adapt_method == "fixed" or not measured:
            return state
        target = (c.target_accept if c.adapt_method in ("chain", "dual-averaging")
                  else 0.5 * sum(c.accept_window))
        order = adaptation.law_order(measured[-2], measured[-1]) if len(measured) > 1 else 2.0
        _, rate, n = measured[-1]
        dt = adaptation.corrected_step_size(state.step_size, rate, target, n, order=order)
        return state._replace(step_size=min(dt, self.step_size_max))

    # -- adaptation along the chain (warm-up only) -------------------------------------------

    def warmup_start(self, state: HMCState, *, first: bool = True
                     ) -> adaptation.DualAveraging:
        """A dual-averaging state around ``state.step_size`` for :meth:`HMC.warmup_step`.

        ``first``: Stan's start (mu = log(10 dt), gamma = 0.05); otherwise a refinement from
        a dt that is already close (mu = log dt, gamma = ``DA_GAMMA_REFINE``).
        """
        dt = min(state.step_size, self.step_size_max)
        if first:
            return adaptation.dual_averaging_start(dt)
        return adaptation.dual_averaging_start(dt, shrink=1.0,
                                               gamma=adaptation.DA_GAMMA_REFINE)

    def warmup_step(self, state: HMCState, da: adaptation.DualAveraging,
                    rng: np.random.Generator
                    ) -> tuple[HMCState, adaptation.DualAveraging, HMCInfo]:
        """One warm-up transition of the chain at the dual-averaging dt, and the updated ``da``.

        The transition is an ordinary :meth:`HMC.step` (same draws from ``rng``); ``da`` learns
        from its acceptance probability ``min(1, exp(log a))`` towards ``target_accept``. An
        engine can call this per transition and checkpoint ``da`` (plain numbers) alongside the
        state.
        """
        dt = adaptation.dual_averaging_step_size(da, self.step_size_max)
        state, info = self.step(state._replace(step_size=dt), rng)
        da = adaptation.dual_averaging_update(
            da, adaptation.acceptance_probability(info.log_accept_ratio),
            self.config.target_accept)
        return state, da, info

    def warm_up(self, state: HMCState, rng: np.random.Generator, n: int) -> HMCState:
        """Run ``n`` warm-up transitions adapting dt along the chain; return the state with dt
        frozen at the averaged value.

        Dual averaging restarts at each of Stan's window boundaries
        (:func:`thermonet.api.adaptation.warmup_windows`) from the dt learnt so far: the first
        window as Stan, the later ones as damped refinements (:meth:`warmup_start`), because
        Stan's exploratory restarts freeze a dt whose acceptance overshoots the target. The
        chain moves: these transitions are warm-up, not samples. Draws from ``rng`` only what
        the ``n`` transitions draw.
        """
        return self.warm_up_part(state, rng, n, 0, int(n), None)[0]

    def warm_up_part(self, state: HMCState, rng: np.random.Generator, n: int, start: int,
                     stop: int, da: adaptation.DualAveraging | None
                     ) -> tuple[HMCState, adaptation.DualAveraging | None]:
        """Transitions ``start .. stop - 1`` of :meth:`warm_up` over ``n``, from the
        dual-averaging state ``da`` the part before returned (unused at a window's start)."""
        edges = np.cumsum([0, *adaptation.warmup_windows(int(n))])
        for t in range(int(start), int(stop)):
            w = int(np.searchsorted(edges, t, side="right")) - 1
            if t == edges[w]:
                da = self.warmup_start(state, first=w == 0)
            elif da is None:
                raise ValueError(f"warm-up transition {t} is inside a window: it needs the "
                                 "dual-averaging state of the part before")
            state, da, _ = self.warmup_step(state, da, rng)
            if t + 1 == edges[w + 1]:
                state = state._replace(
                    step_size=adaptation.dual_averaging_final(da, self.step_size_max))
        return state, da

    def adapt_transitions(self) -> int:
        """``warmup_transitions`` with ``adapt_method = "chain"`` (:meth:`adapt_part` splits
        them), else 0."""
        return self.config.warmup_transitions if self.config.adapt_method == "chain" else 0

    def adapt_part(self, state: HMCState, rng: np.random.Generator, start: int, stop: int,
                   carry: FloatArray | None) -> tuple[HMCState, FloatArray | None]:
        """A part of the "chain" warm-up (:meth:`warm_up_part`); ``carry`` is the
        dual-averaging state as six floats."""
        if not self.adapt_transitions():
            return super().adapt_part(state, rng, start, stop, carry)
        da = None if carry is None else adaptation.DualAveraging(
            float(carry[0]), float(carry[1]), float(carry[2]), float(carry[3]),
            int(carry[4]), float(carry[5]))
        state, da = self.warm_up_part(state, rng, self.adapt_transitions(), start, stop, da)
        return state, None if da is None else np.array(da, dtype=np.float64)


def bracket_search(sampler: HMC, state: HMCState, rng: np.random.Generator,
                   factor: float) -> float:
    """The paper code's multiplicative bracket search
    (:func:`thermonet.api.adaptation.bracket_search`).

    Each round estimates the acceptance rate from ``adapt_trajectories`` trajectories that all
    start at the current state with fresh momenta.
    """
    c = sampler.config

    def rate_at(dt: float) -> float:
        return sampler.acceptance_rate(state._replace(step_size=dt), rng, c.adapt_trajectories)

    return adaptation.bracket_search(rate_at, state.step_size, c.accept_window, factor=factor,
                                     max_rounds=c.adapt_max_rounds,
                                     step_size_max=sampler.step_size_max)


def dual_averaging(sampler: HMC, state: HMCState, rng: np.random.Generator) -> float:
    """Dual averaging towards the window's centre (:func:`thermonet.api.adaptation.dual_averaging`).

    Runs ``5 * adapt_trajectories`` extra trajectories on a side chain started at ``state``;
    the side chain is discarded.
    """
    c = sampler.config
    side = state

    def advance(dt: float) -> float:
        nonlocal side
        side = side._replace(step_size=dt)
        prop = sampler.propose(side, rng)
        if prop.info.is_accepted:
            side = HMCState(prop.theta, prop.energy, prop.grad, side.step_size)
        return adaptation.acceptance_probability(prop.info.log_accept_ratio)

    return adaptation.dual_averaging(advance, state.step_size, 0.5 * sum(c.accept_window),
                                     5 * c.adapt_trajectories,
                                     step_size_max=sampler.step_size_max)

