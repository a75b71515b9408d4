"""MacKay's Gaussian approximation against thermodynamic integration of the same integral.

At fixed hyperparameters (the re-estimated ``alpha_c`` and ``beta`` of a
:class:`~thermonet.evidence.mackay.MacKayResult`) the evidence of eq. (7) is

    ln P(D|alpha, beta, H) = ln ∫ exp(-M(w)) dw + sum_i ln(prec_i / 2 pi) / 2,

``M`` the framework's objective (the potential's energy at temperature 1: ``beta E_D``, the
noise normalisation and ``sum_i prec_i w_i^2 / 2``). MacKay replaces the integral by the
Gaussian around ``w_MP``; :func:`ti_cross_check` computes it by thermodynamic integration
(:func:`~thermonet.evidence.ti.thermodynamic_integration`) from a diagonal reference fitted
around the same ``w_MP``, inside a box of ``box_sigmas`` prior standard deviations (the
Gaussian prior in ``M`` makes what lies beyond negligible). Both are the evidence of the basin
around ``w_MP``: the chains of the bridges stay in it, and neither counts the hidden units'
symmetric copies (the framework's ``log_symmetry`` term is left out of the comparison). Where
the posterior is Gaussian in the basin the two agree within the TI error bar; the difference
elsewhere is what the Gaussian approximation costs.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from thermonet.errors import ConfigError
from thermonet.evidence.ti import thermodynamic_integration
from thermonet.evidence.ti_config import TIConfig
from thermonet.priors import BoxPrior

__all__ = ["TICheck", "ti_cross_check"]


@dataclass
class TICheck:
    """The framework's eq. (7) and its thermodynamic-integration value (nats)."""

    laplace: float              #: ln P(D|alpha, beta) by the Gaussian approximation
    ti: float                   #: the same by thermodynamic integration
    ti_error: float             #: TI's one-sigma error (Monte Carlo and quadrature)
    difference: float           #: ti - laplace
    z: float                    #: difference / ti_error
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def ti_cross_check(result: Any, potential: Any, *, config: TIConfig | None = None,
                   seed: Any = 0, box_sigmas: float = 50.0) -> TICheck:
    """TI of the integral behind ``result.log_evidence_fixed`` (module docstring) on
    ``potential`` (the one ``result`` was computed on), at ``result``'s hyperparameters."""
    if not result.positive_definite:
        raise ConfigError("the Hessian at w_MP is not positive definite: the framework has no "
                          "Gaussian evidence there to check")
    if not (box_sigmas > 0 and math.isfinite(box_sigmas)):
        raise ConfigError(f"box_sigmas = {box_sigmas!r}; expected a positive number of prior "
                          "standard deviations")
    hyper = [*np.asarray(result.alpha).tolist(), *([result.beta] if result.beta_estimated
                                                   else [])]
    potential.set_hyperparameters(hyper, 1.0)
    prec = np.array(potential.prec, dtype=np.float64)
    theta = np.asarray(result.theta, dtype=np.float64)
    half = box_sigmas / np.sqrt(prec)
    if np.any(np.abs(theta) >= half):
        raise ConfigError(f"w_MP lies outside {box_sigmas} prior standard deviations; "
                          "expected a larger box_sigmas")
    t0 = time.perf_counter()
    ti = thermodynamic_integration(potential, theta, BoxPrior(2.0 * half), config, seed=seed)
    log_ev = ti.log_integral + 0.5 * float(np.sum(np.log(prec / (2.0 * math.pi))))
    err = float(ti.log_integral_error)
    diff = log_ev - float(result.log_evidence_fixed)
    return TICheck(laplace=float(result.log_evidence_fixed), ti=log_ev, ti_error=err,
                   difference=diff, z=diff / err if err > 0 else math.nan,
                   seconds=time.perf_counter() - t0)
