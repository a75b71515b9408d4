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

from thermonet.errors import ConfigError


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
        Anything with ``sample(rng)`` returning a draw strictly inside the box.
    """

    temperature = math.inf

    def __init__(self, inner: Any, prior: Any) -> None:
        if prior is None or not hasattr(prior, "sample"):
            raise ConfigError("a prior rung (ladder.prior_rung = true) needs a proper prior "
                              "to draw from (the box prior); this run has none")
        if getattr(inner, "hyper_model", None) is not None:
            raise ConfigError("a prior rung (ladder.prior_rung = true) draws from the box prior, "
                              "but this sampler's target has a hierarchical prior with "
                              "hyperparameters, which has no exact draw here; set "
                              "ladder.prior_rung = false and a finite t_max")
        self.inner = inner
        self.prior = prior
        self.potential = inner.potential
        self.masses = inner.masses

    def draw(self, rng: np.random.Generator, step_size: float | None = None) -> Any:
        """A state at a fresh prior draw (energy and gradient evaluated once)."""
        state = self.inner.init(self.prior.sample(rng))
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
        """The donor's configuration (its energy does not depend on the temperature)."""
        return donor._replace(step_size=state.step_size)


__all__ = ["PriorRung", "PriorRungInfo"]
