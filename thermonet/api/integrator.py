"""The contract of the ``thermonet.integrators`` group: quadrature over lambda for
thermodynamic integration.

An integrator is a pure function of tabulated means: given ``lambda_j`` (ascending), the mean
``<dJ/dlambda>_j`` at each and its standard error, it returns the integral and its propagated
Monte Carlo error. The weights are linear in the means, so with independent chains per
lambda the error is ``sqrt(sum_j w_j^2 sem_j^2)``.
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar, NamedTuple

import numpy as np

from thermonet.errors import ConfigError
from thermonet.types import FloatArray


class IntegrationResult(NamedTuple):
    """The integral, its propagated standard error and the quadrature weights."""

    value: float          #: the integral
    error: float          #: Monte Carlo standard error propagated through the weights
    weights: FloatArray   #: the quadrature weights w_j (value = sum w_j mean_j)


class Integrator(abc.ABC):
    """Base class of integrator plugins (entry-point group ``thermonet.integrators``)."""

    name: ClassVar[str] = ""
    api_version: ClassVar[int] = 1

    @abc.abstractmethod
    def weights(self, lambdas: FloatArray) -> FloatArray:
        """Quadrature weights for the grid ``lambdas`` (ascending, length >= 2)."""

    def integrate(self, lambdas: Any, means: Any, sems: Any = None) -> IntegrationResult:
        lam = np.asarray(lambdas, dtype=np.float64)
        y = np.asarray(means, dtype=np.float64)
        if lam.ndim != 1 or lam.size < 2 or y.shape != lam.shape:
            raise ConfigError(f"integrate needs matching 1-D arrays of at least 2 points; got "
                              f"lambdas {lam.shape} and means {y.shape}")
        if np.any(np.diff(lam) <= 0):
            raise ConfigError("lambdas must be strictly ascending")
        w = self.weights(lam)
        err = 0.0
        if sems is not None:
            s = np.asarray(sems, dtype=np.float64)
            err = float(np.sqrt(np.sum((w * s) ** 2)))
        return IntegrationResult(float(w @ y), err, w)
