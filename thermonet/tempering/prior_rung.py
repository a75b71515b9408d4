"""The hot end of a ladder at ``beta = 0``: exact, independent draws from the prior.

At ``beta = 0`` the tempered posterior ``exp(-beta E) prior`` is the prior itself (the box, or
the box times a tempered Gaussian prior, which is then part of the potential and vanishes with
it). Drawing it exactly, instead of running a sampler there, regenerates every replica that
reaches the top of the ladder: a replica carried down from it to the cold end is a "restart"
(Syed et al. 2022; Pigeons.jl), a fresh independent start of the coldest chain. The swap rule
is unchanged: ``(beta_j - 0)(E_j - E_prior)``.

References
----------
S. Syed, A. Bouchard-Côté, G. Deligiannidis & A. Doucet, JRSS B 84 (2022) 321, Sec. 2 and 5.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from thermonet.api import Potential
from thermonet.errors import ConfigError
from thermonet.tempering.reference import PathSampler


class PriorRungInfo(NamedTuple):
    """Diagnostics of one prior draw (every draw is accepted: it is exact)."""

    is_accepted: bool = True
    is_divergent: bool = False


class PriorRung:
    """A sampler-like slot at ``T = inf`` that replaces its state by a prior draw.

    Parameters
    ----------
    inner : thermonet.api.Sampler
        The ladder's own sampler (at any finite temperature); only its ``init`` is used, so
        that the prior rung's states are of the same ``State`` class (with energy and gradient)
        as every other slot's and can be exchanged with them.
    prior : BoxPrior
        Anything with ``sample(rng)`` returning a draw strictly inside the box; not used when
        the inner sampler's potential draws from a proper prior of its own
        (``prior_sample``: a regression network's Gaussian prior, with its hyperparameters
        drawn first from their Gamma priors when it is hierarchical; the temperature does
        not divide that prior, so ``swap_energy`` is the likelihood's and ``log Z(1)`` is the
        evidence with the hyperparameters integrated out).
    """

    temperature = math.inf

    def __init__(self, inner: Any, prior: Any) -> None:
        # only a potential that overrides the hook has a prior of its own to draw from
        own = getattr(inner.potential, "prior_sample", None)
        if getattr(type(inner.potential), "prior_sample", None) is Potential.prior_sample:
            own = None
        hyper = getattr(inner, "hyper_model", None)
        if hyper is not None and own is None:
            raise ConfigError("a prior rung (ladder.prior_rung = true) draws from the prior, "
                              f"but this sampler's target has a prior of its own ("
                              f"{hyper.n_hyper} hyperparameters) that "
                              f"{type(inner.potential).__name__} cannot draw exactly; set "
                              "ladder.prior_rung = false and a finite t_max")
        if own is not None and hyper is None:
            raise ConfigError("a prior rung draws from the potential's own prior, but "
                              f"{type(inner).__name__} divides the whole energy, prior term "
                              "included, by T, so its target at beta = 0 is not that prior; "
                              "use a sampler that tempers the likelihood only (hmc-gibbs) or "
                              "ladder.prior_rung = false")
        #: a variational leg's rung at b = 0 draws its reference q instead of the prior
        self.reference = inner.reference if isinstance(inner, PathSampler) else None
        if self.reference is not None:
            own = self.reference.sample
        if prior is None and own is None:
            raise ConfigError("a prior rung (ladder.prior_rung = true) needs a proper prior "
                              "to draw from (the box prior); this run has none")
        #: hyperparameters drawn with the weights (a hierarchical prior), or None
        self.hyper_model = hyper if hyper is not None and hyper.n_hyper > 0 else None
        self.inner = inner
        self.prior = prior
        self._own_sample = own
        self.potential = inner.potential
        self.masses = inner.masses

    @property
    def draws_from_box(self) -> bool:
        """Whether the draws come from the run's box prior (uniform in the box), not from a
        prior of the potential's own."""
        return self._own_sample is None

    def sample(self, rng: np.random.Generator) -> tuple[Any, Any]:
        """A configuration drawn from the prior, and its hyperparameters (None without a
        hierarchy): the potential's own proper prior if it has one
        (:meth:`thermonet.api.Potential.prior_sample`; hyperparameters first, from
        :meth:`thermonet.api.hyper.HyperModel.sample`), else the box."""
        if self._own_sample is None:
            return self.prior.sample(rng), None
        if self.hyper_model is None:
            return self._own_sample(rng), None
        hyper = self.hyper_model.sample(rng)
        return self._own_sample(rng, hyper), hyper

    def draw(self, rng: np.random.Generator, step_size: float | None = None) -> Any:
        """A state at a fresh prior draw (energy and gradient evaluated once)."""
        theta, hyper = self.sample(rng)
        state = (self.inner.init(theta) if hyper is None else
                 self.inner.init(theta, hyper=hyper))
        return state if step_size is None else state._replace(step_size=step_size)

    def init(self, theta0: Any) -> Any:
        """The state at ``theta0`` (a starting point like any other slot's)."""
        return self.inner.init(theta0)

    def step(self, state: Any, rng: np.random.Generator) -> tuple[Any, PriorRungInfo]:
        """Replace the configuration by an independent prior draw (always accepted)."""
        return self.draw(rng, state.step_size), PriorRungInfo()

    def adapt(self, state: Any, rng: np.random.Generator, **options: Any) -> Any:
        """Nothing to tune: the draws are exact."""
        return state

    def state_energy(self, state: Any) -> float:
        """As the inner sampler's."""
        return float(self.inner.state_energy(state))

    def swap_energy(self, state: Any) -> float:
        """As the inner sampler's."""
        return float(self.inner.swap_energy(state))

    def take_configuration(self, state: Any, donor: Any, donor_temperature: float) -> Any:
        """The donor's configuration (its energy does not depend on the temperature; on a
        variational leg it does, and the inner path sampler evaluates it afresh)."""
        if self.reference is not None:
            return self.inner.take_configuration(state, donor, donor_temperature)
        return donor._replace(step_size=state.step_size)


__all__ = ["PriorRung", "PriorRungInfo"]
