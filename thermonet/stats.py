"""Error bars for correlated Monte Carlo series.

* :func:`batch_means`: mean and its standard error from non-overlapping batch means.
* :func:`integrated_autocorrelation_time`: tau_int with Sokal's automatic window.
* :func:`mean_and_error`: mean with the standard error ``sqrt(var * tau_int / n)``.
"""

from __future__ import annotations

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
