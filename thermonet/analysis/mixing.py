"""Has a run mixed? Diagnostics of replica exchange and the verdict built on them.

* :func:`split_rhat`, :func:`ess_bulk`, :func:`ess_tail` (from :mod:`.convergence`,
  re-exported): rank-normalised split-R-hat and bulk/tail ESS (Vehtari et al. 2021);
* :func:`replica_passages` (from :mod:`.passages`, re-exported): restarts (as Pigeons.jl
  counts them) and round trips of replicas;
* :func:`swap_barrier`: per-pair swap rejection rates and the global communication barrier
  Lambda = sum_k r_k of Syed, Bouchard-Côté, Deligiannidis & Doucet (JRSS-B 2022);
* :func:`rung_acceptance`: HMC acceptance per rung with a standard error and flags;
* :func:`verdict`: the one-line answer, with its reasons;
* :func:`assess`: all of the above from a run's trace;
* :func:`assess_chains`, :func:`between_chains`: the verdict of a one-rung run of several
  independent chains (``run.chains``), R-hat between them naming the chain that stands out.

These statistics are only meaningful for observables that do not depend on which replica is
where and are identified by the posterior: the energy at a temperature slot, test energies and
errors. Never apply them to raw network weights: the posterior is invariant under permutations
of hidden units and sign flips, so independent chains that have mixed perfectly still sit in
different, equivalent modes, and R-hat of weights would call them unmixed.

NumPy only (plus :mod:`math` and :mod:`thermonet.stats`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from thermonet.analysis.convergence import (
    ESS_MIN,
    RHAT_MAX,
    chain_diagnostics,
    ess,
    ess_bulk,
    ess_tail,
    normal_quantile,
    rank_normalise,
    split_chains,
    split_rhat,
)
from thermonet.analysis.passages import Passages, replica_passages
from thermonet.analysis.rung_statistics import (
    ACCEPT_FROZEN,
    ACCEPT_TIMID,
    RungAcceptance,
    SwapBarrier,
    rung_acceptance,
    swap_barrier,
)

#: restarts after the discard below which a ladder is not mixed (``run.min_restarts``): with
#: fewer, the fraction of the target's mass in each basin is estimated from too few fresh
#: draws to trust, and a Poisson count of 20 has a relative error of about 0.22
MIN_RESTARTS = 20


# --- the verdict --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Verdict:
    """Whether a run (or a set of runs) has mixed, and why.

    Attributes
    ----------
    mixed : bool
    reasons : list of str
        When not mixed, every rule that failed; when mixed, the evidence (restarts, R-hat).
    flags : list of str
        Warnings that do not decide the verdict (low ESS, timid rungs, a cut ladder, ...).
    """

    mixed: bool
    reasons: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        head = "mixed" if self.mixed else "not mixed"
        text = f"{head}: " + ("; " if not self.mixed else ", ").join(self.reasons or ["-"])
        if self.flags:
            text += "; flagged: " + "; ".join(self.flags)
        return text

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (``mixed``, ``reasons``, ``flags``, ``text``)."""
        return {"mixed": self.mixed, "reasons": list(self.reasons), "flags": list(self.flags),
                "text": str(self)}


def _runs_of(mask: np.ndarray) -> list[tuple[int, int]]:
    """Contiguous runs of True as (first, last) indices."""
    out: list[tuple[int, int]] = []
    for i in np.flatnonzero(mask):
        if out and out[-1][1] == i - 1:
            out[-1] = (out[-1][0], int(i))
        else:
            out.append((int(i), int(i)))
    return out


def _rungs(first: int, last: int, verb: str, value: float, unit: str = "rung") -> str:
    if first == last:
        return f"{unit} {first} {verb}s {value:.2f}"
    return f"{unit}s {first}-{last} {verb} {value:.2f}"


@dataclass
class _Findings:
    """What the verdict's rules found so far, in the order the rules ran."""

    failed: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)


