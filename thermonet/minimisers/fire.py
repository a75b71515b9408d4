"""FIRE: the Fast Inertial Relaxation Engine of Bitzek et al. (2006).

Velocity-Verlet dynamics (unit masses) with, after every step, the FIRE update on the
velocity ``v`` and the force ``F = -dE/dw``::

    P = F . v
    if P > 0:
        v = (1 - alpha) v + alpha |v| F / |F|
        if more than N_min steps since P <= 0:
            dt = min(dt * f_inc, dt_max);  alpha = alpha * f_alpha
    else:
        v = 0;  dt = dt * f_dec;  alpha = alpha_start

with the paper's parameters N_min = 5, f_inc = 1.1, f_dec = 0.5, alpha_start = 0.1,
f_alpha = 0.99 and ``dt_max`` about ten times the initial step.

thermonet's additions, from the shared driver :class:`thermonet.api.descent.Descent`: the same
stopping rules (gradient tolerance, step budget, step-size underflow), a step to a non-finite energy
(or, with ``respect_box``, out of the prior box) is undone and treated as ``P <= 0``, and one
gradient evaluation per step.

References
----------
E. Bitzek, P. Koskinen, F. Gähler, M. Moseler and P. Gumbsch, "Structural relaxation made
simple", Phys. Rev. Lett. 97, 170201 (2006).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from thermonet.api.descent import Descent, Walk
from thermonet.api.settings import check_bool, check_int, check_real
from thermonet.errors import ConfigError
from thermonet.types import FloatArray


def _dot(a: FloatArray, b: FloatArray) -> float:
    # einsum, not np.dot: BLAS threading costs ~0.5 ms per call on a busy machine
    return float(np.einsum("i,i->", a, b))


@dataclass(frozen=True)
class FIREConfig:
    """Settings of :class:`FIRE` (defaults: Bitzek et al. 2006).

    Attributes
    ----------
    step_size : float
        Initial time step dt (0.005). > 0.
    dt_max : float
        Largest time step (0.05 = 10 x step_size, Bitzek et al.'s ratio). >= step_size. It must
        stay below the stability limit ``2/sqrt(lambda_max)`` of velocity Verlet: for the
        summed cross-entropy lambda_max grows with the number of training points N (about
        1.9 N at the standard initialisation of M1/M3, limit 0.065 on D500), and a FIRE run
        with too large a dt_max can blow the weights up into a saturated plateau where the
        gradient vanishes at high E. 0.05 is measured to work on D50 and D500
        (docs/minimisers.md); use about 0.015 for D5000.
    n_min : int
        Steps with ``P > 0`` before dt may grow (N_min = 5). >= 0.
    f_inc : float
        dt growth factor (1.1). >= 1.
    f_dec : float
        dt shrink factor when ``P <= 0`` (0.5). In (0, 1).
    alpha_start : float
        Initial and reset velocity-mixing parameter (0.1). In [0, 1].
    f_alpha : float
        alpha shrink factor (0.99). In (0, 1].
    max_steps : int
        Step budget (1000). >= 0.
    grad_tol : float
        Stop when ``max_i |dE/dw_i| < grad_tol`` (1e-4). 0 disables the test. >= 0.
    respect_box : bool
        True: a step leaving the prior box is undone and treated as ``P <= 0`` (needs
        ``prior=``). False (default): the box is ignored.
    dt_min : float
        Stop with reason "step size underflow" when dt falls below this (1e-50). >= 0.
    """

    step_size: float = 0.005
    dt_max: float = 0.05
    n_min: int = 5
    f_inc: float = 1.1
    f_dec: float = 0.5
    alpha_start: float = 0.1
    f_alpha: float = 0.99
    max_steps: int = 1000
    grad_tol: float = 1e-4
    respect_box: bool = False
    dt_min: float = 1e-50

    def __post_init__(self) -> None:
        o = "fire"
        check_real(self, o, "step_size", lo=0.0, expected="a positive finite time step")
        check_real(self, o, "dt_max", lo=0.0, allow_inf=True,
                   expected="a positive number or inf")
        check_int(self, o, "n_min", minimum=0, expected="an integer >= 0")
        check_real(self, o, "f_inc", lo=1.0, lo_open=False, expected="a finite factor >= 1")
        check_real(self, o, "f_dec", lo=0.0, hi=1.0,
                   expected="a factor strictly between 0 and 1")
        check_real(self, o, "alpha_start", lo=0.0, lo_open=False, hi=1.0, hi_open=False,
                   expected="a number in [0, 1]")
        check_real(self, o, "f_alpha", lo=0.0, hi=1.0, hi_open=False,
                   expected="a factor in (0, 1]")
        check_int(self, o, "max_steps", minimum=0, expected="an integer >= 0")
        check_real(self, o, "grad_tol", lo=0.0, lo_open=False,
                   expected="a finite number >= 0 (0 disables the test)")
        check_bool(self, o, "respect_box")
        check_real(self, o, "dt_min", lo=0.0, lo_open=False, expected="a finite number >= 0")
        if self.step_size > self.dt_max:
            raise ConfigError(f"{o} setting step_size = {self.step_size!r} is larger than "
                              f"dt_max = {self.dt_max!r}; expected step_size <= dt_max. Lower "
                              f"step_size too, e.g. --set step_size={self.dt_max!r}")


@dataclass
class FIREState:
    """FIRE's own state: the velocity-mixing parameter and the steps since ``P <= 0``."""

    alpha: float
    n_pos: int = 0


class FIRE(Descent):
    """Standard FIRE (Bitzek et al. 2006) with velocity Verlet and unit masses.

    Parameters
    ----------
    config : FIREConfig, optional
    **settings
        Fields of :class:`FIREConfig`, e.g. ``FIRE(dt_max=2.0)``.

    Notes
    -----
    Unlike RMin, FIRE does not revert ordinary uphill steps, so its current point is not
    always the lowest visited. The result holds the point where the gradient tolerance was
    met if the run converged, otherwise the lowest-energy point visited (the shared driver,
    :class:`thermonet.api.descent.Descent`).
    """

    name: ClassVar[str] = "fire"
    api_version: ClassVar[int] = 1
    Config: ClassVar[type] = FIREConfig

    def init(self, walk: Walk) -> FIREState:
        """``alpha = alpha_start`` and no step with ``P > 0`` yet."""
        return FIREState(alpha=self.config.alpha_start)

    def step(self, walk: Walk, state: FIREState) -> FIREState:
        """One velocity-Verlet step and the FIRE update of the velocity, dt and alpha."""
        cfg: FIREConfig = self.config
        _, ok = walk.trial()
        if ok:
            walk.accept()
            power = -_dot(walk.grad, walk.p)      # P = F . v with F = -grad
        else:
            # the step is undone (the walk is untouched) and counts as P <= 0
            power = -1.0
        if power > 0.0:
            f_norm = math.sqrt(_dot(walk.grad, walk.grad))
            v_norm = math.sqrt(_dot(walk.p, walk.p))
            if f_norm > 0.0:
                walk.p *= 1.0 - state.alpha
                walk.p -= (state.alpha * v_norm / f_norm) * walk.grad
            if state.n_pos > cfg.n_min:
                walk.dt = min(walk.dt * cfg.f_inc, cfg.dt_max)
                state.alpha *= cfg.f_alpha
            state.n_pos += 1
        else:
            walk.p.fill(0.0)
            walk.dt *= cfg.f_dec
            state.alpha = cfg.alpha_start
            state.n_pos = 0
        return state
