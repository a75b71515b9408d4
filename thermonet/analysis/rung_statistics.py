"""Statistics of a ladder's rungs and pairs: swap rejection per adjacent pair with the global
communication barrier Lambda (Syed, Bouchard-Côté, Deligiannidis & Doucet, JRSS-B 2022), and
HMC acceptance per rung with its flags (:mod:`.mixing` builds the verdict on them)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from thermonet.stats import mean_and_error

#: a rung accepting fewer HMC trajectories than this is frozen: it does not move
ACCEPT_FROZEN = 0.05

#: a rung accepting more than this takes steps so small that it diffuses slowly
ACCEPT_TIMID = 0.98


@dataclass(frozen=True)
class SwapBarrier:
    """Swap rejection per adjacent pair and the global communication barrier.

    Attributes
    ----------
    rejection, rejection_err : ndarray, shape (K-1,)
        ``r_k`` = rejected / attempted swaps of pair (k, k+1) and its autocorrelation-aware
        standard error (NaN without attempts, or when ``r_k`` is exactly 0 or 1, where the
        sample gives no error bar).
    attempts : ndarray of int64, shape (K-1,)
    barrier, barrier_err : float
        ``Lambda = sum_k r_k`` (Syed et al. 2022) and ``sqrt(sum_k err_k^2)`` (pairs treated
        as independent). Lambda estimates the communication barrier of the ladder; with
        perfect local exploration the deterministic even-odd scheme makes
        ``1 / (2 + 2 sum_k r_k / (1 - r_k))`` round trips per iteration, which tends to
        ``1 / (2 + 2 Lambda)`` for dense ladders (:mod:`.ideal_exchange` simulates the finite
        run).
    """

    rejection: np.ndarray
    rejection_err: np.ndarray
    attempts: np.ndarray
    barrier: float
    barrier_err: float


def swap_barrier(attempted_nk: Any, accepted_nk: Any) -> SwapBarrier:
    """Per-pair swap rejection rates with error bars and Lambda = sum_k r_k.

    Parameters
    ----------
    attempted_nk, accepted_nk : array_like of int, shape (n_iterations, K-1)

    Returns
    -------
    SwapBarrier
    """
    att = np.atleast_2d(np.asarray(attempted_nk, dtype=np.float64))
    acc = np.atleast_2d(np.asarray(accepted_nk, dtype=np.float64))
    n_pairs = att.shape[1]
    rej = np.full(n_pairs, math.nan)
    err = np.full(n_pairs, math.nan)
    for k in range(n_pairs):
        tot = att[:, k].sum()
        if tot == 0:
            continue
        rej[k] = 1.0 - acc[:, k].sum() / tot
        if 0.0 < rej[k] < 1.0:
            # ratio estimator: the residuals rejected_t - r attempted_t have mean zero, and
            # their (autocorrelated) standard error over mean(attempts) is that of r
            d = (att[:, k] - acc[:, k]) - rej[k] * att[:, k]
            _, se = mean_and_error(d)
            err[k] = se / (tot / att.shape[0])
    known = np.isfinite(rej)
    barrier = float(rej[known].sum()) if known.any() else math.nan
    barrier_err = float(math.sqrt(np.sum(err[known] ** 2))) if np.isfinite(err[known]).all() \
        and known.any() else math.nan
    return SwapBarrier(rej, err, att.sum(axis=0).astype(np.int64), barrier, barrier_err)


@dataclass(frozen=True)
class RungAcceptance:
    """HMC acceptance at each rung.

    Attributes
    ----------
    acceptance, error : ndarray, shape (K,)
        Accepted / attempted trajectories and the autocorrelation-aware standard error of the
        per-iteration fraction; the error is NaN when the acceptance is exactly 0 or 1 (no
        spread to measure), never a silent 0.
    n_trajectories : ndarray of int64, shape (K,)
        Trajectories attempted at each rung (iterations x trajectories per iteration).
    frozen, timid : ndarray of bool, shape (K,)
        Acceptance below :data:`ACCEPT_FROZEN` / above :data:`ACCEPT_TIMID`.
    """

    acceptance: np.ndarray
    error: np.ndarray
    n_trajectories: np.ndarray
    frozen: np.ndarray
    timid: np.ndarray


def rung_acceptance(n_accepted_nk: Any, n_trajectories: Any) -> RungAcceptance:
    """Acceptance per rung from the trace's ``n_accepted_k``.

    Parameters
    ----------
    n_accepted_nk : array_like of int, shape (n_iterations, K)
        Accepted trajectories at each slot in each iteration.
    n_trajectories : int or array_like of int, shape (K,)
        Trajectories per slot per iteration (``ladder.n_trajectories``, or per rung:
        :func:`thermonet.tempering.ladder.trajectories_from_settings`).

    Returns
    -------
    RungAcceptance
    """
    a = (np.atleast_2d(np.asarray(n_accepted_nk, dtype=np.float64))
         / np.asarray(n_trajectories, dtype=np.float64))
    k = a.shape[1]
    acc = np.full(k, math.nan)
    err = np.full(k, math.nan)
    for j in range(k):
        if a.shape[0] == 0:
            continue
        acc[j], e = mean_and_error(a[:, j])
        if 0.0 < acc[j] < 1.0:
            err[j] = e
    per_rung = np.broadcast_to(np.asarray(n_trajectories, dtype=np.int64), (k,))
    return RungAcceptance(acc, err, a.shape[0] * per_rung, acc < ACCEPT_FROZEN,
                          acc > ACCEPT_TIMID)