def _restart_rule(found: _Findings, restarts: int, round_trips: int | None,
                  elapsed_s: float | None, min_restarts: int) -> None:
    """Fail without restarts, without a round trip or with fewer than ``min_restarts``;
    otherwise the restarts (and their rate per hour) are evidence."""
    if restarts == 0:
        found.failed.append("0 restarts")
    elif round_trips is not None and round_trips == 0:
        found.failed.append(f"0 round trips ({restarts} restarts)")
    elif restarts < min_restarts:
        found.failed.append(f"{restarts} restarts (fewer than {min_restarts})")
    else:
        per_h = 3600 * restarts / elapsed_s if elapsed_s else math.nan
        rate = f" ({per_h:.{1 if per_h < 100 else 0}f}/h)" if elapsed_s else ""
        found.evidence.append(f"{restarts} restarts{rate}"
                              + (f", {round_trips} round trips" if round_trips is not None
                                 else ""))


def _acceptance_rules(found: _Findings, temps: np.ndarray, acceptance: RungAcceptance,
                      unit: str = "rung") -> None:
    """Fail on frozen rungs (or chains: ``unit``); flag those that accepted nothing and timid
    ones."""
    acc = acceptance.acceptance
    # a prior rung (T = inf) draws exactly: it accepts everything by construction
    sampled = np.isfinite(temps)
    if sampled.shape == acc.shape:
        acceptance = RungAcceptance(acc, acceptance.error, acceptance.n_trajectories,
                                    acceptance.frozen & sampled,
                                    acceptance.timid & sampled)
    for a, b in _runs_of(acceptance.frozen):
        found.failed.append(_rungs(a, b, "accept", float(np.max(acc[a:b + 1])), unit))
    zero = np.flatnonzero(acc == 0.0)
    if zero.size:
        n_zero = int(np.min(np.broadcast_to(acceptance.n_trajectories, acc.shape)[zero]))
        found.flags.append(f"{unit}{'s' if zero.size > 1 else ''} "
                           f"{', '.join(str(int(i)) for i in zero)} accepted 0 of "
                           f"{n_zero} trajectories (error bar undefined; "
                           f"95% bound < {3 / max(n_zero, 1):.2g})")
    for a, b in _runs_of(acceptance.timid):
        found.flags.append(_rungs(a, b, "accept", float(np.min(acc[a:b + 1])), unit)
                           + f" (> {ACCEPT_TIMID:g}: steps too timid)")


def _rhat_rule(found: _Findings, temps: np.ndarray, r: np.ndarray, rhat_max: float,
               rhat_decides: bool) -> None:
    """Fail (or, unless ``rhat_decides``, flag) the largest split-R-hat above ``rhat_max``;
    flag temperatures where R-hat is undefined."""
    finite = np.isfinite(r)
    if finite.any():
        i = int(np.argmax(np.where(finite, r, -np.inf)))
        label = "split R-hat"
        if r[i] > rhat_max and rhat_decides:
            found.failed.append(f"{label} {r[i]:.2f} at T = {temps[i]:.4g} (> {rhat_max:g})")
        elif r[i] > rhat_max:
            found.flags.append(f"{label} {r[i]:.2f} at T = {temps[i]:.4g} (this run's halves)")
        else:
            found.evidence.append(f"max {label} {r[i]:.2f}")
    if not finite.all():
        bad = ", ".join(f"{t:.4g}" for t in temps[~finite][:4])
        found.flags.append(f"R-hat undefined at T = {bad} (constant or too short)")


def _ess_rule(found: _Findings, temps: np.ndarray, e: np.ndarray, ess_min: float) -> None:
    """Fail when the smallest bulk ESS is below ``ess_min``."""
    if np.isfinite(e).any():
        i = int(np.nanargmin(e))
        if e[i] < ess_min:
            found.failed.append(f"bulk ESS {e[i]:.0f} at T = {temps[i]:.4g} (fewer than "
                                f"{ess_min:g})")
        else:
            found.evidence.append(f"min bulk ESS {e[i]:.0f}")


def _swap_flags(found: _Findings, temps: np.ndarray, swaps: SwapBarrier) -> None:
    """Flag the pairs that never swapped (a cut ladder)."""
    cut = np.flatnonzero(swaps.rejection == 1.0)
    if cut.size:
        found.flags.append("no swap accepted across T = " + ", ".join(
            f"{temps[k]:.4g}-{temps[k + 1]:.4g}" for k in cut[:4])
            + (", ..." if cut.size > 4 else ""))


