"""A variational reference for parallel tempering: a diagonal Gaussian ``q`` and the path from
it to the target.

The prior-only ladder tempers ``exp(-E/T) prior`` from the prior (``T = inf``) down to
``T_min``. A variational leg instead joins a fitted Gaussian ``q`` to the same target along

    pi_b(w) ∝ q(w)^(1 - b) * (exp(-E(w)/T_min) box(w))^b,     b in [0, 1]

(Surjanovic, Syed, Bouchard-Côté & Campbell, NeurIPS 2022). With ``R = -log q`` a rung's
potential is ``V_b = (1 - b) R + b E/T_min = R + b W``, ``W = E/T_min - R``, so the rungs swap
by the usual rule ``(b_j - b_k)(W_j - W_k)`` with ``W`` in place of the energy, and the
stepping-stone sum of ``W`` along the leg gives ``log ∫ exp(-E/T_min) box dw - log Z_q`` (``q``
is normalised: ``log Z_q = 0``). Outside the box ``pi_b`` is 0 for every ``b > 0``, so ``W`` is
``+inf`` there and a draw of ``q`` outside the box is never swapped in.

:class:`ReferencePath` makes such a leg out of any sampler: called like a sampler class at a
"temperature" ``1/b`` it runs that sampler at ``T = 1`` on :class:`PathPotential` ``V_b``.
The rung at ``b = 0`` is ``q`` itself, drawn exactly (:class:`~thermonet.tempering.prior_rung.
PriorRung` draws from the inner sampler's ``reference``). ``q`` is fitted by moment matching
(:meth:`GaussianReference.fit`) in warm-up only, then frozen, so production is an exact chain.

References
----------
N. Surjanovic, S. Syed, A. Bouchard-Côté & T. Campbell, "Parallel tempering with a variational
reference", NeurIPS 2022 (Sec. 3, moment matching for exponential families; Sec. 4, the
stabilised two-leg form that Pigeons.jl uses).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from thermonet.api import Potential
from thermonet.errors import ConfigError
from thermonet.kernels.bridge import quadratic
from thermonet.kernels.leapfrog import beyond
from thermonet.types import FloatArray

#: smallest scale of a fitted coordinate, relative to the largest, so that a coordinate the
#: warm-up never moved does not pin the reference to a point
SCALE_FLOOR = 1e-6


@dataclass(frozen=True, eq=False)
class GaussianReference:
    """A normalised diagonal Gaussian ``q ∝ N(mean, diag(scale^2))``, truncated to the box
    ``|w_i| < half_width_i`` if one is given.

    Truncated, every draw of ``q`` lies in the box, where every other rung lives: an untruncated
    ``q`` fitted to a network's posterior, whose weights spread over much of the box, puts a few
    of its thousands of coordinates outside it at nearly every draw, and such a draw is never
    swapped in. The truncated density is normalised on the box (``log Z_q = 0`` either way).

    Attributes
    ----------
    mean, scale : ndarray of float64, shape (n,)
        Read-only; ``scale > 0``.
    half_width : ndarray of float64, shape (n,), or None
        The box; None: untruncated.
    """

    mean: FloatArray
    scale: FloatArray
    half_width: FloatArray | None = None
    _log_norm: float = field(init=False, repr=False, compare=False)
    _precision: FloatArray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        m = np.array(self.mean, dtype=np.float64)
        s = np.array(self.scale, dtype=np.float64)
        if m.ndim != 1 or s.shape != m.shape:
            raise ConfigError(f"reference mean has shape {m.shape} and scale {s.shape}; "
                              "expected two vectors of the same length")
        if not (np.all(np.isfinite(m)) and np.all(np.isfinite(s)) and np.all(s > 0)):
            raise ConfigError("reference mean and scale must be finite and the scales > 0; "
                              f"got {int(np.count_nonzero(~(s > 0)))} scale(s) <= 0 or NaN")
        log_norm = float(np.sum(np.log(s)) + 0.5 * m.size * math.log(2 * math.pi))
        h = None
        if self.half_width is not None:
            h = np.array(self.half_width, dtype=np.float64)
            if h.shape != m.shape or not np.all(h > 0):
                raise ConfigError(f"reference half_width has shape {h.shape}; expected "
                                  f"{m.shape} positive half-widths of the box")
            mass = box_mass(m, s, h)
            if not np.all(mass >= 1e-3):
                i = int(np.argmin(mass))
                raise ConfigError(f"the reference puts {mass[i]:.2g} of its mass in the box "
                                  f"along weight {i} (mean {m[i]:.4g}, scale {s[i]:.4g}, "
                                  f"half-width {h[i]:.4g}); expected >= 1e-3: fit it to "
                                  "samples from inside the box")
            log_norm += float(np.sum(np.log(mass)))
            h.flags.writeable = False
        m.flags.writeable = False
        s.flags.writeable = False
        object.__setattr__(self, "mean", m)
        object.__setattr__(self, "scale", s)
        object.__setattr__(self, "half_width", h)
        object.__setattr__(self, "_log_norm", log_norm)
        precision = 1.0 / (s * s)
        precision.flags.writeable = False
        object.__setattr__(self, "_precision", precision)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, GaussianReference)
                and np.array_equal(self.mean, other.mean)
                and np.array_equal(self.scale, other.scale)
                and ((self.half_width is None and other.half_width is None)
                     or (self.half_width is not None and other.half_width is not None
                         and np.array_equal(self.half_width, other.half_width))))

    def __hash__(self) -> int:
        return hash((self.mean.tobytes(), self.scale.tobytes()))

    @classmethod
    def of_box(cls, half_width: Any) -> GaussianReference:
        """The Gaussian with the moments of the uniform box ``|w_i| < half_width_i``, truncated
        to it: the starting reference before any fit."""
        h = np.asarray(half_width, dtype=np.float64)
        return cls(np.zeros_like(h), h / math.sqrt(3.0), h)

    @classmethod
    def fit(cls, theta_nd: Any, half_width: Any = None) -> GaussianReference:
        """Moment matching (Surjanovic et al. 2022, Sec. 3.2): the mean and standard deviation
        of each coordinate over the rows of ``theta_nd`` (at least two samples); scales are
        floored at ``SCALE_FLOOR`` times the largest. With ``half_width`` the result is
        truncated to the box, its parameters still the sample moments (the truncated family's
        own moment matching would widen it slightly; any ``q`` keeps the chain exact)."""
        x = np.asarray(theta_nd, dtype=np.float64)
        if x.ndim != 2 or x.shape[0] < 2:
            raise ConfigError(f"a reference fit needs an array of >= 2 samples by parameters; "
                              f"got shape {x.shape}")
        s = x.std(axis=0, ddof=1)
        top = float(np.max(s))
        if not top > 0:
            raise ConfigError("every sample of the reference fit is the same point; run more "
                              "warm-up iterations before fitting")
        return cls(x.mean(axis=0), np.maximum(s, SCALE_FLOOR * top), half_width)

    @property
    def n_params(self) -> int:
        """The dimension of ``q``."""
        return int(self.mean.size)

    @property
    def log_normaliser(self) -> float:
        """``log ∫ q`` = 0: ``q`` is a normalised density."""
        return 0.0

    @property
    def precision(self) -> FloatArray:
        """``1 / scale^2`` per coordinate (read-only): the stiffness of ``R``."""
        return self._precision

    @property
    def energy_offset(self) -> float:
        """``R(mean)``: the constant in ``R(w) = |(w - mean)/scale|^2/2 + R(mean)``."""
        return float(self._log_norm)

    def _outside(self, theta: FloatArray) -> bool:
        # compiled: NumPy's abs, compare and all cost more than a small model's gradient
        return self.half_width is not None and bool(beyond(
            np.asarray(theta, dtype=np.float64), self.half_width, 1.0))

    def energy(self, theta: FloatArray) -> float:
        """``R(w) = -log q(w)`` (``+inf`` outside the box of a truncated ``q``)."""
        if self._outside(theta):
            return math.inf
        # compiled, without temporaries: the engine calls this for every rung and iteration,
        # and NumPy's version (two arrays and a BLAS dot) cost as much as a trajectory
        return float(quadratic(np.ascontiguousarray(theta, dtype=np.float64), self.mean,
                               self._precision) + self._log_norm)

    def energy_and_grad(self, theta: FloatArray) -> tuple[float, FloatArray]:
        """``R(w)`` and its gradient ``(w - mean) / scale^2`` (inside the box)."""
        d = theta - self.mean
        g = d / (self.scale * self.scale)
        if self._outside(theta):
            return math.inf, g
        return float(0.5 * np.dot(d, g) + self._log_norm), g

    def sample(self, rng: np.random.Generator) -> FloatArray:
        """One exact draw of ``q``: truncated, the coordinates that fall outside the box are
        redrawn until inside (rejection sampling; each keeps its box mass >= 1e-3)."""
        x = self.mean + self.scale * rng.standard_normal(self.mean.size)
        if self.half_width is None:
            return x
        out = np.flatnonzero(np.abs(x) >= self.half_width)
        while out.size:
            x[out] = self.mean[out] + self.scale[out] * rng.standard_normal(out.size)
            out = out[np.abs(x[out]) >= self.half_width[out]]
        return x

    def to_dict(self) -> dict[str, Any]:
        """The parameters as lists (for a checkpoint); :meth:`from_dict` inverts it exactly."""
        return {"mean": self.mean.tolist(), "scale": self.scale.tolist(),
                "half_width": None if self.half_width is None else self.half_width.tolist()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GaussianReference:
        """The reference stored by :meth:`to_dict`."""
        h = data.get("half_width")
        return cls(np.asarray(data["mean"]), np.asarray(data["scale"]),
                   None if h is None else np.asarray(h))


def box_mass(mean: FloatArray, scale: FloatArray, half_width: FloatArray) -> FloatArray:
    """``P(|w_i| < h_i)`` under ``N(mean_i, scale_i^2)``, per coordinate."""
    erf = np.vectorize(math.erf, otypes=[np.float64])
    root2 = math.sqrt(2.0)
    hi = (half_width - mean) / (scale * root2)
    lo = (-half_width - mean) / (scale * root2)
    return np.asarray(0.5 * (erf(hi) - erf(lo)), dtype=np.float64)


class PathPotential(Potential):
    """``V_b(w) = (1 - b) R(w) + b E(w)/T_min`` (R = -log q): the potential of a rung at
    ``b`` on the path from ``reference`` to the target ``exp(-E/T_min)``. Run a sampler on it at
    ``T = 1``. At ``b = 0`` the data energy is not evaluated."""

    def __init__(self, base: Any, reference: GaussianReference, b: float, t_min: float
                 ) -> None:
        if reference.n_params != base.n_params:
            raise ConfigError(f"the reference has {reference.n_params} parameters; the "
                              f"potential has {base.n_params}; fit it to this model's samples")
        if not (0.0 <= b <= 1.0):
            raise ConfigError(f"path coordinate b = {b}; expected 0 <= b <= 1")
        if not (math.isfinite(t_min) and t_min > 0):
            raise ConfigError(f"t_min = {t_min}; expected a positive finite temperature")
        self.base = base
        self.reference = reference
        self.b = float(b)
        self.t_min = float(t_min)
        self.n_params = base.n_params
        self._scratch: tuple[FloatArray, FloatArray] | None = None
        self._compiled = type(base).trajectory is not Potential.trajectory
        self._bridge: bool | None = None      # whether the base's bridge kernel takes V_b

    def energy(self, theta: FloatArray) -> float:
        if self.b == 1.0:              # q has no weight (and may be +inf outside its box)
            return float(self.base.energy(theta)) / self.t_min
        r = self.reference.energy(theta)
        if self.b == 0.0:
            return r
        return (1.0 - self.b) * r + self.b * float(self.base.energy(theta)) / self.t_min

    def energy_and_grad(self, theta: FloatArray, grad_out: FloatArray | None = None
                        ) -> tuple[float, FloatArray]:
        if self.b == 1.0:
            e, ge = self.base.energy_and_grad(theta)
            v, g = float(e) / self.t_min, np.asarray(ge) / self.t_min
        else:
            v, g = self._mixed(theta)
        if grad_out is None:
            return v, np.ascontiguousarray(g, dtype=np.float64)
        grad_out[:] = g
        return v, grad_out

    def _mixed(self, theta: FloatArray) -> tuple[float, FloatArray]:
        r, gr = self.reference.energy_and_grad(theta)
        if self.b == 0.0:
            v, g = r, gr
        else:
            e, ge = self.base.energy_and_grad(theta)
            c = self.b / self.t_min
            v = (1.0 - self.b) * r + c * float(e)
            g = (1.0 - self.b) * gr + c * np.asarray(ge)
        return v, g

    def trajectory(self, theta: FloatArray, p: FloatArray, grad: FloatArray,
                   inv_mass: FloatArray, step: float, n_steps: int, wall: int,
                   half_width: FloatArray, runaway: float,
                   precision: str = "float64") -> tuple[float, int, int, int]:
        """One trajectory on ``V_b`` in a compiled call where the base has one (the built-in
        MLP, float64); otherwise the generic Python loop over :meth:`energy_and_grad`.

        ``T_min V_b`` is the base's own energy at ``b = 1`` and its TI bridge ``J_λ``
        (:meth:`~thermonet.api.Potential.bridge_trajectory`) with ``λ = 1 - b``, centre
        ``mean``, stiffness ``T_min / scale^2`` and ``E0 = T_min R(mean)`` in between.
        Leapfrog on ``V = J/T_min`` with inverse mass ``M^-1`` is leapfrog on ``J`` with
        momenta ``T_min p`` and inverse mass ``M^-1/T_min``: the same map, so the chain stays
        exact. Outside a truncated ``q``'s box the bridge continues the Gaussian; the
        sampler's end-point test (or the reflecting wall) keeps every state inside.
        """
        t = self.t_min
        if self.b == 0.0 or not self._compiled or (self.b < 1.0 and self._bridge is False):
            return Potential.trajectory(self, theta, p, grad, inv_mass, step, n_steps, wall,
                                        half_width, runaway, precision)
        # until the base is known to have a bridge kernel, keep the draws to fall back on
        saved = (p.copy(), grad.copy()) if self.b < 1.0 and self._bridge is None else None
        p *= t
        grad *= t
        inv_mass_t = inv_mass / t
        if self.b == 1.0:
            e, n, status, n_ref = self.base.trajectory(theta, p, grad, inv_mass_t, step,
                                                       n_steps, wall, half_width, runaway,
                                                       precision)
            j = float(e)
        else:
            if self._scratch is None:
                self._scratch = (t * self.reference.precision, np.empty(self.n_params))
            k_t, scratch = self._scratch
            out = self.base.bridge_trajectory(
                theta, p, grad, inv_mass_t, step, n_steps, wall, half_width, runaway,
                1.0 - self.b, self.reference.mean, k_t, t * self.reference.energy_offset,
                scratch)
            if out is None:
                # only on the first call (saved): the base declines before touching anything
                self._bridge = False
                p[:], grad[:] = saved if saved is not None else (p / t, grad / t)
                return Potential.trajectory(self, theta, p, grad, inv_mass, step, n_steps,
                                            wall, half_width, runaway, precision)
            self._bridge = True
            j, _, n, status, n_ref = out
        p /= t
        grad /= t
        return j / t, n, status, n_ref

    def copy(self) -> PathPotential:
        return PathPotential(self.base.copy(), self.reference, self.b, self.t_min)


class PathSampler:
    """A sampler at path coordinate ``b`` of a variational leg: ``inner`` (any sampler class)
    at ``T = 1`` on :class:`PathPotential`. Its swap energy is ``W = E/T_min - R`` (``+inf``
    outside the box), which the engine's rule multiplies by ``b = 1/T``."""

    def __init__(self, inner: Any, reference: GaussianReference, b: float, prior: Any) -> None:
        self.inner = inner
        self.reference = reference
        self.b = b
        self._box = prior
        self.potential = inner.potential
        self.masses = inner.masses
        self.config = inner.config
        self.prior = inner.prior
        self.temperature = math.inf if b == 0.0 else 1.0 / b

    def __getattr__(self, name: str) -> Any:
        # everything else (adaptation, step-size correction, info) is the inner sampler's
        return getattr(self.inner, name)

    def init(self, theta0: Any, step_size: float | None = None) -> Any:
        state = self.inner.init(theta0)
        return state if step_size is None else state._replace(step_size=step_size)

    def step(self, state: Any, rng: np.random.Generator) -> tuple[Any, Any]:
        return self.inner.step(state, rng)

    def hmc_transition(self) -> None:
        """None: only :meth:`step` runs this rung (its potential has no compiled form)."""
        return None

    def state_energy(self, state: Any) -> float:
        return float(self.potential.energy(state.theta))

    def swap_energy(self, state: Any) -> float:
        """``W = (V_b - R)/b = E/T_min - R`` from the state's ``V_b``; ``+inf`` outside the
        box, where every rung with ``b > 0`` has density 0."""
        theta = state.theta
        if self._box is not None and not self._box.contains(theta):
            return math.inf
        r = self.reference.energy(theta)
        return (float(state.energy) - r) / self.b

    def take_configuration(self, state: Any, donor: Any, donor_temperature: float) -> Any:
        """The donor's configuration with ``V`` and its gradient evaluated at this rung's
        ``b`` (the rungs' potentials differ, not only their temperatures)."""
        return self.init(donor.theta, step_size=state.step_size)


