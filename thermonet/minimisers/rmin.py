"""RMin: the paper's Algorithm 3, a FIRE-like damped velocity-Verlet descent.

Algorithm 3 of Baldock & Marzari (2019), "Fast minimisation of E(D|w)"::

    procedure RMin(w)
        p = 0                                    # zero initial momenta
        for i = 1, N_steps do
            w_save, E_save = w, E(D|w)           # save the lowest-energy state
            propagate (w, p) through one velocity-Verlet step of length dt
            if E(D|w) < E_save then              # downhill step
                dt = dt + 0.05                   # slowly increase dt
            else                                 # uphill step
                p = 0; w = w_save                # zero momenta, return to lowest-energy w
                dt = dt * 0.95                   # rapidly decrease dt

As coded in the paper's ``pt.rough_minimise`` (original-code-spec.md §5) an *equal* energy
counts as downhill, dt has no cap, the box prior is ignored, and the loop always runs 1000
steps. thermonet adds a gradient-tolerance stop, a step-size-underflow stop, a treatment of
non-finite energies (uphill), and an option to respect the box (the paper's text minimises
``J = E - ln prior``, which is infinite outside the box, so a step that leaves it is uphill).

``RMin(grad_tol=0.0)`` reproduces the original exactly (ties downhill, no box, no dt cap,
always ``max_steps = 1000`` steps), up to the float32 energies of the original code.

References
----------
R. J. N. Baldock and N. Marzari, arXiv:1904.04154 (2019), Sec. 3.3.2, Algorithm 3.
E. Bitzek, P. Koskinen, F. Gähler, M. Moseler and P. Gumbsch, Phys. Rev. Lett. 97, 170201
(2006).
"""

from __future__ import annotations

import logging
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from thermonet._types import FloatArray
from thermonet.api import Minimiser, MinimiseResult, Potential, as_theta
from thermonet.errors import ConfigError, ConvergenceError
from thermonet.kernels import leapfrog as lf

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


# --------------------------------------------------------------------------- validation helpers
# (shared with thermonet.minimisers.fire)

def _fail(owner: str, key: str, value: Any, expected: str) -> None:
    raise ConfigError(f"{owner} setting {key} = {value!r}; expected {expected}. "
                      f"Fix it with --set {key}=<value> or {key}=<value> in Python.")


def check_real(cfg: Any, owner: str, key: str, *, lo: float | None = None,
               lo_open: bool = True, hi: float | None = None, hi_open: bool = True,
               allow_inf: bool = False, expected: str) -> None:
    """Check that ``cfg.<key>`` is a real number in the given range; store it as float."""
    value = getattr(cfg, key)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        _fail(owner, key, value, expected)
    v = float(value)
    bad = math.isnan(v) or (math.isinf(v) and not allow_inf)
    if lo is not None:
        bad = bad or (v <= lo if lo_open else v < lo)
    if hi is not None:
        bad = bad or (v >= hi if hi_open else v > hi)
    if bad:
        _fail(owner, key, value, expected)
    object.__setattr__(cfg, key, v)


def check_int(cfg: Any, owner: str, key: str, *, minimum: int, expected: str) -> None:
    """Check that ``cfg.<key>`` is an integer >= ``minimum``; store it as int."""
    value = getattr(cfg, key)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        # accept integral floats such as 1e3 from a config file
        if (isinstance(value, float) and value.is_integer() and value >= minimum):
            object.__setattr__(cfg, key, int(value))
            return
        _fail(owner, key, value, expected)
    object.__setattr__(cfg, key, int(value))


def check_bool(cfg: Any, owner: str, key: str) -> None:
    """Check that ``cfg.<key>`` is a boolean (not a string such as "True")."""
    value = getattr(cfg, key)
    if not isinstance(value, (bool, np.bool_)):
        _fail(owner, key, value, "true or false")
    object.__setattr__(cfg, key, bool(value))


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


