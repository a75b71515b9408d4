"""``analyse`` (what ``thermonet analyse`` runs) and ``summarise`` (``thermonet info``)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from thermonet.analysis.hyperparameters import hyper_widths, with_state_widths
from thermonet.analysis.ideal_exchange import ideal_for_run
from thermonet.analysis.ladder import (
    MIN_SAMPLES,
    MIN_TAU_MULTIPLE,
    SWAP_WARN_THRESHOLD,
    heat_capacity,
    series_stats,
    swap_table,
)
from thermonet.analysis.local_exploration import (
    gradients_per_iteration,
    local_exploration,
)
from thermonet.analysis.mixing import Mixing, assess, verdict_rules
from thermonet.analysis.model_evidence import model_evidence
from thermonet.analysis.replica_flow import replica_flow
from thermonet.analysis.report import TABLE_COLUMNS, Analysis
from thermonet.analysis.samples import SampleStore, evaluate_samples
from thermonet.analysis.stopping import STOP_PATIENCE, STOP_SIGMA, best_temperature
from thermonet.config.schema import TOMLDecodeError, parse_toml
from thermonet.errors import CheckpointError, CheckpointFormatError, ConfigError
from thermonet.io.checkpoint import read_checkpoint
from thermonet.io.trace import read_trace
from thermonet.tempering import SCHEMES
from thermonet.tempering.ladder import trajectories_from_settings


def _read_baseline(path: str | Path, arch: Any, split: Any, workers: int,
                   warnings: list[str], world: Any = None) -> dict[str, float]:
    """Reference numbers from a `thermonet baseline` result: its JSON summary (``--json``
    output) or its saved minima (``--out``, an (n_kept, n_params) .npy array, evaluated here on
    the run's test set); a directory is searched for ``baseline.json`` then ``baseline.npy``."""
    p = Path(path)
    if p.is_dir():
        for name in ("baseline.json", "baseline.npy"):
            if (p / name).is_file():
                p = p / name
                break
        else:
            raise ConfigError(f"--baseline {path} is a directory without baseline.json or "
                              "baseline.npy; expected the JSON of `thermonet baseline --json` or "
                              "the .npy of `thermonet baseline --out`")
    if not p.is_file():
        raise ConfigError(f"--baseline {path} does not exist; expected the JSON printed by "
                          "`thermonet baseline --json` (saved to a file) or the .npy written by "
                          "`thermonet baseline --out`")
    if p.suffix == ".npy":
        try:
            minima = np.load(p, allow_pickle=False)
        except (OSError, ValueError) as err:
            raise ConfigError(f"--baseline {p} is not a readable .npy file ({err})") from None
        if arch is None or split is None:
            raise ConfigError(f"--baseline {p} holds parameter vectors, which need the run's "
                              "architecture and test set; this run has no data")
        if minima.ndim != 2 or minima.shape[1] != arch.n_params or minima.shape[0] == 0:
            raise ConfigError(f"--baseline {p} has shape {minima.shape}; expected (n_kept, "
                              f"{arch.n_params}) minima of this run's architecture")
        ev = evaluate_samples(arch, minima, test=split.test, predictive=False, workers=workers,
                              world=world)
        n_test = len(split.test.y)
        e = ev.test_energy / n_test
        k = minima.shape[0]

        def sem(a: np.ndarray) -> float:
            return float(np.std(a, ddof=1) / math.sqrt(k)) if k > 1 else math.nan

        return {"baseline_test_energy_per_point": float(e.mean()),
                "baseline_test_energy_per_point_err": sem(e),
                "baseline_test_error": float(ev.test_error.mean()),
                "baseline_test_error_err": sem(ev.test_error),
                "baseline_n_kept": float(k)}
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
        out = {"baseline_test_energy_per_point": doc["test_energy_per_point_mean"],
               "baseline_test_energy_per_point_err": doc["test_energy_per_point_sem"],
               "baseline_test_error": doc["test_error_mean"],
               "baseline_test_error_err": doc["test_error_sem"],
               "baseline_n_kept": doc["n_kept"]}
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as err:
        raise ConfigError(f"--baseline {p} is not the JSON of `thermonet baseline --json` "
                          f"({type(err).__name__}: {err}); expected keys "
                          "test_energy_per_point_mean, test_error_mean, ...") from None
    if split is not None:
        n_test, kind = len(split.test.y), getattr(split, "test_kind", None)
        if doc.get("n_test") not in (None, n_test) or doc.get("test_kind") not in (None, kind):
            warnings.append(f"the baseline was evaluated on a different test set "
                            f"({doc.get('test_kind')}, {doc.get('n_test')} images) than this "
                            f"analysis ({kind}, {n_test} images); its lines are not comparable")
        n_train = len(split.train.y)
        if doc.get("n_train") not in (None, n_train):
            warnings.append(f"the baseline was trained on {doc.get('n_train')} images; this run "
                            f"on {n_train}")
    return {k: (math.nan if v is None else float(v)) for k, v in out.items()}


def _build_model(cfg_toml: str, mnist_dir: str | None) -> tuple[Any, Any, Any]:
    """(architecture, data split or None, resolved config) of a run."""
    from thermonet import config as cfgmod
    from thermonet import registry

    cfg = cfgmod.resolve(parse_toml(cfg_toml))
    settings = {k: (list(v) if isinstance(v, tuple) else v)
                for k, v in cfg["architecture"].items() if k != "name"}
    arch = registry.get_architecture(cfg["architecture"]["name"], **settings)
    split = None
    if cfg["data"]["name"] != "none":
        from thermonet.data import load_configured

        split = load_configured(cfg["data"], cfg["run"]["seed"], mnist_dir=mnist_dir)
    return arch, split, cfg


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
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise CheckpointError(f"{run_dir} does not exist; expected a run directory made by "
                                   "`thermonet run`")
    if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 1:
        raise ConfigError(f"workers = {workers!r}; expected an integer >= 1")
    if baseline is not None and not Path(baseline).exists():   # fail before loading any data
        raise ConfigError(f"--baseline {baseline} does not exist; expected the JSON printed by "
                          "`thermonet baseline --json` (saved to a file) or the .npy written by "
                          "`thermonet baseline --out`")
    ck = read_checkpoint(run_dir)
    tr = read_trace(run_dir, run_uuid=ck.run_uuid)
    try:
        cfg_raw = parse_toml(ck.config_toml)
    except TOMLDecodeError as toml_err:
        raise CheckpointFormatError(f"the configuration stored in {run_dir} is not valid "
                                         f"TOML ({toml_err})") from None
    run_cfg = cfg_raw.get("run", {})
    if discard is None:
        discard = float(run_cfg.get("discard", 0.2))
    if not (isinstance(discard, (int, float)) and 0 <= discard < 1):
        raise ConfigError(f"discard = {discard!r}; expected a fraction in [0, 1), e.g. 0.2")
    warnings: list[str] = []
    temps = np.asarray(ck.temperatures, dtype=np.float64)
    k_n = temps.size
    # rows beyond the checkpoint (left by a crash, trimmed on resume) are not part of the run
    its = np.asarray(tr.get("iteration", np.zeros(0, np.int64)))
    keep_rows = its <= ck.iteration
    tr = {name: np.asarray(a)[keep_rows] for name, a in tr.items()}
    n = int(keep_rows.sum())
    start = math.floor(discard * n)
    sl = slice(start, n)
    n_used = n - start
    first_it = int(tr["iteration"][start]) if n_used > 0 else ck.iteration + 1
    sampler = cfg_raw.get("sampler", {})
    n_traj = trajectories_from_settings(cfg_raw.get("ladder", sampler), temps)
    nan_k = np.full(k_n, np.nan)
    table: dict[str, np.ndarray] = {c: nan_k.copy() for c in TABLE_COLUMNS}
    table["temperature"] = temps.copy()
    table["n_samples"] = np.zeros(k_n, dtype=np.int64)
    if n == 0:
        warnings.append(f"{run_dir} has no recorded iterations yet; continue it with "
                        f"`thermonet resume {run_dir}`")
    if n_used > 0:
        e_nk = np.asarray(tr["energy_k"], dtype=np.float64)[sl]
        table["acceptance"] = tr["n_accepted_k"][sl].sum(axis=0) / (n_used * n_traj)
        table["dt"] = np.asarray(tr["step_size_k"], dtype=np.float64)[sl].mean(axis=0)
        short = []
        for k in range(k_n):
            m, err, tau = series_stats(e_nk[:, k])
            table["train_energy"][k], table["train_energy_err"][k] = m, err
            table["tau_train_energy"][k] = tau
            c, cerr = heat_capacity(e_nk[:, k], temps[k])
            table["heat_capacity"][k], table["heat_capacity_err"][k] = c, cerr
            if np.isfinite(tau) and n_used < MIN_TAU_MULTIPLE * tau:
                short.append(float(temps[k]))
        if short:
            warnings.append(f"at {len(short)} of {k_n} temperatures (T = "
                            f"{', '.join(f'{t:.4g}' for t in short[:6])}"
                            f"{', ...' if len(short) > 6 else ''}) the {n_used} iterations "
                            f"used are fewer than {MIN_TAU_MULTIPLE:g} autocorrelation times "
                            "of the training energy; its error bars are rough")
    gaussian = cfg_raw.get("prior", {}).get("gaussian_std") is not None
    if gaussian:
        warnings.append("this run has a Gaussian prior: the trace energies (train_energy, "
                        "heat_capacity) include its term; the test energies do not")

    # samples: train/test errors, test energies, the predictive
    store = SampleStore(run_dir, ck.run_uuid, ck.iteration)
    used_its = store.select(first_it)
    n_s = int(used_its.size)
    table["n_samples"][:] = n_s
    data_name = cfg_raw.get("data", {}).get("name", "none")
    arch = split = None
    meta: dict[str, Any] = {}
    if data_name != "none":
        arch, split, _ = _build_model(ck.config_toml, mnist_dir)
    n_train = len(split.train.y) if split is not None else 0
    n_test = len(split.test.y) if split is not None else 0
    if split is not None and n_train:
        table["train_energy_per_point"] = table["train_energy"] / n_train
        table["train_energy_per_point_err"] = table["train_energy_err"] / n_train
    if n_s == 0 and n_used > 0:
        warnings.append("no stored parameter samples after the discarded part (run."
                        f"sample_every = {run_cfg.get('sample_every')}); the error and test "
                        "columns are NaN")
    elif 0 < n_s < MIN_SAMPLES and split is not None:
        warnings.append(f"only {n_s} stored samples per temperature after discard; the test "
                        "and error columns have rough error bars")
    series: dict[str, np.ndarray] = {}
    # Neal's scale factors: the group widths are coordinates of the state, read from the samples
    state_widths = getattr(arch.potential(split.train), "group_widths", None) if (
        arch is not None and getattr(arch, "scaled", False) and split is not None) else None
    widths_nkj: list[np.ndarray] = []
    if split is not None and n_s > 0:
        series["sample_iteration"] = np.asarray(used_its, dtype=np.int64)
        per_sample = ["train_error"] + (["test_energy", "test_error"] if test else [])
        for name in per_sample:
            series[name] = np.full((n_s, k_n), np.nan)
        for k in range(k_n):
            theta = store.slot(k, first_it)
            if state_widths is not None:
                group_names, w = state_widths(theta)
                widths_nkj.append(w)
            ev = evaluate_samples(arch, theta, train=split.train,
                                  test=split.test if test else None,
                                  predictive=predictive and test, workers=workers,
                                  world=world)
            for name in per_sample:
                series[name][:, k] = getattr(ev, name)
            m, err, _ = series_stats(ev.train_error)
            table["train_error"][k], table["train_error_err"][k] = m, err
            if test:
                m, err, _ = series_stats(ev.test_energy)
                table["test_energy"][k], table["test_energy_err"][k] = m, err
                m, err, _ = series_stats(ev.test_error)
                table["test_error"][k], table["test_error_err"][k] = m, err
                if predictive:
                    table["predictive_test_energy_per_point"][k] = \
                        ev.predictive_test_energy / n_test
                    table["predictive_test_error"][k] = ev.predictive_test_error
        if n_test:
            table["test_energy_per_point"] = table["test_energy"] / n_test
            table["test_energy_per_point_err"] = table["test_energy_err"] / n_test

    hyper = hyper_widths(arch, split, tr["hyper_k"][sl]) if (
        "hyper_k" in tr and n_used > 0 and arch is not None and split is not None) else {}
    if widths_nkj and widths_nkj[0].shape[1] > 0:
        hyper = with_state_widths(hyper, group_names, np.stack(widths_nkj, axis=1))

    # ladder health
    if k_n > 1 and n_used > 0:
        pairs = swap_table(temps, tr["swap_attempted_k"][sl], tr["swap_accepted_k"][sl])
    else:
        pairs = swap_table(temps, np.zeros((0, max(k_n - 1, 0))), np.zeros((0, max(k_n - 1, 0))))
    mx = assess(tr, temps, n_trajectories=n_traj, start=start,
                elapsed_s=ck.counters.get("elapsed_s"), **verdict_rules(run_cfg))
    trips, restarts = mx.passages.round_trips, mx.passages.restarts
    explore = _exploration(tr, cfg_raw, temps, n_traj, start, mx)
    if explore is not None:
        table["energy_rho1"] = explore["rho1"]
        table["energy_rho1_err"] = explore["rho1_err"]
        table["local_efficiency"] = explore["efficiency"]
    ideal = ideal_for_run(mx.swaps.rejection, n_used, cfg_raw.get("ladder", {}))
    flow = replica_flow(tr["replica_k"][sl]) if k_n > 1 and "replica_k" in tr else None
    # the model's log evidence, when the ladder reaches from T = 1 to the prior
    evidence = None if gaussian or n_used < 2 else model_evidence(
        temps, np.asarray(tr.get("swap_energy_k", tr["energy_k"]), dtype=np.float64)[sl],
        mx.verdict)
    table["acceptance_err"] = mx.acceptance.error
    table["rhat_train_energy"] = mx.diagnostics["rhat"]
    table["ess_bulk_train_energy"] = mx.diagnostics["ess_bulk"]
    table["ess_tail_train_energy"] = mx.diagnostics["ess_tail"]
    table["ess_bulk_per_hour"] = ess_per_hour(mx.diagnostics["ess_bulk"], n_used, ck.iteration,
                                              ck.counters.get("elapsed_s"))
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

    # references and the best temperature
    task = split.train.task if split is not None else "classification"
    n_classes = int(getattr(arch, "widths", [0, 10])[-1]) if arch is not None else 10
    uninformed = (math.log(n_classes), 1.0 - 1.0 / n_classes)
    if task == "regression" and split is not None:
        # predicting the training targets' mean everywhere: its test squared error
        from thermonet.data import to_original_units

        mean = np.mean(split.train.y, axis=0)
        f_te, y_te = to_original_units(split.test, np.broadcast_to(mean, split.test.y.shape))
        uninformed = (math.nan, float(np.mean(np.sum((y_te - f_te) ** 2, axis=1)))
                      if n_test else math.nan)
    references = {"uninformed_per_point": uninformed[0],
                  "uninformed_error": uninformed[1],
                  "baseline_test_energy_per_point": math.nan,
                  "baseline_test_energy_per_point_err": math.nan,
                  "baseline_test_error": math.nan, "baseline_test_error_err": math.nan,
                  "baseline_n_kept": math.nan}
    if baseline is not None:
        references.update(_read_baseline(baseline, arch, split, workers, warnings, world))
    best = best_temperature(temps, table, stop_sigma, stop_patience)

    meta.update({
        "run_dir": str(run_dir), "run_uuid": ck.run_uuid,
        "thermonet_version": ck.thermonet_version,
        "architecture": (arch.describe() if arch is not None
                         else cfg_raw.get("architecture", {})),
        "data": data_name,
        "test_set": getattr(split.test, "name", None) if split is not None else None,
        "test_kind": getattr(split, "test_kind", None) if split is not None else None,
        "n_train": n_train, "n_test": n_test, "n_classes": n_classes, "task": task,
        "iterations": ck.iteration, "discard": float(discard),
        "discarded_iterations": start, "iterations_used": n_used,
        "first_iteration_used": first_it if n_used > 0 else None,
        "sample_iterations_used": [int(i) for i in used_its],
        "n_samples": n_s, "n_trajectories": [int(v) for v in n_traj],
        "round_trips": int(trips.sum()),
        "round_trips_per_replica": [int(v) for v in trips],
        "restarts": int(restarts.sum()),
        "restarts_per_replica": [int(v) for v in restarts],
        "ideal_passages": None if ideal is None else ideal.to_dict(),
        "local_exploration": explore,
        "replica_flow": None if flow is None else flow.to_dict(),
        "elapsed_s": float(ck.counters.get("elapsed_s", math.nan)),
        "barrier": mx.swaps.barrier, "barrier_err": mx.swaps.barrier_err,
        "mixed": mx.verdict.mixed, "verdict": mx.verdict.to_dict(),
        "log_evidence": None if evidence is None else evidence.to_dict(),
        "swap_warn_threshold": float(swap_threshold), "stop_sigma": float(stop_sigma),
        "stop_patience": int(stop_patience),
        "test": bool(test), "predictive": bool(predictive and test),
        "gaussian_prior": gaussian,
        "baseline": None if baseline is None else str(baseline),
        "hyperparameters": hyper,
    })
    return Analysis(run_dir, temps, table, pairs, references, best, warnings, meta, series)


def _with_scale_factors(run_dir: Path, ck: Any, arch: Any, split: Any, hyper: dict[str, Any],
                        first_kept: int) -> dict[str, Any]:
    """``hyper`` with the group widths of a scale-factor model, read from its stored samples
    from iteration ``first_kept`` on (they are coordinates of the state, not in the trace's
    ``hyper_k``); unchanged if no sample is kept."""
    tr = read_trace(run_dir, samples=True, run_uuid=ck.run_uuid, through=ck.iteration)
    theta = tr["samples_theta"][tr["samples_iteration"] >= first_kept]
    if theta.shape[0] == 0:
        return hyper
    pot = arch.potential(split.train)
    per_slot = [pot.group_widths(theta[:, k]) for k in range(theta.shape[1])]
    names = per_slot[0][0]
    return with_state_widths(hyper, names, np.stack([w for _, w in per_slot], axis=1))


def summarise(run_dir: str | Path) -> dict[str, Any]:
    """The ``thermonet info`` summary of a run directory (JSON-serialisable)."""
    run_dir = Path(run_dir)
    ck = read_checkpoint(run_dir)
    tr = read_trace(run_dir, run_uuid=ck.run_uuid)
    cfg = parse_toml(ck.config_toml)
    n = int(tr["iteration"].shape[0]) if "iteration" in tr else 0
    discard = float(cfg.get("run", {}).get("discard", 0.2))
    start = int(np.floor(discard * n))
    sl = slice(start, n)
    k = len(ck.temperatures)
    sampler = cfg.get("sampler", {})
    n_traj = trajectories_from_settings(cfg.get("ladder", sampler), ck.temperatures)
    out: dict[str, Any] = {
        "run_dir": str(run_dir),
        "run_uuid": ck.run_uuid,
        "iterations": ck.iteration,
        "n_iterations": int(cfg.get("run", {}).get("n_iterations", ck.iteration)),
        "discarded_iterations": start,
        "temperatures": [float(t) for t in ck.temperatures],
        "dt": [float(v) for v in np.atleast_1d(ck.slots["step_size"])],
        "elapsed_s": float(ck.counters.get("elapsed_s", 0.0)),
        "blas_backend": ck.blas_backend,
        "blas_reason": str(ck.blas_choice.get("reason", "")),
        "architecture": cfg.get("architecture", {}).get("name"),
        "data": cfg.get("data", {}).get("name"),
        "sampler": sampler.get("name"),
    }
    if n - start > 0:
        acc = tr["n_accepted_k"][sl].sum(axis=0) / ((n - start) * n_traj)
        out["acceptance"] = [float(a) for a in acc]
        out["mean_energy"] = [float(e) for e in tr["energy_k"][sl].mean(axis=0)]
        out["divergences"] = int(tr["n_divergent_k"].sum())
    else:
        out["acceptance"] = [float("nan")] * k
        out["mean_energy"] = [float("nan")] * k
        out["divergences"] = 0
    its = np.asarray(tr.get("iteration", np.zeros(0, np.int64)))
    trimmed = {name: np.asarray(a)[its <= ck.iteration] for name, a in tr.items()}
    mx = assess(trimmed, ck.temperatures, n_trajectories=n_traj, start=start,
                elapsed_s=ck.counters.get("elapsed_s"), **verdict_rules(cfg.get("run", {})))
    out["acceptance_err"] = [float(v) for v in mx.acceptance.error]
    out["rhat"] = [float(v) for v in mx.diagnostics["rhat"]]
    out["ess_bulk"] = [float(v) for v in mx.diagnostics["ess_bulk"]]
    out["ess_bulk_per_hour"] = [float(v) for v in ess_per_hour(
        mx.diagnostics["ess_bulk"], ck.iteration - start, ck.iteration,
        ck.counters.get("elapsed_s"))]
    out["restarts"] = int(mx.passages.restarts.sum())
    n_kept = int((its <= ck.iteration).sum()) - start
    ideal = ideal_for_run(mx.swaps.rejection, n_kept, cfg.get("ladder", {}))
    out["ideal_passages"] = None if ideal is None else ideal.to_dict()
    out["local_exploration"] = _exploration(trimmed, cfg, np.asarray(ck.temperatures),
                                            n_traj, start, mx)
    flow = replica_flow(trimmed["replica_k"][start:]) if (
        k > 1 and "replica_k" in trimmed) else None
    out["replica_flow"] = None if flow is None else flow.to_dict()
    out["barrier"] = mx.swaps.barrier
    # hierarchical models: the hyperparameters' posterior means (names need the model)
    out["hyperparameters"] = {}
    scaled = cfg.get("architecture", {}).get("parameterisation") == "scale"
    if (("hyper_k" in trimmed or scaled) and cfg.get("data", {}).get("name", "none") != "none"
            and n_kept > 0):
        arch, split = _build_model(ck.config_toml, None)[:2]
        if "hyper_k" in trimmed:
            out["hyperparameters"] = hyper_widths(arch, split, trimmed["hyper_k"][start:])
        if scaled:
            out["hyperparameters"] = _with_scale_factors(run_dir, ck, arch, split,
                                                         out["hyperparameters"],
                                                         first_kept=start + 1)
    out["mixed"] = mx.verdict.mixed
    out["verdict"] = str(mx.verdict)
    out["verdict_reasons"] = list(mx.verdict.reasons)
    out["verdict_flags"] = list(mx.verdict.flags)
    # the warm-up's ladder adaptation, if any: each round's barrier estimate and ladder
    out["ladder_rounds"] = list(ck.counters.get("ladder_rounds", []))
    out["per_rung_masses"] = ck.masses_k is not None
    # the warm-up's step-size correction, if any: the acceptance it measured per rung
    out["step_size_retune"] = ck.counters.get("step_size_retune")
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


def _exploration(trace: dict[str, Any], cfg: dict[str, Any], temps: np.ndarray,
                 n_traj: np.ndarray, start: int, mx: Mixing) -> dict[str, Any] | None:
    """The run's :func:`~thermonet.analysis.local_exploration.local_exploration` after the
    discard, as a dict (None for one rung or no production iterations)."""
    n = int(np.asarray(trace.get("iteration", np.zeros(0))).shape[0])
    if temps.size < 2 or n - start < 2 or "replica_k" not in trace:
        return None
    scheme = SCHEMES.get(str(cfg.get("ladder", {}).get("swap_scheme", "random-pairs")))
    grads = (n - start) * gradients_per_iteration(cfg.get("sampler", {}), n_traj, temps)
    le = local_exploration(np.asarray(trace["energy_k"], dtype=np.float64)[start:],
                           np.asarray(trace["replica_k"])[start:],
                           restarts=int(mx.passages.restarts.sum()),
                           round_trips=int(mx.passages.round_trips.sum()), gradients=grads,
                           swaps_first=bool(getattr(scheme, "before_propagation", False)))
    return le.to_dict()


def ess_per_hour(ess: Any, n_used: int, n_iterations: int, elapsed_s: Any) -> np.ndarray:
    """Bulk ESS per hour of the run's wall time: the ESS of the ``n_used`` iterations over
    their share of the elapsed time (initialisation and warm-up included in the per-iteration
    cost, so the figure errs low). NaN without a recorded time."""
    e = np.asarray(ess, dtype=np.float64)
    if not elapsed_s or n_iterations <= 0 or n_used <= 0:
        return np.full(e.shape, np.nan)
    hours = float(elapsed_s) * n_used / n_iterations / 3600.0
    return e / hours
