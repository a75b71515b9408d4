"""The common result of every evidence estimator (thermodynamic integration, Laplace)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class EvidenceResult:
    """An estimate of ``log Z = log ∫_{|w_i| < σ_i/2} exp(-E(D|w)/T) dw`` and the evidence.

    Attributes
    ----------
    method : str
        "ti" or "laplace" (or a plugin's name).
    temperature : float
        T of the integral; the log evidence is only the paper's quantity at T = 1.
    n_params : int
        d, the number of parameters.
    energy0 : float
        E(D|w0) at the minimum the estimate starts from.
    log_integral : float
        log ∫_box exp(-E/T) dw.
    log_integral_error : float
        One-sigma error of ``log_integral`` (Monte Carlo and quadrature combined in
        quadrature); 0 for deterministic estimates, NaN when unknown.
    log_volume : float
        log ∏ σ_i, the log volume of the box prior.
    details : dict
        Method-specific, JSON-serialisable diagnostics (per-λ means, error split,
        convergence report, eigenvalue counts, ...).
    """

    method: str
    temperature: float
    n_params: int
    energy0: float
    log_integral: float
    log_integral_error: float
    log_volume: float
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def log_evidence(self) -> float:
        """Log p(D | model) = log ∫_box e^{-E/T} dw - log ∏ σ_i (uniform prior on the box)."""
        return self.log_integral - self.log_volume

    def as_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (NaN and inf are kept as floats; use allow_nan JSON)."""
        return {"method": self.method, "temperature": self.temperature,
                "n_params": self.n_params, "energy0": self.energy0,
                "log_integral": self.log_integral,
                "log_integral_error": self.log_integral_error,
                "log_volume": self.log_volume, "log_evidence": self.log_evidence,
                "details": self.details}

    @property
    def is_finite(self) -> bool:
        return math.isfinite(self.log_integral)
