"""Free energies along the ladder, from the same run: stepping stone and integration over beta.

With a rung at ``beta = 0`` (the prior, ``Z(0) = 1`` for a normalised prior) every rung's
``log Z(beta_k) = log ∫ exp(-beta_k E(w)) prior(w) dw`` follows from the energies the run
recorded there:

* stepping stone (Xie, Lewis, Fan, Kuo & Chen 2011): ``log Z(beta_j) - log Z(beta_{j+1}) =
  log E_{beta_{j+1}}[exp(-(beta_j - beta_{j+1}) E)]``, each ratio estimated from the samples of
  the hotter rung, summed from the prior down;
* thermodynamic integration over beta: ``d log Z / d beta = -<E>_beta``, by the trapezoid rule
  over the rungs (its difference from stepping stone is a check of the rung spacing), and by
  the trapezoid with its end correction: the slope of the integrand is known at every rung,
  ``d(-<E>)/d beta = Var_beta(E)``, so each interval of width ``d`` gets
  ``+ d^2 / 12 (Var_hot - Var_cold)`` (the cubic-Hermite rule, exact for cubics). The size of
  that correction, summed over intervals in absolute value, is reported as the quadrature
  error: to leading order it is the plain trapezoid's error, and it bounds the corrected
  rule's, whose error is of higher order in the spacing.

At ``T = 1`` (a rung at ``beta = 1``) ``log Z`` is the log evidence of the model with the box
prior. Without a prior rung the values are relative to the hottest rung.

Error bars. The rungs are not independent: a swap carries a configuration from one rung to
the next, so the energies of neighbouring rungs are correlated, at one iteration and across
iterations. The error bars therefore come from one series per rung that sums every pair's
contribution at each iteration, and its batch means (autocorrelation and every cross-rung
covariance included):

* stepping stone, by the delta method: ``log Z_k = sum_{j >= k} log m_j`` with
  ``m_j = mean_i r_{j,i}``, ``r_{j,i} = exp(-(beta_j - beta_{j+1}) E_{j+1,i})``, varies to
  first order as the mean of ``y_{k,i} = sum_{j >= k} r_{j,i} / m_j``; its batch-means standard
  error is the error of ``log Z_k``;
* integration over beta is linear in the energies: the series is each iteration's trapezoid
  sum itself.

The errors of earlier releases, which add the rungs' variances as if independent, are kept as
``log_z_ss_indep_err_k`` and ``log_z_ti_indep_err_k`` for comparison. The coverage of both on
Gaussians in a box over 400 seeds is in docs/analysis.md (benchmarks/free_energy_coverage.py).

References
----------
W. Xie, P. O. Lewis, Y. Fan, L. Kuo & M.-H. Chen, Syst. Biol. 60 (2011) 150 (stepping stone);
S. Syed et al., JRSS B 84 (2022) 321, Sec. 5 (normalising constants from parallel tempering).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from thermonet.stats import batch_means
from thermonet.types import FloatArray


class FreeEnergies(NamedTuple):
    """``log Z`` at every rung (slot order) by two estimators, with standard errors."""

    beta_k: FloatArray                   #: (K,) inverse temperatures, slot order
    log_z_ss_k: FloatArray               #: (K,) stepping stone
    log_z_ss_err_k: FloatArray           #: (K,) its standard error, rungs jointly
    log_z_ti_k: FloatArray               #: (K,) trapezoid integration of -<E> over beta
    log_z_ti_err_k: FloatArray           #: (K,) its standard error, rungs jointly
    absolute: bool                       #: True if the hottest rung is the prior (beta = 0)
    log_z_ss_indep_err_k: FloatArray     #: (K,) stepping stone's error, rungs as independent
    log_z_ti_indep_err_k: FloatArray     #: (K,) trapezoid's error, rungs as independent
    log_z_tic_k: FloatArray              #: (K,) trapezoid with the end correction from Var(E)
    log_z_ti_quad_k: FloatArray          #: (K,) quadrature error: sum of |correction|


def _log_mean_exp(x: FloatArray) -> tuple[float, float, FloatArray]:
    """``log mean exp(x)``, its standard error alone (batch means on the shifted
    exponentials) and the series ``exp(x) / mean exp(x)`` (the delta method's terms)."""
    shift = float(np.max(x))
    r = np.exp(x - shift)
    m, err = batch_means(r)
    return shift + math.log(m), err / m, r / m


def free_energies(beta_k: Any, energy_nk: Any) -> FreeEnergies:
    """``log Z`` at every rung from the energies ``energy_nk`` (iterations x slots) recorded
    on a ladder with inverse temperatures ``beta_k`` (descending along the slots)."""
    beta = np.asarray(beta_k, dtype=np.float64)
    e = np.asarray(energy_nk, dtype=np.float64)
    k = beta.size
    ss, ss_var = np.zeros(k), np.zeros(k)
    ti, ti_var = np.zeros(k), np.zeros(k)
    means, sems, var = np.empty(k), np.empty(k), np.empty(k)
    for j in range(k):
        means[j], sems[j] = batch_means(e[:, j])
        var[j] = float(np.var(e[:, j], ddof=1))
    tic, quad = np.zeros(k), np.zeros(k)
    # per-iteration contributions of each pair, summed from the hot end down below
    y = np.zeros_like(e)          # stepping stone, linearised: r_ji / m_j
    t = np.zeros_like(e)          # trapezoid: -d_j (E_j + E_j+1) / 2
    for j in range(k - 2, -1, -1):          # from the hot end down
        d = beta[j] - beta[j + 1]
        lr, lr_err, y[:, j] = _log_mean_exp(-d * e[:, j + 1])
        ss[j] = ss[j + 1] + lr
        ss_var[j] = ss_var[j + 1] + lr_err ** 2
        ti[j] = ti[j + 1] - 0.5 * d * (means[j] + means[j + 1])
        corr = d * d / 12.0 * (var[j + 1] - var[j])
        tic[j] = tic[j + 1] - 0.5 * d * (means[j] + means[j + 1]) + corr
        quad[j] = quad[j + 1] + abs(corr)
        ti_var[j] = ti_var[j + 1] + (0.5 * d) ** 2 * (sems[j] ** 2 + sems[j + 1] ** 2)
        t[:, j] = -0.5 * d * (e[:, j] + e[:, j + 1])
    y = np.cumsum(y[:, ::-1], axis=1)[:, ::-1]
    t = np.cumsum(t[:, ::-1], axis=1)[:, ::-1]
    ss_err, ti_err = np.zeros(k), np.zeros(k)
    for j in range(k - 1):
        ss_err[j] = batch_means(y[:, j])[1]
        ti_err[j] = batch_means(t[:, j])[1]
    return FreeEnergies(beta, ss, ss_err, ti, ti_err, bool(beta[-1] == 0.0), np.sqrt(ss_var),
                        np.sqrt(ti_var), tic, quad)


def variational_log_z(path_b: Any, swap_energy_nk: Any, *, log_normaliser: float = 0.0,
                      log_volume: float = 0.0) -> tuple[float, float]:
    """``log Z(T_min) = log ∫ exp(-E/T_min) prior dw`` from a variational leg
    (:mod:`thermonet.tempering.reference`), with its standard error.

    ``path_b`` are the leg's coordinates (1 first, 0 last) and ``swap_energy_nk`` its recorded
    ``W = E/T_min + log q`` (``+inf`` outside the box). Stepping stone along ``b`` gives
    ``log ∫ exp(-E/T_min) box dw - log Z_q``; adding ``log_normaliser`` (``log Z_q``, 0 for a
    normalised ``q``) and subtracting ``log_volume`` (the box's, whose uniform density is
    ``exp(-log_volume)``) makes it the number the prior leg's stepping stone gives at
    ``T_min``: the evidence at ``T_min = 1``.
    """
    # W is +inf for draws of q outside the box: their ratios are 0, and the trapezoid's
    # moments (not used here) are not finite
    with np.errstate(invalid="ignore", over="ignore"):
        fe = free_energies(path_b, swap_energy_nk)
    return (float(fe.log_z_ss_k[0]) + log_normaliser - log_volume, float(fe.log_z_ss_err_k[0]))


__all__ = ["FreeEnergies", "free_energies", "variational_log_z"]
