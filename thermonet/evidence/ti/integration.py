"""Thermodynamic integration as a user calls it: one sweep or both directions
(:func:`thermodynamic_integration`), and independent repeats (:func:`repeat_ti`).

The sweep itself is :mod:`thermonet.evidence.ti.sweep`, both directions
:mod:`thermonet.evidence.ti.pair`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from thermonet.errors import ConfigError
from thermonet.evidence._result import EvidenceResult
from thermonet.evidence.ti.bridge import BridgePotential
from thermonet.evidence.ti.config import TIConfig
from thermonet.evidence.ti.pair import bidirectional_ti
from thermonet.evidence.ti.reference import Reference, log_truncated_gaussian
from thermonet.evidence.ti.store import TI_CHECKPOINT
from thermonet.evidence.ti.sweep import fit_reference, one_way, ti_streams
from thermonet.parallel import make_executor


def thermodynamic_integration(potential: Any, theta0: Any, prior: Any,
                              config: TIConfig | None = None, *, seed: Any = 0,
                              reference: Reference | None = None,
                              run_dir: str | os.PathLike[str] | None = None,
                              progress: Callable[[int, int, dict[str, Any]], None] | None = None
                              ) -> EvidenceResult:
    """``log ∫_{|w_i|<a_i} exp(-E(w)/T) dw`` by thermodynamic integration from ``theta0``.

    Parameters
    ----------
    potential : thermonet.api.Potential
        E(w), untempered, summed over the data.
    theta0 : ndarray, shape (n_params,)
        The minimum w0 the reference is centred on (inside the box).
    prior : thermonet.priors.BoxPrior
        The box ``|w_i| < sigma_i/2``.
    config : TIConfig, optional
    seed : int or numpy.random.SeedSequence
        Root of every random number: child 0 fits the reference, child 1 drives the sweep.
    reference : Reference, optional
        A reference to use instead of fitting one (``config.k_scale`` still applies).
    run_dir : path, optional
        Directory for an HDF5 checkpoint written atomically after every λ. Calling again with
        the same directory resumes and gives a bit-identical result; a directory holding the
        TI of another potential, start, prior, seed or config is refused.
    progress : callable, optional
        ``progress(j, n_points, info)`` after the j-th λ point of the sweep (0-based, sweep
        order); ``info`` has ``lambda``, ``mean``, ``sem``, ``acceptance``, ``step_size``.
        An exception raised by it stops the run after the checkpoint of that point.

    With ``config.both_directions`` the two sweeps run and their midpoint is returned
    (:func:`thermonet.evidence.ti_pair.bidirectional_ti`).

    Returns
    -------
    EvidenceResult
        ``method="ti"``; ``details`` holds the per-λ table, the Monte Carlo and quadrature
        errors of the integral separately, ``log_z0`` and the reference summary.
    """
    config = TIConfig() if config is None else config
    if not isinstance(config, TIConfig):
        raise ConfigError(f"config is a {type(config).__name__}; expected a TIConfig")
    if config.both_directions:
        return bidirectional_ti(potential, theta0, prior, config, seed=seed,
                                reference=reference, run_dir=run_dir, progress=progress)
    return one_way(potential, theta0, prior, config, seed=seed, reference=reference,
                   run_dir=run_dir, progress=progress)


def repeat_ti(potential: Any, theta0: Any, prior: Any, config: TIConfig | None,
              seeds: Sequence[Any], *, workers: int = 1, reference: Reference | None = None
              ) -> tuple[list[EvidenceResult], float, float]:
    """Independent TI runs, one per seed, ``workers`` at a time (threads).

    Each run has its own copy of the potential (``potential.copy()``) and draws only from its
    own seed, so the results do not depend on ``workers``. Returns the results (in the order of
    ``seeds``), the mean of ``log_integral`` and its sample standard deviation (NaN for one
    run).
    """
    seeds = list(seeds)
    if not seeds:
        raise ConfigError("repeat_ti needs at least one seed")
    executor = make_executor(int(workers))
    try:
        results = executor.map(
            lambda s: thermodynamic_integration(potential.copy(), theta0, prior, config,
                                                seed=s, reference=reference), seeds)
    finally:
        close = getattr(executor, "close", None)
        if close is not None:
            close()
    vals = np.array([r.log_integral for r in results])
    std = float(np.std(vals, ddof=1)) if vals.size > 1 else math.nan
    return results, float(np.mean(vals)), std


__all__ = ["TI_CHECKPOINT", "BridgePotential", "Reference", "TIConfig", "fit_reference",
           "log_truncated_gaussian", "repeat_ti", "thermodynamic_integration", "ti_streams"]