def verdict(temperatures: Any, *, restarts: int | None = None, round_trips: int | None = None,
            elapsed_s: float | None = None, acceptance: RungAcceptance | None = None,
            rhat: Any = None, ess_bulk: Any = None, swaps: SwapBarrier | None = None,
            rhat_max: float = RHAT_MAX, ess_min: float = ESS_MIN,
            rhat_decides: bool = True, min_restarts: int = MIN_RESTARTS,
            unit: str = "rung") -> Verdict:
    """Has the run mixed? Every piece of evidence is optional; the rules use what is given.

    Not mixed when: the ladder has more than one rung and its replicas made fewer than
    ``min_restarts`` restarts or no round trip (count them after the discard); any rung is
    frozen (acceptance below :data:`ACCEPT_FROZEN`); the largest rank-normalised split-R-hat
    over temperatures exceeds ``rhat_max`` (when ``rhat_decides``; otherwise that is only
    flagged); the rank-normalised bulk ESS at some temperature is below ``ess_min``. Flagged
    (still mixed): timid rungs, undefined R-hat, pairs that never swap.

    R-hat and ESS must be of permutation-invariant observables (the energy per temperature
    slot, test energies): never of raw weights, which are not identifiable.

    Parameters
    ----------
    temperatures : array_like, shape (K,)
    restarts, round_trips : int, optional
        Totals over replicas (:func:`replica_passages`).
    elapsed_s : float, optional
        Wall time of the run, for the restart rate.
    acceptance : RungAcceptance, optional
    rhat, ess_bulk : array_like, shape (K,), optional
        Per temperature.
    swaps : SwapBarrier, optional
    rhat_max, ess_min : float
        The largest split-R-hat and the smallest bulk ESS allowed (``run.min_ess``).
    rhat_decides : bool
        True (the default) for a condition; False reports R-hat as a flag only.
    min_restarts : int
        Restarts required (``run.min_restarts``, :data:`MIN_RESTARTS`).
    unit : str
        What ``acceptance``'s columns are, in messages: ``rung``, or ``chain`` for the
        chains of a one-rung run.

    Returns
    -------
    Verdict
    """
    temps = np.asarray(temperatures, dtype=np.float64)
    found = _Findings()
    if temps.size > 1 and restarts is not None:
        _restart_rule(found, restarts, round_trips, elapsed_s, min_restarts)
    if acceptance is not None:
        _acceptance_rules(found, temps, acceptance, unit)
    if rhat is not None:
        _rhat_rule(found, temps, np.asarray(rhat, dtype=np.float64), rhat_max, rhat_decides)
    if ess_bulk is not None:
        _ess_rule(found, temps, np.asarray(ess_bulk, dtype=np.float64), ess_min)
    if swaps is not None:
        _swap_flags(found, temps, swaps)
    failed, evidence, flags = found.failed, found.evidence, found.flags
    if failed:
        return Verdict(False, failed, flags)
    if not evidence and temps.size == 1:
        evidence.append("no check failed in this one chain (set run.chains >= 2, or run "
                        "`thermonet compare` on independent runs, for R-hat across chains)")
    return Verdict(True, evidence, flags)


@dataclass(frozen=True)
class Mixing:
    """Everything :func:`assess` finds in one run's trace.

    Attributes
    ----------
    passages : Passages
        Over the iterations after the discard only: a replica's passages through the
        burn-in, when the ladder and the energies were still far from equilibrium, are not
        evidence of mixing.
    swaps : SwapBarrier
    acceptance : RungAcceptance
    diagnostics : dict of ndarray, each of shape (K,)
        ``rhat``, ``ess_bulk``, ``ess_tail`` of the training energy at each slot, this run's
        chain split into halves (a test of stationarity within the run).
    verdict : Verdict
    """

    passages: Passages
    swaps: SwapBarrier
    acceptance: RungAcceptance
    diagnostics: dict[str, np.ndarray]
    verdict: Verdict


