"""Hyperparameters of hierarchical models: Gamma priors on precisions and their Gibbs updates.

A potential with hyperparameters (the regression MLP with a hierarchical prior) describes them
by a :class:`HyperModel`: groups of parameters that share a prior precision, each precision with
a Gamma hyperprior, and optionally an unknown noise precision with a Gamma prior. A sampler
(``hmc-gibbs``) updates the precisions by Gibbs sampling from their exact conditionals
between HMC updates of the weights (Neal 1996; Rasmussen 1996, Sec. 2.2.2).

Gamma priors are given as Neal's FBM gives them: a *width* ``s`` (the precision's prior mean is
``mu = 1/s^2``) and a *shape* ``alpha``, with density ``p(tau) ∝ tau^(alpha/2 - 1)
exp(-tau alpha / (2 mu))``: an ordinary Gamma of shape ``alpha/2`` and rate ``alpha/(2 mu)``
(Rasmussen 1996, Sec. 2.1).

Conditionals at temperature T
-----------------------------
thermonet tempers the likelihood only: the target is ``p(D|w,tau)^(1/T) p(w|prec) p(prec)
p(tau)``. A group of n weights with sum of squares Q therefore has the conditional

    prec | w  ~  Gamma(shape alpha/2 + n/2,  rate alpha/(2 mu) + Q/2)        (any T)

and the noise precision, with N K residuals of squared sum 2 S(w) (N cases, K outputs), whose
likelihood factor ``tau^(NK/2) exp(-tau S)`` is raised to the power 1/T,

    tau | w, D  ~  Gamma(shape alpha/2 + N K/(2 T),  rate alpha/(2 mu) + S/T).

At T = 1 both are the usual conjugate updates. A third level (:class:`TopLevel`, Rasmussen
1996's prior on the input weights) is untempered too; its mean is updated by slice sampling
(:func:`slice_top`), as its conditional is not a Gamma.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from thermonet.errors import ConfigError
from thermonet.types import FloatArray, IntArray


@dataclass(frozen=True)
class GammaPrior:
    """A Gamma prior on a precision, by width ``s`` (mean precision ``1/s^2``) and Neal's
    shape ``alpha`` (ordinary shape ``alpha/2``)."""

    width: float
    shape: float

    def __post_init__(self) -> None:
        for key in ("width", "shape"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (
                    math.isfinite(v) and v > 0):
                raise ConfigError(f"Gamma hyperprior {key} = {v!r}; expected a finite "
                                  "positive number, e.g. width = 0.05, shape = 0.5 (Neal's "
                                  "vague prior)")

    @property
    def mean(self) -> float:
        """Prior mean of the precision, ``1/width^2``."""
        return 1.0 / self.width ** 2

    @property
    def gamma_shape(self) -> float:
        """Ordinary shape ``alpha/2``."""
        return 0.5 * self.shape

    @property
    def gamma_rate(self) -> float:
        """Ordinary rate ``alpha/(2 mu)``."""
        return 0.5 * self.shape / self.mean

    def log_density(self, tau: float) -> float:
        """``ln p(tau)`` (normalised)."""
        a, b = self.gamma_shape, self.gamma_rate
        return a * math.log(b) - math.lgamma(a) + (a - 1.0) * math.log(tau) - b * tau


@dataclass(frozen=True)
class HyperGroup:
    """Parameters ``index`` sharing one prior precision with hyperprior ``prior``; ``scale``
    multiplies the precision for these parameters (e.g. the number of hidden units for the
    hidden-to-output weights, so the output's prior scale does not grow with it)."""

    name: str
    index: IntArray
    prior: GammaPrior
    scale: float = 1.0


@dataclass(frozen=True)
class TopLevel:
    """A third level (Rasmussen 1996, Sec. 2.1): the precisions of the groups ``members``
    have Gamma priors of Neal's shape ``unit_shape`` whose common *mean* is itself a
    hyperparameter, with the Gamma prior ``prior`` (ARD: one group per input unit, one
    common mean over the inputs).

    ``log_index``, if not empty, gives the coordinates of the *parameter vector* that hold the
    members' log precisions (Neal 1993's scale factors move them by HMC); otherwise the
    members' precisions are entries ``members`` of the hyperparameter vector."""

    name: str
    members: tuple[int, ...]
    prior: GammaPrior
    unit_shape: float
    log_index: tuple[int, ...] = ()

    def member_precisions(self, theta: FloatArray, hyper: FloatArray) -> FloatArray:
        """The members' current precisions, from ``theta`` or from ``hyper``."""
        if self.log_index:
            with np.errstate(over="ignore"):
                return np.exp(np.asarray(theta)[list(self.log_index)])
        return np.asarray(hyper)[list(self.members)]


@dataclass(frozen=True)
class HyperModel:
    """The hyperparameters of a potential, in the order of the state's ``hyper`` vector:
    one precision per group, then the noise precision if ``noise`` is not None, then the
    mean precision of each top level (:class:`TopLevel`)."""

    groups: tuple[HyperGroup, ...]
    noise: GammaPrior | None
    n_residuals: int
    tops: tuple[TopLevel, ...] = ()

    @property
    def n_hyper(self) -> int:
        return len(self.groups) + (self.noise is not None) + len(self.tops)

    @property
    def top_offset(self) -> int:
        """Index of the first top-level mean in the ``hyper`` vector."""
        return len(self.groups) + (self.noise is not None)

    def names(self) -> list[str]:
        return ([g.name for g in self.groups] + (["noise"] if self.noise is not None else [])
                + [t.name for t in self.tops])

    def sample(self, rng: np.random.Generator) -> FloatArray:
        """Hyperparameters drawn exactly from their priors, in the order of :meth:`names`:
        each top-level mean first, then every group's precision given them, then the noise
        precision (the hot end of a ladder anchored at the prior, whose weights are then
        drawn at these precisions). Top levels whose members are parameters (Neal's scale
        factors) are drawn with the parameters, not here: refused."""
        if any(top.log_index for top in self.tops):
            raise ConfigError("the hyperparameters of a scale-factor model are partly "
                              "parameters; no exact prior draw of them alone: use "
                              "parameterisation = 'direct' for a prior rung")
        h = np.empty(self.n_hyper)
        for j, top in enumerate(self.tops):
            h[self.top_offset + j] = draw_gamma(top.prior.gamma_shape, top.prior.gamma_rate,
                                                rng)
        for g in range(len(self.groups)):
            prior = self.group_prior(g, h)
            h[g] = draw_gamma(prior.gamma_shape, prior.gamma_rate, rng)
        if self.noise is not None:
            h[len(self.groups)] = draw_gamma(self.noise.gamma_shape, self.noise.gamma_rate, rng)
        return h

    def group_prior(self, g: int, hyper: FloatArray) -> GammaPrior:
        """The Gamma prior of group g's precision given ``hyper``: its own hyperprior, or,
        under a top level, shape ``unit_shape`` and mean the top level's current value."""
        for j, top in enumerate(self.tops):
            if g in top.members:
                return GammaPrior(1.0 / math.sqrt(hyper[self.top_offset + j]), top.unit_shape)
        return self.groups[g].prior


def top_conditional(top: TopLevel, precisions: FloatArray) -> tuple[float, float, float]:
    """``(c, b, d)``: the conditional of a top-level mean mu as a density of ``u = ln mu``.

    Given the members' precisions ``r_i`` (I of them),

        ln p(u | r) = c u - b e^u - d e^-u + const,
        c = A/2 - I a/2,  b = A/(2 mu0),  d = (a/2) sum_i r_i,

    with ``A``, ``mu0`` the top prior's shape and mean and ``a`` the members' shape (the
    Gamma prior of mu, its Jacobian e^u, and ``prod_i Gamma(r_i; a/2, a/(2 mu))``). In mu it
    is a generalised inverse Gaussian; in u it is log-concave, so a slice update is cheap."""
    r = np.asarray(precisions, dtype=np.float64)
    a = top.unit_shape
    return (top.prior.gamma_shape - 0.5 * a * r.size, top.prior.gamma_rate,
            0.5 * a * float(np.sum(r)))


def slice_top(c: float, b: float, d: float, u0: float, rng: np.random.Generator,
              width: float = 1.0, max_steps: int = 100) -> float:
    """One slice-sampling update (Neal 2003, stepping out and shrinkage) of ``u`` under
    ``ln f(u) = c u - b e^u - d e^-u``: leaves that density exactly invariant. Returns the
    new u. Draws: one exponential, two uniforms for the interval, then one uniform per try."""
    def logf(u: float) -> float:
        if abs(u) > 700.0:    # beyond exp's range the density is zero to float precision
            return -math.inf
        return c * u - b * math.exp(u) - d * math.exp(-u)

    level = logf(u0) - rng.exponential()
    lo = u0 - width * rng.random()
    hi = lo + width
    # the step budget split at random between the two ends keeps the update exact
    # (Neal 2003, Fig. 3)
    left = int(max_steps * rng.random())
    right = max_steps - 1 - left
    while left > 0 and logf(lo) > level:
        lo -= width
        left -= 1
    while right > 0 and logf(hi) > level:
        hi += width
        right -= 1
    while True:
        u = lo + (hi - lo) * rng.random()
        if logf(u) > level:
            return u
        if u < u0:
            lo = u
        else:
            hi = u


def group_conditional(prior: GammaPrior, n: int, sum_sq: float, scale: float = 1.0
                      ) -> tuple[float, float]:
    """``(shape, rate)`` of the Gamma conditional of a group precision (module docstring);
    the weights' precision is ``scale * prec``, so ``Q`` enters as ``scale * sum_sq``."""
    return prior.gamma_shape + 0.5 * n, prior.gamma_rate + 0.5 * scale * sum_sq


def noise_conditional(prior: GammaPrior, n_residuals: int, half_sse: float,
                      temperature: float = 1.0) -> tuple[float, float]:
    """``(shape, rate)`` of the Gamma conditional of the noise precision at temperature T,
    given ``half_sse`` = S(w) = sum of squared residuals / 2 (module docstring)."""
    return (prior.gamma_shape + 0.5 * n_residuals / temperature,
            prior.gamma_rate + half_sse / temperature)


def draw_gamma(shape: float, rate: float, rng: np.random.Generator) -> float:
    """One draw of Gamma(shape, rate) from ``rng`` (NumPy's ``gamma``, scale = 1/rate)."""
    return float(rng.gamma(shape, 1.0 / rate))
