"""Assembling the TI result: quadrature over lambda, error bars and convergence details."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from thermonet.evidence._result import EvidenceResult
from thermonet.evidence.ti.config import TIConfig
from thermonet.evidence.ti.reference import Reference
from thermonet.evidence.ti.store import Progress
from thermonet.evidence.ti.sweep_error import sweep_error
from thermonet.types import FloatArray, IntArray


def sem_of(row: FloatArray) -> float:
    """The standard error of the mean of one λ point's samples (autocorrelation-corrected)."""
    from thermonet.stats import mean_and_error

    return float(mean_and_error(row)[1])


def integrator_named(name: str) -> Any:
    """The quadrature rule registered as ``name``."""
    from thermonet import registry

    return registry.load("integrator", name)()


def assemble_result(config: TIConfig, ref: Reference, prior: Any, lambdas: FloatArray,
            order: IntArray, pr: Progress, integrator: Any, seed: Any) -> EvidenceResult:
    """The :class:`EvidenceResult` of a finished TI run from its λ table, with its error
    bar, the other quadrature rule's value and the diagnostics docs/evidence.md lists."""
    from thermonet.stats import integrated_autocorrelation_time, mean_and_error

    t = config.temperature
    inv = np.argsort(order)                 # sweep position of each ascending λ
    samples = pr.samples[inv]
    n_pts = lambdas.size
    mean = np.empty(n_pts)
    sem = np.empty(n_pts)
    tau = np.empty(n_pts)
    accepted = pr.accepted[inv]
    for j in range(n_pts):
        mean[j], sem[j] = mean_and_error(samples[j])
        tau[j] = integrated_autocorrelation_time(samples[j])
        if accepted[j] == 0:     # a stuck chain: its zero variance says nothing
            sem[j] = math.nan
    main = integrator.integrate(lambdas, mean, sem)
    # one chain runs the sweep: pooled memory, carried from one λ point to the next
    mc_err, cross, window = sweep_error(pr.samples, main.weights[order], config.n_burn_in,
                                        main.error)
    other = integrator_named(other_rule(integrator.name)).integrate(lambdas, mean, sem)
    half = None
    if n_pts >= 5:
        sl = slice(0, None, 2) if (n_pts - 1) % 2 == 0 else None
        if sl is not None:
            half = integrator.integrate(lambdas[sl], mean[sl]).value
        else:  # even count: both half grids through the end points are uneven; use 0,2,..,N,N+1
            idx = np.r_[np.arange(0, n_pts - 1, 2), n_pts - 1]
            half = integrator.integrate(lambdas[idx], mean[idx]).value
    quad_err = abs(main.value - other.value)
    assert config.f0 is not None  # TIConfig.__post_init__ fills it
    log_z0 = ref.log_z0(prior.half_width, t, config.f0)
    log_z0_exact = ref.log_z0(prior.half_width, t, "exact")
    log_z0_centred = ref.log_z0(prior.half_width, t, "centred")
    log_integral = log_z0 + main.value / t
    err = math.hypot(mc_err, quad_err) / t
    acc = pr.accepted[inv] / config.n_samples
    details: dict[str, Any] = {
        "lambdas": lambdas.tolist(),
        "dj_mean": mean.tolist(),
        "dj_sem": sem.tolist(),
        "tau_int": tau.tolist(),
        "step_size": pr.step_size[inv].tolist(),
        "acceptance": acc.tolist(),
        "wall_reflections": pr.reflections[inv].astype(int).tolist(),
        "divergent": pr.divergent[inv].astype(int).tolist(),
        "extra_adaptation": pr.extra_adapt[inv].astype(int).tolist(),
        "integral": main.value,
        "integral_mc_error": mc_err,
        "integral_mc_error_independent": main.error,
        "integral_mc_cross_covariance": cross,
        "carried_window": window,
        "integral_quadrature_error": quad_err,
        "integral_other_rule": other.value,
        "other_rule": other_rule(integrator.name),
        "integral_half_grid": half,
        "log_integral_mc_error": mc_err / t,
        "log_integral_quadrature_error": quad_err / t,
        "log_z0": log_z0,
        "log_z0_exact": log_z0_exact,
        "log_z0_centred": log_z0_centred,
        "f0": config.f0,
        "n_uniform": ref.n_uniform,
        "reference": ref.summary(),
        "elapsed_seconds": pr.elapsed,
        "gradient_evaluations": pr.n_grad + pr.kfit_grad,
        "kfit_gradient_evaluations": pr.kfit_grad,
        "seed": int(seed) if isinstance(seed, (int, np.integer)) else repr(seed),
        "config": config.as_dict(),
        "completed": bool(pr.next_index == n_pts),
    }
    return EvidenceResult("ti", t, ref.n_params, ref.energy0, float(log_integral), float(err),
                          prior.log_volume, details)


def other_rule(name: str) -> str:
    """The quadrature rule compared against ``name`` as a discretisation check."""
    return "trapezoid" if name != "trapezoid" else "simpson"