@dataclass(frozen=True)
class ReferencePath:
    """A sampler "class" for :class:`~thermonet.tempering.ReplicaExchange` over a ladder of
    ``T = 1/b``: builds a :class:`PathSampler` of ``sampler_cls`` at each rung. The rung at
    ``T = inf`` (``b = 0``) is made a prior rung by the engine, which then draws from
    ``reference``."""

    sampler_cls: type
    reference: GaussianReference
    t_min: float

    @property
    def Config(self) -> Any:
        return getattr(self.sampler_cls, "Config", None)

    def __call__(self, potential: Any, *, prior: Any = None, temperature: float = 1.0,
                 masses: Any = None, config: Any = None) -> PathSampler:
        b = 0.0 if math.isinf(temperature) else 1.0 / float(temperature)
        # the engine hands a moved rung its former potential: take the data energy under it
        base = potential.base if isinstance(potential, PathPotential) else potential
        path = PathPotential(base, self.reference, b, self.t_min)
        inner = self.sampler_cls(path, prior=prior, temperature=1.0, masses=masses,
                                 config=config)
        return PathSampler(inner, self.reference, b, prior)


def path_ladder_temperatures(b_k: Any) -> FloatArray:
    """The engine's temperatures ``1/b`` of a variational leg with path coordinates ``b_k``
    (strictly descending from 1 to 0: the target first, ``q`` last)."""
    b = np.asarray(b_k, dtype=np.float64)
    if (b.ndim != 1 or b.size < 2 or b[0] != 1.0 or b[-1] != 0.0
            or np.any(np.diff(b) >= 0)):
        raise ConfigError(f"variational path = {b.tolist()}; expected a strictly descending "
                          "list from 1 (the target) to 0 (the reference)")
    with np.errstate(divide="ignore"):
        return 1.0 / b


__all__ = [
    "GaussianReference",
    "PathPotential",
    "PathSampler",
    "ReferencePath",
    "box_mass",
    "path_ladder_temperatures",
]
