"""The shared driver of damped-dynamics minimisers (RMin, FIRE and plugins like them).

A :class:`Descent` minimiser defines only its update rule: :meth:`Descent.init` returns the
rule's own state and :meth:`Descent.step` advances a :class:`Walk` by one step. The driver
(:meth:`Descent.minimise`) owns everything else, identically for every rule: input checks, the
first gradient, the stop rules (gradient tolerance, step budget, step-size underflow, a
callback), best-point tracking and the :class:`~thermonet.api.minimiser.MinimiseResult`.

A rule's settings dataclass needs the fields ``step_size``, ``max_steps``, ``grad_tol``,
``respect_box`` and ``dt_min`` (their meaning is the same for every rule).
"""

from __future__ import annotations

import abc
import logging
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from thermonet.api.minimiser import Minimiser, MinimiseResult
from thermonet.api.potential import Potential, as_theta
from thermonet.errors import ConfigError, ConvergenceError
from thermonet.kernels import leapfrog as lf
from thermonet.types import FloatArray

logger = logging.getLogger(__name__)

#: stop reasons (``MinimiseResult.reason``)
GRADIENT_TOLERANCE = "gradient tolerance"
STEP_BUDGET = "step budget"
STEP_SIZE_UNDERFLOW = "step size underflow"
STOPPED_BY_CALLBACK = "stopped by callback"
REASONS = (GRADIENT_TOLERANCE, STEP_BUDGET, STEP_SIZE_UNDERFLOW, STOPPED_BY_CALLBACK)

#: ``callback(step, energy, max_abs_grad, dt)`` called after every step; a true return value
#: stops the minimisation (reason "stopped by callback")
Callback = Callable[[int, float, float, float], Any]


def max_abs(a: FloatArray) -> float:
    """``max_i |a_i|`` (0 for an empty array)."""
    return float(np.max(np.abs(a))) if a.size else 0.0


def prepare(potential: Any, theta0: Any, prior: Any, respect_box: bool, owner: str
            ) -> tuple[FloatArray, FloatArray | None]:
    """Validate the inputs of a minimisation; return a float64 copy of ``theta0`` and the box
    half-widths (None without ``respect_box``)."""
    if not isinstance(potential, Potential):
        raise ConfigError(f"{owner} needs a thermonet.api.Potential; got "
                          f"{type(potential).__name__}. Build one with arch.potential(data).")
    n = int(potential.n_params)
    theta = np.array(as_theta(theta0, n, what="initial parameter vector theta0"),
                     dtype=np.float64, copy=True)
    half_width = None
    if respect_box:
        if prior is None or not hasattr(prior, "half_width"):
            raise ConfigError(f"{owner} with respect_box=True needs the box prior: pass "
                              "prior=BoxPrior.for_architecture(arch), or set respect_box=False")
        half_width = np.ascontiguousarray(prior.half_width, dtype=np.float64)
        if half_width.shape != (n,):
            raise ConfigError(f"prior box has {half_width.shape[0]} widths; expected {n} (one "
                              "per parameter of the potential)")
        if lf.beyond(theta, half_width, 1.0):
            n_out = int(np.count_nonzero(~(np.abs(theta) < half_width)))
            raise ConfigError(f"initial parameter vector has {n_out} coordinate(s) on or outside "
                              "the prior box |w_i| < sigma_i/2, where J = E - ln prior is "
                              "infinite; start inside the box or use respect_box=False")
    return theta, half_width


def first_gradient(potential: Potential, theta: FloatArray, grad: FloatArray, owner: str
                   ) -> float:
    """E and (into ``grad``) the gradient at the starting point; ConvergenceError if either
    is not finite."""
    e, _ = potential.energy_and_grad(theta, grad)
    e = float(e)
    if not (math.isfinite(e) and bool(lf.all_finite(grad))):
        raise ConvergenceError(f"{owner}: the energy or gradient at the initial parameter "
                               f"vector is not finite (E = {e}); a minimisation cannot start "
                               "there. Start from a finite-energy point (e.g. the standard "
                               "initialisation arch.initial_draw(rng)).")
    return e


