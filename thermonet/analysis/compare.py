"""``compare_runs`` (what ``thermonet compare`` runs): R-hat and ESS across independent runs of
one configuration on one ladder."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from thermonet.analysis.config_difference import FREE_KEYS, FREE_SECTIONS, config_difference
from thermonet.analysis.convergence import RHAT_MAX, chain_diagnostics
from thermonet.analysis.mixing import (
    RungAcceptance,
    Verdict,
    replica_passages,
    rung_acceptance,
    verdict,
    verdict_rules,
)
from thermonet.analysis.report import read_analysis
from thermonet.analysis.run_record import open_run
from thermonet.errors import ConfigError

#: per-sample observables compared when every run has an analysis.h5 holding them
SAMPLE_OBSERVABLES = ("test_energy", "test_error")


def _temps(t: np.ndarray) -> str:
    return ", ".join(f"{v:.4g}" for v in t)


def _load(run_dir: Path, discard: float | None) -> dict[str, Any]:
    rec = open_run(run_dir, discard=discard)
    kept = rec.kept
    n, start = rec.n_recorded, rec.start
    energy = (np.asarray(kept["energy_k"], dtype=np.float64) if n
              else np.zeros((0, len(rec.temperatures) * rec.n_chains)))
    passages = replica_passages(kept["replica_k"]) if rec.n_kept else None
    # each run's own acceptance per rung, for the frozen-rung rule of its own verdict
    acceptance = (rung_acceptance(kept["n_accepted_k"], rec.n_trajectories)
                  if n > start and "n_accepted_k" in kept else None)
    hyper = np.asarray(kept["hyper_k"], dtype=np.float64) if (
        n and "hyper_k" in kept and np.ndim(kept["hyper_k"]) == 3) else None
    series: dict[str, np.ndarray] = {}
    if (run_dir / "analysis.h5").is_file():
        series = read_analysis(run_dir / "analysis.h5").series
    # a one-rung run of several chains is that many chains here: its slots, one by one
    c = rec.n_chains
    return {"dir": run_dir, "config": rec.config, "temperatures": rec.temperatures,
            "energy": [energy[:, [j]] for j in range(c)] if c > 1 else [energy],
            "passages": passages, "discard": rec.discard, "acceptance": acceptance,
            "series": _chain_series(series, c),
            "hyper": (None if hyper is None else
                      [hyper[:, [j]] for j in range(c)] if c > 1 else [hyper]),
            "uuid": rec.run_uuid, "seed": rec.seed, "n_chains": c}


def _chain_series(series: dict[str, np.ndarray], n_chains: int) -> list[dict[str, np.ndarray]]:
    """An analysis's per-sample series, one dict per chain (``sample_chain`` says whose)."""
    if n_chains == 1 or "sample_chain" not in series:
        return [series]
    which = np.asarray(series["sample_chain"])
    return [{name: np.asarray(a)[which == j] for name, a in series.items()}
            for j in range(n_chains)]


def hyper_names(cfg: dict[str, Any], n: int) -> list[str]:
    """Names of the ``n`` recorded hyperparameters of a run (its architecture's
    ``hyper_model``: group precisions, then the noise precision), or ``hyper0``, ... when the
    architecture does not name them."""
    from thermonet import registry
    from thermonet.errors import ThermonetError

    a = dict(cfg.get("architecture", {}))
    try:
        arch = registry.get_architecture(a.pop("name"), **a)
        names = list(arch.hyper_model(1).names())
    except (AttributeError, TypeError, KeyError, ThermonetError):
        names = []           # a plugin without hyper_model, or one whose model needs data
    return names if len(names) == n else [f"hyper{j}" for j in range(n)]


def _stack(chains: list[np.ndarray]) -> np.ndarray:
    """The last common number of draws of every chain, stacked (n_chains, n_draws, K): the
    ends of the runs are the draws furthest from their starts."""
    n = min(c.shape[0] for c in chains)
    return np.stack([c[c.shape[0] - n:] for c in chains])


