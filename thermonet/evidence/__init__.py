"""Bayesian evidence of a network: thermodynamic integration and the Laplace approximation."""

from __future__ import annotations

from thermonet.evidence._result import EvidenceResult

__all__ = ["EvidenceResult"]
