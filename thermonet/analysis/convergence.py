"""Convergence statistics of MCMC chains: the rank-normalised split-R-hat and the bulk/tail
effective sample sizes of Vehtari, Gelman, Simpson, Carpenter & Bürkner (2021),
"Rank-normalization, folding, and localization: an improved R-hat", Bayesian Analysis 16:667,
with Geyer's initial monotone sequence as in Stan and ArviZ.

Apply them only to scalar observables that the posterior identifies (the energy at a
temperature slot, test energies and errors), never to raw network weights: the posterior is
invariant under permutations of hidden units and sign flips, so chains that have mixed perfectly
still sit in different, equivalent modes and R-hat of weights would call them unmixed.

NumPy and :mod:`math` only, so that the numbers can be checked against ArviZ without
depending on it (tests/analysis/test_mixing.py).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: split-R-hat above this: not mixed (Vehtari et al. 2021 recommend 1.01 for final results;
#: 1.05 is the looser bar for "the chains have not obviously failed")
RHAT_MAX = 1.05

#: bulk ESS below this: not mixed, unless ``run.min_ess`` says otherwise (Vehtari et al. 2021:
#: 100 per quantity at the least)
ESS_MIN = 100.0


# --- rank normalisation ------------------------------------------------------------------------

_A = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
      1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00)
_B = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
      6.680131188771972e+01, -1.328068155288572e+01)
_C = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
      -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00)
_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
      3.754408661907416e+00)
_erfc = np.frompyfunc(math.erfc, 1, 1)


def normal_quantile(p: Any) -> np.ndarray:
    """Inverse of the standard normal CDF for 0 < p < 1.

    Acklam's rational approximation (relative error 1.2e-9) refined by one Halley step on
    ``math.erfc``, which brings it to double precision without SciPy.
    """
    p = np.asarray(p, dtype=np.float64)
    x = np.empty_like(p)
    lo, hi = p < 0.02425, p > 1 - 0.02425
    mid = ~(lo | hi)
    q = p[mid] - 0.5
    r = q * q
    x[mid] = (((((_A[0] * r + _A[1]) * r + _A[2]) * r + _A[3]) * r + _A[4]) * r + _A[5]) * q / \
        (((((_B[0] * r + _B[1]) * r + _B[2]) * r + _B[3]) * r + _B[4]) * r + 1)
    for mask, sign, tail in ((lo, 1.0, p), (hi, -1.0, 1 - p)):
        q = np.sqrt(-2 * np.log(tail[mask]))
        x[mask] = sign * (((((_C[0] * q + _C[1]) * q + _C[2]) * q + _C[3]) * q + _C[4]) * q
                          + _C[5]) / ((((_D[0] * q + _D[1]) * q + _D[2]) * q + _D[3]) * q + 1)
    e = 0.5 * _erfc(-x / math.sqrt(2)).astype(np.float64) - p
    u = e * math.sqrt(2 * math.pi) * np.exp(x * x / 2)
    return np.asarray(x - u / (1 + x * u / 2))


def rank_normalise(x: Any) -> np.ndarray:
    """Normal scores of the pooled ranks: ``Phi^-1((r - 3/8) / (S + 1/4))`` (Blom 1958).

    Ties get their average rank. The shape of ``x`` is kept; ``S`` is its size.
    """
    x = np.asarray(x, dtype=np.float64)
    flat = x.ravel()
    n = flat.size
    order = np.argsort(flat, kind="mergesort")
    xs = flat[order]
    new = np.r_[True, xs[1:] != xs[:-1]]
    starts = np.flatnonzero(new)
    counts = np.diff(np.r_[starts, n])
    ranks = np.empty(n)
    ranks[order] = (starts + (counts + 1) / 2.0)[np.cumsum(new) - 1]
    return normal_quantile((ranks - 3 / 8) / (n + 1 / 4)).reshape(x.shape)


def split_chains(x: Any) -> np.ndarray:
    """Each chain cut into its first and last halves (the middle draw of an odd chain dropped).

    Parameters
    ----------
    x : array_like, shape (n_chains, n_draws) or (n_draws,)

    Returns
    -------
    ndarray, shape (2 n_chains, n_draws // 2)
    """
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    half = x.shape[1] // 2
    return np.concatenate([x[:, :half], x[:, x.shape[1] - half:]])


def _valid(x: np.ndarray) -> bool:
    return x.ndim == 2 and x.shape[1] >= 4 and bool(np.all(np.isfinite(x)))


def _rhat(x: np.ndarray) -> float:
    n = x.shape[1]
    within = float(np.mean(np.var(x, axis=1, ddof=1)))
    between = n * float(np.var(np.mean(x, axis=1), ddof=1))
    if within == 0.0:       # every chain constant: R-hat is undefined, not 1
        return math.nan
    return math.sqrt((between / within + n - 1) / n)


def split_rhat(draws: Any) -> float:
    """Rank-normalised split-R-hat: the larger of the bulk and the folded (tail) R-hat.

    Vehtari et al. (2021), eq. (4) on split chains, after rank normalisation of the draws
    (bulk) and of their absolute deviations from the pooled median (tail).

    Parameters
    ----------
    draws : array_like, shape (n_chains, n_draws)
        One row per chain of a scalar, permutation-invariant observable. A single chain is
        allowed: its two halves are compared (a test of stationarity, not of mixing between
        modes). Never raw network weights (they are not identifiable; see the module).

    Returns
    -------
    float
        NaN for fewer than 4 draws per chain, non-finite draws or constant chains.
    """
    x = np.atleast_2d(np.asarray(draws, dtype=np.float64))
    if not _valid(x):
        return math.nan
    s = split_chains(x)
    bulk = _rhat(rank_normalise(s))
    tail = _rhat(rank_normalise(np.abs(s - np.median(s))))
    return max(bulk, tail) if not (math.isnan(bulk) or math.isnan(tail)) else math.nan


def _autocov(x: np.ndarray) -> np.ndarray:
    n = x.shape[1]
    d = x - x.mean(axis=1, keepdims=True)
    f = np.fft.rfft(d, n=2 * n, axis=1)
    return np.fft.irfft(f * np.conj(f), n=2 * n, axis=1)[:, :n] / n


def ess(draws: Any) -> float:
    """Effective sample size of chains as they are (no splitting, no ranks).

    Multi-chain autocorrelations (Vehtari et al. 2021, eq. 10) summed in pairs with Geyer's
    initial positive sequence, made monotone (Geyer's initial monotone sequence), exactly as
    Stan and ArviZ do; ``tau`` is kept above ``1 / log10(S)``.

    Parameters
    ----------
    draws : array_like, shape (n_chains, n_draws)

    Returns
    -------
    float
        ``S / tau`` with ``S = n_chains * n_draws``; ``S`` for constant draws; NaN for
        non-finite draws.
    """
    x = np.atleast_2d(np.asarray(draws, dtype=np.float64))
    if not np.all(np.isfinite(x)):
        return math.nan
    if np.max(x) - np.min(x) < np.finfo(float).resolution:
        return float(x.size)
    m, n = x.shape
    acov = _autocov(x)
    mean_var = float(np.mean(acov[:, 0])) * n / (n - 1.0)
    var_plus = mean_var * (n - 1.0) / n
    if m > 1:
        var_plus += float(np.var(x.mean(axis=1), ddof=1))
    mean_acov = acov.mean(axis=0)
    rho = np.zeros(n)
    even, odd = 1.0, 1.0 - (mean_var - mean_acov[1]) / var_plus
    rho[0], rho[1] = even, odd
    t = 1
    while t < n - 3 and even + odd > 0.0:          # initial positive sequence
        even = 1.0 - (mean_var - mean_acov[t + 1]) / var_plus
        odd = 1.0 - (mean_var - mean_acov[t + 2]) / var_plus
        if even + odd >= 0:
            rho[t + 1], rho[t + 2] = even, odd
        t += 2
    max_t = t - 2
    if even > 0:     # the last positive even lag improves the estimate (Stan does the same)
        rho[max_t + 1] = even
    t = 1
    while t <= max_t - 2:                          # ... made monotone
        if rho[t + 1] + rho[t + 2] > rho[t - 1] + rho[t]:
            rho[t + 1] = rho[t + 2] = (rho[t - 1] + rho[t]) / 2.0
        t += 2
    tau = -1.0 + 2.0 * float(np.sum(rho[:max_t + 1])) + float(np.sum(rho[max_t + 1:max_t + 2]))
    tau = max(tau, 1.0 / math.log10(m * n))
    return float(m * n / tau)


def ess_bulk(draws: Any) -> float:
    """Bulk effective sample size: :func:`ess` of the rank-normalised split chains.

    Parameters
    ----------
    draws : array_like, shape (n_chains, n_draws)

    Returns
    -------
    float
        NaN for fewer than 4 draws per chain or non-finite draws.
    """
    x = np.atleast_2d(np.asarray(draws, dtype=np.float64))
    if not _valid(x):
        return math.nan
    return ess(rank_normalise(split_chains(x)))


def ess_tail(draws: Any) -> float:
    """Tail effective sample size: the smaller ESS of the indicators ``x <= q_0.05`` and
    ``x <= q_0.95`` (pooled quantiles, linear interpolation) on split chains.

    Parameters
    ----------
    draws : array_like, shape (n_chains, n_draws)

    Returns
    -------
    float
        NaN for fewer than 4 draws per chain or non-finite draws.
    """
    x = np.atleast_2d(np.asarray(draws, dtype=np.float64))
    if not _valid(x):
        return math.nan
    return min(ess(split_chains(x <= np.quantile(x, p))) for p in (0.05, 0.95))


def chain_diagnostics(draws: Any) -> dict[str, np.ndarray]:
    """Split-R-hat, bulk and tail ESS of every column of a stack of chains.

    Parameters
    ----------
    draws : array_like, shape (n_chains, n_draws, K)
        E.g. the training energy at each of K temperature slots, one chain per run.

    Returns
    -------
    dict of ndarray, each of shape (K,)
        ``rhat``, ``ess_bulk``, ``ess_tail``.
    """
    x = np.asarray(draws, dtype=np.float64)
    k = x.shape[2]
    return {"rhat": np.array([split_rhat(x[:, :, j]) for j in range(k)]),
            "ess_bulk": np.array([ess_bulk(x[:, :, j]) for j in range(k)]),
            "ess_tail": np.array([ess_tail(x[:, :, j]) for j in range(k)])}


__all__ = ["ESS_MIN", "RHAT_MAX", "chain_diagnostics", "ess", "ess_bulk", "ess_tail",
           "normal_quantile", "rank_normalise", "split_chains", "split_rhat"]