def compare_runs(run_dirs: Sequence[str | Path], *, discard: float | None = None
                 ) -> dict[str, Any]:
    """Split-R-hat and bulk/tail ESS per temperature across independent runs.

    Each run is one chain (a one-rung run of several chains is as many) of the mean training
    energy at every temperature slot (the trace's ``energy_k`` after the run's
    ``run.discard`` fraction), and, when every run has an
    ``analysis.h5`` with per-sample test energies and errors (``thermonet analyse``), of those
    too. Chains are cut to the shortest run's length (keeping their ends).

    The unit differs by statistic. R-hat and ESS take the chain: the chains of one run are
    as independent as separate runs (each its own stream, no swaps), so 2 runs of 4 chains
    are 8 chains. The log evidence's t-interval and chi-square take the run: one log Z per
    run, from its ladder, with that run's own error bar (n = the number of runs). A run of
    several chains has one rung and no log Z, so chains never enter those two.

    Parameters
    ----------
    run_dirs : sequence of path
        At least two run directories of the same configuration (apart from
        :data:`FREE_KEYS`) on the same ladder.
    discard : float, optional
        Burn-in fraction for every run (default: each run's ``run.discard``).

    Returns
    -------
    dict
        ``runs``, ``n_chains`` (the chains compared, all runs together),
        ``chains_per_run``, ``temperatures``, ``n_draws`` (per chain), one entry per observable
        (``train_energy`` and, if available, ``test_energy``, ``test_error``) holding
        ``rhat``, ``ess_bulk``, ``ess_tail`` lists and ``n_draws``; for runs that record
        hyperparameters (``hmc-gibbs``), ``hyperparameters`` (their names) and one entry
        ``width:<name>`` each, of the width ``1/sqrt(precision)``; ``restarts`` (total),
        ``verdict`` (``mixed``, ``reasons``, ``flags``, ``text``).

    Raises
    ------
    ConfigError
        Fewer than two runs, a bad ``discard``, or runs of different configurations or
        ladders (the message names the first difference).
    """
    _check_arguments(run_dirs, discard)
    runs = [_load(Path(d), discard) for d in run_dirs]
    _check_one_experiment(runs)
    shared = all(np.array_equal(r["temperatures"], runs[0]["temperatures"]) for r in runs)
    temps = runs[0]["temperatures"] if shared else _restrict_to_common(runs)
    out: dict[str, Any] = {"runs": [str(r["dir"]) for r in runs],
                           "common_ladder": shared,
                           "chains_per_run": [int(r["n_chains"]) for r in runs],
                           "n_chains": sum(int(r["n_chains"]) for r in runs),
                           "temperatures": [float(t) for t in temps],
                           "discard": [r["discard"] for r in runs]}
    observables = _observables(runs, out)
    for name, draws in observables.items():
        d = chain_diagnostics(draws)
        out[name] = {"n_draws": int(draws.shape[1]),
                     **{key: [float(v) for v in arr] for key, arr in d.items()}}
    out["n_draws"] = out["train_energy"]["n_draws"]
    multi, restarts, trips = _passage_totals(temps, runs)
    v = _pooled_verdict(temps, runs, list(observables), out,
                        restarts=restarts if multi else None,
                        round_trips=trips if multi else None)
    out["acceptance"] = {str(r["dir"]): (None if r["acceptance"] is None else
                                         [float(a) for a in r["acceptance"].acceptance])
                         for r in runs}
    out["restarts"], out["round_trips"] = restarts, trips
    out["log_evidence"] = ev = _evidence_consistency([r["dir"] for r in runs], discard)
    if ev is not None and ev.get("agree") is False:
        # runs that mixed would scatter as their error bars say; these do not
        why = (f"log Z of the runs disagree (chi2 = {ev['chi2']:.1f} on {ev['n'] - 1} dof, "
               f"p = {ev['p_value']:.2g})")
        v = Verdict(False, ([] if v.mixed else list(v.reasons)) + [why], list(v.flags))
    out["verdict"] = v.to_dict()
    return out