def max_abs(a: FloatArray) -> float:
    """``max_i |a_i|`` (0 for an empty array)."""
    return float(np.max(np.abs(a))) if a.size else 0.0


# --------------------------------------------------------------------------------------- RMin

@dataclass(frozen=True)
class RMinConfig:
    """Settings of :class:`RMin` (defaults are the paper's and the original code's).

    Attributes
    ----------
    step_size : float
        Initial time step dt (the original code's ``dt_initial = 0.1``). > 0.
    dt_increase : float
        Added to dt after a downhill step (0.05). >= 0.
    dt_decrease : float
        dt is multiplied by this after an uphill step (0.95). In (0, 1).
    max_steps : int
        Step budget (1000, the original code's fixed number of steps). >= 0.
    grad_tol : float
        Stop when ``max_i |dE/dw_i| < grad_tol`` (1e-4). 0 disables the test (the original
        code, which always runs ``max_steps`` steps). >= 0.
    respect_box : bool
        False (default, the original code): minimise the bare E and ignore the box. True (the
        paper's text): ``J`` is infinite outside the box ``|w_i| < sigma_i/2``, so a step that
        leaves it counts as uphill; needs ``prior=``.
    ties : {"downhill", "uphill"}
        How a step with ``E_new == E_saved`` counts: "downhill" as the original code
        (``if E_new > E_saved: uphill``), "uphill" as the paper's strict ``E < E_save``.
    dt_max : float
        Cap on dt (inf, the original code has none). > 0.
    dt_min : float
        Stop with reason "step size underflow" when dt falls below this (1e-50, as the
        original code's ``exit(25)`` in its dt adaptation). >= 0.
    """

    step_size: float = 0.1
    dt_increase: float = 0.05
    dt_decrease: float = 0.95
    max_steps: int = 1000
    grad_tol: float = 1e-4
    respect_box: bool = False
    ties: str = "downhill"
    dt_max: float = math.inf
    dt_min: float = 1e-50

    def __post_init__(self) -> None:
        o = "rmin"
        check_real(self, o, "step_size", lo=0.0, expected="a positive finite time step")
        check_real(self, o, "dt_increase", lo=0.0, lo_open=False,
                   expected="a finite number >= 0")
        check_real(self, o, "dt_decrease", lo=0.0, hi=1.0,
                   expected="a factor strictly between 0 and 1")
        check_int(self, o, "max_steps", minimum=0, expected="an integer >= 0")
        check_real(self, o, "grad_tol", lo=0.0, lo_open=False,
                   expected="a finite number >= 0 (0 disables the test)")
        check_bool(self, o, "respect_box")
        if self.ties not in ("downhill", "uphill"):
            _fail(o, "ties", self.ties, "'downhill' (the original code) or 'uphill' (the "
                  "paper's strict <)")
        check_real(self, o, "dt_max", lo=0.0, allow_inf=True,
                   expected="a positive number or inf (no cap)")
        check_real(self, o, "dt_min", lo=0.0, lo_open=False, expected="a finite number >= 0")
        if self.step_size > self.dt_max:
            raise ConfigError(f"{o} setting step_size = {self.step_size!r} is larger than "
                              f"dt_max = {self.dt_max!r}; expected step_size <= dt_max. Lower "
                              f"step_size too, e.g. --set step_size={self.dt_max!r}")


