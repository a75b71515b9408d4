"""Error bars for Monte Carlo estimates: correlated series and counted events.

* :func:`batch_means`: mean and its standard error from non-overlapping batch means.
* :func:`integrated_autocorrelation_time`: tau_int with Sokal's automatic window.
* :func:`mean_and_error`: mean with the standard error ``sqrt(var * tau_int / n)``.
* :func:`rate_ratio_interval`: interval for the ratio of two Poisson rates (e.g. two
  schemes' round trips at an equal gradient budget).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def batch_means(x: Any, n_batches: int = 20) -> tuple[float, float]:
    """Mean of ``x`` and its standard error from ``n_batches`` batch means.

    The last ``len(x) % n_batches`` samples are dropped from the error estimate only.
    """
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[0]
    if n < 2 * n_batches:
        raise ValueError(f"batch_means needs at least {2 * n_batches} samples; got {n}")
    size = n // n_batches
    means = x[: size * n_batches].reshape(n_batches, size).mean(axis=1)
    return float(x.mean()), float(means.std(ddof=1) / np.sqrt(n_batches))


def autocorrelation(x: Any) -> np.ndarray:
    """Normalised autocorrelation function of a 1-D series (FFT, zero-padded)."""
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[0]
    d = x - x.mean()
    f = np.fft.rfft(d, n=2 * n)
    acf = np.fft.irfft(f * np.conj(f))[:n]
    if acf[0] == 0:
        out = np.zeros(n)
        out[0] = 1.0
        return out
    return acf / acf[0]


def integrated_autocorrelation_time(x: Any, c: float = 5.0) -> float:
    """``tau_int = 1 + 2 sum_t rho(t)`` with Sokal's window (smallest M with M >= c tau(M))."""
    rho = autocorrelation(x)
    taus = 2.0 * np.cumsum(rho) - 1.0
    m = np.arange(len(taus))
    ok = m >= c * taus
    window = int(np.argmax(ok)) if ok.any() else len(taus) - 1
    return float(max(taus[window], 1.0))


def mean_and_error(x: Any) -> tuple[float, float]:
    """Mean and standard error ``sqrt(var * tau_int / n)`` of a correlated series."""
    x = np.asarray(x, dtype=np.float64)
    if x.size < 2:
        return float(x.mean()) if x.size else float("nan"), float("nan")
    tau = integrated_autocorrelation_time(x)
    return float(x.mean()), float(np.sqrt(x.var(ddof=1) * tau / x.size))


def rate_ratio_interval(a: int, b: int, level: float = 0.95) -> tuple[float, float]:
    """Two-sided interval for ``rho = lambda_a / lambda_b`` from Poisson counts ``a`` and ``b``
    over equal exposures.

    Given ``a + b`` events, ``a`` is binomial with ``p = rho / (1 + rho)``; the exact
    (Clopper-Pearson) interval of ``p`` maps to ``rho``. ``b = 0`` gives an infinite upper end,
    ``a = 0`` a lower end of 0; no events at all give ``(0, inf)``.
    """
    from scipy.stats import beta

    if a < 0 or b < 0 or not 0 < level < 1:
        raise ValueError(f"counts {a}, {b} and level {level}; expected counts >= 0 and a "
                         "level in (0, 1)")
    tail = (1 - level) / 2
    p_low = float(beta.ppf(tail, a, b + 1)) if a > 0 else 0.0
    p_high = float(beta.ppf(1 - tail, a + 1, b)) if b > 0 else 1.0
    return p_low / (1 - p_low), (p_high / (1 - p_high) if p_high < 1 else math.inf)
