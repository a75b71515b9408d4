"""Deprecated: replica exchange moved to :mod:`thermonet.tempering` (the engine, not a sampler
plugin); runs configure it with a ``[ladder]`` section (docs/config.md).

:class:`ReplicaExchangeHMC` keeps the constructor of the former sampler plugin
(``ReplicaExchangeHMC(potential, prior=..., t_min=..., inner={...}, sampler="hmc")``) for one
release; it is :class:`thermonet.tempering.ReplicaExchange` with the inner sampler looked up by
its registry name. It is no longer registered as a sampler. New code builds
``thermonet.tempering.ReplicaExchange(sampler_cls, potential, Ladder.geometric(...), ...)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from thermonet.errors import ConfigError
from thermonet.tempering import (
    SCHEMES,
    Ladder,
    REInfo,
    ReplicaExchange,
    REState,
    Streams,
    geometric_temperatures,
    make_scheme,
    make_streams,
)
from thermonet.types import FloatArray

SWAP_SCHEMES = tuple(SCHEMES)
geometric_ladder = geometric_temperatures


@dataclass(frozen=True)
class REHMCConfig:
    """The former plugin's settings: the ladder, the swap scheme and the inner sampler."""

    n_temperatures: int = 16
    t_min: float = 1e-2
    t_max: float = 1.0
    temperatures: tuple[float, ...] | None = None
    n_trajectories: int = 10
    swap_scheme: str = "random-pairs"
    n_swaps: int | None = None
    sampler: str = "hmc"
    inner: Mapping[str, Any] = field(default_factory=dict)
    workers: int = 1

    def __post_init__(self) -> None:
        lad = self.ladder_object()
        if self.temperatures is not None:
            object.__setattr__(self, "temperatures", tuple(float(v) for v in lad.temperature_k))
            object.__setattr__(self, "n_temperatures", lad.n_temperatures)
            object.__setattr__(self, "t_min", float(lad.temperature_k[0]))
            object.__setattr__(self, "t_max", float(lad.temperature_k[-1]))
        if self.n_trajectories < 1:
            raise ConfigError(f"n_trajectories = {self.n_trajectories}; expected >= 1")
        if self.swap_scheme not in SCHEMES:
            raise ConfigError(f"swap_scheme = {self.swap_scheme!r}; expected one of "
                              f"{SWAP_SCHEMES}")
        if self.n_swaps is not None and self.n_swaps < 0:
            raise ConfigError(f"n_swaps = {self.n_swaps}; expected >= 0")
        if self.workers < 1:
            raise ConfigError(f"workers = {self.workers}; expected >= 1")

    def ladder_object(self) -> Ladder:
        """The ladder as a :class:`~thermonet.tempering.Ladder`."""
        if self.temperatures is not None:
            return Ladder.from_temperatures(self.temperatures)
        return Ladder.geometric(self.t_min, self.t_max, self.n_temperatures)

    def ladder(self) -> FloatArray:
        """The temperatures."""
        return np.array(self.ladder_object().temperature_k)


class ReplicaExchangeHMC(ReplicaExchange):
    """Deprecated former plugin; see the module docstring."""

    deprecated: ClassVar[bool] = True
    Config: ClassVar[type] = REHMCConfig

    def __init__(self, potential: Any, *, prior: Any = None, temperature: float = 1.0,
                 masses: Any = None, config: Any = None, executor: Any = None,
                 **settings: Any) -> None:
        from thermonet import registry
        from thermonet.api import build_config

        if config is None:
            config = build_config(REHMCConfig, settings, "sampler 'rehmc'")
        self.config = config
        inner_cls = registry.load("sampler", config.sampler)
        inner_cfg = build_config(inner_cls.Config, dict(config.inner),
                                 f"sampler {config.sampler!r} (replica_exchange.inner)")
        super().__init__(inner_cls, potential, config.ladder_object(), prior=prior,
                         masses=masses, sampler_config=inner_cfg,
                         n_trajectories=config.n_trajectories,
                         swap=make_scheme(config.swap_scheme, n_swaps=config.n_swaps
                                          if config.swap_scheme == "random-pairs" else None),
                         executor=executor, workers=config.workers)

    @staticmethod
    def make_streams(seed: Any, n_slots: int) -> list[np.random.Generator]:  # type: ignore[override]
        """K + 1 independent generators from one seed (slots, then the swap stream)."""
        return make_streams(seed, n_slots).all()


__all__ = [
    "SWAP_SCHEMES",
    "REHMCConfig",
    "REInfo",
    "REState",
    "ReplicaExchangeHMC",
    "Streams",
    "geometric_ladder",
]
