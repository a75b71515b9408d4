"""``analyse`` (what ``thermonet analyse`` runs) and ``summarise`` (``thermonet info``)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from thermonet.analysis.baseline_reference import read_baseline
from thermonet.analysis.convergence import split_rhat
from thermonet.analysis.hyperparameters import hyper_widths, joined_chains, with_state_widths
from thermonet.analysis.ideal_exchange import ideal_for_run
from thermonet.analysis.ladder import (
    MIN_SAMPLES,
    MIN_TAU_MULTIPLE,
    SWAP_WARN_THRESHOLD,
    chains_stats,
    heat_capacity,
    swap_table,
)
from thermonet.analysis.local_exploration import gradients_per_iteration, local_exploration
from thermonet.analysis.model_evidence import model_evidence
from thermonet.analysis.replica_flow import replica_flow
from thermonet.analysis.report import TABLE_COLUMNS, Analysis
from thermonet.analysis.run_record import RunRecord, open_run
from thermonet.analysis.samples import evaluate_samples
from thermonet.analysis.stopping import STOP_PATIENCE, STOP_SIGMA, best_temperature
from thermonet.errors import ConfigError
from thermonet.tempering import SCHEMES


def _build_model(rec: RunRecord, mnist_dir: str | None) -> tuple[Any, Any]:
    """(architecture, data split or None) of a run."""
    return rec.architecture(), rec.data(mnist_dir)


def analyse(run_dir: str | Path, *, discard: float | None = None, test: bool = True,
            baseline: str | Path | None = None, predictive: bool = True, workers: int = 1,
            swap_threshold: float = SWAP_WARN_THRESHOLD, stop_sigma: float = STOP_SIGMA,
            stop_patience: int = STOP_PATIENCE,
            mnist_dir: str | None = None, world: Any = None) -> Analysis:
    """Analyse a run directory: per temperature, averages with error bars and test-set
    performance; reference lines; the temperature of best generalisation; ladder health.

    Parameters
    ----------
    run_dir : path
        A directory made by ``thermonet run`` (it is only read).
    discard : float, optional
        Fraction of the recorded iterations discarded as burn-in (default: the run's
        ``run.discard``, 0.2). Applies to the trace and to the stored samples.
    test : bool
        Evaluate the stored samples on the test set (the expensive part).
    baseline : path, optional
        A ``thermonet baseline`` result: the JSON of ``--json`` (saved to a file), or the
        ``--out`` .npy of its minima (evaluated here on the run's test set).
    predictive : bool
        Also the Bayesian predictive (average of the samples' softmax outputs).
    workers : int
        Threads over stored samples (in each rank under MPI); the result does not depend on it.
    swap_threshold : float
        Pairs with a lower swap acceptance get a warning.
    stop_sigma : float
        Significance of an increase in the stopping rule (:func:`stopping_rule`).
    mnist_dir : str, optional
        Directory of the MNIST files (for the complement test set).
    world : World, optional
        The processes sharing the stored samples (:func:`thermonet.parallel.world`): blocks
        of samples per MPI rank, the same analysis on every rank. Default: this process.

    Returns
    -------
    Analysis
    """
    if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 1:
        raise ConfigError(f"workers = {workers!r}; expected an integer >= 1")
    if baseline is not None and not Path(baseline).exists():   # fail before loading any data
        raise ConfigError(f"--baseline {baseline} does not exist; expected the JSON printed by "
                          "`thermonet baseline --json` (saved to a file) or the .npy written by "
                          "`thermonet baseline --out`")
    rec = open_run(run_dir, discard=discard)
    table, warnings = _trace_table(rec)
    arch = split = None
    if rec.data_name != "none":
        arch, split = _build_model(rec, mnist_dir)
    series, hyper = _sample_columns(rec, table, warnings, arch, split, test=test,
                                    predictive=predictive, workers=workers, world=world)
    pairs, meta = _ladder_health(rec, table, warnings, swap_threshold)
    references = _references(arch, split)
    if baseline is not None:
        references.update(read_baseline(baseline, arch, split, workers, warnings, world))
    best = best_temperature(rec.temperatures, table, stop_sigma, stop_patience)
    meta.update(_identity(rec, arch, split, series))
    meta.update({
        "swap_warn_threshold": float(swap_threshold), "stop_sigma": float(stop_sigma),
        "stop_patience": int(stop_patience),
        "test": bool(test), "predictive": bool(predictive and test),
        "gaussian_prior": _gaussian(rec),
        "baseline": None if baseline is None else str(baseline),
        "hyperparameters": hyper,
    })
    return Analysis(rec.path, rec.temperatures.copy(), table, pairs, references, best,
                    warnings, meta, series)


def _gaussian(rec: RunRecord) -> bool:
    return rec.config.get("prior", {}).get("gaussian_std") is not None


def _trace_table(rec: RunRecord) -> tuple[dict[str, np.ndarray], list[str]]:
    """The per-temperature table's trace columns (energies, acceptance, step sizes, heat
    capacity) from the kept iterations, and the warnings they raise."""
    warnings: list[str] = []
    temps, k_n, n_used = rec.temperatures, rec.temperatures.size, rec.n_kept
    nan_k = np.full(k_n, np.nan)
    table: dict[str, np.ndarray] = {c: nan_k.copy() for c in TABLE_COLUMNS}
    table["temperature"] = temps.copy()
    table["n_samples"] = np.zeros(k_n, dtype=np.int64)
    if rec.n_recorded == 0:
        warnings.append(f"{rec.path} has no recorded iterations yet; continue it with "
                        f"`thermonet resume {rec.path}`")
    if n_used > 0:
        kept = rec.kept
        e_nk = np.asarray(kept["energy_k"], dtype=np.float64)
        acc = kept["n_accepted_k"].sum(axis=0) / (n_used * rec.n_trajectories)
        dt = np.asarray(kept["step_size_k"], dtype=np.float64).mean(axis=0)
        # a one-rung run of several chains: its one row averages the chains (equal lengths)
        table["acceptance"] = acc.reshape(k_n, -1).mean(axis=1)
        table["dt"] = dt.reshape(k_n, -1).mean(axis=1)
        short = []
        for k in range(k_n):
            m, err, tau = chains_stats(e_nk[:, rec.chain_slots(k)])
            table["train_energy"][k], table["train_energy_err"][k] = m, err
            table["tau_train_energy"][k] = tau
            # (n, C): each chain's own autocorrelation, none across one chain's end and the
            # next one's start
            c, cerr = heat_capacity(e_nk[:, rec.chain_slots(k)], temps[k])
            table["heat_capacity"][k], table["heat_capacity_err"][k] = c, cerr
            if np.isfinite(tau) and n_used < MIN_TAU_MULTIPLE * tau:
                short.append(float(temps[k]))
        if short:
            warnings.append(f"at {len(short)} of {k_n} temperatures (T = "
                            f"{', '.join(f'{t:.4g}' for t in short[:6])}"
                            f"{', ...' if len(short) > 6 else ''}) the {n_used} iterations "
                            f"used are fewer than {MIN_TAU_MULTIPLE:g} autocorrelation times "
                            "of the training energy; its error bars are rough")
    if _gaussian(rec):
        warnings.append("this run has a Gaussian prior: the trace energies (train_energy, "
                        "heat_capacity) include its term; the test energies do not")
    return table, warnings


def by_chain(x: np.ndarray, n_chains: int) -> np.ndarray:
    """The draws ``x`` of one rung, chain by chain as :meth:`RunRecord.samples` gives them
    (axis 0), as one column per chain: shape (n, n_chains, ...)."""
    x = np.asarray(x)
    return np.moveaxis(x.reshape(n_chains, -1, *x.shape[1:]), 0, 1)


def _sample_columns(rec: RunRecord, table: dict[str, np.ndarray], warnings: list[str],
                    arch: Any, split: Any, *, test: bool, predictive: bool, workers: int,
                    world: Any) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Fill the table's columns of the stored samples (train/test errors, test energies, the
    predictive); return the per-sample series and the hyperparameter widths."""
    used_its = np.tile(rec.sample_iterations(), rec.n_chains)   # chain by chain
    n_s = int(used_its.size)
    table["n_samples"][:] = n_s
    n_train = len(split.train.y) if split is not None else 0
    if split is not None and n_train:
        table["train_energy_per_point"] = table["train_energy"] / n_train
        table["train_energy_per_point_err"] = table["train_energy_err"] / n_train
    if n_s == 0 and rec.n_kept > 0:
        warnings.append("no stored parameter samples after the discarded part (run."
                        f"sample_every = {rec.config.get('run', {}).get('sample_every')}); "
                        "the error and test columns are NaN")
    elif 0 < n_s < MIN_SAMPLES and split is not None:
        warnings.append(f"only {n_s} stored samples per temperature after discard; the test "
                        "and error columns have rough error bars")
    series: dict[str, np.ndarray] = {}
    widths: tuple[list[str], np.ndarray] | None = None
    if split is not None and n_s > 0:
        series["sample_iteration"] = np.asarray(used_its, dtype=np.int64)
        if rec.n_chains > 1:
            series["sample_chain"] = np.repeat(np.arange(rec.n_chains, dtype=np.int64),
                                               n_s // rec.n_chains)
        widths = _evaluate_slots(rec, table, series, arch, split, test=test,
                                 predictive=predictive, workers=workers, world=world)
    kept = rec.kept
    # a one-rung run of several chains: hyper_k's slot axis holds the chains, and the state
    # widths come chain by chain; each chain is summarised on its own, then joined
    hyper = hyper_widths(arch, split, kept["hyper_k"]) if (
        "hyper_k" in kept and rec.n_kept > 0 and arch is not None and split is not None) else {}
    if widths is not None and widths[1].shape[2] > 0:
        w = by_chain(widths[1][:, 0], rec.n_chains) if rec.n_chains > 1 else widths[1]
        hyper = with_state_widths(hyper, widths[0], w)
    if rec.n_chains > 1:
        hyper = joined_chains(hyper)
    return series, hyper


def _evaluate_slots(rec: RunRecord, table: dict[str, np.ndarray],
                    series: dict[str, np.ndarray], arch: Any, split: Any, *, test: bool,
                    predictive: bool, workers: int, world: Any
                    ) -> tuple[list[str], np.ndarray] | None:
    """Evaluate every slot's stored samples into ``table`` and ``series``; the group widths
    of a scale-factor model (Neal's: coordinates of the state), else None."""
    temps = rec.temperatures
    n_s, k_n = series["sample_iteration"].size, temps.size
    n_test = len(split.test.y)
    state_widths = getattr(arch.potential(split.train), "group_widths", None) if (
        getattr(arch, "scaled", False)) else None
    per_sample = ["train_error"] + (["test_energy", "test_error"] if test else [])
    for name in per_sample:
        series[name] = np.full((n_s, k_n), np.nan)
    group_names: list[str] = []
    widths_nkj: list[np.ndarray] = []
    for k in range(k_n):
        theta = rec.samples(slot=k)
        if state_widths is not None:
            group_names, w = state_widths(theta)
            widths_nkj.append(w)
        ev = evaluate_samples(arch, theta, train=split.train, test=split.test if test else None,
                              predictive=predictive and test, workers=workers, world=world)
        for name in per_sample:
            series[name][:, k] = getattr(ev, name)
        m, err, _ = chains_stats(by_chain(ev.train_error, rec.n_chains))
        table["train_error"][k], table["train_error_err"][k] = m, err
        if test:
            m, err, _ = chains_stats(by_chain(ev.test_energy, rec.n_chains))
            table["test_energy"][k], table["test_energy_err"][k] = m, err
            m, err, _ = chains_stats(by_chain(ev.test_error, rec.n_chains))
            table["test_error"][k], table["test_error_err"][k] = m, err
            if predictive:
                table["predictive_test_energy_per_point"][k] = \
                    ev.predictive_test_energy / n_test
                table["predictive_test_error"][k] = ev.predictive_test_error
    if n_test:
        table["test_energy_per_point"] = table["test_energy"] / n_test
        table["test_energy_per_point_err"] = table["test_energy_err"] / n_test
    return (group_names, np.stack(widths_nkj, axis=1)) if widths_nkj else None


def _ladder_health(rec: RunRecord, table: dict[str, np.ndarray], warnings: list[str],
                   swap_threshold: float) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The swap table, the mixing columns of ``table``, low-swap warnings and the meta
    entries of the mixing (verdict, passages, flow, the model's log evidence)."""
    temps, k_n, n_used, kept = rec.temperatures, rec.temperatures.size, rec.n_kept, rec.kept
    if k_n > 1 and n_used > 0:
        pairs = swap_table(temps, kept["swap_attempted_k"], kept["swap_accepted_k"])
    else:
        pairs = swap_table(temps, np.zeros((0, max(k_n - 1, 0))), np.zeros((0, max(k_n - 1, 0))))
    mx = rec.mixing
    ideal = ideal_for_run(mx.swaps.rejection, n_used, rec.config.get("ladder", {}))
    flow = replica_flow(kept["replica_k"]) if k_n > 1 and "replica_k" in kept else None
    explore = _exploration(rec, mx)
    if explore is not None:
        table["energy_rho1"] = np.asarray(explore["rho1"], dtype=np.float64)
        table["energy_rho1_err"] = np.asarray(explore["rho1_err"], dtype=np.float64)
        table["local_efficiency"] = np.asarray(explore["efficiency"], dtype=np.float64)
    # the model's log evidence, when the ladder reaches from T = 1 to the prior
    evidence = None if _gaussian(rec) or n_used < 2 else model_evidence(
        temps, np.asarray(kept.get("swap_energy_k", kept["energy_k"]), dtype=np.float64),
        mx.verdict)
    err = mx.acceptance.error.reshape(k_n, -1)
    table["acceptance_err"] = np.sqrt(np.sum(err ** 2, axis=1)) / err.shape[1]
    table["rhat_train_energy"] = mx.diagnostics["rhat"]
    table["ess_bulk_train_energy"] = mx.diagnostics["ess_bulk"]
    table["ess_tail_train_energy"] = mx.diagnostics["ess_tail"]
    table["ess_bulk_per_hour"] = ess_per_hour(mx.diagnostics["ess_bulk"], n_used,
                                              rec.iterations, rec.elapsed_s)
    pairs["swap_rejection"] = mx.swaps.rejection
    pairs["swap_rejection_err"] = mx.swaps.rejection_err
    if k_n > 1 and n_used > 0:
        low = [(float(a), float(b), float(r)) for a, b, r in
               zip(pairs["t_low"], pairs["t_high"], pairs["swap_acceptance"], strict=True)
               if not (r >= swap_threshold)]
        if low:
            listed = "; ".join(f"T = {a:.4g}-{b:.4g}: {100 * r:.1f}%" for a, b, r in low[:6])
            warnings.append(f"{len(low)} of {k_n - 1} adjacent pairs have swap acceptance "
                            f"below {100 * swap_threshold:g}% ({listed}"
                            f"{'; ...' if len(low) > 6 else ''}); the ladder may not mix: add "
                            "temperatures there")
    trips, restarts = mx.passages.round_trips, mx.passages.restarts
    return pairs, {
        "round_trips": int(trips.sum()), "round_trips_per_replica": [int(v) for v in trips],
        "restarts": int(restarts.sum()), "restarts_per_replica": [int(v) for v in restarts],
        "ideal_passages": None if ideal is None else ideal.to_dict(),
        "local_exploration": explore,
        "replica_flow": None if flow is None else flow.to_dict(),
        "barrier": mx.swaps.barrier, "barrier_err": mx.swaps.barrier_err,
        "mixed": mx.verdict.mixed, "verdict": mx.verdict.to_dict(),
        "log_evidence": None if evidence is None else evidence.to_dict()}


def _references(arch: Any, split: Any) -> dict[str, float]:
    """The uninformed predictor's test energy per point and error (for a regression, the
    squared error of the training targets' mean), and empty baseline lines."""
    task = split.train.task if split is not None else "classification"
    n_classes = int(getattr(arch, "widths", [0, 10])[-1]) if arch is not None else 10
    uninformed = (math.log(n_classes), 1.0 - 1.0 / n_classes)
    if task == "regression" and split is not None:
        from thermonet.data import to_original_units

        mean = np.mean(split.train.y, axis=0)
        f_te, y_te = to_original_units(split.test, np.broadcast_to(mean, split.test.y.shape))
        uninformed = (math.nan, float(np.mean(np.sum((y_te - f_te) ** 2, axis=1)))
                      if len(split.test.y) else math.nan)
    return {"uninformed_per_point": uninformed[0], "uninformed_error": uninformed[1],
            "baseline_test_energy_per_point": math.nan,
            "baseline_test_energy_per_point_err": math.nan,
            "baseline_test_error": math.nan, "baseline_test_error_err": math.nan,
            "baseline_n_kept": math.nan}


def _identity(rec: RunRecord, arch: Any, split: Any, series: dict[str, np.ndarray]
              ) -> dict[str, Any]:
    """The analysis's meta entries that say what was analysed."""
    used = series.get("sample_iteration", rec.sample_iterations())
    return {
        "run_dir": str(rec.path), "run_uuid": rec.run_uuid,
        "thermonet_version": rec.checkpoint.thermonet_version,
        "architecture": (arch.describe() if arch is not None
                         else rec.config.get("architecture", {})),
        "data": rec.data_name,
        "test_set": getattr(split.test, "name", None) if split is not None else None,
        "test_kind": getattr(split, "test_kind", None) if split is not None else None,
        "n_train": len(split.train.y) if split is not None else 0,
        "n_test": len(split.test.y) if split is not None else 0,
        "n_classes": int(getattr(arch, "widths", [0, 10])[-1]) if arch is not None else 10,
        "task": split.train.task if split is not None else "classification",
        "iterations": rec.iterations, "discard": rec.discard,
        "discarded_iterations": rec.start, "iterations_used": rec.n_kept,
        "first_iteration_used": rec.first_kept_iteration if rec.n_kept > 0 else None,
        "sample_iterations_used": [int(i) for i in used],
        "n_samples": len(used), "n_trajectories": [int(v) for v in rec.n_trajectories],
        "elapsed_s": float(rec.checkpoint.counters.get("elapsed_s", math.nan)),
    }


def _with_scale_factors(rec: RunRecord, arch: Any, split: Any, hyper: dict[str, Any]
                        ) -> dict[str, Any]:
    """``hyper`` with the group widths of a scale-factor model, read from its stored samples
    after the discard (they are coordinates of the state, not in the trace's ``hyper_k``);
    unchanged if no sample is kept."""
    if rec.sample_iterations().size == 0:
        return hyper
    pot = arch.potential(split.train)
    per_slot = ([pot.group_widths(rec.samples(slot=0, chain=c)) for c in range(rec.n_chains)]
                if rec.n_chains > 1 else
                [pot.group_widths(rec.samples(slot=k)) for k in range(rec.temperatures.size)])
    names = per_slot[0][0]
    return with_state_widths(hyper, names, np.stack([w for _, w in per_slot], axis=1))


def summarise(run_dir: str | Path) -> dict[str, Any]:
    """The ``thermonet info`` summary of a run directory (JSON-serialisable)."""
    rec = open_run(run_dir)
    ck, cfg, tr, kept = rec.checkpoint, rec.config, rec.trace, rec.kept
    n, start, k = rec.n_recorded, rec.start, rec.temperatures.size
    out: dict[str, Any] = {
        "run_dir": str(run_dir),
        "run_uuid": rec.run_uuid,
        "iterations": rec.iterations,
        "n_iterations": int(cfg.get("run", {}).get("n_iterations", rec.iterations)),
        "discarded_iterations": start,
        "temperatures": [float(t) for t in rec.temperatures],
        "chains": rec.n_chains,
        "dt": [float(v) for v in np.atleast_1d(ck.slots["step_size"])],
        "elapsed_s": float(ck.counters.get("elapsed_s", 0.0)),
        "blas_backend": ck.blas_backend,
        "blas_reason": str(ck.blas_choice.get("reason", "")),
        "architecture": cfg.get("architecture", {}).get("name"),
        "data": cfg.get("data", {}).get("name"),
        "sampler": cfg.get("sampler", {}).get("name"),
    }
    if rec.n_kept > 0:
        acc = kept["n_accepted_k"].sum(axis=0) / (rec.n_kept * rec.n_trajectories)
        out["acceptance"] = [float(a) for a in acc]
        out["mean_energy"] = [float(e) for e in kept["energy_k"].mean(axis=0)]
        out["divergences"] = int(tr["n_divergent_k"].sum())
        if rec.n_chains > 1:
            # each chain's own halves: a test of its stationarity, not of its mixing
            energy = np.asarray(kept["energy_k"], dtype=np.float64)
            out["chain_rhat"] = [split_rhat(energy[:, c]) for c in range(rec.n_chains)]
    else:
        out["acceptance"] = [float("nan")] * k
        out["mean_energy"] = [float("nan")] * k
        out["divergences"] = 0
    out.update(_mixing_summary(rec))
    out["hyperparameters"] = _hyper_summary(rec)
    mx = rec.mixing
    out["mixed"] = mx.verdict.mixed
    out["verdict"] = str(mx.verdict)
    out["verdict_reasons"] = list(mx.verdict.reasons)
    out["verdict_flags"] = list(mx.verdict.flags)
    # the warm-up's ladder adaptation, if any: each round's barrier estimate and ladder
    out["ladder_rounds"] = list(ck.counters.get("ladder_rounds", []))
    out["per_rung_masses"] = ck.masses_k is not None
    # the warm-up's step-size correction, if any: the acceptance it measured per rung
    out["step_size_retune"] = ck.counters.get("step_size_retune")
    # the warm-up's adaptive local budget, if any: rho1 measured and trajectories per rung
    out["local_budget"] = ck.counters.get("local_budget")
    # an unfinished warm-up (stopped in it): where it stands; None once the ladder is frozen
    out["warmup"] = ck.counters.get("warmup")
    if k > 1 and n > 0:
        att = tr["swap_attempted_k"].sum(axis=0)
        accd = tr["swap_accepted_k"].sum(axis=0)
        out["swap_acceptance"] = [float(a / b) if b else float("nan")
                                  for a, b in zip(accd, att, strict=True)]
        out["round_trips"] = int(mx.passages.round_trips.sum())
    else:
        out["swap_acceptance"] = []
        out["round_trips"] = 0
    return out


def _mixing_summary(rec: RunRecord) -> dict[str, Any]:
    """``info``'s mixing entries: acceptance errors, R-hat, ESS, restarts, passages, flow."""
    mx, k = rec.mixing, rec.temperatures.size
    ideal = ideal_for_run(mx.swaps.rejection, rec.n_kept, rec.config.get("ladder", {}))
    flow = replica_flow(rec.kept["replica_k"]) if k > 1 and "replica_k" in rec.trace else None
    return {
        "acceptance_err": [float(v) for v in mx.acceptance.error],
        "rhat": [float(v) for v in mx.diagnostics["rhat"]],
        "ess_bulk": [float(v) for v in mx.diagnostics["ess_bulk"]],
        "ess_bulk_per_hour": [float(v) for v in ess_per_hour(
            mx.diagnostics["ess_bulk"], rec.iterations - rec.start, rec.iterations,
            rec.elapsed_s)],
        "restarts": int(mx.passages.restarts.sum()),
        "ideal_passages": None if ideal is None else ideal.to_dict(),
        "local_exploration": _exploration(rec, mx),
        "replica_flow": None if flow is None else flow.to_dict(),
        "barrier": mx.swaps.barrier,
    }


def _exploration(rec: RunRecord, mx: Any) -> dict[str, Any] | None:
    """The run's :func:`~thermonet.analysis.local_exploration.local_exploration` after the
    discard, as a dict (None for one rung or fewer than two kept iterations)."""
    temps, kept = rec.temperatures, rec.kept
    if temps.size < 2 or rec.n_kept < 2 or "replica_k" not in kept:
        return None
    scheme = SCHEMES.get(str(rec.config.get("ladder", {}).get("swap_scheme", "random-pairs")))
    grads = rec.n_kept * gradients_per_iteration(rec.config.get("sampler", {}),
                                                 rec.n_trajectories, temps)
    le = local_exploration(np.asarray(kept["energy_k"], dtype=np.float64),
                           np.asarray(kept["replica_k"]),
                           restarts=int(mx.passages.restarts.sum()),
                           round_trips=int(mx.passages.round_trips.sum()), gradients=grads,
                           swaps_first=bool(getattr(scheme, "before_propagation", False)))
    return le.to_dict()


def _hyper_summary(rec: RunRecord) -> dict[str, Any]:
    """Hierarchical models: the hyperparameters' posterior means (names need the model)."""
    scaled = rec.config.get("architecture", {}).get("parameterisation") == "scale"
    if not (("hyper_k" in rec.trace or scaled) and rec.data_name != "none"
            and rec.n_kept > 0):
        return {}
    arch, split = _build_model(rec, None)
    hyper = hyper_widths(arch, split, rec.kept["hyper_k"]) if "hyper_k" in rec.trace else {}
    return _with_scale_factors(rec, arch, split, hyper) if scaled else hyper


def ess_per_hour(ess: Any, n_used: int, n_iterations: int, elapsed_s: Any) -> np.ndarray:
    """Bulk ESS per hour of the run's wall time: the ESS of the ``n_used`` iterations over
    their share of the elapsed time (initialisation and warm-up included in the per-iteration
    cost, so the figure errs low). NaN without a recorded time."""
    e = np.asarray(ess, dtype=np.float64)
    if not elapsed_s or n_iterations <= 0 or n_used <= 0:
        return np.full(e.shape, np.nan)
    hours = float(elapsed_s) * n_used / n_iterations / 3600.0
    return e / hours
