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

For a classifier (:class:`~thermonet.evidence.mackay.classify.GaussianPriorClassifier`, no
``beta``) :func:`sampled_class_probabilities` is the counterpart of MacKay's moderated outputs:
the same HMC draws at the result's ``alpha_c``, and the posterior predictive class
probabilities as the mean over the draws of the softmax of the logits (the logistic function
of a single logistic output), with batch-means standard errors, the acceptance, and traces
of ``M(w)`` and of the white distance ``(w - w_MP)^T A (w - w_MP)`` (``d`` on average under
the Gaussian ``N(w_MP, A^-1)``) that show whether the chain stayed in ``w_MP``'s basin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from thermonet import registry
from thermonet.errors import ConfigError
from thermonet.evidence.mackay.framework import MacKayResult
from thermonet.types import FloatArray

__all__ = ["SampledClassProbabilities", "SampledPredictive", "sampled_class_probabilities",
           "sampled_predictive"]


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


def _posterior_hmc(result: MacKayResult, potential: Any, n_draws: int, burn: int,
                   n_leapfrog: int, step_size: float, n_batches: int) -> Any:
    """The registry's ``hmc`` on ``exp(-M(w))`` at the result's hyperparameters (set on
    ``potential`` here), masses ``diag(A)``."""
    if int(n_draws) < 2 * int(n_batches) or int(burn) < 0 or int(n_batches) < 2:
        raise ConfigError(f"n_draws = {n_draws}, burn = {burn}, n_batches = {n_batches}; "
                          "expected n_draws >= 2 n_batches, burn >= 0, n_batches >= 2")
    if not result.positive_definite:
        raise ConfigError("the Hessian at w_MP is not positive definite; re-estimate first")
    # (alpha_1..alpha_C[, beta]) with scale 1: the prior at T = 1, as reestimate sets it
    hyper = [*result.alpha.tolist(), *([result.beta] if result.beta_estimated else [])]
    potential.set_hyperparameters(hyper, 1.0)
    a_diag = result.hessian_factor().diagonal()
    return registry.load("sampler", "hmc")(
        potential, temperature=1.0, masses=a_diag, n_leapfrog=int(n_leapfrog),
        step_size=float(step_size), adapt_method="fixed", step_size_jitter=0.2,
        n_leapfrog_jitter=0.5)


def sampled_predictive(result: MacKayResult, potential: Any, x: Any, *, n_draws: int = 4000,
                       burn: int = 200, n_leapfrog: int = 20, step_size: float = 0.15,
                       seed: int = 0, n_batches: int = 20) -> SampledPredictive:
    """HMC draws of ``exp(-M(w))`` at the result's hyperparameters; the outputs' predictive
    mean and variance at ``x`` over ``n_draws`` transitions after ``burn``.

    ``step_size`` is in units of the posterior's widths ``diag(A)^-1/2`` (masses
    ``diag(A)``); ``n_leapfrog * step_size`` ~ 3 crosses the Gaussian's width. The potential
    keeps the hyperparameters of ``result`` afterwards.
    """
    hmc = _posterior_hmc(result, potential, n_draws, burn, n_leapfrog, step_size, n_batches)
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


@dataclass
class SampledClassProbabilities:
    """Posterior predictive class probabilities ``(n, K)`` from HMC draws (``K = 1``: ``P(t =
    1)`` of a single logistic output), their batch-means standard errors, and per kept
    draw ``M(w)`` and the white distance ``(w - w_MP)^T A (w - w_MP)``."""

    p: FloatArray
    p_se: FloatArray
    acceptance: float
    n_draws: int
    energy: FloatArray
    white_sq: FloatArray


def _probabilities(z: FloatArray) -> FloatArray:
    if z.shape[1] == 1:
        return np.asarray(1.0 / (1.0 + np.exp(-z)))
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return np.asarray(e / e.sum(axis=1, keepdims=True))


def sampled_class_probabilities(result: MacKayResult, potential: Any, x: Any, *,
                                n_draws: int = 4000, burn: int = 200, n_leapfrog: int = 20,
                                step_size: float = 0.15, seed: int = 0, n_batches: int = 20
                                ) -> SampledClassProbabilities:
    """HMC draws of ``exp(-M(w))`` at the result's ``alpha_c`` (held fixed) and the mean over
    ``n_draws`` transitions after ``burn`` of the class probabilities at ``x``: the Bayesian
    posterior predictive that :func:`~thermonet.evidence.mackay.classify.moderated_outputs`
    approximates. ``potential``: the classifier the result was computed on (``outputs`` are
    the logits). Settings as :func:`sampled_predictive`; per-draw probabilities are summed
    into ``n_batches`` batches as they come, so memory does not grow with ``n_draws``.
    """
    if result.beta_estimated:
        raise ConfigError("the result has a noise level beta (a regression network); "
                          "expected a classifier's: use sampled_predictive for regression")
    hmc = _posterior_hmc(result, potential, n_draws, burn, n_leapfrog, step_size, n_batches)
    fac = result.hessian_factor()
    rng = np.random.default_rng(seed)
    state = hmc.init(result.theta.copy())
    xx = np.asarray(x, dtype=np.float64)
    nb, per = int(n_batches), int(n_draws) // int(n_batches)
    sums: FloatArray | None = None
    energy = np.empty(int(n_draws))
    white = np.empty(int(n_draws))
    accepted = 0
    for i in range(int(burn) + int(n_draws)):
        state, info = hmc.step(state, rng)
        j = i - int(burn)
        if j < 0:
            continue
        accepted += bool(info.is_accepted)
        energy[j] = state.energy
        white[j] = fac.quadratic(state.theta - result.theta)
        if j >= nb * per:
            continue
        p = _probabilities(np.asarray(potential.outputs(state.theta, xx), dtype=np.float64))
        if sums is None:
            sums = np.zeros((nb, *p.shape))
        sums[j // per] += p
    assert sums is not None
    means = sums / per
    return SampledClassProbabilities(
        p=means.mean(axis=0), p_se=np.asarray(means.std(axis=0, ddof=1) / math.sqrt(nb)),
        acceptance=accepted / int(n_draws), n_draws=nb * per, energy=energy, white_sq=white)