def _check_arguments(run_dirs: Sequence[str | Path], discard: float | None) -> None:
    """At least two distinct run directories and a burn-in fraction in [0, 1)."""
    if len(run_dirs) < 2:
        raise ConfigError(f"compare needs at least two run directories; got {len(run_dirs)}")
    if discard is not None and not 0 <= discard < 1:
        raise ConfigError(f"discard = {discard!r}; expected a fraction in [0, 1), e.g. 0.2")
    seen: dict[str, str] = {}
    for run_dir in run_dirs:
        real = os.path.realpath(run_dir)
        if real in seen:
            raise ConfigError(f"{run_dir} and {seen[real]} are the same run directory; "
                              "expected independent runs (one chain each), e.g. runs of one "
                              "configuration with different run.seed")
        seen[real] = str(run_dir)


def _check_one_experiment(runs: list[dict[str, Any]]) -> None:
    """Independent chains (no copy, no repeated seed) of one configuration on one ladder."""
    ref = runs[0]
    for j, r in enumerate(runs[1:], start=1):
        for q in runs[:j]:
            # a copy of a run, or a run of the same seed, repeats its chain exactly
            if r["uuid"] == q["uuid"]:
                same = "a copy of"
            elif r["seed"] == q["seed"] and config_difference(q["config"], r["config"]) is None:
                same = "a run with the same run.seed as"
            else:
                continue
            raise ConfigError(
                f"{r['dir']} is {same} {q['dir']} (run id {r['uuid']}, seed {r['seed']}), so "
                "its chain repeats the other's; expected independent runs; compare runs of "
                "one configuration with different run.seed")
        ta, tb = ref["temperatures"], r["temperatures"]
        if (ta.shape != tb.shape or not np.array_equal(ta, tb)) and not _adapted(runs):
            raise ConfigError(
                f"{r['dir']} is on another ladder than {ref['dir']}: "
                f"{tb.size} temperatures ({_temps(tb)}) vs {ta.size} ({_temps(ta)})")
        diff = config_difference(ref["config"], r["config"])
        if diff is not None:
            raise ConfigError(f"{r['dir']} has another configuration than {ref['dir']}: "
                              f"{diff}")


def _adapted(runs: list[dict[str, Any]]) -> bool:
    """Whether every run placed its own rungs in warm-up (``ladder.adapt_rounds`` > 0): runs
    of one such configuration with other seeds share only the fixed rungs."""
    return all(int(r["config"].get("ladder", {}).get("adapt_rounds", 0) or 0) > 0
               for r in runs)


def _restrict_to_common(runs: list[dict[str, Any]]) -> np.ndarray:
    """The temperatures every run samples (in the first run's order); each run's per-slot
    arrays cut to them (its ``temperatures`` stay its own ladder's). Ladders adapted per seed
    share their fixed ends (T_min, the prior rung and any anchors), where the runs can be
    compared rung for rung."""
    common = [t for t in runs[0]["temperatures"]
              if all(np.any(r["temperatures"] == t) for r in runs[1:])]
    temps = np.asarray(common, dtype=np.float64)
    if not temps.size:
        raise ConfigError(f"{runs[0]['dir']} and the other runs share no temperature; "
                          "expected runs of one configuration whose ladders share T_min")
    for r in runs:
        idx = [int(np.flatnonzero(r["temperatures"] == t)[0]) for t in temps]
        r["energy"] = [e[:, idx] for e in r["energy"]]
        r["series"] = [{k: (np.asarray(a)[:, idx] if np.ndim(a) == 2 else a)
                        for k, a in sr.items()} for sr in r["series"]]
        if r["hyper"] is not None:
            r["hyper"] = [h[:, idx] for h in r["hyper"]]
    return temps


def _observables(runs: list[dict[str, Any]], out: dict[str, Any]) -> dict[str, np.ndarray]:
    """The chains compared, (n_runs, n_draws, K) each: the training energy, the per-sample
    test observables when every run has them, and the hyperparameters' widths (their names
    go to ``out["hyperparameters"]``)."""
    observables = {"train_energy": _stack([e for r in runs for e in r["energy"]])}
    series = [s for r in runs for s in r["series"]]
    if all(all(name in s for name in SAMPLE_OBSERVABLES) for s in series):
        for name in SAMPLE_OBSERVABLES:
            observables[name] = _stack([np.asarray(s[name], np.float64) for s in series])
    # hierarchical models: each recorded hyperparameter's width 1/sqrt(precision), one chain
    # per run (invariant under the network's symmetries, unlike the weights)
    widths = [w for r in runs for w in (r["hyper"] or [None])]
    if all(w is not None and w.shape[2] > 0 for w in widths) and len(
            {w.shape[2] for w in widths}) == 1:
        names = hyper_names(runs[0]["config"], widths[0].shape[2])
        out["hyperparameters"] = names
        for j, name in enumerate(names):
            observables[f"width:{name}"] = _stack([1.0 / np.sqrt(w[:, :, j]) for w in widths])
    return observables


