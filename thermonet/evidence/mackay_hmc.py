"""The Gaussian predictive of MacKay's framework against the sampled one.

At the re-estimated hyperparameters (``alpha_c``, ``beta`` held fixed) the posterior of the
weights is ``exp(-M(w))``; MacKay's framework approximates it by ``N(w_MP, A^-1)`` and the
outputs by their linearisation, giving the predictive mean ``f(x, w_MP)`` and variance
``g^T A^-1 g + 1/beta``. :func:`sampled_predictive` samples the same posterior by HMC (the
registry's ``hmc`` sampler at T = 1 on the same potential, started at ``w_MP``, masses
``diag(A)`` so that one step size suits every direction) and returns the predictive mean
and variance of the outputs over the draws (plus ``1/beta``), with Monte-Carlo standard
errors from batch means. For a model linear in its parameters the two are the same
distribution, so they must agree within those errors; for a network the difference measures
the Gaussian approximation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from thermonet import registry
from thermonet.errors import ConfigError
from thermonet.evidence.mackay import MacKayResult
from thermonet.types import FloatArray

__all__ = ["SampledPredictive", "sampled_predictive"]


@dataclass
class SampledPredictive:
    """Predictive moments of the outputs from HMC draws, each ``(n, K)``, with the
    Monte-Carlo standard errors of the mean and of the variance (batch means)."""

    mean: FloatArray
    var: FloatArray
    mean_se: FloatArray
    var_se: FloatArray
    acceptance: float
    n_draws: int


def _batch_se(values: FloatArray, n_batches: int) -> FloatArray:
    """Standard error of the mean over axis 0 by ``n_batches`` batch means."""
    m = values.shape[0] // n_batches
    b = values[:m * n_batches].reshape(n_batches, m, *values.shape[1:]).mean(axis=1)
    return np.asarray(b.std(axis=0, ddof=1) / math.sqrt(n_batches))


def sampled_predictive(result: MacKayResult, potential: Any, x: Any, *, n_draws: int = 4000,
                       burn: int = 200, n_leapfrog: int = 20, step_size: float = 0.15,
                       seed: int = 0, n_batches: int = 20) -> SampledPredictive:
    """HMC draws of ``exp(-M(w))`` at the result's hyperparameters; the outputs' predictive
    mean and variance at ``x`` over ``n_draws`` transitions after ``burn``.

    ``step_size`` is in units of the posterior's widths ``diag(A)^-1/2`` (masses
    ``diag(A)``); ``n_leapfrog * step_size`` ~ 3 crosses the Gaussian's width. The potential
    keeps the hyperparameters of ``result`` afterwards.
    """
    if int(n_draws) < 2 * int(n_batches) or int(burn) < 0 or int(n_batches) < 2:
        raise ConfigError(f"n_draws = {n_draws}, burn = {burn}, n_batches = {n_batches}; "
                          "expected n_draws >= 2 n_batches, burn >= 0, n_batches >= 2")
    if not result.positive_definite:
        raise ConfigError("the Hessian at w_MP is not positive definite; re-estimate first")
    hyper = [*result.alpha.tolist(), *([result.beta] if result.beta_estimated else [])]
    potential.set_hyperparameters(hyper, 1.0)
    a_diag = result.hessian_factor().diagonal()
    hmc = registry.load("sampler", "hmc")(
        potential, temperature=1.0, masses=a_diag, n_leapfrog=int(n_leapfrog),
        step_size=float(step_size), adapt_method="fixed", step_size_jitter=0.2,
        n_leapfrog_jitter=0.5)
    rng = np.random.default_rng(seed)
    state = hmc.init(result.theta.copy())
    xx = np.asarray(x, dtype=np.float64)
    outs = []
    accepted = 0
    for i in range(int(burn) + int(n_draws)):
        state, info = hmc.step(state, rng)
        if i >= burn:
            accepted += bool(info.is_accepted)
            outs.append(np.asarray(potential.outputs(state.theta, xx)))
    f = np.array(outs)                                              # (S, n, K)
    mean = f.mean(axis=0)
    centred = (f - mean) ** 2
    noise = 1.0 / result.beta if result.beta_estimated else 1.0 / float(potential.tau)
    return SampledPredictive(
        mean=mean, var=centred.mean(axis=0) + noise, mean_se=_batch_se(f, int(n_batches)),
        var_se=_batch_se(centred, int(n_batches)), acceptance=accepted / int(n_draws),
        n_draws=int(n_draws))
