"""Step-size adaptation a sampler plugin can reuse: the bracket search and dual averaging.

Both drive a sampler-specific measurement through a callable, so a sampler decides what "the
acceptance at step size dt" means (HMC: extra trajectories from the current state; a sampler
with persistent momenta: a side chain) and the search itself is written once.

* :func:`bracket_search`: the paper code's multiplicative search (Baldock & Marzari 2019,
  Sec. 3.3.1: the step size is adapted to keep the acceptance in a window), with a round cap.
* :func:`dual_averaging`: Nesterov dual averaging of log dt (Hoffman & Gelman 2014, Alg. 5;
  gamma = 0.05, t0 = 10, kappa = 0.75).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from thermonet.errors import ConfigError

#: smallest step size either search returns
DT_FLOOR = 1e-50


def acceptance_probability(log_accept_ratio: float) -> float:
    """``min(1, exp(log a))``; 0 for a non-finite (diverged) ratio."""
    if not math.isfinite(log_accept_ratio):
        return 0.0
    return min(1.0, math.exp(min(log_accept_ratio, 0.0)))


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
    mu = math.log(10 * step_size)
    log_dt = math.log(step_size)
    log_dt_bar, h_bar = 0.0, 0.0
    for m in range(1, n + 1):
        alpha = advance(min(math.exp(log_dt), step_size_max))
        w = 1.0 / (m + 10.0)
        h_bar = (1 - w) * h_bar + w * (target - alpha)
        log_dt = mu - math.sqrt(m) / 0.05 * h_bar
        eta = m ** -0.75
        log_dt_bar = eta * log_dt + (1 - eta) * log_dt_bar
    return float(min(max(math.exp(log_dt_bar), DT_FLOOR), step_size_max))


__all__ = ["DT_FLOOR", "acceptance_probability", "bracket_search", "dual_averaging"]