def verdict_rules(run_table: Mapping[str, Any]) -> dict[str, Any]:
    """The verdict's thresholds from a run's ``[run]`` table (``min_restarts``,
    ``min_ess``; their defaults for runs written before the keys existed), as keyword
    arguments of :func:`verdict` and :func:`assess`."""
    return {"min_restarts": int(run_table.get("min_restarts", MIN_RESTARTS)),
            "ess_min": float(run_table.get("min_ess", ESS_MIN))}


def assess(trace: Mapping[str, Any], temperatures: Any, *, n_trajectories: Any, start: int = 0,
           elapsed_s: float | None = None, min_restarts: int = MIN_RESTARTS,
           ess_min: float = ESS_MIN) -> Mixing:
    """The mixing diagnostics and verdict of one run from its trace.

    Parameters
    ----------
    trace : mapping
        :func:`thermonet.io.trace.read_trace` output (rows beyond the checkpoint removed):
        ``replica_k``, ``energy_k``, ``n_accepted_k``, ``swap_attempted_k``,
        ``swap_accepted_k``.
    temperatures : array_like, shape (K,)
    n_trajectories : int or array_like of int, shape (K,)
        HMC trajectories per slot per iteration.
    start : int
        First row used for passages, acceptance, swaps, R-hat and ESS (after the burn-in
        discard).
    elapsed_s : float, optional
        Wall time, for the restart rate.
    min_restarts, ess_min : int, float
        As :func:`verdict` (:func:`verdict_rules` reads them from a run's configuration).

    Returns
    -------
    Mixing
    """
    temps = np.asarray(temperatures, dtype=np.float64)
    k = temps.size
    rows = np.asarray(trace.get("iteration", np.zeros(0))).shape[0]
    sl = slice(start, rows)
    passages = replica_passages(np.asarray(trace["replica_k"])[sl]) if rows > start else \
        Passages(np.zeros(k, np.int64), np.zeros(k, np.int64))
    if rows and k > 1:
        swaps = swap_barrier(trace["swap_attempted_k"][sl], trace["swap_accepted_k"][sl])
    else:
        swaps = swap_barrier(np.zeros((0, max(k - 1, 0))), np.zeros((0, max(k - 1, 0))))
    acc = rung_acceptance(np.asarray(trace["n_accepted_k"])[sl] if rows else np.zeros((0, k)),
                          n_trajectories)
    energy = np.asarray(trace["energy_k"], dtype=np.float64)[sl] if rows else np.zeros((0, k))
    diag = chain_diagnostics(energy[None])
    multi = k > 1 and rows > 0
    if rows <= start:     # a run still in its warm-up, or stopped right after it
        return Mixing(passages, swaps, acc, diag, Verdict(False, [
            f"no production iterations {'kept ' if rows else 'yet'}".strip()]))
    v = verdict(temps, restarts=int(passages.restarts.sum()) if multi else None,
                round_trips=int(passages.round_trips.sum()) if multi else None,
                elapsed_s=elapsed_s, acceptance=acc, rhat=diag["rhat"],
                ess_bulk=diag["ess_bulk"], swaps=swaps, min_restarts=min_restarts,
                ess_min=ess_min)
    return Mixing(passages, swaps, acc, diag, v)


# --- independent chains of one rung ------------------------------------------------------------

def standing_out(draws: Any) -> int:
    """The chain whose draws sit furthest from the others: the largest distance of a chain's
    mean pooled rank from the middle rank (``draws``: shape (n_chains, n_draws))."""
    x = np.asarray(draws, dtype=np.float64)
    z = rank_normalise(x)
    return int(np.argmax(np.abs(z.mean(axis=1))))


