"""Step-size adaptation a sampler plugin can reuse: the bracket search and dual averaging.

The searches drive a sampler-specific measurement through a callable, so a sampler decides
what "the acceptance at step size dt" means (HMC: extra trajectories from the current state; a
sampler with persistent momenta: a side chain) and the search itself is written once.

* :func:`bracket_search`: the paper code's multiplicative search (Baldock & Marzari 2019,
  Sec. 3.3.1: the step size is adapted to keep the acceptance in a window), with a round cap.
* :func:`dual_averaging`: Nesterov dual averaging of log dt (Hoffman & Gelman 2014, Alg. 5;
  gamma = 0.05, t0 = 10, kappa = 0.75) over a side chain.

Adaptation along the chain itself (warm-up only, as Stan does) is a pure update of a small
state, so the sampler or the engine owns the loop and can checkpoint between transitions:

* :class:`DualAveraging`: the state (plain numbers);
* :func:`dual_averaging_start`, :func:`dual_averaging_update`, :func:`dual_averaging_step_size`
  (dt for the next transition) and :func:`dual_averaging_final` (the averaged dt to freeze);
* :func:`warmup_windows`: Stan's window lengths; dual averaging restarts at each boundary.

After the adaptation, a rate measured at the frozen dt over many transitions can correct dt in
one step: :func:`corrected_step_size`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import NamedTuple

from thermonet.errors import ConfigError

#: smallest step size either search returns
DT_FLOOR = 1e-50

# Hoffman & Gelman (2014) Sec. 3.2.1 constants, also Stan's and NumPyro's defaults
DA_GAMMA = 0.05
DA_T0 = 10.0
DA_KAPPA = 0.75
# gamma of the refinement windows after the first (see thermonet.samplers.hmc.HMC.warm_up):
# with Stan's 0.05 and mu = log(10 dt) at every restart, the frozen dt of 3 x 200 warm-up
# transitions gave 0.67-0.90 acceptance for a 0.65 target on Gaussians; the damped refinement
# (gamma = 1) gives 0.61-0.70 (figures in docs/samplers.md)
DA_GAMMA_REFINE = 1.0


class DualAveraging(NamedTuple):
    """State of Nesterov dual averaging of log dt (Hoffman & Gelman 2014, Alg. 5).

    Plain numbers only, so a checkpoint can store it field by field.
    """

    mu: float          #: shrinkage point, log(10 dt0)
    log_dt: float      #: log dt of the next transition
    log_dt_bar: float  #: the iterate average: log of the dt to freeze
    h_bar: float       #: running average of target - acceptance
    n_updates: int     #: updates so far (m)
    gamma: float = DA_GAMMA  #: how far log dt may move from mu (larger: less)


def dual_averaging_start(step_size: float, *, shrink: float = 10.0,
                         gamma: float = DA_GAMMA) -> DualAveraging:
    """A fresh dual-averaging state around ``step_size``.

    ``mu = log(shrink * dt)``: Stan's 10 explores larger steps first; a restart from a dt that
    is already close uses ``shrink = 1`` and a larger ``gamma``.
    """
    log_dt = math.log(step_size)
    return DualAveraging(math.log(shrink * step_size), log_dt, 0.0, 0.0, 0, float(gamma))


def dual_averaging_update(state: DualAveraging, accept_prob: float,
                          target: float) -> DualAveraging:
    """One dual-averaging update with the acceptance probability of the last transition.

    ``accept_prob`` is ``min(1, exp(log a))`` of the transition that used
    :func:`dual_averaging_step_size` (:func:`acceptance_probability`).
    """
    m = state.n_updates + 1
    w = 1.0 / (m + DA_T0)
    h_bar = (1 - w) * state.h_bar + w * (target - accept_prob)
    log_dt = state.mu - math.sqrt(m) / state.gamma * h_bar
    eta = m ** -DA_KAPPA
    log_dt_bar = eta * log_dt + (1 - eta) * state.log_dt_bar
    return DualAveraging(state.mu, log_dt, log_dt_bar, h_bar, m, state.gamma)


def dual_averaging_step_size(state: DualAveraging, step_size_max: float) -> float:
    """The dt of the next transition: ``exp(log_dt)`` clipped to ``[DT_FLOOR, step_size_max]``."""
    return float(min(max(math.exp(min(state.log_dt, 700.0)), DT_FLOOR), step_size_max))


def dual_averaging_final(state: DualAveraging, step_size_max: float) -> float:
    """The averaged dt to freeze after warm-up (the start dt if there was no update)."""
    log_dt = state.log_dt_bar if state.n_updates else state.log_dt
    return float(min(max(math.exp(min(log_dt, 700.0)), DT_FLOOR), step_size_max))


def warmup_windows(n: int) -> list[int]:
    """Stan's warm-up windows for ``n`` transitions: lengths summing to ``n``.

    An initial buffer (75), doubling windows from 25 and a terminal buffer (50), scaled to
    15 % / 75 % / 10 % when ``n`` < 150, as Stan does; dual averaging restarts at every
    boundary from the dt learnt so far, so early far-from-typical transitions do not weigh on
    the final dt. ``n`` < 20: one window.
    """
    if n < 20:
        return [n] if n > 0 else []
    init, term, base = 75, 50, 25
    if init + base + term > n:
        init, term = int(0.15 * n), int(0.1 * n)
        base = n - init - term
    windows = [init]
    rest, w = n - init - term, base
    while rest > 0:
        if rest < 3 * w:        # the next, doubled window would not fit: this one takes all
            w = rest
        windows.append(w)
        rest -= w
        w *= 2
    windows.append(term)
    return windows


def acceptance_probability(log_accept_ratio: float) -> float:
    """``min(1, exp(log a))``; 0 for a non-finite (diverged) ratio."""
    if not math.isfinite(log_accept_ratio):
        return 0.0
    return min(1.0, math.exp(min(log_accept_ratio, 0.0)))


#: the most a measured correction changes dt by (either way)
CORRECTION_MAX = 4.0
#: the range of the acceptance law's order a secant may give (else the default order)
ORDER_RANGE = (1.0, 6.0)
#: the smallest |ln(dt1/dt0)| from which the order is fitted (closer points: too noisy)
ORDER_MIN_LOG_STEP = 0.1


def _law_z(rate: float, n_transitions: float) -> float:
    """``Phi^-1(a/2)`` (< 0) of a rate kept half a transition away from 0 and 1."""
    n = max(float(n_transitions), 1.0)
    a = min(max(float(rate), 0.5 / n), 1.0 - 0.5 / n)
    return statistics.NormalDist().inv_cdf(a / 2.0)


def corrected_step_size(step_size: float, rate: float, target: float, n_transitions: float,
                        *, order: float = 2.0) -> float:
    """The step size whose acceptance rate is ``target``, from ``rate`` measured at
    ``step_size`` over ``n_transitions`` transitions.

    Uses the law of HMC's acceptance in high dimension, ``a = 2 Phi(-c dt**order)`` (Beskos,
    Pillai, Roberts, Sanz-Serna & Stuart 2013; ``order = 2`` for a fixed number of leapfrog
    steps, whose energy error is O(dt^2)): ``c`` is solved from the measurement and dt from
    the target, ``dt' = dt (Phi^-1(target/2) / Phi^-1(rate/2)) ** (1/order)``. The rate is kept
    half a transition away from 0 and 1 and the change within a factor
    :data:`CORRECTION_MAX`, so a rung that accepted everything or nothing moves by a bounded
    step.
    """
    if not 0.0 < target < 1.0:
        raise ConfigError(f"target acceptance = {target!r}; expected 0 < target < 1")
    inv = statistics.NormalDist().inv_cdf
    factor = (inv(target / 2.0) / _law_z(rate, n_transitions)) ** (1.0 / order)
    factor = min(max(factor, 1.0 / CORRECTION_MAX), CORRECTION_MAX)
    return float(step_size * factor)


def law_order(earlier: tuple[float, float, float], later: tuple[float, float, float],
              default: float = 2.0) -> float:
    """The order p of the acceptance law ``a = 2 Phi(-c dt**p)`` through two measurements
    ``(dt, rate, n_transitions)``: the slope of ``ln(-Phi^-1(a/2))`` against ``ln dt``.

    Away from the asymptotic regime the acceptance falls faster than dt^2 (near a stiff
    direction's stability limit the energy error grows steeply), so a correction with p = 2
    overshoots; the secant through two rounds follows the real curve. ``default`` when the two
    step sizes are closer than :data:`ORDER_MIN_LOG_STEP` in ln dt (the slope would be noise)
    or the slope falls outside :data:`ORDER_RANGE` (noise, or a non-monotone curve).
    """
    (dt0, a0, n0), (dt1, a1, n1) = earlier, later
    step = math.log(dt1 / dt0)
    if abs(step) < ORDER_MIN_LOG_STEP:
        return float(default)
    p = (math.log(-_law_z(a1, n1)) - math.log(-_law_z(a0, n0))) / step
    lo, hi = ORDER_RANGE
    return float(p) if math.isfinite(p) and lo <= p <= hi else float(default)


def bracket_search(rate_at: Callable[[float], float], step_size: float,
                   window: tuple[float, float], *, factor: float, max_rounds: int,
                   step_size_max: float) -> float:
    """The step size whose measured acceptance rate lies in ``window``.

    Each round measures ``rate_at(dt)``. dt is multiplied by ``factor`` (< 1) when the rate is
    below the window and divided by it when above; when two successive rates bracket the
    window, the dt whose rate was closer to the window's centre is kept. The search stops
    after ``max_rounds`` rounds, at :data:`DT_FLOOR` or at ``step_size_max``.
    """
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor < 1:
        raise ConfigError(f"adaptation factor = {factor!r}; expected 0 < factor < 1")
    lo, hi = window
    mid = 0.5 * (lo + hi)
    dt = min(step_size, step_size_max)
    dt_prev = rate_prev = None
    for _ in range(max_rounds):
        rate = rate_at(dt)
        if lo <= rate <= hi:
            return dt
        if rate_prev is not None and min(rate, rate_prev) < lo and max(rate, rate_prev) > hi:
            assert dt_prev is not None  # set together with rate_prev
            return dt if abs(rate - mid) < abs(rate_prev - mid) else dt_prev
        dt_prev, rate_prev = dt, rate
        dt = dt * factor if rate < lo else dt / factor
        if dt < DT_FLOOR:
            return DT_FLOOR
        if dt > step_size_max:
            return step_size_max
    return dt


def dual_averaging(advance: Callable[[float], float], step_size: float, target: float,
                   n: int, *, step_size_max: float) -> float:
    """Dual averaging of log dt towards the acceptance probability ``target``.

    ``advance(dt)`` moves a side chain one update with step size dt and returns that update's
    acceptance probability (:func:`acceptance_probability`); it is called ``n`` times. Returns
    the averaged step size, clipped to ``[DT_FLOOR, step_size_max]``.
    """
    state = dual_averaging_start(step_size)
    for _ in range(n):
        alpha = advance(min(math.exp(state.log_dt), step_size_max))
        state = dual_averaging_update(state, alpha, target)
    return float(min(max(math.exp(state.log_dt_bar), DT_FLOOR), step_size_max))


__all__ = ["DA_GAMMA", "DA_GAMMA_REFINE", "DA_KAPPA", "DA_T0", "DT_FLOOR", "DualAveraging",
           "acceptance_probability", "bracket_search", "dual_averaging", "dual_averaging_final",
           "dual_averaging_start", "dual_averaging_step_size", "dual_averaging_update",
           "warmup_windows"]
