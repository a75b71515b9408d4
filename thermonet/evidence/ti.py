"""Thermodynamic integration (TI): ``log ∫_box exp(-E(w)/T) dw`` from a chain of bridges.

The bridging potential between the energy ``E`` (λ = 0) and a reference ``J_1`` made of
independent quadratic and uniform directions (λ = 1) is (paper eq. 21; Frenkel & Smit 2001)::

    J_λ(w) = E0 + (1 - λ)(E(w) - E0) + λ Σ_i k_i (w_i - w0_i)² / 2,        k_i = 0 on uniform
    dJ/dλ  = Σ_i k_i (w_i - w0_i)² / 2 - (E(w) - E0)                           directions

and, with ``Z_λ = ∫_box exp(-J_λ/T)``, ``d log Z_λ/dλ = -<dJ/dλ>_λ / T``, so::

    log ∫_box e^{-E/T} = log Z_1 + (1/T) ∫_0^1 <dJ/dλ>_λ dλ.

``log Z_1`` (:meth:`Reference.log_z0`) is known in closed form: a product of Gaussian integrals
truncated to the box and of box widths. The averages come from HMC on ``J_λ`` at temperature
T at ``λ_j = j/(N+1)``, j = 0..N+1, and the integral from a quadrature rule of the
``thermonet.integrators`` group (Simpson's 'avg' rule by default, as the paper's code).

Two recipes (:class:`TIConfig` ``method``):

* ``"converged"`` (default): the reference is fitted with the box in place (reflecting walls),
  directions whose sampled spread fills the box are uniform (``k_i = 0``), HMC reflects at the
  walls, and ``log Z_1`` is exact for the box ``|w_i| < a_i`` actually sampled.
* ``"paper"``: the original code's recipe (original-code-spec.md §7): ``k`` fitted without the
  box, end-point box rejection in the bridges, and ``log Z_1`` for a box centred on ``w0``
  (exact only when the box does not cut the reference Gaussian; kept to reproduce the
  published numbers).

References
----------
Baldock & Marzari, arXiv:1904.04154, Sec. 4.3; D. Frenkel and B. Smit, *Understanding
Molecular Simulation* (2nd ed., 2001), Sec. 10.2.1; D. Frenkel and A. J. C. Ladd, J. Chem. Phys.
81, 3188 (1984).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import special

from thermonet._types import FloatArray
from thermonet.api import Potential, as_theta
from thermonet.errors import (
    CheckpointFormatError,
    CheckpointMismatchError,
    ConfigError,
    ConvergenceError,
)
from thermonet.evidence._result import EvidenceResult

__all__ = ["TI_CHECKPOINT", "BridgePotential", "Reference", "TIConfig", "fit_reference",
           "log_truncated_gaussian", "repeat_ti", "thermodynamic_integration"]

METHODS = ("converged", "paper")
F0_KINDS = ("exact", "centred")
REFERENCE_KINDS = ("box", "free")
TI_CHECKPOINT = "ti_checkpoint.h5"
TI_FORMAT = "thermonet.ti-checkpoint"
TI_FORMAT_VERSION = 1


@dataclass(frozen=True)
class TIConfig:
    """Settings of :func:`thermodynamic_integration` (defaults: the paper's Sec. 4.3.1).

    Attributes
    ----------
    temperature : float
        T of the integral ``∫ exp(-E/T)``; the paper's evidence is at T = 1.
    n_bridges : int
        N: ``λ_j = j/(N+1)``, j = 0..N+1 (N + 2 points; 102 for N = 100).
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
    uniform_threshold: float = 0.5
    step_jitter: float | None = None
    min_acceptance: float | None = None

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
        if not self.uniform_threshold > 0:
            raise ConfigError(f"TI uniform_threshold = {self.uniform_threshold!r}; expected > 0 "
                              "(inf: never treat a direction as uniform)")

    @property
    def lambdas(self) -> FloatArray:
        """``λ_j = j/(N+1)``, j = 0..N+1, ascending."""
        return np.arange(self.n_bridges + 2, dtype=np.float64) / (self.n_bridges + 1)

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        if math.isinf(d["uniform_threshold"]):
            d["uniform_threshold"] = "inf"
        return d


# --- the reference and its partition function ------------------------------------------------

def log_truncated_gaussian(k: Any, w0: Any, half_width: Any, temperature: float) -> FloatArray:
    """``log ∫_{-a}^{a} exp(-k (w - w0)² / (2T)) dw`` per dimension, without overflow or NaN.

    Equals ``log[½ sqrt(2πT/k) (erf(q(a - w0)) + erf(q(a + w0)))]`` with ``q = sqrt(k/2T)``;
    ``k = 0`` gives ``log 2a`` and small ``k`` tends to it smoothly (series); erfc and
    ``log_ndtr`` forms avoid cancellation when both erf terms are close to 1, or when ``w0`` is
    outside the box.
    """
    k_i = np.asarray(k, dtype=np.float64)
    w_i = np.asarray(w0, dtype=np.float64)
    a_i, k_i, w_i = np.broadcast_arrays(np.asarray(half_width, dtype=np.float64), k_i, w_i)
    out = np.empty(a_i.shape, dtype=np.float64)
    for idx in np.ndindex(a_i.shape):
        out[idx] = _log_trunc_1d(float(k_i[idx]), float(w_i[idx]), float(a_i[idx]),
                                 float(temperature))
    return out


_LOG_SQRT_PI_2 = 0.5 * math.log(math.pi) - math.log(2.0)


def _log_erfc(x: float) -> float:
    # erfc(x) = 2 Φ(-x sqrt 2); log_ndtr keeps full precision far in the tail
    return math.log(2.0) + float(special.log_ndtr(-x * math.sqrt(2.0)))


def _log_trunc_1d(k: float, w0: float, a: float, t: float) -> float:
    if not (k >= 0 and a > 0 and t > 0) or not math.isfinite(w0):
        return math.nan
    if k == 0.0:
        return math.log(2.0 * a)
    if math.isinf(k):
        return -math.inf if abs(w0) >= a else math.nan
    q = math.sqrt(k / (2.0 * t))
    if q * (a + abs(w0)) < 1e-5:
        # first order in q² of log ∫(1 - q²(w - w0)²) dw: log 2a - q² (a²/3 + w0²)
        return math.log(2.0 * a) - q * q * (a * a / 3.0 + w0 * w0)
    u, v = q * (a - w0), q * (a + w0)
    if u > v:
        u, v = v, u
    log_pref = _LOG_SQRT_PI_2 - math.log(q)
    if u >= 0.0:
        if u > 0.5:
            # erf(u) + erf(v) = 2 - erfc(u) - erfc(v): no cancellation near 2
            return log_pref + math.log(2.0) + math.log1p(-0.5 * (special.erfc(u)
                                                                  + special.erfc(v)))
        return log_pref + math.log(special.erf(u) + special.erf(v))
    # w0 outside the box: erf(v) - erf(|u|), v > |u|
    au = -u
    if au > 0.5:
        lu, lv = _log_erfc(au), _log_erfc(v)    # erfc(|u|) - erfc(v), lu > lv
        delta = lu - lv
        if delta <= 0:
            return -math.inf
        return log_pref + lu + math.log(-math.expm1(-delta))
    return log_pref + math.log(special.erf(v) - special.erf(au))


@dataclass(frozen=True)
class Reference:
    """The λ = 1 reference ``J_1(w) = E0 + Σ_i k_i (w_i - w0_i)²/2`` on the box.

    Attributes
    ----------
    w0 : ndarray of float64, shape (n_params,)
        Centre (the minimum TI starts from).
    k : ndarray of float64, shape (n_params,)
        Spring constants; 0 on uniform directions.
    uniform : ndarray of bool, shape (n_params,)
        Directions treated as uniform on the box.
    energy0 : float
        E(w0).
    """

    w0: FloatArray
    k: FloatArray
    uniform: FloatArray
    energy0: float

    def __post_init__(self) -> None:
        w0 = np.ascontiguousarray(self.w0, dtype=np.float64)
        k = np.ascontiguousarray(np.broadcast_to(self.k, w0.shape), dtype=np.float64)
        uni = np.ascontiguousarray(np.broadcast_to(self.uniform, w0.shape), dtype=bool)
        if w0.ndim != 1 or not np.all(np.isfinite(w0)):
            raise ConfigError("reference w0 must be a flat vector of finite numbers")
        if not np.all(np.isfinite(k)) or np.any(k < 0):
            raise ConfigError("reference spring constants k must be finite and >= 0")
        if not math.isfinite(self.energy0):
            raise ConfigError(f"reference energy E0 = {self.energy0}; expected a finite energy "
                              "(is w0 a minimum of the potential?)")
        k = np.where(uni, 0.0, k)
        object.__setattr__(self, "w0", w0)
        object.__setattr__(self, "k", k)
        object.__setattr__(self, "uniform", uni)
        object.__setattr__(self, "energy0", float(self.energy0))

    @property
    def n_params(self) -> int:
        return int(self.w0.shape[0])

    @property
    def n_uniform(self) -> int:
        return int(np.count_nonzero(self.uniform))

    def scaled(self, factor: float) -> Reference:
        """The same reference with every ``k_i`` multiplied by ``factor``."""
        if not (math.isfinite(factor) and factor > 0):
            raise ConfigError(f"k scale factor = {factor}; expected a positive number")
        return Reference(self.w0, self.k * factor, self.uniform, self.energy0)

    def log_z0(self, half_width: Any, temperature: float, f0: str = "exact") -> float:
        """``log Z_1 = log ∫_{|w_i| < a_i} exp(-J_1(w)/T) dw``.

        ``f0="exact"``: for the box centred on 0 that is actually sampled (truncated Gaussians,
        and ``log 2a_i`` for uniform directions). ``f0="centred"``: the original code's formula,
        exact only for a box ``[w0_i - a_i, w0_i + a_i]``.
        """
        a = np.broadcast_to(np.asarray(half_width, dtype=np.float64), self.w0.shape)
        if f0 == "exact":
            per_dim = log_truncated_gaussian(self.k, self.w0, a, temperature)
        elif f0 == "centred":
            per_dim = log_truncated_gaussian(self.k, 0.0, a, temperature)
        else:
            raise ConfigError(f"f0 = {f0!r}; expected one of {F0_KINDS}")
        return float(-self.energy0 / temperature + math.fsum(per_dim))

    def summary(self) -> dict[str, Any]:
        kk = self.k[~self.uniform]
        out: dict[str, Any] = {"n_params": self.n_params, "n_uniform": self.n_uniform,
                               "energy0": self.energy0}
        if kk.size:
            out.update(k_min=float(kk.min()), k_median=float(np.median(kk)),
                       k_max=float(kk.max()), log_k_mean=float(np.mean(np.log(kk)))
                       if np.all(kk > 0) else float("-inf"))
        return out


# --- the bridging potential ------------------------------------------------------------------

class BridgePotential(Potential):
    """``J_λ(w) = E0 + (1-λ)(E(w) - E0) + λ Σ k_i (w_i - w0_i)²/2`` around a base potential.

    ``λ`` is the mutable attribute :attr:`lam`. At λ = 0 the energy and gradient are exactly
    the base's; at λ = 1 the base is not evaluated (``J_1`` does not depend on it). Every
    evaluation stores the base energy at the evaluated point in :attr:`last_base_energy`
    (NaN at λ = 1) and is counted in :attr:`n_grad` (gradient evaluations of the base).
    """

    def __init__(self, base: Any, reference: Reference, lam: float = 0.0) -> None:
        if reference.n_params != base.n_params:
            raise ConfigError(f"reference has {reference.n_params} parameters; the potential "
                              f"has {base.n_params}")
        self.base = base
        self.n_params = int(base.n_params)
        self.set_reference(reference)
        self.lam = float(lam)
        self.last_base_energy = math.nan
        self.n_grad = 0
        self.n_energy = 0
        self._g = np.empty(self.n_params)
        self._d = np.empty(self.n_params)

    def set_reference(self, reference: Reference) -> None:
        self.reference = reference
        self.w0 = reference.w0
        self.k = reference.k
        self.e0 = reference.energy0

    def quadratic(self, theta: FloatArray) -> float:
        """``Σ k_i (w_i - w0_i)²/2``."""
        from thermonet.kernels import bridge as kb

        return float(kb.quadratic(np.ascontiguousarray(theta, dtype=np.float64), self.w0,
                                  self.k))

    def base_energy(self, theta: FloatArray) -> float:
        self.n_energy += 1
        return float(self.base.energy(theta))

    def dj_dlambda(self, theta: FloatArray, base_energy: float) -> float:
        """``Σ k_i (w_i - w0_i)²/2 - (E(w) - E0)``."""
        return self.quadratic(theta) - (base_energy - self.e0)

    def energy(self, theta: FloatArray) -> float:
        lam = self.lam
        if lam == 1.0:
            self.last_base_energy = math.nan
            return self.e0 + self.quadratic(theta)
        e = self.base_energy(theta)
        self.last_base_energy = e
        if lam == 0.0:
            return e
        return self.e0 + (1.0 - lam) * (e - self.e0) + lam * self.quadratic(theta)

    def energy_and_grad(self, theta: FloatArray, grad_out: FloatArray | None = None
                        ) -> tuple[float, FloatArray]:
        from thermonet.kernels import bridge as kb

        lam = self.lam
        if grad_out is None:
            grad_out = np.empty(self.n_params)
        if lam == 1.0:
            np.multiply(self.k, np.subtract(theta, self.w0, out=self._d), out=grad_out)
            self.last_base_energy = math.nan
            return self.e0 + self.quadratic(theta), grad_out
        self.n_grad += 1
        if lam == 0.0:
            e, g = self.base.energy_and_grad(theta, grad_out)
            if g is not grad_out:
                grad_out[:] = g
            self.last_base_energy = float(e)
            return float(e), grad_out
        e, g = self.base.energy_and_grad(theta, self._g)
        e = float(e)
        self.last_base_energy = e
        q = kb.bridge_mix(np.ascontiguousarray(theta, dtype=np.float64),
                          np.ascontiguousarray(g, dtype=np.float64), lam, self.w0, self.k,
                          grad_out)
        return self.e0 + (1.0 - lam) * (e - self.e0) + lam * q, grad_out

    def copy(self) -> BridgePotential:
        return BridgePotential(self.base.copy(), self.reference, self.lam)

    def _compiled_mlp(self) -> bool:
        from thermonet.architectures.mlp import MLPPotential

        b = self.base
        return (type(b) is MLPPotential and b.dtype == np.float64
                and not (b.threads > 1 and b._nb > 1))

    def trajectory(self, theta: FloatArray, p: FloatArray, grad: FloatArray,
                   inv_mass: FloatArray, step: float, n_steps: int, wall: int,
                   half_width: FloatArray, runaway: float,
                   precision: str = "float64") -> tuple[float, int, int, int]:
        """One HMC trajectory on ``J_λ``: at λ = 0 the base's own (compiled) trajectory; for
        the built-in MLP (float64, one thread) at 0 < λ < 1 the compiled bridge kernel;
        otherwise the generic Python loop over :meth:`energy_and_grad`."""
        if self.lam == 0.0 and isinstance(self.base, Potential) \
                and type(self.base).trajectory is not Potential.trajectory:
            e, n, status, n_ref = self.base.trajectory(theta, p, grad, inv_mass, step, n_steps,
                                                       wall, half_width, runaway, precision)
            self.n_grad += n
            self.last_base_energy = float(e)
            return e, n, status, n_ref
        if 0.0 < self.lam < 1.0 and self._compiled_mlp():
            from thermonet.kernels import bridge as kb
            from thermonet.kernels import threads as kt

            b = self.base
            with kt.blas_single():
                j, e, n, status, n_ref = kb.mlp_bridge_trajectory(
                    theta, p, grad, inv_mass, step, n_steps, wall, half_width, runaway,
                    self.lam, self.w0, self.k, self.e0, b._widths, b._out, b.x, b.y, b.block,
                    b._work, b._partial, self._g)
            self.n_grad += int(n)
            self.last_base_energy = float(e)
            return float(j), int(n), int(status), int(n_ref)
        return Potential.trajectory(self, theta, p, grad, inv_mass, step, n_steps, wall,
                                    half_width, runaway, precision)


# --- HMC driving -----------------------------------------------------------------------------

def _hmc(bridge: BridgePotential, prior: Any, config: TIConfig, wall: str,
         with_box: bool) -> Any:
    from thermonet.samplers.hmc import HMC

    step_max = float(np.median(prior.half_width))
    return HMC(bridge, prior=prior if with_box else None, temperature=config.temperature,
               n_leapfrog=config.n_leapfrog, step_size=config.step_size, wall=wall,
               step_size_max=step_max)


class _Chain:
    """An HMC chain on a bridge that also tracks the base energy at its current point."""

    def __init__(self, sampler: Any, bridge: BridgePotential, theta: FloatArray,
                 step_size: float, jitter: float = 0.0) -> None:
        self.sampler = sampler
        self.jitter = float(jitter)
        self.bridge = bridge
        self.state = sampler.init(theta, step_size)
        self.base_e = bridge.last_base_energy
        if math.isnan(self.base_e):
            self.base_e = bridge.base_energy(self.state.theta)
        self.n_accepted = 0
        self.n_reflections = 0
        self.n_divergent = 0

    def relambda(self, lam: float) -> None:
        """Move to another λ at the same point (energy and gradient recomputed)."""
        self.bridge.lam = float(lam)
        self.state = self.sampler.init(self.state.theta, self.state.step_size)
        if math.isnan(self.bridge.last_base_energy):
            self.base_e = self.bridge.base_energy(self.state.theta)
        else:
            self.base_e = self.bridge.last_base_energy
        if not math.isfinite(self.state.energy):
            raise ConvergenceError(f"J_λ is not finite ({self.state.energy}) at λ = {lam} at "
                                   "the current point; the potential returned NaN/inf there")

    def run(self, rng: np.random.Generator, n: int,
            record: Callable[[], None] | None = None) -> None:
        for _ in range(n):
            if self.jitter:
                dt = self.state.step_size
                jittered = self.state._replace(
                    step_size=dt * (1.0 + self.jitter * (2.0 * rng.random() - 1.0)))
                st, info = self.sampler.step(jittered, rng)
                self.state = st._replace(step_size=dt)
            else:
                self.state, info = self.sampler.step(self.state, rng)
            if info.is_accepted:
                self.n_accepted += 1
                e = self.bridge.last_base_energy
                self.base_e = e if not math.isnan(e) else self.bridge.base_energy(
                    self.state.theta)
            self.n_reflections += info.n_reflections
            self.n_divergent += bool(info.is_divergent)
            if record is not None:
                record()

    def reset_counters(self) -> None:
        self.n_accepted = self.n_reflections = self.n_divergent = 0

    def adapt(self, rng: np.random.Generator, factor: float) -> None:
        self.state = self.sampler.adapt(self.state, rng, factor=factor)


def fit_reference(potential: Any, theta0: Any, prior: Any, config: TIConfig | None = None,
                  rng: np.random.Generator | None = None) -> Reference:
    """Fit the diagonal reference ``k_i = T / <(w_i - w0_i)²>`` around ``w0 = theta0``.

    Samples ``exp(-E/T)`` with HMC started at ``theta0``: dt adapted coarsely (factor 0.1),
    ``0.2 kfit_burn_in`` trajectories, adapted again, ``0.8 kfit_burn_in`` trajectories,
    adapted coarsely then finely (0.9), then ``kfit_samples`` trajectories after each of which
    ``(w - w0)²`` is accumulated (paper eq. 20; original-code-spec.md §7.2). The average is
    about the minimum ``w0``, not the sample mean.

    ``config.reference="free"``: no box at all (the paper). ``"box"``: reflecting walls, and
    directions with ``sqrt(<(w_i - w0_i)²>) > uniform_threshold · a_i`` become uniform.
    ``config.k_scale`` is *not* applied here.
    """
    return _fit_reference(potential, theta0, prior, config, rng)[0]


def _fit_reference(potential: Any, theta0: Any, prior: Any, config: TIConfig | None,
                   rng: np.random.Generator | None) -> tuple[Reference, int]:
    config = TIConfig() if config is None else config
    rng = np.random.default_rng(0) if rng is None else rng
    n = potential.n_params
    w0 = as_theta(theta0, n, what="TI starting point theta0")
    _check_prior(prior, n, w0)
    e0 = float(potential.energy(w0))
    if not math.isfinite(e0):
        raise ConvergenceError(f"E(theta0) = {e0}; TI needs a finite energy at its starting "
                               "point (a minimum)")
    bridge = BridgePotential(potential, Reference(w0, np.zeros(n), np.zeros(n, bool), e0), 0.0)
    with_box = config.reference == "box"
    sampler = _hmc(bridge, prior, config, "reflect" if with_box else "endpoint", with_box)
    chain = _Chain(sampler, bridge, w0, config.step_size, config.step_jitter)
    first = math.ceil(0.2 * config.kfit_burn_in)
    chain.adapt(rng, 0.1)
    chain.run(rng, first)
    chain.adapt(rng, 0.1)
    chain.run(rng, config.kfit_burn_in - first)
    chain.adapt(rng, 0.1)
    chain.adapt(rng, 0.9)
    rsq = np.zeros(n)

    def record() -> None:
        d = chain.state.theta - w0
        rsq[:] += d * d

    chain.run(rng, config.kfit_samples, record)
    rsq /= config.kfit_samples
    if with_box:
        uniform = np.sqrt(rsq) > config.uniform_threshold * prior.half_width
    else:
        uniform = np.zeros(n, dtype=bool)
    bad = ~uniform & ~(rsq > 0)
    if bad.any():
        raise ConvergenceError(
            f"the k fit saw no motion in {int(bad.sum())} direction(s) ({chain.n_accepted} of "
            f"{config.kfit_samples} trajectories accepted, dt = {chain.state.step_size:.3g}); "
            "increase kfit_samples or check the potential")
    with np.errstate(divide="ignore"):
        k = np.where(uniform, 0.0, config.temperature / np.where(rsq > 0, rsq, 1.0))
    return Reference(w0, k, uniform, bridge.e0), bridge.n_grad


def _check_prior(prior: Any, n: int, w0: FloatArray) -> None:
    if prior is None or not hasattr(prior, "half_width"):
        raise ConfigError(f"TI needs a BoxPrior (the box |w_i| < sigma_i/2); got {prior!r}")
    if prior.n_params != n:
        raise ConfigError(f"prior has {prior.n_params} parameters; the potential has {n}")
    if not prior.contains(w0):
        raise ConfigError(f"theta0 has {prior.n_outside(w0)} parameter(s) on or outside the "
                          "prior box; TI must start inside the box (widen the prior or "
                          "minimise with the box)")


# --- the TI run ------------------------------------------------------------------------------

def _streams(seed: Any) -> tuple[np.random.Generator, np.random.Generator]:
    if isinstance(seed, np.random.SeedSequence):   # a copy: spawning advances the original
        ss = np.random.SeedSequence(seed.entropy, spawn_key=seed.spawn_key,
                                    pool_size=seed.pool_size)
    else:
        ss = np.random.SeedSequence(seed)
    a, b = ss.spawn(2)
    return np.random.Generator(np.random.PCG64(a)), np.random.Generator(np.random.PCG64(b))


def _fingerprint(potential: Any, w0: FloatArray, prior: Any, config: TIConfig, seed: Any,
                 reference: Reference | None) -> str:
    h = hashlib.sha256()
    h.update(json.dumps(config.as_dict(), sort_keys=True).encode())
    if isinstance(seed, np.random.SeedSequence):
        key: Any = (seed.entropy, seed.spawn_key)
    elif isinstance(seed, (int, np.integer)):
        key = int(seed)
    else:
        key = seed
    h.update(repr(key).encode())
    h.update(type(potential).__name__.encode())
    h.update(str(potential.n_params).encode())
    h.update(np.ascontiguousarray(w0).tobytes())
    h.update(np.ascontiguousarray(prior.half_width).tobytes())
    h.update(repr(float(potential.energy(w0))).encode())
    if reference is not None:
        for arr in (reference.w0, reference.k, reference.uniform):
            h.update(np.ascontiguousarray(arr).tobytes())
        h.update(repr(reference.energy0).encode())
    return h.hexdigest()


@dataclass
class _Progress:
    """Everything a TI run needs to continue exactly (what the checkpoint holds)."""

    next_index: int                 # λ points completed (in sweep order)
    samples: FloatArray             # (n_points, n_samples) dJ/dλ in sweep order
    step_size: FloatArray           # (n_points,) dt used for the sampling
    accepted: FloatArray            # (n_points,) accepted sampling trajectories
    reflections: FloatArray         # (n_points,)
    divergent: FloatArray           # (n_points,)
    extra_adapt: FloatArray         # (n_points,) 1 where min_acceptance forced an adaptation
    theta: FloatArray
    dt: float
    rng_state: dict[str, Any]
    elapsed: float
    n_grad: int
    kfit_grad: int


def _write_checkpoint(run_dir: Path, fp: str, ref: Reference, pr: _Progress) -> None:
    from thermonet.checkpoint import _atomic_h5

    def write(fh: Any) -> None:
        fh.attrs["format"] = TI_FORMAT
        fh.attrs["format_version"] = TI_FORMAT_VERSION
        fh.attrs["fingerprint"] = fp
        fh.attrs["next_index"] = np.int64(pr.next_index)
        fh.attrs["dt"] = float(pr.dt)
        fh.attrs["rng"] = json.dumps(pr.rng_state)
        fh.attrs["counters"] = json.dumps({"elapsed_seconds": pr.elapsed,
                                           "gradient_evaluations": pr.n_grad,
                                           "kfit_gradient_evaluations": pr.kfit_grad})
        g = fh.create_group("reference")
        g.create_dataset("w0", data=ref.w0)
        g.create_dataset("k", data=ref.k)
        g.create_dataset("uniform", data=ref.uniform)
        g.attrs["energy0"] = ref.energy0
        s = fh.create_group("sweep")
        for name in ("samples", "step_size", "accepted", "reflections", "divergent",
                     "extra_adapt"):
            s.create_dataset(name, data=getattr(pr, name))
        fh.create_dataset("theta", data=pr.theta)

    _atomic_h5(run_dir / TI_CHECKPOINT, write)


def _read_checkpoint(path: Path, fp: str) -> tuple[Reference, _Progress]:
    import h5py

    try:
        fh = h5py.File(path, "r")
    except OSError as err:
        raise CheckpointFormatError(f"{path} is not a readable HDF5 file ({err}); remove it to "
                                    "start the TI again") from None
    with fh:
        if fh.attrs.get("format") != TI_FORMAT:
            raise CheckpointFormatError(f"{path} is not a TI checkpoint (format "
                                        f"{fh.attrs.get('format')!r}; expected {TI_FORMAT!r})")
        if int(fh.attrs.get("format_version", -1)) != TI_FORMAT_VERSION:
            raise CheckpointFormatError(f"{path} has TI checkpoint version "
                                        f"{fh.attrs.get('format_version')}; expected "
                                        f"{TI_FORMAT_VERSION}")
        if fh.attrs["fingerprint"] != fp:
            raise CheckpointMismatchError(
                f"{path.parent} holds a TI of a different potential, starting point, prior, "
                "seed or configuration; use another run directory or remove it")
        counters = json.loads(fh.attrs["counters"])
        g = fh["reference"]
        ref = Reference(g["w0"][()], g["k"][()], g["uniform"][()], float(g.attrs["energy0"]))
        s = fh["sweep"]
        pr = _Progress(int(fh.attrs["next_index"]), s["samples"][()], s["step_size"][()],
                       s["accepted"][()], s["reflections"][()], s["divergent"][()],
                       s["extra_adapt"][()],
                       fh["theta"][()], float(fh.attrs["dt"]), json.loads(fh.attrs["rng"]),
                       float(counters["elapsed_seconds"]),
                       int(counters["gradient_evaluations"]),
                       int(counters["kfit_gradient_evaluations"]))
    return ref, pr


def thermodynamic_integration(potential: Any, theta0: Any, prior: Any,
                              config: TIConfig | None = None, *, seed: Any = 0,
                              reference: Reference | None = None,
                              run_dir: str | os.PathLike[str] | None = None,
                              progress: Callable[[int, int, dict[str, Any]], None] | None = None
                              ) -> EvidenceResult:
    """``log ∫_{|w_i|<a_i} exp(-E(w)/T) dw`` by thermodynamic integration from ``theta0``.

    Parameters
    ----------
    potential : thermonet.api.Potential
        E(w), untempered, summed over the data.
    theta0 : ndarray, shape (n_params,)
        The minimum w0 the reference is centred on (inside the box).
    prior : thermonet.priors.BoxPrior
        The box ``|w_i| < sigma_i/2``.
    config : TIConfig, optional
    seed : int or numpy.random.SeedSequence
        Root of every random number: child 0 fits the reference, child 1 drives the sweep.
    reference : Reference, optional
        A reference to use instead of fitting one (``config.k_scale`` still applies).
    run_dir : path, optional
        Directory for an HDF5 checkpoint written atomically after every λ. Calling again with
        the same directory resumes and gives a bit-identical result; a directory holding the
        TI of another potential, start, prior, seed or config is refused.
    progress : callable, optional
        ``progress(j, n_points, info)`` after the j-th λ point of the sweep (0-based, sweep
        order); ``info`` has ``lambda``, ``mean``, ``sem``, ``acceptance``, ``step_size``.
        An exception raised by it stops the run after the checkpoint of that point.

    Returns
    -------
    EvidenceResult
        ``method="ti"``; ``details`` holds the per-λ table, the Monte Carlo and quadrature
        errors of the integral separately, ``log_z0`` and the reference summary.
    """
    config = TIConfig() if config is None else config
    if not isinstance(config, TIConfig):
        raise ConfigError(f"config is a {type(config).__name__}; expected a TIConfig")
    t_start = time.perf_counter()
    n = potential.n_params
    w0 = as_theta(theta0, n, what="TI starting point theta0")
    _check_prior(prior, n, w0)
    integrator = _integrator(config.quadrature)
    rng_fit, rng = _streams(seed)
    lambdas = config.lambdas
    n_pts = lambdas.size
    order = np.arange(n_pts)[::-1] if config.reverse else np.arange(n_pts)

    path = None
    fp = ""
    resumed = None
    if run_dir is not None:
        path = Path(run_dir)
        path.mkdir(parents=True, exist_ok=True)
        fp = _fingerprint(potential, w0, prior, config, seed, reference)
        if (path / TI_CHECKPOINT).exists():
            resumed = _read_checkpoint(path / TI_CHECKPOINT, fp)

    if resumed is not None:
        ref, pr = resumed
        rng.bit_generator.state = pr.rng_state
        bridge = BridgePotential(potential, ref)
    else:
        kfit_grad = 0
        if reference is None:
            ref, kfit_grad = _fit_reference(potential, w0, prior, config, rng_fit)
        else:
            if reference.n_params != n:
                raise ConfigError(f"reference has {reference.n_params} parameters; the "
                                  f"potential has {n}")
            ref = reference
        ref = ref.scaled(config.k_scale) if config.k_scale != 1.0 else ref
        bridge = BridgePotential(potential, ref)
        pr = _Progress(0, np.full((n_pts, config.n_samples), np.nan), np.full(n_pts, np.nan),
                       np.zeros(n_pts), np.zeros(n_pts), np.zeros(n_pts), np.zeros(n_pts),
                       w0.copy(),
                       config.step_size, {}, 0.0, 0, kfit_grad)

    sampler = _hmc(bridge, prior, config, config.wall, True)
    bridge.lam = float(lambdas[order[0]])
    chain = _Chain(sampler, bridge, pr.theta, pr.dt, config.step_jitter)
    if resumed is None:
        # initial burn-in at the first λ (the original code's 500 + 1000 at λ = 0)
        nb = config.initial_burn_in
        chain.adapt(rng, 0.1)
        chain.run(rng, nb // 3)
        chain.adapt(rng, 0.1)
        chain.run(rng, nb - nb // 3)
        chain.adapt(rng, 0.1)
        chain.adapt(rng, 0.9)
        pr.theta, pr.dt = chain.state.theta, chain.state.step_size
        pr.rng_state = rng.bit_generator.state
        pr.n_grad = bridge.n_grad
        pr.elapsed += time.perf_counter() - t_start
        t_start = time.perf_counter()
        if path is not None:
            _write_checkpoint(path, fp, ref, pr)
    grad0 = bridge.n_grad

    for pos in range(pr.next_index, n_pts):
        j = order[pos]
        chain.relambda(lambdas[j])
        chain.reset_counters()
        chain.run(rng, config.n_burn_in)
        if config.n_burn_in and chain.n_accepted < config.min_acceptance * config.n_burn_in:
            chain.adapt(rng, 0.1)
            chain.adapt(rng, 0.9)
            pr.extra_adapt[pos] = 1
        elif config.readapt_every and pos % config.readapt_every == 0 and pos != 0:
            chain.adapt(rng, 0.9)
        chain.reset_counters()
        row = pr.samples[pos]
        count = [0]

        def record(row: FloatArray = row, count: list[int] = count) -> None:
            row[count[0]] = bridge.dj_dlambda(chain.state.theta, chain.base_e)
            count[0] += 1

        chain.run(rng, config.n_samples, record)
        pr.step_size[pos] = chain.state.step_size
        pr.accepted[pos] = chain.n_accepted
        pr.reflections[pos] = chain.n_reflections
        pr.divergent[pos] = chain.n_divergent
        pr.next_index = pos + 1
        pr.theta, pr.dt = chain.state.theta, chain.state.step_size
        pr.rng_state = rng.bit_generator.state
        now = time.perf_counter()
        pr.elapsed += now - t_start
        t_start = now
        pr.n_grad += bridge.n_grad - grad0
        grad0 = bridge.n_grad
        if path is not None:
            _write_checkpoint(path, fp, ref, pr)
        if progress is not None:
            mean = float(np.mean(row))
            progress(pos, n_pts, {"lambda": float(lambdas[j]), "mean": mean,
                                  "sem": _sem(row), "acceptance":
                                  chain.n_accepted / config.n_samples,
                                  "step_size": chain.state.step_size})
    return _result(config, ref, prior, lambdas, order, pr, integrator, seed)


def _sem(row: FloatArray) -> float:
    from thermonet.stats import mean_and_error

    return float(mean_and_error(row)[1])


def _integrator(name: str) -> Any:
    from thermonet import registry

    return registry.load("integrator", name)()


def _result(config: TIConfig, ref: Reference, prior: Any, lambdas: FloatArray,
            order: FloatArray, pr: _Progress, integrator: Any, seed: Any) -> EvidenceResult:
    from thermonet.integrators.quadrature import Simpson, Trapezoid
    from thermonet.stats import integrated_autocorrelation_time, mean_and_error

    t = config.temperature
    inv = np.argsort(order)                 # sweep position of each ascending λ
    samples = pr.samples[inv]
    n_pts = lambdas.size
    mean = np.empty(n_pts)
    sem = np.empty(n_pts)
    tau = np.empty(n_pts)
    accepted = pr.accepted[inv]
    for j in range(n_pts):
        mean[j], sem[j] = mean_and_error(samples[j])
        tau[j] = integrated_autocorrelation_time(samples[j])
        if accepted[j] == 0:     # a stuck chain: its zero variance says nothing
            sem[j] = math.nan
    main = integrator.integrate(lambdas, mean, sem)
    other = (Trapezoid() if integrator.name != "trapezoid" else Simpson()).integrate(
        lambdas, mean, sem)
    half = None
    if n_pts >= 5:
        sl = slice(0, None, 2) if (n_pts - 1) % 2 == 0 else None
        if sl is not None:
            half = integrator.integrate(lambdas[sl], mean[sl]).value
        else:  # even count: both half grids through the end points are uneven; use 0,2,..,N,N+1
            idx = np.r_[np.arange(0, n_pts - 1, 2), n_pts - 1]
            half = integrator.integrate(lambdas[idx], mean[idx]).value
    quad_err = abs(main.value - other.value)
    log_z0 = ref.log_z0(prior.half_width, t, config.f0)
    log_z0_exact = ref.log_z0(prior.half_width, t, "exact")
    log_z0_centred = ref.log_z0(prior.half_width, t, "centred")
    log_integral = log_z0 + main.value / t
    err = math.hypot(main.error, quad_err) / t
    acc = pr.accepted[inv] / config.n_samples
    details: dict[str, Any] = {
        "lambdas": lambdas.tolist(),
        "dj_mean": mean.tolist(),
        "dj_sem": sem.tolist(),
        "tau_int": tau.tolist(),
        "step_size": pr.step_size[inv].tolist(),
        "acceptance": acc.tolist(),
        "wall_reflections": pr.reflections[inv].astype(int).tolist(),
        "divergent": pr.divergent[inv].astype(int).tolist(),
        "extra_adaptation": pr.extra_adapt[inv].astype(int).tolist(),
        "integral": main.value,
        "integral_mc_error": main.error,
        "integral_quadrature_error": quad_err,
        "integral_other_rule": other.value,
        "other_rule": _other_name(integrator.name),
        "integral_half_grid": half,
        "log_integral_mc_error": main.error / t,
        "log_integral_quadrature_error": quad_err / t,
        "log_z0": log_z0,
        "log_z0_exact": log_z0_exact,
        "log_z0_centred": log_z0_centred,
        "f0": config.f0,
        "n_uniform": ref.n_uniform,
        "reference": ref.summary(),
        "elapsed_seconds": pr.elapsed,
        "gradient_evaluations": pr.n_grad + pr.kfit_grad,
        "kfit_gradient_evaluations": pr.kfit_grad,
        "seed": int(seed) if isinstance(seed, (int, np.integer)) else repr(seed),
        "config": config.as_dict(),
        "completed": bool(pr.next_index == n_pts),
    }
    return EvidenceResult("ti", t, ref.n_params, ref.energy0, float(log_integral), float(err),
                          prior.log_volume, details)


def _other_name(name: str) -> str:
    return "trapezoid" if name != "trapezoid" else "simpson"


def repeat_ti(potential: Any, theta0: Any, prior: Any, config: TIConfig | None,
              seeds: Sequence[Any], *, workers: int = 1, reference: Reference | None = None
              ) -> tuple[list[EvidenceResult], float, float]:
    """Independent TI runs, one per seed, ``workers`` at a time (threads).

    Each run has its own copy of the potential (``potential.copy()``) and draws only from its
    own seed, so the results do not depend on ``workers``. Returns the results (in the order of
    ``seeds``), the mean of ``log_integral`` and its sample standard deviation (NaN for one
    run).
    """
    from thermonet.api.parallel import make_executor

    seeds = list(seeds)
    if not seeds:
        raise ConfigError("repeat_ti needs at least one seed")
    executor = make_executor(int(workers))
    try:
        results = executor.map(
            lambda s: thermodynamic_integration(potential.copy(), theta0, prior, config,
                                                seed=s, reference=reference), seeds)
    finally:
        close = getattr(executor, "close", None)
        if close is not None:
            close()
    vals = np.array([r.log_integral for r in results])
    std = float(np.std(vals, ddof=1)) if vals.size > 1 else math.nan
    return results, float(np.mean(vals)), std
