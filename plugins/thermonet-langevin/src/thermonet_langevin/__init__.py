"""thermonet-langevin: Neal's (1993) stochastic dynamics as a thermonet sampler plugin.

Langevin dynamics with partial momentum refresh (persistence alpha), made exact by a Metropolis
test with momentum negation on rejection (Horowitz's generalised HMC). Registered in the
``thermonet.samplers`` entry-point group as ``thermonet_langevin.sd``; usable on its own and as the
per-temperature sampler of replica exchange (``[sampler] name = "thermonet_langevin.sd"`` with a
``[ladder]``, or ``thermonet.ReplicaExchange(StochasticDynamics, ...)``).

This package imports only thermonet's plugin API (``thermonet.api``, ``thermonet.kernels``,
``thermonet.errors``, ``thermonet.types``).
"""

from __future__ import annotations

from importlib import metadata as _metadata

from thermonet_langevin.sampler import (
    StochasticDynamics,
    StochasticDynamicsConfig,
    StochasticDynamicsInfo,
    StochasticDynamicsState,
    bracket_search,
    dual_averaging,
)

try:
    __version__ = _metadata.version("thermonet-langevin")
except _metadata.PackageNotFoundError:  # pragma: no cover - imported from a source tree
    __version__ = "0+unknown"

__all__ = [
    "StochasticDynamics",
    "StochasticDynamicsConfig",
    "StochasticDynamicsInfo",
    "StochasticDynamicsState",
    "__version__",
    "bracket_search",
    "dual_averaging",
]
