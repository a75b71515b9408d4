"""The Monte Carlo error of a TI sweep: one chain's memory, pooled over the λ points.

One chain runs the whole sweep: the chain at ``λ_{j+1}`` starts where the chain at ``λ_j``
stopped, ``n_burn_in`` trajectories earlier, so the means ``m_j`` of neighbouring λ points are
correlated, and ``I = Σ_j w_j m_j`` (quadrature weights ``w_j``) has

    Var I = Σ_j w_j² Var m_j  +  2 Σ_{j<k} w_j w_k Cov(m_j, m_k).

Both terms come from the chain's autocorrelation ρ: ``Cov(m_j, m_k) = σ_j σ_k / n² Σ_{s,t}
ρ(|lag|)`` over the ``n x n`` pairs of samples, ``lag = (k - j)(n_burn_in + n) + t - s``
trajectories along the sweep (``j = k``: the usual variance of a correlated mean).

Estimating ρ from each λ point's own short series (Sokal's window on n = 20-100 samples, the
earlier error bar) underestimates it badly: on a Gaussian in a box with n = 30, τ_int came out
2.0 per point against 5.9 from a 20,000-sample chain, and the spread of 60 independent runs
was 1.8-2.3 times the error bar, whatever the burn-in between λ points. So ρ is estimated
here from all λ points of the sweep together (each point's series centred on its mean and
scaled by its standard deviation, the lagged products summed over the points and divided by
their number), up to lag n/2, with the bias of centring a short series on its own mean
removed (``ρ̂ ≈ (ρ - τ/n)/(1 - τ/n)``, solved for ρ by fixed-point iteration) and truncated at
Sokal's window (the smallest W with W ≥ 5 τ_int(W)). The error is never smaller than the
earlier one. Measured against the empirical spread of 60 runs: docs/evidence.md, "Error bars
of one run"; tested in tests/evidence/test_ti_errors.py.
"""

from __future__ import annotations

import math

import numpy as np

from thermonet.types import FloatArray


def pooled_autocorrelation(samples: FloatArray) -> FloatArray:
    """The autocorrelation function of a sweep's samples (points x n), pooled over the λ
    points: each point's series centred on its own mean and scaled by its own standard
    deviation, the lagged products summed over all points. Pooling gives a K times longer
    record of the chain's memory than any one point's series."""
    x = np.asarray(samples, dtype=np.float64)
    n = x.shape[1]
    sd = x.std(axis=1, keepdims=True)
    sd[sd == 0] = 1.0
    d = (x - x.mean(axis=1, keepdims=True)) / sd
    f = np.fft.rfft(d, n=2 * n, axis=1)
    acf = np.fft.irfft(f * np.conj(f), axis=1)[:, :n].sum(axis=0)
    acf /= np.arange(n, 0, -1)          # the number of products at each lag
    return acf / acf[0] if acf[0] > 0 else np.eye(1, n)[0]


def _sokal(rho: FloatArray) -> tuple[float, int]:
    taus = 2.0 * np.cumsum(rho) - 1.0
    ok = np.arange(rho.size) >= 5.0 * taus
    window = int(np.argmax(ok)) if ok.any() else rho.size - 1
    return float(taus[window]), window


def corrected_autocorrelation(samples: FloatArray, max_iter: int = 20
                              ) -> tuple[FloatArray, int]:
    """The pooled autocorrelation with the bias of centring each short series on its own
    mean removed, and Sokal's window of the result.

    Centring on the sample mean lowers every autocovariance by about ``Var(mean) = σ² τ/n``
    (τ the integrated autocorrelation time), so the estimate is ``ρ̂(t) ≈ (ρ(t) - τ/n) /
    (1 - τ/n)``; solved for ρ with τ from the corrected ρ itself, by fixed-point iteration
    (``τ/n`` capped at 0.5: a series that short says little either way)."""
    raw = pooled_autocorrelation(samples)
    n = raw.size
    half = raw[: max(n // 2, 2)]       # lags beyond n/2 rest on too few products
    rho = half
    tau, window = _sokal(rho)
    for _ in range(max_iter):
        f = min(tau / n, 0.5)
        rho = half * (1.0 - f) + f
        rho[0] = 1.0
        new_tau, window = _sokal(rho)
        if abs(new_tau - tau) < 1e-6 * max(tau, 1.0):
            break
        tau = new_tau
    out = np.zeros(n)
    out[: rho.size] = rho
    return out, window


def sweep_variance(samples: FloatArray, weights: FloatArray, gap: int
                   ) -> tuple[float, float, int]:
    """``Var(Σ_j w_j m_j)`` of one sweep, with and without the covariances of λ points.

    From the pooled, bias-corrected autocorrelation ρ truncated at Sokal's window W:

        Cov(m_j, m_k) = σ_j σ_k / n² Σ_{s,t} ρ(|lag(j, s; k, t)|) [|lag| <= W],

    ``lag = (k - j)(gap + n) + t - s`` trajectories along the sweep. ``samples`` (points x
    n) and ``weights`` in sweep order (row j is the j-th point visited); ``gap`` the burn-in
    trajectories between two points' samples. Returns (with, without, W)."""
    x = np.asarray(samples, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    n_pts, n = x.shape
    if n_pts < 1 or n < 2 or not np.all(np.isfinite(x)):
        return math.nan, math.nan, 0
    rho, window = corrected_autocorrelation(x)
    r = np.zeros(window + 1)
    r[:] = rho[:window + 1]
    a = w * x.std(axis=1, ddof=1) / n            # w_j σ_j / n
    delta = np.arange(-(n - 1), n)
    pairs = n - np.abs(delta)                    # pairs (s, t) with t - s = delta

    def s_of(offset: int) -> float:
        lag = np.abs(offset + delta)
        keep = lag <= window
        return float(np.sum(pairs[keep] * r[lag[keep]]))

    diag = s_of(0)
    without = float(np.sum(a * a) * diag)
    total = without
    stride = gap + n
    for m in range(1, n_pts):
        if m * stride - (n - 1) > window:
            break
        total += 2.0 * s_of(m * stride) * float(np.sum(a[:-m] * a[m:]))
    return total, without, window


def sweep_error(samples: FloatArray, weights: FloatArray, gap: int, independent: float
                ) -> tuple[float, float, int]:
    """The Monte Carlo error of ``Σ_j w_j m_j`` from :func:`sweep_variance`, never below
    ``independent`` (each point's own Sokal error in quadrature, the earlier error bar; NaN,
    when a point accepted nothing, stays NaN); with the part of the variance the covariances
    between λ points add, and the window."""
    if math.isnan(independent):       # a λ point accepted nothing: the error is unknown
        return independent, math.nan, 0
    total, without, window = sweep_variance(samples, weights, gap)
    if not math.isfinite(total):
        return independent, 0.0, 0
    return math.sqrt(max(total, independent ** 2)), total - without, window


__all__ = ["corrected_autocorrelation", "pooled_autocorrelation", "sweep_error", "sweep_variance"]