def between_chains(observables: Mapping[str, Any], *, rhat_max: float = RHAT_MAX
                   ) -> tuple[str | None, str]:
    """R-hat between independent chains of one rung, over permutation-invariant
    observables (the energy, hyperparameter widths, the noise level; never raw weights).

    ``observables``: name -> draws of shape (n_draws, n_chains). Returns ``(failure, evidence)``:
    the failure (None when every R-hat is at most ``rhat_max``) names the observable with the
    largest rank-normalised split R-hat (Vehtari et al. 2021) and the chain that stands out
    (:func:`standing_out`) with its mean against the others' range; the evidence is the largest
    R-hat and where.
    """
    worst: tuple[float, str, np.ndarray] | None = None
    undefined = []
    for name, values in observables.items():
        x = np.asarray(values, dtype=np.float64).T          # (chains, draws)
        r = split_rhat(x) if np.all(np.isfinite(x)) else math.nan
        if not math.isfinite(r):
            undefined.append(name)
        elif worst is None or r > worst[0]:
            worst = (r, name, x)
    if worst is None:
        return None, f"R-hat between chains undefined ({', '.join(undefined)})"
    r, name, x = worst
    n_chains = x.shape[0]
    if r <= rhat_max:
        return None, f"max split R-hat {r:.2f} between {n_chains} chains ({name})"
    c = standing_out(x)
    means = x.mean(axis=1)
    others = np.delete(means, c)
    return (f"split R-hat {r:.2f} of {name} between {n_chains} chains (> {rhat_max:g}): chain "
            f"{c} stands out ({name} {means[c]:.3g} against {others.min():.3g}-"
            f"{others.max():.3g} in the others)"), ""


def assess_chains(trace: Mapping[str, Any], temperature: float, *, n_trajectories: Any,
                  start: int = 0, observables: Mapping[str, Any] | None = None,
                  ess_min: float = ESS_MIN, rhat_max: float = RHAT_MAX) -> Mixing:
    """The mixing diagnostics and verdict of a one-rung run of several independent chains.

    The trace's slot axis is the chain axis. Not mixed when some chain is frozen, when the
    rank-normalised split R-hat between the chains of any observable exceeds ``rhat_max``
    (the verdict names the observable and the chain that stands out), or when the bulk ESS of
    the energy over all chains is below ``ess_min``. ``observables``: name -> kept draws
    (n_kept, n_chains) beyond the training energy (``energy``, always included), e.g. the
    widths of a hierarchical model's hyperparameters and its noise level.
    """
    rows = np.asarray(trace.get("iteration", np.zeros(0))).shape[0]
    sl = slice(start, rows)
    energy = np.asarray(trace["energy_k"], dtype=np.float64)[sl]
    n_chains = energy.shape[1]
    temps = np.full(n_chains, float(temperature))
    passages = Passages(np.zeros(n_chains, np.int64), np.zeros(n_chains, np.int64))
    swaps = swap_barrier(np.zeros((0, 0)), np.zeros((0, 0)))
    acc = rung_acceptance(np.asarray(trace["n_accepted_k"])[sl] if rows else
                          np.zeros((0, n_chains)), n_trajectories)
    diag = chain_diagnostics(energy.T[:, :, None])
    if rows <= start:
        return Mixing(passages, swaps, acc, diag, Verdict(False, [
            f"no production iterations {'kept ' if rows else 'yet'}".strip()]))
    found = _Findings()
    _acceptance_rules(found, temps, acc, unit="chain")
    failure, evidence = between_chains({"energy": energy, **dict(observables or {})},
                                       rhat_max=rhat_max)
    if failure is not None:
        found.failed.append(failure)
    elif evidence.startswith("max"):
        found.evidence.append(evidence)
    else:
        found.flags.append(evidence)
    _ess_rule(found, temps[:1], diag["ess_bulk"], ess_min)
    if found.failed:
        return Mixing(passages, swaps, acc, diag, Verdict(False, found.failed, found.flags))
    return Mixing(passages, swaps, acc, diag, Verdict(True, found.evidence, found.flags))


__all__ = [
    "ACCEPT_FROZEN",
    "ACCEPT_TIMID",
    "ESS_MIN",
    "MIN_RESTARTS",
    "RHAT_MAX",
    "Mixing",
    "Passages",
    "RungAcceptance",
    "SwapBarrier",
    "Verdict",
    "assess",
    "assess_chains",
    "between_chains",
    "chain_diagnostics",
    "ess",
    "ess_bulk",
    "ess_tail",
    "normal_quantile",
    "rank_normalise",
    "replica_passages",
    "rung_acceptance",
    "split_chains",
    "split_rhat",
    "standing_out",
    "swap_barrier",
    "verdict",
    "verdict_rules",
]
