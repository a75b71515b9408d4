"""The TI reference: a diagonal Gaussian around the minimum, truncated to the prior box, and
its exact partition function."""

from __future__ import annotations

import io
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import special

from thermonet.errors import ConfigError
from thermonet.io.atomic import write_bytes
from thermonet.types import BoolArray, FloatArray

F0_KINDS = ("exact", "centred")


def log_truncated_gaussian(k: Any, w0: Any, half_width: Any, temperature: float) -> FloatArray:
    """``log ∫_{-a}^{a} exp(-k (w - w0)² / (2T)) dw`` per dimension, without overflow or NaN.

    Equals ``log[½ sqrt(2πT/k) (erf(q(a - w0)) + erf(q(a + w0)))]`` with ``q = sqrt(k/2T)``;
    ``k = 0`` gives ``log 2a`` and small ``k`` tends to it smoothly (series); erfc and
    ``log_ndtr`` forms avoid cancellation when both erf terms are close to 1, or when ``w0`` is
    outside the box.
    """
    k_i = np.asarray(k, dtype=np.float64)
    w_i = np.asarray(w0, dtype=np.float64)
    a_i, k_i, w_i = np.broadcast_arrays(np.asarray(half_width, dtype=np.float64), k_i, w_i)
    out = np.empty(a_i.shape, dtype=np.float64)
    for idx in np.ndindex(a_i.shape):
        out[idx] = _log_trunc_1d(float(k_i[idx]), float(w_i[idx]), float(a_i[idx]),
                                 float(temperature))
    return out


_LOG_SQRT_PI_2 = 0.5 * math.log(math.pi) - math.log(2.0)


def _log_erfc(x: float) -> float:
    # erfc(x) = 2 Φ(-x sqrt 2); log_ndtr keeps full precision far in the tail
    return math.log(2.0) + float(special.log_ndtr(-x * math.sqrt(2.0)))


def _log_trunc_1d(k: float, w0: float, a: float, t: float) -> float:
    if not (k >= 0 and a > 0 and t > 0) or not math.isfinite(w0):
        return math.nan
    if k == 0.0:
        return math.log(2.0 * a)
    if math.isinf(k):
        return -math.inf if abs(w0) >= a else math.nan
    q = math.sqrt(k / (2.0 * t))
    if q * (a + abs(w0)) < 1e-5:
        # first order in q² of log ∫(1 - q²(w - w0)²) dw: log 2a - q² (a²/3 + w0²)
        return math.log(2.0 * a) - q * q * (a * a / 3.0 + w0 * w0)
    u, v = q * (a - w0), q * (a + w0)
    if u > v:
        u, v = v, u
    log_pref = _LOG_SQRT_PI_2 - math.log(q)
    if u >= 0.0:
        if u > 0.5:
            # erf(u) + erf(v) = 2 - erfc(u) - erfc(v): no cancellation near 2
            return log_pref + math.log(2.0) + math.log1p(-0.5 * (special.erfc(u)
                                                                  + special.erfc(v)))
        return log_pref + math.log(special.erf(u) + special.erf(v))
    # w0 outside the box: erf(v) - erf(|u|), v > |u|
    au = -u
    if au > 0.5:
        lu, lv = _log_erfc(au), _log_erfc(v)    # erfc(|u|) - erfc(v), lu > lv
        delta = lu - lv
        if delta <= 0:
            return -math.inf
        return log_pref + lu + math.log(-math.expm1(-delta))
    return log_pref + math.log(special.erf(v) - special.erf(au))


