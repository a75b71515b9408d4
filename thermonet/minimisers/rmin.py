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

As coded in the paper's ``pt.rough_minimise`` (Baldock & Marzari's released code) an *equal* energy
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

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from thermonet.api.descent import (  # noqa: F401  (names of the old path, kept importable)
    GRADIENT_TOLERANCE,
    REASONS,
    STEP_BUDGET,
    STEP_SIZE_UNDERFLOW,
    STOPPED_BY_CALLBACK,
    Callback,
    Descent,
    Walk,
    first_gradient,
    max_abs,
    prepare,
)
from thermonet.api.settings import check_bool, check_int, check_real, fail
from thermonet.errors import ConfigError


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
            fail(o, "ties", self.ties, "'downhill' (the original code) or 'uphill' (the "
                  "paper's strict <)")
        check_real(self, o, "dt_max", lo=0.0, allow_inf=True,
                   expected="a positive number or inf (no cap)")
        check_real(self, o, "dt_min", lo=0.0, lo_open=False, expected="a finite number >= 0")
        if self.step_size > self.dt_max:
            raise ConfigError(f"{o} setting step_size = {self.step_size!r} is larger than "
                              f"dt_max = {self.dt_max!r}; expected step_size <= dt_max. Lower "
                              f"step_size too, e.g. --set step_size={self.dt_max!r}")


class RMin(Descent):
    """The paper's Algorithm 3 ("RMin"): velocity Verlet from zero momentum, with dt growing
    additively on downhill steps and shrinking geometrically, with a revert to the lowest
    point and zeroed momenta, on uphill steps.

    Unit masses. One gradient evaluation per step: the energy comes with the gradient, and
    after an uphill step the saved gradient of the lowest point is reused. The loop, the stop
    rules and the result are the shared driver's (:class:`thermonet.api.descent.Descent`).

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

    def step(self, walk: Walk, state: Any) -> Any:
        """One step of Algorithm 3: keep a downhill step, revert an uphill one."""
        cfg: RMinConfig = self.config
        e_new, ok = walk.trial()
        if ok and (e_new < walk.energy if cfg.ties == "uphill" else e_new <= walk.energy):
            walk.accept()
            walk.dt = min(walk.dt + cfg.dt_increase, cfg.dt_max)
        else:
            # revert: the walk still holds the saved lowest point, its energy and gradient
            walk.p.fill(0.0)
            walk.dt *= cfg.dt_decrease
        return state