class Walk:
    """The current point of a descent and its velocity-Verlet machinery (unit masses).

    Attributes a rule reads and changes: ``theta``, ``grad``, ``energy`` and ``g_max`` (the
    current point, its gradient and ``max |grad|``), ``p`` (momenta) and ``dt`` (the step
    size of the next step). ``n_evals`` counts gradient evaluations.
    """

    def __init__(self, potential: Potential, theta: FloatArray, grad: FloatArray, energy: float,
                 dt: float, half_width: FloatArray | None) -> None:
        n = theta.shape[0]
        self.potential = potential
        self.theta = theta
        self.grad = grad
        self.energy = energy
        self.g_max = max_abs(grad)
        self.p = np.zeros(n)
        self.dt = dt
        self.n_evals = 1
        self.half_width = half_width
        self._trial = np.empty(n)
        self._grad_trial = np.empty(n)
        self._inv_mass = np.ones(n)
        self._e_trial = math.nan

    def trial(self) -> tuple[float, bool]:
        """Half kick and drift from the current point into a trial point; evaluate it.

        Returns ``(E_trial, ok)``: ``ok`` is False when the trial energy or gradient is not
        finite or (with the box) the trial point is on or outside the box (``E_trial = inf``
        there, and no gradient is evaluated). The current point is unchanged until
        :meth:`accept`.
        """
        np.copyto(self._trial, self.theta)
        lf.kick(self.p, self.grad, 0.5 * self.dt)
        lf.drift(self._trial, self.p, self._inv_mass, self.dt)
        if self.half_width is not None and lf.beyond(self._trial, self.half_width, 1.0):
            e_new = math.inf    # J = E - ln prior is infinite outside the box
        else:
            e_new, _ = self.potential.energy_and_grad(self._trial, self._grad_trial)
            self.n_evals += 1
            e_new = float(e_new)
        self._e_trial = e_new
        ok = math.isfinite(e_new) and bool(lf.all_finite(self._grad_trial))
        return e_new, ok

    def accept(self) -> None:
        """Make the trial point current and complete the step with the second half kick."""
        lf.kick(self.p, self._grad_trial, 0.5 * self.dt)
        self.theta, self._trial = self._trial, self.theta
        self.grad, self._grad_trial = self._grad_trial, self.grad
        self.energy = self._e_trial
        self.g_max = max_abs(self.grad)


class Descent(Minimiser):
    """Base class of minimisers that differ from RMin and FIRE only in their update rule.

    Subclasses define ``name``, ``Config`` (with the fields named in the module docstring),
    :meth:`init` and :meth:`step`; :meth:`minimise` is the shared driver.
    """

    def init(self, walk: Walk) -> Any:
        """The rule's own state at the start (default: none)."""
        return None

    @abc.abstractmethod
    def step(self, walk: Walk, state: Any) -> Any:
        """Advance ``walk`` by one step (usually :meth:`Walk.trial`, then :meth:`Walk.accept`
        or a revert) and set ``walk.dt`` for the next one; return the rule's new state."""

    def minimise(self, potential: Any, theta0: FloatArray, *, prior: Any = None,
                 callback: Callback | None = None) -> MinimiseResult:
        """Minimise ``potential`` from ``theta0``.

        Parameters
        ----------
        potential : thermonet.api.Potential
        theta0 : ndarray of float64, shape (n_params,)
            Starting point (not modified).
        prior : BoxPrior, optional
            Needed only with ``respect_box=True`` (anything with ``half_width``, shape
            ``(n_params,)``).
        callback : callable, optional
            ``callback(step, energy, max_abs_grad, dt)`` after every step, with the values at
            the current point and the dt of the next step; returning a true value stops the
            run with reason "stopped by callback".

        Returns
        -------
        MinimiseResult
            The point where the gradient tolerance was met if the run converged, otherwise the
            lowest-energy point visited.
        """
        cfg = self.config
        owner = self.name or type(self).__name__
        theta, half_width = prepare(potential, theta0, prior, cfg.respect_box, owner)
        grad = np.empty(theta.shape[0])
        energy = first_gradient(potential, theta, grad, owner)
        walk = Walk(potential, theta, grad, energy, cfg.step_size, half_width)
        best_theta = theta.copy()
        best_e, best_g = walk.energy, walk.g_max
        state = self.init(walk)
        reason = STEP_BUDGET
        step = 0
        if walk.g_max < cfg.grad_tol:
            reason = GRADIENT_TOLERANCE
        else:
            with np.errstate(over="ignore", invalid="ignore"):  # divergence is data
                while step < cfg.max_steps:
                    step += 1
                    state = self.step(walk, state)
                    if walk.energy < best_e:
                        np.copyto(best_theta, walk.theta)
                        best_e, best_g = walk.energy, walk.g_max
                    if callback is not None and callback(step, walk.energy, walk.g_max,
                                                         walk.dt):
                        reason = STOPPED_BY_CALLBACK
                        break
                    if walk.g_max < cfg.grad_tol:
                        reason = GRADIENT_TOLERANCE
                        break
                    if walk.dt < cfg.dt_min:
                        reason = STEP_SIZE_UNDERFLOW
                        break
        theta, energy, g_max = walk.theta, walk.energy, walk.g_max
        if reason != GRADIENT_TOLERANCE and best_e < energy:
            theta, energy, g_max = best_theta, best_e, best_g
        logger.debug("%s: %s after %d steps, E = %.6g, max|grad| = %.3g, dt = %.3g",
                     owner, reason, step, energy, g_max, walk.dt)
        return MinimiseResult(theta=np.array(theta, copy=True), energy=energy,
                              max_abs_grad=g_max, n_steps=step, n_grad_evals=walk.n_evals,
                              reason=reason, converged=reason == GRADIENT_TOLERANCE)


__all__ = ["GRADIENT_TOLERANCE", "REASONS", "STEP_BUDGET", "STEP_SIZE_UNDERFLOW",
           "STOPPED_BY_CALLBACK", "Callback", "Descent", "Walk", "first_gradient", "max_abs",
           "prepare"]
