"""Bayesian evidence of a network: thermodynamic integration and the Laplace approximation.

``thermodynamic_integration``, ``repeat_ti``, ``fit_reference`` and ``TIConfig`` come from
:mod:`thermonet.evidence.ti.integration`, ``bidirectional_ti`` (both directions) from
:mod:`thermonet.evidence.ti.pair`; ``laplace_evidence`` and ``hessian`` from
:mod:`thermonet.evidence.laplace.approximation` and :mod:`thermonet.evidence.laplace.curvature`.
They are imported on first use, so ``import thermonet.evidence`` stays cheap. See docs/evidence.md.
"""

from __future__ import annotations

import importlib
from typing import Any

from thermonet.evidence._result import EvidenceResult

_LAZY = {
    "TIConfig": "thermonet.evidence.ti.integration",
    "Reference": "thermonet.evidence.ti.integration",
    "fit_reference": "thermonet.evidence.ti.integration",
    "thermodynamic_integration": "thermonet.evidence.ti.integration",
    "repeat_ti": "thermonet.evidence.ti.integration",
    "bidirectional_ti": "thermonet.evidence.ti.pair",
    "laplace_evidence": "thermonet.evidence.laplace.approximation",
    "hessian": "thermonet.evidence.laplace.curvature",
    "hvp": "thermonet.evidence.laplace.curvature",
}

__all__ = ["EvidenceResult", "Reference", "TIConfig", "bidirectional_ti", "fit_reference",
           "hessian", "hvp",
           "laplace_evidence", "repeat_ti", "thermodynamic_integration"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'thermonet.evidence' has no attribute {name!r}")
