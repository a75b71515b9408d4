"""Priors over the parameter vector.

* :class:`BoxPrior`: the paper's uniform prior (eq. 6), ``|w_i| < sigma_i/2`` with
  ``sigma_i = c/sqrt(k_i)`` (eq. 11), ``k_i`` the fan-in including the bias. Its density is
  ``1/prod(sigma_i)``; :attr:`BoxPrior.log_volume` is ``sum(ln sigma_i)``.
* :class:`GaussianPrior`: independent zero-mean Gaussians with per-group widths (MacKay 1992;
  Neal 1993), ``-ln prior = sum w_i^2 / (2 s_i^2) + const``. :class:`PriorPotential` adds its
  energy and gradient to a potential, which is what the samplers then see.

References
----------
Baldock & Marzari, arXiv:1904.04154, Sec. 3.2. D. J. C. MacKay, Neural Computation 4, 448
(1992).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from thermonet.api import Architecture, Potential
from thermonet.errors import ConfigError
from thermonet.types import FloatArray


class BoxPrior:
    """Uniform prior on the box ``|w_i| < sigma_i / 2``.

    Parameters
    ----------
    sigma : ndarray of float64, shape (n_params,)
        Full widths of the box (the paper's ``sigma_i``); the half-widths are ``sigma/2``.
    """

    def __init__(self, sigma: Any) -> None:
        sigma = np.ascontiguousarray(sigma, dtype=np.float64)
        if sigma.ndim != 1 or not np.all(np.isfinite(sigma)) or np.any(sigma <= 0):
            raise ConfigError("box widths sigma must be a 1-D array of positive finite numbers")
        self.sigma: FloatArray = sigma
        self.half_width: FloatArray = 0.5 * sigma

    @classmethod
    def from_fan_in(cls, fan_in: Any, scale: float = 100.0) -> BoxPrior:
        """``sigma_i = scale / sqrt(k_i)`` (paper eq. 11; ``scale`` = 100 for M(3), 2000 for
        M(3*))."""
        if not scale > 0:
            raise ConfigError(f"prior scale c = {scale}; expected a positive number "
                              "(the paper uses 100, or 2000 for M3*)")
        return cls(scale / np.sqrt(np.asarray(fan_in, dtype=np.float64)))

    @classmethod
    def for_architecture(cls, arch: Architecture, scale: float | None = None) -> BoxPrior:
        """The box of ``arch``: its :meth:`~thermonet.api.Architecture.prior_widths` (the
        paper's ``c / sqrt(k_i)`` unless the architecture says otherwise), or, when ``scale``
        is given, ``scale / sqrt(k_i)``."""
        if scale is not None:
            return cls.from_fan_in(arch.fan_in(), scale)
        sigma = np.asarray(arch.prior_widths(), dtype=np.float64)
        if sigma.shape != (arch.n_params,):
            raise ConfigError(f"architecture {arch.name!r}: prior_widths() has shape "
                              f"{sigma.shape}; expected ({arch.n_params},), one width per "
                              "parameter")
        return cls(sigma)

    @property
    def n_params(self) -> int:
        return int(self.sigma.shape[0])

    @property
    def log_volume(self) -> float:
        """``sum_i ln sigma_i``: minus the log prior density inside the box."""
        return float(np.sum(np.log(self.sigma)))

    def contains(self, theta: Any) -> bool:
        """True if ``|theta_i| < sigma_i/2`` for every i (strict, as the paper's code)."""
        return bool(np.all(np.abs(theta) < self.half_width))

    def n_outside(self, theta: Any) -> int:
        """Number of parameters on or outside the box walls."""
        return int(np.count_nonzero(~(np.abs(theta) < self.half_width)))

    def log_density(self, theta: Any) -> float:
        """``-sum ln sigma_i`` inside the box, ``-inf`` outside."""
        return -self.log_volume if self.contains(theta) else -np.inf

    def sample(self, rng: np.random.Generator) -> FloatArray:
        """A draw from the prior (uniform in the box)."""
        return rng.uniform(-self.half_width, self.half_width)


class GaussianPrior:
    """Independent zero-mean Gaussian prior with per-parameter standard deviations.

    Parameters
    ----------
    std : ndarray of float64, shape (n_params,)
    """

    def __init__(self, std: Any) -> None:
        std = np.ascontiguousarray(std, dtype=np.float64)
        if std.ndim != 1 or not np.all(np.isfinite(std)) or np.any(std <= 0):
            raise ConfigError("Gaussian prior widths must be positive finite numbers")
        self.std: FloatArray = std
        self._inv_var = 1.0 / std**2

    @classmethod
    def for_architecture(cls, arch: Architecture,
                         widths: float | Mapping[str, float]) -> GaussianPrior:
        """Widths per parameter group of ``arch``.

        ``widths`` is one number for every parameter, or a mapping from group names to widths.
        Group names are those of ``arch.param_groups()`` (``layer1.weight``, ``layer1.bias``,
        ...) plus the wildcards ``weight`` and ``bias`` (every weight / bias group) and
        ``default`` (every group not named). Every parameter must receive a width.
        """
        groups = arch.param_groups()
        std = np.full(arch.n_params, np.nan)
        if isinstance(widths, (int, float)):
            std[:] = float(widths)
        else:
            unknown = set(widths) - set(groups) - {"weight", "bias", "default"}
            if unknown:
                raise ConfigError(f"unknown prior group(s) {sorted(unknown)}; expected names "
                                  f"from {sorted(groups)} or 'weight', 'bias', 'default'")
            for gname, sl in groups.items():
                kind = gname.rsplit(".", 1)[-1]
                value = widths.get(gname, widths.get(kind, widths.get("default")))
                if value is not None:
                    std[sl] = float(value)
            if np.isnan(std).any():
                missing = [g for g, sl in groups.items() if np.isnan(std[sl]).any()]
                raise ConfigError(f"no Gaussian prior width for group(s) {missing}; give them "
                                  "a width or a 'default'")
        return cls(std)

    @property
    def n_params(self) -> int:
        return int(self.std.shape[0])

    def energy(self, theta: Any) -> float:
        """``sum_i theta_i^2 / (2 s_i^2)`` (minus the log density, without its constant)."""
        th = np.asarray(theta, dtype=np.float64)
        return float(0.5 * np.dot(th * th, self._inv_var))

    def energy_and_grad(self, theta: Any) -> tuple[float, FloatArray]:
        """The energy above and its gradient ``theta_i / s_i^2``."""
        th = np.asarray(theta, dtype=np.float64)
        g = th * self._inv_var
        return float(0.5 * np.dot(th, g)), g

    @property
    def log_normaliser(self) -> float:
        """``sum_i ln(sqrt(2 pi) s_i)``, so that ``ln p(w) = -energy(w) - log_normaliser``."""
        return float(np.sum(np.log(np.sqrt(2.0 * np.pi) * self.std)))

    def log_density(self, theta: Any) -> float:
        return -self.energy(theta) - self.log_normaliser

    def sample(self, rng: np.random.Generator) -> FloatArray:
        return rng.normal(0.0, self.std)


class PriorPotential(Potential):
    """A potential plus a Gaussian prior's energy: what the samplers see with a Gaussian prior.

    ``E_total(w) = E(w) + s * sum_i w_i^2 / (2 s_i^2)`` with ``s = 1`` ("tempered": the target
    at temperature T is ``[p(D|w) p(w)]^(1/T)``, MacKay's and Neal's posterior at T = 1), or
    ``s = T`` ("untempered": ``p(D|w)^(1/T) p(w)``, the paper's eq. 10 and its code's
    ``gprior_std``). The wrapped potential's ``energy`` is the total, so Metropolis tests and
    replica-exchange swaps between equal-``s`` slots stay exact; for the untempered form each
    slot has its own ``s = T``, and exchanges must compare the *likelihood* energies
    (:meth:`likelihood_energy`), which is what :class:`~thermonet.tempering.ReplicaExchange`
    does through ``State.energy`` only when the prior is tempered. Untempered Gaussian priors are
    therefore supported for single-temperature runs; replica exchange requires ``tempered``.
    """

    def __init__(self, base: Any, prior: GaussianPrior, scale: float = 1.0) -> None:
        if prior.n_params != base.n_params:
            raise ConfigError(f"Gaussian prior has {prior.n_params} widths; the potential has "
                              f"{base.n_params} parameters")
        self.base = base
        self.prior = prior
        self.scale = float(scale)
        self.n_params = base.n_params

    def likelihood_energy(self, theta: Any) -> float:
        return float(self.base.energy(theta))

    def energy(self, theta: Any) -> float:
        return float(self.base.energy(theta)) + self.scale * self.prior.energy(theta)

    def energy_and_grad(self, theta: Any, grad_out: Any = None) -> tuple[float, FloatArray]:
        e, g = self.base.energy_and_grad(theta, grad_out)
        ep, gp = self.prior.energy_and_grad(theta)
        g += self.scale * gp
        return float(e) + self.scale * ep, g

    def energy_batch(self, theta_kp: Any) -> FloatArray:
        return np.array([self.energy(t) for t in theta_kp])

    def energy_and_grad_batch(self, theta_kp: Any, grad_kp: Any = None
                              ) -> tuple[FloatArray, FloatArray]:
        if grad_kp is None:
            grad_kp = np.empty((len(theta_kp), self.n_params))
        e_k = np.empty(len(theta_kp))
        for k in range(len(theta_kp)):
            e_k[k], _ = self.energy_and_grad(theta_kp[k], grad_kp[k])
        return e_k, grad_kp

    def copy(self) -> PriorPotential:
        return PriorPotential(self.base.copy(), self.prior, self.scale)

    # the Gaussian term's Hessian is diag(s / s_i^2): the base potential's, plus that diagonal

    @property
    def hessian_method(self) -> str | None:  # type: ignore[override]
        """The base potential's scheme (the prior term is exact)."""
        return self.base.hessian_method

    def hvp(self, theta: FloatArray, v_kp: FloatArray, *, threads: int | None = None
            ) -> FloatArray:
        v = np.asarray(v_kp, dtype=np.float64)
        return self.base.hvp(theta, v, threads=threads) + v * (self.scale / self.prior.std ** 2)

    def hessian(self, theta: FloatArray, *, index: Any = None, column_block: int = 128,
                threads: int | None = None) -> FloatArray:
        h = self.base.hessian(theta, index=index, column_block=column_block, threads=threads)
        diag = self.scale / self.prior.std ** 2
        h[np.diag_indices_from(h)] += diag if index is None else diag[np.asarray(index)]
        return h

    def flat_coordinates(self) -> tuple[Any, Any]:
        """None: the Gaussian term curves every coordinate."""
        return super().flat_coordinates()

