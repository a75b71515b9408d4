"""Thermodynamic integration (TI): ``log ∫_box exp(-E(w)/T) dw`` from a chain of bridges.

The bridging potential between the energy ``E`` (λ = 0) and a reference ``J_1`` made of
independent quadratic and uniform directions (λ = 1) is (paper eq. 21; Frenkel & Smit 2001)::

    J_λ(w) = E0 + (1 - λ)(E(w) - E0) + λ Σ_i k_i (w_i - w0_i)² / 2,        k_i = 0 on uniform
    dJ/dλ  = Σ_i k_i (w_i - w0_i)² / 2 - (E(w) - E0)                           directions

and, with ``Z_λ = ∫_box exp(-J_λ/T)``, ``d log Z_λ/dλ = -<dJ/dλ>_λ / T``, so::

    log ∫_box e^{-E/T} = log Z_1 + (1/T) ∫_0^1 <dJ/dλ>_λ dλ.

``log Z_1`` (:meth:`Reference.log_z0`) is known in closed form: a product of Gaussian integrals
truncated to the box and of box widths. The averages come from HMC on ``J_λ`` at temperature
T at ``λ_j = j/(N+1)``, j = 0..N+1, and the integral from a quadrature rule of the
``thermonet.integrators`` group (Simpson's 'avg' rule by default, as the paper's code).

Two recipes (:class:`TIConfig` ``method``):

* ``"converged"`` (default): the reference is fitted with the box in place (reflecting walls),
  directions whose sampled spread fills the box are uniform (``k_i = 0``), HMC reflects at the
  walls, and ``log Z_1`` is exact for the box ``|w_i| < a_i`` actually sampled.
* ``"paper"``: the recipe of Baldock & Marzari's released code: ``k`` fitted without the
  box, end-point box rejection in the bridges, and ``log Z_1`` for a box centred on ``w0``
  (exact only when the box does not cut the reference Gaussian; kept to reproduce the
  published numbers).

References
----------
Baldock & Marzari, arXiv:1904.04154, Sec. 4.3; D. Frenkel and B. Smit, *Understanding
Molecular Simulation* (2nd ed., 2001), Sec. 10.2.1; D. Frenkel and A. J. C. Ladd, J. Chem. Phys.
81, 3188 (1984).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from thermonet.api import as_theta
from thermonet.errors import ConfigError, ConvergenceError
from thermonet.evidence._result import EvidenceResult
from thermonet.evidence.ti.bridge import BridgePotential, Chain, ti_sampler
from thermonet.evidence.ti.config import TIConfig
from thermonet.evidence.ti.reference import Reference
from thermonet.evidence.ti.result import assemble_result, integrator_named, sem_of
from thermonet.evidence.ti.store import (
    TI_CHECKPOINT,
    Progress,
    fingerprint,
    read_ti_checkpoint,
    write_ti_checkpoint,
)
from thermonet.types import FloatArray


def fit_reference(potential: Any, theta0: Any, prior: Any, config: TIConfig | None = None,
                  rng: np.random.Generator | None = None) -> Reference:
    """Fit the diagonal reference ``k_i = T / <(w_i - w0_i)²>`` around ``w0 = theta0``.

    Samples ``exp(-E/T)`` with HMC started at ``theta0``: dt adapted coarsely (factor 0.1),
    ``0.2 kfit_burn_in`` trajectories, adapted again, ``0.8 kfit_burn_in`` trajectories,
    adapted coarsely then finely (0.9), then ``kfit_samples`` trajectories after each of which
    ``(w - w0)²`` is accumulated (paper eq. 20; Baldock & Marzari's released code). The average is
    about the minimum ``w0``, not the sample mean.

    ``config.reference="free"``: no box at all (the paper). ``"box"``: reflecting walls, and
    directions with ``sqrt(<(w_i - w0_i)²>) > uniform_threshold · a_i`` become uniform.
    ``config.k_scale`` is *not* applied here.
    """
    return _fit_reference(potential, theta0, prior, config, rng)[0]


def _fit_reference(potential: Any, theta0: Any, prior: Any, config: TIConfig | None,
                   rng: np.random.Generator | None) -> tuple[Reference, int]:
    config = TIConfig() if config is None else config
    rng = np.random.default_rng(0) if rng is None else rng
    n = potential.n_params
    w0 = as_theta(theta0, n, what="TI starting point theta0")
    check_prior(prior, n, w0)
    e0 = float(potential.energy(w0))
    if not math.isfinite(e0):
        raise ConvergenceError(f"E(theta0) = {e0}; TI needs a finite energy at its starting "
                               "point (a minimum)")
    bridge = BridgePotential(potential, Reference(w0, np.zeros(n), np.zeros(n, bool), e0), 0.0)
    with_box = config.reference == "box"
    sampler = ti_sampler(bridge, prior, config, "reflect" if with_box else "endpoint", with_box)
    assert config.step_jitter is not None  # TIConfig.__post_init__ fills every None
    chain = Chain(sampler, bridge, w0, config.step_size, config.step_jitter)
    first = math.ceil(0.2 * config.kfit_burn_in)
    chain.adapt(rng, 0.1)
    chain.run(rng, first)
    chain.adapt(rng, 0.1)
    chain.run(rng, config.kfit_burn_in - first)
    chain.adapt(rng, 0.1)
    chain.adapt(rng, 0.9)
    rsq = np.zeros(n)

    def record() -> None:
        d = chain.state.theta - w0
        rsq[:] += d * d

    chain.run(rng, config.kfit_samples, record)
    rsq /= config.kfit_samples
    if with_box:
        uniform = np.sqrt(rsq) > config.uniform_threshold * prior.half_width
    else:
        uniform = np.zeros(n, dtype=bool)
    bad = ~uniform & ~(rsq > 0)
    if bad.any():
        raise ConvergenceError(
            f"the k fit saw no motion in {int(bad.sum())} direction(s) ({chain.n_accepted} of "
            f"{config.kfit_samples} trajectories accepted, dt = {chain.state.step_size:.3g}); "
            "increase kfit_samples or check the potential")
    with np.errstate(divide="ignore"):
        k = np.where(uniform, 0.0, config.temperature / np.where(rsq > 0, rsq, 1.0))
    return Reference(w0, k, uniform, bridge.e0), bridge.n_grad


def check_prior(prior: Any, n: int, w0: FloatArray) -> None:
    """Refuse a prior that is not a box of ``n`` widths holding ``w0``."""
    if prior is None or not hasattr(prior, "half_width"):
        raise ConfigError(f"TI needs a BoxPrior (the box |w_i| < sigma_i/2); got {prior!r}")
    if prior.n_params != n:
        raise ConfigError(f"prior has {prior.n_params} parameters; the potential has {n}")
    if not prior.contains(w0):
        raise ConfigError(f"theta0 has {prior.n_outside(w0)} parameter(s) on or outside the "
                          "prior box; TI must start inside the box (widen the prior or "
                          "minimise with the box)")


def ti_streams(seed: Any) -> tuple[np.random.Generator, np.random.Generator]:
    """The two random streams of a TI from ``seed``: the reference fit's and the sweep's."""
    if isinstance(seed, np.random.SeedSequence):   # a copy: spawning advances the original
        ss = np.random.SeedSequence(seed.entropy, spawn_key=seed.spawn_key,
                                    pool_size=seed.pool_size)
    else:
        ss = np.random.SeedSequence(seed)
    a, b = ss.spawn(2)
    return np.random.Generator(np.random.PCG64(a)), np.random.Generator(np.random.PCG64(b))


def one_way(potential: Any, theta0: Any, prior: Any, config: TIConfig, *, seed: Any = 0,
            reference: Reference | None = None,
            run_dir: str | os.PathLike[str] | None = None,
            progress: Callable[[int, int, dict[str, Any]], None] | None = None
            ) -> EvidenceResult:
    """One sweep of thermodynamic integration through λ (forward, or in reverse with
    ``config.reverse``); the arguments are those of
    :func:`thermonet.evidence.ti.integration.thermodynamic_integration`."""
    t_start = time.perf_counter()
    n = potential.n_params
    w0 = as_theta(theta0, n, what="TI starting point theta0")
    check_prior(prior, n, w0)
    integrator = integrator_named(config.quadrature)
    rng_fit, rng = ti_streams(seed)
    lambdas = config.lambdas
    n_pts = lambdas.size
    order = np.arange(n_pts)[::-1] if config.reverse else np.arange(n_pts)
    path, fp, resumed = _open_checkpoint(run_dir, potential, w0, prior, config, seed, reference)
    if resumed is not None:
        ref, pr = resumed
        rng.bit_generator.state = pr.rng_state
    else:
        ref, pr = _fresh_start(potential, w0, prior, config, reference, rng_fit, n_pts)
    bridge = BridgePotential(potential, ref)

    # TIConfig.__post_init__ fills every None
    assert config.wall is not None and config.step_jitter is not None
    if resumed is None and config.reverse:
        # in equilibrium at λ = 1 from the start, as the second law's bracket of the two sweeps
        # assumes (thermonet.evidence.ti.pair): the reference is drawn exactly
        pr.theta = ref.draw(prior.half_width, config.temperature, rng)
    sampler = ti_sampler(bridge, prior, config, config.wall, True)
    bridge.lam = float(lambdas[order[0]])
    chain = Chain(sampler, bridge, pr.theta, pr.dt, config.step_jitter)
    if resumed is None:
        _initial_burn_in(chain, rng, config, pr, bridge)
        pr.elapsed += time.perf_counter() - t_start
        t_start = time.perf_counter()
        if path is not None:
            write_ti_checkpoint(path, fp, ref, pr)
    grad0 = bridge.n_grad

    for pos in range(pr.next_index, n_pts):
        j = order[pos]
        row = _sample_point(chain, rng, config, pr, pos, lambdas[j], bridge)
        now = time.perf_counter()
        pr.elapsed += now - t_start
        t_start = now
        pr.n_grad += bridge.n_grad - grad0
        grad0 = bridge.n_grad
        if path is not None:
            write_ti_checkpoint(path, fp, ref, pr)
        if progress is not None:
            mean = float(np.mean(row))
            progress(pos, n_pts, {"lambda": float(lambdas[j]), "mean": mean,
                                  "sem": sem_of(row), "acceptance":
                                  chain.n_accepted / config.n_samples,
                                  "step_size": chain.state.step_size})
    return assemble_result(config, ref, prior, lambdas, order, pr, integrator, seed)


def _open_checkpoint(run_dir: str | os.PathLike[str] | None, potential: Any, w0: FloatArray,
                     prior: Any, config: TIConfig, seed: Any, reference: Reference | None
                     ) -> tuple[Path | None, str, tuple[Reference, Progress] | None]:
    """The checkpoint's directory, the fingerprint of this TI and what it stored (None: a
    fresh start)."""
    if run_dir is None:
        return None, "", None
    path = Path(run_dir)
    path.mkdir(parents=True, exist_ok=True)
    fp = fingerprint(potential, w0, prior, config, seed, reference)
    resumed = None
    if (path / TI_CHECKPOINT).exists():
        resumed = read_ti_checkpoint(path / TI_CHECKPOINT, fp)
    return path, fp, resumed


def _fresh_start(potential: Any, w0: FloatArray, prior: Any, config: TIConfig,
                 reference: Reference | None, rng_fit: np.random.Generator, n_pts: int
                 ) -> tuple[Reference, Progress]:
    """The reference (fitted, or the one given, scaled by ``k_scale``) and empty progress."""
    n = potential.n_params
    kfit_grad = 0
    if reference is None:
        ref, kfit_grad = _fit_reference(potential, w0, prior, config, rng_fit)
    else:
        if reference.n_params != n:
            raise ConfigError(f"reference has {reference.n_params} parameters; the "
                              f"potential has {n}")
        ref = reference
    ref = ref.scaled(config.k_scale) if config.k_scale != 1.0 else ref
    pr = Progress(0, np.full((n_pts, config.n_samples), np.nan), np.full(n_pts, np.nan),
                  np.zeros(n_pts), np.zeros(n_pts), np.zeros(n_pts), np.zeros(n_pts),
                  w0.copy(),
                  config.step_size, {}, 0.0, 0, kfit_grad)
    return ref, pr


def _initial_burn_in(chain: Chain, rng: np.random.Generator, config: TIConfig, pr: Progress,
                     bridge: BridgePotential) -> None:
    """Burn-in at the first λ (the original code's 500 + 1000 at λ = 0), into ``pr``."""
    assert config.initial_burn_in is not None
    nb = config.initial_burn_in
    chain.adapt(rng, 0.1)
    chain.run(rng, nb // 3)
    chain.adapt(rng, 0.1)
    chain.run(rng, nb - nb // 3)
    chain.adapt(rng, 0.1)
    chain.adapt(rng, 0.9)
    pr.theta, pr.dt = chain.state.theta, chain.state.step_size
    pr.rng_state = rng.bit_generator.state
    pr.n_grad = bridge.n_grad


def _sample_point(chain: Chain, rng: np.random.Generator, config: TIConfig, pr: Progress,
                  pos: int, lam: Any, bridge: BridgePotential) -> FloatArray:
    """The ``pos``-th λ point of the sweep: burn-in, re-adaptation, the samples of dJ/dλ
    (into ``pr.samples[pos]``, returned) and the chain's counters."""
    assert config.min_acceptance is not None
    chain.relambda(lam)
    chain.reset_counters()
    chain.run(rng, config.n_burn_in)
    if config.n_burn_in and chain.n_accepted < config.min_acceptance * config.n_burn_in:
        chain.adapt(rng, 0.1)
        chain.adapt(rng, 0.9)
        pr.extra_adapt[pos] = 1
    elif config.readapt_every and pos % config.readapt_every == 0 and pos != 0:
        chain.adapt(rng, 0.9)
    chain.reset_counters()
    row = pr.samples[pos]
    count = [0]

    def record() -> None:
        row[count[0]] = bridge.dj_dlambda(chain.state.theta, chain.base_e)
        count[0] += 1

    chain.run(rng, config.n_samples, record)
    pr.step_size[pos] = chain.state.step_size
    pr.accepted[pos] = chain.n_accepted
    pr.reflections[pos] = chain.n_reflections
    pr.divergent[pos] = chain.n_divergent
    pr.next_index = pos + 1
    pr.theta, pr.dt = chain.state.theta, chain.state.step_size
    pr.rng_state = rng.bit_generator.state
    return row


__all__ = ["check_prior", "fit_reference", "one_way", "ti_streams"]
