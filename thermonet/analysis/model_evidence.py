"""The log evidence of a model from a replica-exchange run anchored at the prior.

A ladder whose hottest rung is the prior (``beta = 0``) and which holds a rung at ``T = 1``
gives ``log Z(1) = log ∫ exp(-E(w)) prior(w) dw`` by stepping stone and by integration over
beta (:mod:`thermonet.analysis.free_energy`). Unlike thermodynamic integration from a minimum,
which measures the basin its chains stay in, this is the integral over the whole prior box:
**the evidence of the model**, every basin and every symmetry copy included, but only if the
replicas have visited them in proportion, i.e. if the run's mixing verdict is "mixed". A run
that has not mixed gives a number whose error bar does not cover the basins it never
reached. Checked against the exact log Z of a Gaussian mixture with unequal basins in
tests/analysis/test_model_evidence.py; see docs/evidence.md, "Basin evidence and model evidence".
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from thermonet.analysis.free_energy import free_energies
from thermonet.analysis.run_record import open_run
from thermonet.errors import ConfigError

#: how close a rung's temperature must be to 1 to count as ``T = 1``
T_ONE_RTOL = 1e-9

#: integration over beta is reported as not usable when its error bar exceeds the stepping
#: stone's by this factor (e.g. under vague hyperpriors, where the prior rung's energies span
#: many decades and the trapezoid's first interval has no useful mean)
TI_UNUSABLE_RATIO = 100.0


class ModelEvidence(NamedTuple):
    """``log Z(T = 1)`` of a run, its error bars and whether it may be read as the model's
    evidence (``mixed``)."""

    log_z_ss: float          #: stepping stone
    log_z_ss_err: float      #: its standard error (rungs jointly)
    log_z_ti: float          #: trapezoid integration of -<E> over beta
    log_z_ti_err: float      #: its standard error (rungs jointly)
    n_rungs: int             #: rungs from T = 1 up to the prior, both included
    iterations_used: int
    mixed: bool              #: the run's mixing verdict
    verdict: str             #: its text
    log_z_tic: float = math.nan      #: the trapezoid with its end correction from Var(E)
    log_z_ti_quad: float = math.nan  #: its quadrature error (the correction's size)

    @property
    def ti_usable(self) -> bool:
        """Whether integration over beta gives a number worth printing (module constant)."""
        return bool(np.isfinite(self.log_z_ti) and np.isfinite(self.log_z_ti_err)
                    and self.log_z_ti_err <= TI_UNUSABLE_RATIO * max(self.log_z_ss_err,
                                                                       1e-12))

    def describe(self) -> str:
        """One line: the numbers and what they are."""
        ti = (f"{self.log_z_ti:.4f} ± {self.log_z_ti_err:.2g} (integration over beta), "
              f"{self.log_z_tic:.4f} with the end correction from Var(E) (quadrature "
              f"error ≤ {self.log_z_ti_quad:.2g})"
              if self.ti_usable else
              f"integration over beta not usable (± {self.log_z_ti_err:.2g}: the energies at "
              "the prior rung are too spread for the trapezoid rule)")
        head = (f"log evidence (T = 1, from the prior rung): {self.log_z_ss:.4f} ± "
                f"{self.log_z_ss_err:.2g} (stepping stone), {ti}")
        if self.mixed:
            return head + "; the run mixed, so this is the model's evidence"
        return (head + "; NOT the model's evidence: the run has not mixed, so basins its "
                "replicas never reached are missing")

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return {**self._asdict(), "text": self.describe()}


def t_one_slot(temperatures: Any) -> int | None:
    """Index of the rung at ``T = 1``, or None."""
    t = np.asarray(temperatures, dtype=np.float64)
    hits = np.flatnonzero(np.isclose(t, 1.0, rtol=T_ONE_RTOL, atol=0.0))
    return int(hits[0]) if hits.size else None


def model_evidence(temperatures: Any, energy_nk: Any, verdict: Any) -> ModelEvidence | None:
    """``log Z(T = 1)`` from a ladder's energies (iterations x slots, after the discard) and
    its mixing verdict (an object with ``mixed`` and a text form). None when the ladder has
    no prior rung, no rung at ``T = 1``, or no iterations."""
    t = np.asarray(temperatures, dtype=np.float64)
    e = np.asarray(energy_nk, dtype=np.float64)
    j = t_one_slot(t)
    if j is None or not np.isinf(t[-1]) or e.ndim != 2 or e.shape[0] < 2:
        return None
    fe = free_energies(1.0 / t, e)
    return ModelEvidence(float(fe.log_z_ss_k[j]), float(fe.log_z_ss_err_k[j]),
                         float(fe.log_z_ti_k[j]), float(fe.log_z_ti_err_k[j]),
                         int(t.size - j), int(e.shape[0]), bool(verdict.mixed), str(verdict),
                         float(fe.log_z_tic_k[j]), float(fe.log_z_ti_quad_k[j]))


def run_log_evidence(run_dir: str | Path, discard: float | None = None) -> ModelEvidence:
    """``log Z(T = 1)`` of the run in ``run_dir`` (made by ``thermonet run`` with
    ``[ladder] prior_rung = true`` and a rung at T = 1), after discarding the fraction
    ``discard`` of its iterations (default: the run's ``run.discard``), with the run's
    mixing verdict. Raises :class:`ConfigError` when the run cannot give it."""
    rec = open_run(run_dir, discard=discard)
    if rec.config.get("prior", {}).get("gaussian_std") is not None:
        raise ConfigError(f"{run_dir} has a Gaussian prior; log Z from the ladder is computed "
                          "for the box prior only (its trace energies include the prior term)")
    temps = rec.temperatures
    if not np.isinf(temps[-1]) or t_one_slot(temps) is None:
        raise ConfigError(f"{run_dir}: its ladder (T = {temps[0]:.4g} ... {temps[-1]:.4g}) "
                          "needs a prior rung and a rung at T = 1 for the log evidence; run "
                          "with [ladder] prior_rung = true and t_min = 1 (or a rung at 1)")
    # the energies the temperature divides (a regression prior is not tempered); traces
    # written before they were recorded have only the slots' energies, equal for box priors
    kept = rec.kept
    energies = kept.get("swap_energy_k", kept["energy_k"])
    out = model_evidence(temps, np.asarray(energies), rec.verdict)
    if out is None:
        raise ConfigError(f"{run_dir} has {rec.n_kept} iterations after the discard; expected "
                          f"at least 2 (continue it with `thermonet resume {run_dir}`)")
    return out


__all__ = ["TI_UNUSABLE_RATIO", "T_ONE_RTOL", "ModelEvidence", "model_evidence",
           "run_log_evidence", "t_one_slot"]
