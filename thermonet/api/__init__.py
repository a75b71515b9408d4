"""Layer 1: the plugin contract. What a third-party plugin imports from thermonet.

The plugin API is :mod:`thermonet.api`, :mod:`thermonet.kernels`, :mod:`thermonet.errors` and
:mod:`thermonet.types`. Built-in plugins import nothing else, which proves the contract is
sufficient.
"""

from __future__ import annotations

from thermonet.api import adaptation, settings
from thermonet.api.architecture import Architecture
from thermonet.api.descent import Descent, Walk
from thermonet.api.integrator import IntegrationResult, Integrator
from thermonet.api.minimiser import Minimiser, MinimiseResult
from thermonet.api.potential import NetworkSpec, Potential, as_theta
from thermonet.api.sampler import HMCTransition, Proposal, Sampler
from thermonet.api.settings import build_config

__all__ = [
           "Architecture",
           "Descent",
           "HMCTransition",
           "IntegrationResult",
           "Integrator",
           "MinimiseResult",
           "Minimiser",
           "NetworkSpec",
           "Potential",
           "Proposal",
           "Sampler",
           "Walk",
           "adaptation",
           "as_theta",
           "build_config",
           "settings",
]
