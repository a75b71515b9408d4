"""Thermodynamic integration: ``log ∫_box exp(-E/T) dw`` from a chain of bridges.

integration.py (the sweep, :func:`thermodynamic_integration`, :func:`repeat_ti`),
bridge.py (the bridging potential and its chain), reference.py (the Gaussian reference),
config.py (:class:`TIConfig`), store.py (the TI checkpoint), result.py (quadrature and error
bars), sweep_error.py (one chain's memory over the λ points), pair.py (both directions).
The package re-exports the public names of integration.py.
"""

from __future__ import annotations

from thermonet.evidence.ti.integration import (
    TI_CHECKPOINT,
    BridgePotential,
    Reference,
    TIConfig,
    fit_reference,
    log_truncated_gaussian,
    repeat_ti,
    thermodynamic_integration,
)

__all__ = ["TI_CHECKPOINT", "BridgePotential", "Reference", "TIConfig", "fit_reference",
           "log_truncated_gaussian", "repeat_ti", "thermodynamic_integration"]
