"""Free energies along the ladder, from the same run: stepping stone and integration over beta.

With a rung at ``beta = 0`` (the prior, ``Z(0) = 1`` for a normalised prior) every rung's
``log Z(beta_k) = log ∫ exp(-beta_k E(w)) prior(w) dw`` follows from the energies the run
recorded there:

* stepping stone (Xie, Lewis, Fan, Kuo & Chen 2011): ``log Z(beta_j) - log Z(beta_{j+1}) =
  log E_{beta_{j+1}}[exp(-(beta_j - beta_{j+1}) E)]``, each ratio estimated from the samples of
  the hotter rung, summed from the prior down;
* thermodynamic integration over beta: ``d log Z / d beta = -<E>_beta``, by the trapezoid rule
  over the rungs (its difference from stepping stone is a check of the rung spacing).

At ``T = 1`` (a rung at ``beta = 1``) ``log Z`` is the log evidence of the model with the box
prior. Error bars: each rung's estimate carries the standard error of its mean from batch
means (autocorrelation included); rungs are treated as independent, which swaps make only
approximately true, so the error bar is a guide, checked against analytic targets in
tests/test_free_energy.py. Without a prior rung the values are relative to the hottest rung.

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
    log_z_ss_err_k: FloatArray           #: (K,)
    log_z_ti_k: FloatArray               #: (K,) trapezoid integration of -<E> over beta
    log_z_ti_err_k: FloatArray           #: (K,)
    absolute: bool                       #: True if the hottest rung is the prior (beta = 0)


def _log_mean_exp(x: FloatArray) -> tuple[float, float]:
    """``log mean exp(x)`` and its standard error (batch means on the shifted exponentials)."""
    shift = float(np.max(x))
    m, err = batch_means(np.exp(x - shift))
    return shift + math.log(m), err / m


def free_energies(beta_k: Any, energy_nk: Any) -> FreeEnergies:
    """``log Z`` at every rung from the energies ``energy_nk`` (iterations x slots) recorded
    on a ladder with inverse temperatures ``beta_k`` (descending along the slots)."""
    beta = np.asarray(beta_k, dtype=np.float64)
    e = np.asarray(energy_nk, dtype=np.float64)
    k = beta.size
    ss, ss_var = np.zeros(k), np.zeros(k)
    ti, ti_var = np.zeros(k), np.zeros(k)
    means, sems = np.empty(k), np.empty(k)
    for j in range(k):
        means[j], sems[j] = batch_means(e[:, j])
    for j in range(k - 2, -1, -1):          # from the hot end down
        d = beta[j] - beta[j + 1]
        lr, lr_err = _log_mean_exp(-d * e[:, j + 1])
        ss[j] = ss[j + 1] + lr
        ss_var[j] = ss_var[j + 1] + lr_err ** 2
        ti[j] = ti[j + 1] - 0.5 * d * (means[j] + means[j + 1])
        ti_var[j] = ti_var[j + 1] + (0.5 * d) ** 2 * (sems[j] ** 2 + sems[j + 1] ** 2)
    return FreeEnergies(beta, ss, np.sqrt(ss_var), ti, np.sqrt(ti_var), bool(beta[-1] == 0.0))


__all__ = ["FreeEnergies", "free_energies"]
