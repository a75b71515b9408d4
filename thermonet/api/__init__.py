"""Layer 1: the plugin contract. What a third-party plugin imports from thermonet.

The plugin API is :mod:`thermonet.api`, :mod:`thermonet.kernels`, :mod:`thermonet.errors` and
:mod:`thermonet._types`. Built-in plugins import nothing else, which proves the contract is
sufficient.
"""

from __future__ import annotations

from thermonet.api.architecture import Architecture, Potential, as_theta
from thermonet.api.integrator import IntegrationResult, Integrator
from thermonet.api.minimiser import Minimiser, MinimiseResult, build_config
from thermonet.api.sampler import Sampler

__all__ = ["Architecture", "IntegrationResult", "Integrator", "Minimiser", "MinimiseResult", "Potential", "Sampler",
           "as_theta", "build_config"]