def _passage_totals(temps: np.ndarray, runs: list[dict[str, Any]]) -> tuple[bool, int, int]:
    """Whether the restart rules apply (a ladder, passages in every run), and the restarts
    and round trips summed over the runs."""
    passages = [r["passages"] for r in runs]
    multi = temps.size > 1 and all(p is not None for p in passages)
    restarts = sum(int(p.restarts.sum()) for p in passages if p is not None)
    trips = sum(int(p.round_trips.sum()) for p in passages if p is not None)
    return multi, restarts, trips


def _pooled_verdict(temps: np.ndarray, runs: list[dict[str, Any]], names: list[str],
                    out: dict[str, Any], *, restarts: int | None,
                    round_trips: int | None) -> Verdict:
    """The verdict on the runs' pooled restarts and the training energy's R-hat and ESS
    across them (in ``out``), flagging the other observables' R-hat, and failing on any run's
    frozen rung."""
    v = verdict(temps, restarts=restarts, round_trips=round_trips,
                rhat=out["train_energy"]["rhat"], ess_bulk=out["train_energy"]["ess_bulk"],
                **verdict_rules(runs[0]["config"].get("run", {})))
    flags = list(v.flags)
    for name in names:
        rh = np.asarray(out[name]["rhat"])
        if name != "train_energy" and np.isfinite(rh).any() and np.nanmax(rh) > RHAT_MAX:
            i = int(np.nanargmax(rh))
            flags.append(f"{name} R-hat {rh[i]:.2f} at T = {temps[i]:.4g}")
    failed, run_flags = _per_run_acceptance(runs)
    flags.extend(run_flags)
    if failed:      # a frozen rung in any run: that run did not sample its temperature
        return Verdict(False, ([] if v.mixed else list(v.reasons)) + failed, flags)
    return Verdict(v.mixed, v.reasons, flags)


def _evidence_consistency(run_dirs: list[Path], discard: float | None) -> dict[str, Any] | None:
    """Each run's log evidence (stepping stone) and whether the runs agree within their
    error bars (:func:`thermonet.analysis.consistency.consistency`), one value per run;
    None when a run's ladder does not reach from the prior to T = 1 (a one-rung run, of
    one chain or several)."""
    from thermonet.analysis.consistency import consistency
    from thermonet.analysis.model_evidence import run_log_evidence

    try:
        each = [run_log_evidence(d, discard) for d in run_dirs]
    except ConfigError:
        return None
    values = [e.log_z_ss for e in each]
    errors = [e.log_z_ss_err for e in each]
    try:
        c = consistency(values, errors)
    except ConfigError as err:
        return {"runs": values, "errors": errors, "text": f"log Z not compared: {err}"}
    return {"runs": values, "errors": errors, "mixed": [e.mixed for e in each],
            **c.to_dict()}


def _per_run_acceptance(runs: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """The acceptance rules of a single run's verdict (:func:`thermonet.analysis.mixing.
    verdict`), applied to each run on its own ladder: a frozen rung fails (reason), a rung
    that accepted nothing or a timid one is flagged; each message names its run."""
    failed: list[str] = []
    flags: list[str] = []
    for r in runs:
        acc: RungAcceptance | None = r["acceptance"]
        if acc is None:
            continue
        own = verdict(r["temperatures"], acceptance=acc,
                      unit="chain" if r["n_chains"] > 1 else "rung")
        if not own.mixed:
            failed.extend(f"{r['dir']}: {reason}" for reason in own.reasons)
        flags.extend(f"{r['dir']}: {flag}" for flag in own.flags)
    return failed, flags


__all__ = ["FREE_KEYS", "FREE_SECTIONS", "SAMPLE_OBSERVABLES", "compare_runs", "config_difference",
           "hyper_names"]
