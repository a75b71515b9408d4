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

thermonet's additions, shared with :mod:`thermonet.minimisers.rmin`: the same stopping rules
(gradient tolerance, step budget, step-size underflow), a step to a non-finite energy (or,
with ``respect_box``, out of the prior box) is undone and treated as ``P <= 0``, and one
gradient evaluation per step.

References
----------
E. Bitzek, P. Koskinen, F. Gähler, M. Moseler and P. Gumbsch, "Structural relaxation made
simple", Phys. Rev. Lett. 97, 170201 (2006).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from thermonet._types import FloatArray
from thermonet.api import Minimiser, MinimiseResult
from thermonet.errors import ConfigError
from thermonet.kernels import leapfrog as lf
from thermonet.minimisers.rmin import (
    GRADIENT_TOLERANCE,
    STEP_BUDGET,
    STEP_SIZE_UNDERFLOW,
    STOPPED_BY_CALLBACK,
    Callback,
    check_bool,
    check_int,
    check_real,
    first_gradient,
    max_abs,
    prepare,
)

logger = logging.getLogger(__name__)


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


class FIRE(Minimiser):
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
    met if the run converged, otherwise the lowest-energy point visited.
    """

    name: ClassVar[str] = "fire"
    api_version: ClassVar[int] = 1
    Config: ClassVar[type] = FIREConfig

    def minimise(self, potential: Any, theta0: FloatArray, *, prior: Any = None,
                 callback: Callback | None = None) -> MinimiseResult:
        """Minimise ``potential`` from ``theta0``.

        Parameters
        ----------
        potential : thermonet.api.Potential
        theta0 : ndarray of float64, shape (n_params,)
            Starting point (not modified).
        prior : BoxPrior, optional
            Needed only with ``respect_box=True``.
        callback : callable, optional
            ``callback(step, energy, max_abs_grad, dt)`` after every step (values at the
            current point); a true return value stops the run ("stopped by callback").

        Returns
        -------
        MinimiseResult
        """
        cfg: FIREConfig = self.config
        theta, half_width = prepare(potential, theta0, prior, cfg.respect_box, "fire")
        n = theta.shape[0]
        grad = np.empty(n)
        energy = first_gradient(potential, theta, grad, "fire")
        n_evals = 1
        trial = np.empty(n)
        grad_trial = np.empty(n)
        v = np.zeros(n)
        inv_mass = np.ones(n)
        best_theta = theta.copy()
        best_e, best_g = energy, max_abs(grad)
        dt = cfg.step_size
        alpha = cfg.alpha_start
        n_pos = 0  # steps since P <= 0
        g_max = best_g
        reason = STEP_BUDGET
        step = 0
        if g_max < cfg.grad_tol:
            reason = GRADIENT_TOLERANCE
        else:
            with np.errstate(over="ignore", invalid="ignore"):  # divergence is data
                while step < cfg.max_steps:
                    step += 1
                    np.copyto(trial, theta)
                    lf.kick(v, grad, 0.5 * dt)
                    lf.drift(trial, v, inv_mass, dt)
                    if half_width is not None and lf.beyond(trial, half_width, 1.0):
                        e_new = math.inf
                    else:
                        e_new, _ = potential.energy_and_grad(trial, grad_trial)
                        n_evals += 1
                        e_new = float(e_new)
                    ok = math.isfinite(e_new) and bool(lf.all_finite(grad_trial))
                    if ok:
                        lf.kick(v, grad_trial, 0.5 * dt)
                        theta, trial = trial, theta
                        grad, grad_trial = grad_trial, grad
                        energy = e_new
                        g_max = max_abs(grad)
                        if energy < best_e:
                            np.copyto(best_theta, theta)
                            best_e, best_g = energy, g_max
                        # FIRE update with F = -grad
                        power = -_dot(grad, v)
                    else:
                        # undo the step (theta, energy, grad are untouched); treat as P <= 0,
                        # which zeroes v below
                        power = -1.0
                    if power > 0.0:
                        f_norm = math.sqrt(_dot(grad, grad))
                        v_norm = math.sqrt(_dot(v, v))
                        if f_norm > 0.0:
                            v *= 1.0 - alpha
                            v -= (alpha * v_norm / f_norm) * grad
                        if n_pos > cfg.n_min:
                            dt = min(dt * cfg.f_inc, cfg.dt_max)
                            alpha *= cfg.f_alpha
                        n_pos += 1
                    else:
                        v.fill(0.0)
                        dt *= cfg.f_dec
                        alpha = cfg.alpha_start
                        n_pos = 0
                    if callback is not None and callback(step, energy, g_max, dt):
                        reason = STOPPED_BY_CALLBACK
                        break
                    if g_max < cfg.grad_tol:
                        reason = GRADIENT_TOLERANCE
                        break
                    if dt < cfg.dt_min:
                        reason = STEP_SIZE_UNDERFLOW
                        break
        if reason != GRADIENT_TOLERANCE and best_e < energy:
            theta, energy, g_max = best_theta, best_e, best_g
        logger.debug("fire: %s after %d steps, E = %.6g, max|grad| = %.3g, dt = %.3g",
                     reason, step, energy, g_max, dt)
        return MinimiseResult(theta=np.array(theta, copy=True), energy=energy,
                              max_abs_grad=g_max, n_steps=step, n_grad_evals=n_evals,
                              reason=reason, converged=reason == GRADIENT_TOLERANCE)