@dataclass(frozen=True)
class Reference:
    """The λ = 1 reference ``J_1(w) = E0 + Σ_i k_i (w_i - w0_i)²/2`` on the box.

    Attributes
    ----------
    w0 : ndarray of float64, shape (n_params,)
        Centre (the minimum TI starts from).
    k : ndarray of float64, shape (n_params,)
        Spring constants; 0 on uniform directions.
    uniform : ndarray of bool, shape (n_params,)
        Directions treated as uniform on the box.
    energy0 : float
        E(w0).
    """

    w0: FloatArray
    k: FloatArray
    uniform: BoolArray
    energy0: float

    def __post_init__(self) -> None:
        w0 = np.ascontiguousarray(self.w0, dtype=np.float64)
        k = np.ascontiguousarray(np.broadcast_to(self.k, w0.shape), dtype=np.float64)
        uni = np.ascontiguousarray(np.broadcast_to(self.uniform, w0.shape), dtype=bool)
        if w0.ndim != 1 or not np.all(np.isfinite(w0)):
            raise ConfigError("reference w0 must be a flat vector of finite numbers")
        if not np.all(np.isfinite(k)) or np.any(k < 0):
            raise ConfigError("reference spring constants k must be finite and >= 0")
        if not math.isfinite(self.energy0):
            raise ConfigError(f"reference energy E0 = {self.energy0}; expected a finite energy "
                              "(is w0 a minimum of the potential?)")
        k = np.where(uni, 0.0, k)
        object.__setattr__(self, "w0", w0)
        object.__setattr__(self, "k", k)
        object.__setattr__(self, "uniform", uni)
        object.__setattr__(self, "energy0", float(self.energy0))

    @property
    def n_params(self) -> int:
        return int(self.w0.shape[0])

    @property
    def n_uniform(self) -> int:
        return int(np.count_nonzero(self.uniform))

    def scaled(self, factor: float) -> Reference:
        """The same reference with every ``k_i`` multiplied by ``factor``."""
        if not (math.isfinite(factor) and factor > 0):
            raise ConfigError(f"k scale factor = {factor}; expected a positive number")
        return Reference(self.w0, self.k * factor, self.uniform, self.energy0)

    def log_z0(self, half_width: Any, temperature: float, f0: str = "exact") -> float:
        """``log Z_1 = log ∫_{|w_i| < a_i} exp(-J_1(w)/T) dw``.

        ``f0="exact"``: for the box centred on 0 that is actually sampled (truncated Gaussians,
        and ``log 2a_i`` for uniform directions). ``f0="centred"``: the original code's formula,
        exact only for a box ``[w0_i - a_i, w0_i + a_i]``.
        """
        a = np.broadcast_to(np.asarray(half_width, dtype=np.float64), self.w0.shape)
        if f0 == "exact":
            per_dim = log_truncated_gaussian(self.k, self.w0, a, temperature)
        elif f0 == "centred":
            per_dim = log_truncated_gaussian(self.k, 0.0, a, temperature)
        else:
            raise ConfigError(f"f0 = {f0!r}; expected one of {F0_KINDS}")
        return float(-self.energy0 / temperature + math.fsum(per_dim))

    def draw(self, half_width: Any, temperature: float, rng: np.random.Generator) -> FloatArray:
        """An exact draw from ``exp(-J_1(w)/T)`` on the box ``|w_i| < a_i``: a Gaussian of
        variance ``T/k_i`` about ``w0_i`` truncated to the box, or uniform on it where
        ``k_i = 0`` (SciPy's ``truncnorm``)."""
        from scipy.stats import truncnorm

        a = np.broadcast_to(np.asarray(half_width, dtype=np.float64), self.w0.shape)
        out = rng.uniform(-a, a)
        g = self.k > 0
        if np.any(g):
            sd = np.sqrt(temperature / self.k[g])
            w0 = self.w0[g]
            lo, hi = (-a[g] - w0) / sd, (a[g] - w0) / sd
            out[g] = w0 + sd * truncnorm.rvs(lo, hi, random_state=rng)
            out[g] = np.clip(out[g], -a[g], a[g])     # rounding at a wall stays inside
        return out

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the reference to ``path`` (.npz, atomically)."""
        buf = io.BytesIO()
        np.savez(buf, w0=self.w0, k=self.k, uniform=self.uniform,
                 energy0=np.float64(self.energy0))
        write_bytes(Path(path), buf.getvalue())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Reference:
        """A reference written by :meth:`save`."""
        with np.load(path, allow_pickle=False) as z:
            return cls(z["w0"], z["k"], z["uniform"], float(z["energy0"]))

    def summary(self) -> dict[str, Any]:
        kk = self.k[~self.uniform]
        out: dict[str, Any] = {"n_params": self.n_params, "n_uniform": self.n_uniform,
                               "energy0": self.energy0}
        if kk.size:
            out.update(k_min=float(kk.min()), k_median=float(np.median(kk)),
                       k_max=float(kk.max()), log_k_mean=float(np.mean(np.log(kk)))
                       if np.all(kk > 0) else float("-inf"))
        return out
