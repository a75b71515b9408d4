"""Layer 1: the plugin contract. What a third-party plugin imports from thermonet.

The plugin API is :mod:`thermonet.api`, :mod:`thermonet.kernels`, :mod:`thermonet.errors` and
:mod:`thermonet._types`. Built-in plugins import nothing else, which proves the contract is
sufficient.
"""

from __future__ import annotations

from thermonet.api.architecture import Architecture, Potential, as_theta

__all__ = ["Architecture", "Potential", "as_theta"]
