"""Statistics of a replica-exchange trace: series means with error bars, heat capacity,
round trips of the ladder and the swap table."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from thermonet import stats
from thermonet.analysis.consistency import consistency
from thermonet.analysis.mixing import replica_passages
from thermonet.types import IntArray

#: a pair whose swap acceptance is below this fraction gets a warning (the ladder may not mix)
SWAP_WARN_THRESHOLD = 0.05


#: a temperature whose training-energy series after discard is shorter than this many
#: integrated autocorrelation times gets a warning
MIN_TAU_MULTIPLE = 50.0


#: fewer stored samples per temperature than this gets a warning (test error bars unreliable)
MIN_SAMPLES = 10


def series_stats(x: Any) -> tuple[float, float, float]:
    """Mean, standard error and integrated autocorrelation time of a correlated series.

    The error is ``sqrt(var(x, ddof=1) * tau_int / n)`` with ``tau_int`` from
    :func:`thermonet.stats.integrated_autocorrelation_time` (Sokal's window, c = 5), in units
    of the series' spacing.

    Parameters
    ----------
    x : array_like, shape (n,)

    Returns
    -------
    (mean, error, tau) : tuple of float
        NaN error and tau for fewer than 2 values (NaN mean for none); tau = 1 for a constant
        series.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return math.nan, math.nan, math.nan
    if x.size < 2:
        return float(x[0]), math.nan, math.nan
    if not np.all(np.isfinite(x)):
        return float(np.mean(x)), math.nan, math.nan
    tau = stats.integrated_autocorrelation_time(x)
    return float(x.mean()), float(np.sqrt(x.var(ddof=1) * tau / x.size)), float(tau)


def join_chains(means: Any, errors: Any) -> tuple[np.ndarray, np.ndarray]:
    """The estimate of ``C`` independent chains of equal length from each chain's mean and
    standard error (axis 0): the mean of the means and its error ``sqrt(sum err_c^2) / C``."""
    m, e = np.asarray(means, np.float64), np.asarray(errors, np.float64)
    return m.mean(axis=0), np.sqrt(np.sum(e ** 2, axis=0)) / m.shape[0]


def chains_stats(x_nc: Any) -> tuple[float, float, float]:
    """:func:`series_stats` of ``C`` independent chains of equal length (the columns of
    ``x_nc``): the mean of the chains' means, its error ``sqrt(sum err_c^2) / C`` from each
    chain's own autocorrelation-aware error (none measured across one chain's end and the
    next one's start), and the chains' mean autocorrelation time. One column is
    :func:`series_stats` of it.

    Parameters
    ----------
    x_nc : array_like, shape (n,) or (n, C)

    Returns
    -------
    (mean, error, tau) : tuple of float
    """
    x = np.asarray(x_nc, dtype=np.float64)
    if x.ndim == 1 or x.shape[1] == 1:
        return series_stats(x.reshape(-1))
    each = np.array([series_stats(x[:, c]) for c in range(x.shape[1])])
    means, errs, taus = each.T
    mean, err = join_chains(means, errs)
    return float(mean), float(err), float(taus.mean())


def heat_capacity(energy: Any, temperature: float) -> tuple[float, float]:
    """``Var(E) / T^2`` of an energy series, or of independent chains of one temperature,
    and its standard error.

    ``Var(E)`` is the pooled sample variance about the pooled mean, ``sum (E - mean E)^2 /
    (N - 1)`` over all ``N`` draws of every chain. Its error comes from the squared
    deviations ``d = (E - mean E)^2``: each chain's autocorrelation-aware standard error of
    the mean of its own ``d`` (:func:`series_stats`, so no autocorrelation is measured
    across the end of one chain and the start of the next), combined as the error of the
    draw-weighted mean of the chains' means, ``sqrt(sum (n_c err_c)^2) / N``, then scaled by
    ``N / (N - 1)``. When the chains' means of ``d`` disagree beyond those errors (the
    chi-square test of :func:`thermonet.analysis.consistency.consistency`, p < 0.05, as a
    stuck chain makes them), the error grows by ``sqrt(chi2 / (C - 1))``, the factor that
    makes the errors cover the spread between chains.

    Parameters
    ----------
    energy : array_like, shape (n,) or (n, C)
        One series, or the draws of ``C`` independent chains (columns) of equal length.
    temperature : float

    Returns
    -------
    (c, error) : tuple of float
        NaN for fewer than 2 draws in all or non-finite draws; NaN error when some chain
        has fewer than 2 draws.
    """
    e = np.asarray(energy, dtype=np.float64)
    chains = e.reshape(e.shape[0], -1).T if e.ndim == 2 else e.reshape(1, -1)
    n_all = chains.size
    if n_all < 2 or not np.all(np.isfinite(chains)):
        return math.nan, math.nan
    t2 = float(temperature) ** 2
    d2 = (chains - chains.mean()) ** 2
    n_c = chains.shape[1]
    errs = np.array([series_stats(d)[1] for d in d2])
    err = float(np.sqrt(np.sum((n_c * errs) ** 2)) / n_all)
    if d2.shape[0] > 1 and np.all(errs > 0):
        between = consistency(d2.mean(axis=1).tolist(), errs.tolist())
        if not between.agree:
            err *= between.error_scale
    scale = n_all / (n_all - 1)
    return float(d2.sum() / (n_all - 1) / t2), float(err * scale / t2)


def round_trips_per_replica(replica_kn: Any) -> IntArray:
    """Complete round trips of each replica: lowest slot -> highest slot -> lowest slot.

    Parameters
    ----------
    replica_kn : array_like of int, shape (n_iterations, K)
        The replica at each slot after each iteration (a permutation of 0..K-1 per row).

    Returns
    -------
    ndarray of int64, shape (K,)
        Trips of replica r. A trip is counted when the replica reaches slot 0 after having
        visited slot K-1 since its previous visit to slot 0; a replica's first trip starts at
        its first visit to slot 0 (:func:`thermonet.analysis.mixing.replica_passages`, which
        also counts restarts).
    """
    return replica_passages(replica_kn).round_trips


def round_trips(replica_kn: Any) -> int:
    """Complete round trips of replicas across the ladder, summed over replicas.

    ``replica_kn`` has shape (n_iterations, K): the replica at each slot after each iteration.
    A round trip is a replica going from the lowest slot to the highest and back to the lowest
    (see :func:`round_trips_per_replica`).
    """
    return int(round_trips_per_replica(replica_kn).sum())


def swap_table(temperatures: Any, attempted_nk: Any, accepted_nk: Any) -> dict[str, np.ndarray]:
    """Swap acceptance of every adjacent pair of temperatures.

    Parameters
    ----------
    temperatures : array_like, shape (K,), ascending
    attempted_nk, accepted_nk : array_like of int, shape (n_iterations, K-1)
        Attempts and accepted exchanges on pair (k, k+1) at each iteration.

    Returns
    -------
    dict of ndarray, each of shape (K-1,)
        ``t_low``, ``t_high``, ``swap_acceptance`` (accepted / attempts, NaN without attempts),
        ``swap_attempts``, ``swap_accepted``.
    """
    t = np.asarray(temperatures, dtype=np.float64)
    n_pairs = max(t.size - 1, 0)
    att = np.asarray(attempted_nk, dtype=np.int64).reshape(-1, n_pairs).sum(axis=0) \
        if n_pairs else np.zeros(0, dtype=np.int64)
    acc = np.asarray(accepted_nk, dtype=np.int64).reshape(-1, n_pairs).sum(axis=0) \
        if n_pairs else np.zeros(0, dtype=np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(att > 0, acc / np.maximum(att, 1), np.nan)
    return {"t_low": t[:-1].copy(), "t_high": t[1:].copy(),
            "swap_acceptance": rate.astype(np.float64),
            "swap_attempts": att, "swap_accepted": acc}