class RMin(Minimiser):
    """The paper's Algorithm 3 ("RMin"): velocity Verlet from zero momentum, with dt growing
    additively on downhill steps and shrinking geometrically, with a revert to the lowest
    point and zeroed momenta, on uphill steps.

    Unit masses. One gradient evaluation per step: the energy comes with the gradient, and
    after an uphill step the saved gradient of the lowest point is reused.

    Parameters
    ----------
    config : RMinConfig, optional
    **settings
        Fields of :class:`RMinConfig`, e.g. ``RMin(max_steps=2000, respect_box=True)``.

    Notes
    -----
    A step is *uphill* (revert, ``p = 0``, ``dt *= dt_decrease``) if the new energy is
    non-finite, or (with ``respect_box``) the new point lies on or outside the box, or
    ``E_new > E_saved`` (``ties="downhill"``) / ``E_new >= E_saved`` (``ties="uphill"``).
    Otherwise it is downhill: ``dt = min(dt + dt_increase, dt_max)``.

    The run stops, in this order of precedence, when ``max |dE/dw| < grad_tol`` at the current
    (lowest) point ("gradient tolerance"), when dt falls below ``dt_min`` ("step size
    underflow"), or after ``max_steps`` steps ("step budget"). ``theta`` in the result is
    always the lowest-energy point visited.
    """

    name: ClassVar[str] = "rmin"
    api_version: ClassVar[int] = 1
    Config: ClassVar[type] = RMinConfig

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
            the current lowest point and the dt of the next step; returning a true value stops
            the run with reason "stopped by callback".

        Returns
        -------
        MinimiseResult
        """
        cfg: RMinConfig = self.config
        theta, half_width = prepare(potential, theta0, prior, cfg.respect_box, "rmin")
        n = theta.shape[0]
        grad = np.empty(n)
        energy = first_gradient(potential, theta, grad, "rmin")
        n_evals = 1
        # trial buffers: the step is taken in (trial, grad_trial) and swapped in if downhill
        trial = np.empty(n)
        grad_trial = np.empty(n)
        p = np.zeros(n)
        inv_mass = np.ones(n)
        dt = cfg.step_size
        strict = cfg.ties == "uphill"
        g_max = max_abs(grad)
        reason = STEP_BUDGET
        step = 0
        if g_max < cfg.grad_tol:
            reason = GRADIENT_TOLERANCE
        else:
            with np.errstate(over="ignore", invalid="ignore"):  # divergence is data
                while step < cfg.max_steps:
                    step += 1
                    # one velocity-Verlet step from (theta, p), gradient ``grad`` at theta
                    np.copyto(trial, theta)
                    lf.kick(p, grad, 0.5 * dt)
                    lf.drift(trial, p, inv_mass, dt)
                    if half_width is not None and lf.beyond(trial, half_width, 1.0):
                        e_new = math.inf  # J = E - ln prior is infinite outside the box
                    else:
                        e_new, _ = potential.energy_and_grad(trial, grad_trial)
                        n_evals += 1
                        e_new = float(e_new)
                    downhill = math.isfinite(e_new) and (
                        e_new < energy if strict else e_new <= energy)
                    if downhill and not lf.all_finite(grad_trial):
                        downhill = False
                    if downhill:
                        lf.kick(p, grad_trial, 0.5 * dt)
                        theta, trial = trial, theta
                        grad, grad_trial = grad_trial, grad
                        energy = e_new
                        g_max = max_abs(grad)
                        dt = min(dt + cfg.dt_increase, cfg.dt_max)
                    else:
                        # revert: theta, energy and grad still hold the saved lowest point
                        p.fill(0.0)
                        dt *= cfg.dt_decrease
                    if callback is not None and callback(step, energy, g_max, dt):
                        reason = STOPPED_BY_CALLBACK
                        break
                    if g_max < cfg.grad_tol:
                        reason = GRADIENT_TOLERANCE
                        break
                    if dt < cfg.dt_min:
                        reason = STEP_SIZE_UNDERFLOW
                        break
        logger.debug("rmin: %s after %d steps, E = %.6g, max|grad| = %.3g, dt = %.3g",
                     reason, step, energy, g_max, dt)
        return MinimiseResult(theta=np.array(theta, copy=True), energy=energy,
                              max_abs_grad=g_max, n_steps=step, n_grad_evals=n_evals,
                              reason=reason, converged=reason == GRADIENT_TOLERANCE)
