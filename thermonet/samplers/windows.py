"""HMC transitions with accept/reject windows (Neal 1994) and the momentum they leave.

A trajectory of ``L`` leapfrog steps has ``L + 1`` states, indexed 0..L. The start state is put
at an offset ``s`` drawn uniformly from 0..W-1, so ``s`` steps are run backwards from it and
``L - s`` forwards. The *reject window* is states 0..W-1, the *accept window* states L+1-W..L.
With ``F_A`` and ``F_R`` the sums of ``exp(-H_j/T)`` over the two windows, the accept window is
chosen with probability ``min(1, F_A/F_R)``, and a state within the chosen window with
probability proportional to ``exp(-H_j/T)``. This satisfies detailed balance (Neal 1994; with
W = 1 it is ordinary HMC).

Momentum after the transition, for partial momentum refresh (Horowitz 1991): a state from the
accept window keeps its momentum; a state from the reject window has it negated. (Derivation:
a move to accept-window state j pairs, under detailed balance, with the reversed trajectory
started from (q_j, -p_j); a move within the reject window pairs with the same trajectory. So
the kernel that maps to ``(q_j, -p_j)`` for accept moves and ``(q_j, p_j)`` for reject moves is
reversible; composing it with the always-valid negation of p gives the rule above, which for
W = 1 is Horowitz's "negate on rejection".)

A state whose energy is not finite, or that ran beyond the runaway guard or ends outside the
box, has weight 0; the trajectory is not continued past a divergence in that direction (the
same states fail from every start in the reject window, so the rule is reversible).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from thermonet.kernels import leapfrog as lf
from thermonet.types import FloatArray


class _Recorder:
    """States of the two windows: position, momentum, gradient, energy and ``H``."""

    def __init__(self, n: int, n_states: int) -> None:
        self.theta = np.empty((n_states, n))
        self.p = np.empty((n_states, n))
        self.grad = np.empty((n_states, n))
        self.energy = np.full(n_states, math.nan)
        self.h = np.full(n_states, math.inf)

    def put(self, slot: int, theta: FloatArray, p: FloatArray, grad: FloatArray, e: float,
            k: float, ok: bool) -> None:
        self.theta[slot] = theta
        self.p[slot] = p
        self.grad[slot] = grad
        self.energy[slot] = e
        self.h[slot] = e + k if ok and math.isfinite(e) else math.inf


def windowed_transition(sampler: Any, theta0: FloatArray, e0: float, grad0: FloatArray,
                        p0: FloatArray, dt: float, n_steps: int, window: int,
                        rng: np.random.Generator
                        ) -> tuple[FloatArray, float, FloatArray, FloatArray, bool, float, int]:
    """One windowed transition from ``(theta0, p0)``.

    Returns ``(theta, energy, grad, p, accepted, log_ratio, n_steps_done)``: the chosen state,
    its momentum after the rule above, whether the accept window was chosen, and
    ``ln(F_A/F_R)``. Draws from ``rng``: one uniform (offset), one (window), one (state).
    """
    pot = sampler.potential
    n = theta0.shape[0]
    w = max(1, min(int(window), (n_steps + 1) // 2))
    big_l = n_steps
    t = sampler.temperature
    im, hw, wall, runaway = sampler.inv_mass, sampler.half_width, sampler._wall, \
        sampler.config.runaway
    s = min(int(rng.random() * w), w - 1)
    rec = _Recorder(n, 2 * w)

    def slot(idx: int) -> int:          # reject window -> 0..w-1, accept window -> w..2w-1
        return idx if idx < w else idx - (big_l + 1 - w) + w

    def in_window(idx: int) -> bool:
        return idx < w or idx >= big_l + 1 - w

    def ok_at(theta: FloatArray) -> bool:
        return wall == lf.WALL_REFLECT or not lf.beyond(theta, hw, 1.0)

    k0 = float(lf.kinetic(p0, im))
    rec.put(slot(s), theta0, p0, grad0, e0, k0, ok_at(theta0))
    done = 0
    # backwards: s steps with negated momentum, recorded with the momentum turned back
    th, p, g = theta0.copy(), -p0, grad0.copy()
    for idx in range(s - 1, -1, -1):
        e, _, status, _ = pot.trajectory(th, p, g, im, dt, 1, wall, hw, runaway)
        done += 1
        if status != lf.OK or not math.isfinite(e):
            break
        rec.put(slot(idx), th, -p, g, e, float(lf.kinetic(p, im)), ok_at(th))
    # forwards: single steps inside the windows, one compiled stretch between them
    th, p, g = theta0.copy(), p0.copy(), grad0.copy()
    idx = s
    while idx < big_l:
        # one step inside a window, else up to the accept window's first state
        m = 1 if in_window(idx + 1) else big_l + 1 - w - idx
        e, _, status, _ = pot.trajectory(th, p, g, im, dt, m, wall, hw, runaway)
        done += m
        idx += m
        if status != lf.OK or not math.isfinite(e):
            break
        if in_window(idx):
            rec.put(slot(idx), th, p, g, e, float(lf.kinetic(p, im)), ok_at(th))
    h_min = float(np.min(rec.h))
    if not math.isfinite(h_min):
        h_min = 0.0
    wts = np.exp(-(rec.h - h_min) / t)
    f_r, f_a = float(np.sum(wts[:w])), float(np.sum(wts[w:]))
    log_ratio = (math.log(f_a) if f_a > 0 else -math.inf) - math.log(f_r)
    accept = math.log(rng.random()) < log_ratio
    lo = w if accept else 0
    cum = np.cumsum(wts[lo:lo + w])
    j = lo + min(int(np.searchsorted(cum, rng.random() * cum[-1], side="right")), w - 1)
    p_out = rec.p[j].copy() if accept else -rec.p[j]
    return (rec.theta[j].copy(), float(rec.energy[j]), rec.grad[j].copy(), p_out, bool(accept),
            float(log_ratio), done)
