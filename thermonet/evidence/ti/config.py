"""Settings of a thermodynamic integration (:class:`TIConfig`)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from thermonet.errors import ConfigError
from thermonet.evidence.ti.reference import F0_KINDS
from thermonet.types import FloatArray

METHODS = ("converged", "paper")


REFERENCE_KINDS = ("box", "free")


@dataclass(frozen=True)
class TIConfig:
    """Settings of :func:`thermodynamic_integration` (defaults: the paper's Sec. 4.3.1).

    Attributes
    ----------
    temperature : float
        T of the integral ``∫ exp(-E/T)``; the paper's evidence is at T = 1.
    n_bridges : int
        N: ``λ_j = 1 - (1 - j/(N+1))^p``, j = 0..N+1 (N + 2 points; 102 for N = 100), with
        ``p`` = ``lambda_power``.
    lambda_power : float
        p of the λ grid: 1 (default) spaces it evenly, as the paper; p > 1 packs the points
        towards λ = 1, where the network integrand falls steeply (spacing near λ = 1 shrinks
        as ``(1/(N+1))^p``); p < 1 packs them towards λ = 0.
    n_burn_in, n_samples : int
        Trajectories per λ before sampling, and trajectories whose ``dJ/dλ`` is recorded (after
        every one, accepted or not).
    n_leapfrog, step_size : int, float
        L and the initial dt of the HMC trajectories.
    readapt_every : int
        dt is re-adapted (factor 0.9) at every ``readapt_every``-th λ, after that λ's burn-in
        (the original code).
    kfit_burn_in, kfit_samples : int
        Trajectories at λ = 0 before and during the fit of ``k`` (split 20%/80% between two
        coarse dt adaptations, as the original code).
    initial_burn_in : int or None
        Trajectories at the first λ before the sweep, split 1/3, 2/3 between coarse dt
        adaptations (the original code's 500 + 1000). None: 1500.
    method : {"converged", "paper"}
        See the module docstring.
    wall : {"reflect", "endpoint"} or None
        HMC walls during the bridges. None: "reflect" (converged), "endpoint" (paper).
    reference : {"box", "free"} or None
        How ``k`` is fitted: "box" samples with reflecting walls and makes directions that fill
        the box uniform; "free" samples without any box (the paper). None: per method.
    f0 : {"exact", "centred"} or None
        ``log Z_1`` for the box centred on 0 (exact) or on ``w0`` (the original code's). None:
        per method.
    quadrature : str
        Name of a ``thermonet.integrators`` plugin ("simpson", "trapezoid").
    k_scale : float
        Factor on every ``k_i`` of the reference (a convergence check: the result must not
        depend on it).
    reverse : bool
        Sweep λ from 1 down to 0 (the initial burn-in is then at λ = 1).
    both_directions : bool
        Sweep both ways with one reference and report the midpoint, with the hysteresis
        between the two and an error bar that includes the work dissipated by the sweeps
        (:mod:`thermonet.evidence.ti.pair`; twice the cost). Not with ``reverse``.
    uniform_threshold : float
        With ``reference="box"``, direction i is uniform (``k_i = 0``) when the root-mean-square
        displacement from the minimum, ``sqrt(<(w_i - w0_i)²>)``, exceeds this fraction of the
        box half-width ``a_i``. A uniform distribution on the box gives at least
        ``a_i/sqrt(3) = 0.577 a_i`` (more when ``w0`` is off-centre), a Gaussian that the
        walls hardly touch less than about ``a_i/3``; 0.5 lies between. ``inf`` disables
        uniform directions. See docs/evidence.md for why the half-width, not the distance to
        the nearer wall, is the scale.
    step_jitter : float or None
        Each trajectory uses ``dt·(1 + j·(2u - 1))``, u ~ U(0, 1): a random step size breaks
        the periodic orbits that make fixed-length HMC stall on near-harmonic directions
        (``L·dt`` close to a period; Neal 2011, Sec. 5.4.2.2). None: 0.5 (converged), 0 (paper).
    min_acceptance : float or None
        When fewer than this fraction of a λ point's burn-in trajectories were accepted, dt is
        re-adapted (factor 0.1, then 0.9) before its sampling, whatever ``readapt_every`` says
        (a dt adapted at another λ can be far too large: sweeping from the flat λ = 1 end
        towards λ = 0, the acceptance fell to 0). None: 0.25 (converged), 0 = never (paper).
    """

    temperature: float = 1.0
    n_bridges: int = 100
    n_burn_in: int = 100
    n_samples: int = 100
    n_leapfrog: int = 100
    step_size: float = 0.1
    readapt_every: int = 10
    kfit_burn_in: int = 1000
    kfit_samples: int = 1000
    initial_burn_in: int | None = None
    method: str = "converged"
    wall: str | None = None
    reference: str | None = None
    f0: str | None = None
    quadrature: str = "simpson"
    k_scale: float = 1.0
    reverse: bool = False
    both_directions: bool = False
    uniform_threshold: float = 0.5
    step_jitter: float | None = None
    min_acceptance: float | None = None
    lambda_power: float = 1.0

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ConfigError(f"TI method = {self.method!r}; expected one of {METHODS}")
        paper = self.method == "paper"
        if self.wall is None:
            object.__setattr__(self, "wall", "endpoint" if paper else "reflect")
        if self.reference is None:
            object.__setattr__(self, "reference", "free" if paper else "box")
        if self.f0 is None:
            object.__setattr__(self, "f0", "centred" if paper else "exact")
        if self.initial_burn_in is None:
            object.__setattr__(self, "initial_burn_in", 1500)
        if self.step_jitter is None:
            object.__setattr__(self, "step_jitter", 0.0 if paper else 0.5)
        if self.min_acceptance is None:
            object.__setattr__(self, "min_acceptance", 0.0 if paper else 0.25)
        assert self.min_acceptance is not None and self.step_jitter is not None  # set above
        if not 0.0 <= self.min_acceptance < 1.0:
            raise ConfigError(f"TI min_acceptance = {self.min_acceptance!r}; expected 0 <= a < 1")
        if not 0.0 <= self.step_jitter < 1.0:
            raise ConfigError(f"TI step_jitter = {self.step_jitter!r}; expected 0 <= j < 1")
        if self.wall not in ("reflect", "endpoint"):
            raise ConfigError(f"TI wall = {self.wall!r}; expected 'reflect' or 'endpoint'")
        if self.reference not in REFERENCE_KINDS:
            raise ConfigError(f"TI reference = {self.reference!r}; expected one of "
                              f"{REFERENCE_KINDS}")
        if self.f0 not in F0_KINDS:
            raise ConfigError(f"TI f0 = {self.f0!r}; expected one of {F0_KINDS}")
        if not (math.isfinite(self.temperature) and self.temperature > 0):
            raise ConfigError(f"TI temperature = {self.temperature!r}; expected T > 0")
        for name in ("n_bridges", "n_burn_in", "kfit_burn_in", "initial_burn_in",
                     "readapt_every"):
            v = getattr(self, name)
            if not (isinstance(v, (int, np.integer)) and v >= 0):
                raise ConfigError(f"TI {name} = {v!r}; expected an integer >= 0")
        for name in ("n_samples", "n_leapfrog", "kfit_samples"):
            v = getattr(self, name)
            if not (isinstance(v, (int, np.integer)) and v >= 2):
                raise ConfigError(f"TI {name} = {v!r}; expected an integer >= 2")
        if not (math.isfinite(self.step_size) and self.step_size > 0):
            raise ConfigError(f"TI step_size = {self.step_size!r}; expected dt > 0")
        if not (math.isfinite(self.k_scale) and self.k_scale > 0):
            raise ConfigError(f"TI k_scale = {self.k_scale!r}; expected a positive factor")
        if not (isinstance(self.lambda_power, (int, float)) and math.isfinite(self.lambda_power)
                and self.lambda_power > 0):
            raise ConfigError(f"TI lambda_power = {self.lambda_power!r}; expected a positive "
                              "number (1: an even λ grid, 2 or 3: denser near λ = 1)")
        if self.both_directions and self.reverse:
            raise ConfigError("TI both_directions = true runs the reverse sweep itself; leave "
                              "reverse = false with it")
        if not self.uniform_threshold > 0:
            raise ConfigError(f"TI uniform_threshold = {self.uniform_threshold!r}; expected > 0 "
                              "(inf: never treat a direction as uniform)")

    @property
    def lambdas(self) -> FloatArray:
        """``λ_j = 1 - (1 - j/(N+1))^p``, j = 0..N+1, ascending (``j/(N+1)`` for p = 1)."""
        u = np.arange(self.n_bridges + 2, dtype=np.float64) / (self.n_bridges + 1)
        if self.lambda_power == 1.0:
            return u
        lam = 1.0 - (1.0 - u) ** float(self.lambda_power)
        lam[0], lam[-1] = 0.0, 1.0
        return lam

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        if math.isinf(d["uniform_threshold"]):
            d["uniform_threshold"] = "inf"
        if d["lambda_power"] == 1.0:
            # the even grid: left out, so that runs checkpointed before the setting existed
            # keep their fingerprint and resume
            del d["lambda_power"]
        if not d["both_directions"]:
            del d["both_directions"]    # likewise for one-way runs made before it existed
        return d
