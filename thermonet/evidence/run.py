"""``thermonet evidence``: minima, TI and Laplace runs, the convergence report and the table.

For every model of an evidence configuration (:mod:`thermonet.evidence.config`) and every one of
its ``n_minima`` minima, this module

1. finds the minimum (the configured minimiser from the standard initial draw that
   ``thermonet minimise --seed SEED --draw j`` uses) or loads it from ``params``;
2. runs ``repeats`` independent thermodynamic integrations (TI) from it;
3. optionally runs the convergence report: the same TI with the reference spring constants
   scaled by 0.5 and by 2, with twice the λ points, with twice the samples per λ, swept in the
   reverse direction, and with another seed (all but the last share the baseline's fitted
   reference, so each variant changes exactly one thing);
4. optionally computes the Laplace estimate at the same minimum;

and then summarises everything in one table with the log Bayes factors between the models.

Run directory
-------------
::

    DIR/evidence.toml                   the resolved configuration (refuses a different one)
    DIR/minima/<model>/min000.npy       each minimum, and min000.json (E, steps, source)
    DIR/ti/<model>/min000/rep000/       one TI run: the engine's checkpoint files and
                                        result.json once it has finished
    DIR/ti/<model>/min000/conv-k0.5/    convergence variants (k0.5, k2, bridges2, samples2,
                                        reverse, seed2)
    DIR/laplace/<model>/min000.json     the Laplace estimate
    DIR/summary.json, DIR/summary.h5    the table, the report and every number in it
    DIR/table.txt                       the printed table

Every file is written to a temporary name and renamed, and a task whose result file exists is
never run again, so re-running the command on the same directory continues where it stopped
(an unfinished TI resumes from its own checkpoint) and never loses finished work.

Reproducibility: every task's seed is derived from ``evidence.seed``, the model's name, the
minimum's index and the task's label, never from the order in which tasks run, so the numbers
do not depend on ``workers`` or on the number of MPI ranks. Under MPI (``world``) each phase
(minima, the convergence report's references, then TI and Laplace runs) is shared out in
contiguous blocks of tasks per rank; each task writes its own files, so the directory must be
on a file system every rank sees, and rank 0 alone writes the configuration and the summary.
"""

from __future__ import annotations

import logging
import math
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from thermonet import config as cfgmod
from thermonet.errors import CheckpointMismatchError, ConfigError, ConvergenceError
from thermonet.evidence import config as evcfg
from thermonet.evidence._result import EvidenceResult
from thermonet.evidence.basins.census import signature_of
from thermonet.evidence.basins.symmetry import summary_entry
from thermonet.evidence.models import (
    CONFIG_NAME,
    Minimum,
    Model,
    build_minimiser,
    build_models,
    loaded_vectors,
    prepare_dir,
)
from thermonet.evidence.report import (
    bayes_factors,
    between_minima,
    format_convergence,
    format_table,
    pm,
    write_summary,
)
from thermonet.evidence.tasks import (
    agreement,
    check_shared,
    convergence_entry,
    lambda_progress,
    read_json,
    result_from_dict,
    run_jobs,
    share_tasks,
    task_seed,
)
from thermonet.io.atomic import write_bytes, write_json
from thermonet.parallel import LOCAL, World

log = logging.getLogger("thermonet.evidence")

RESULT_NAME = "result.json"
#: exit status of ``thermonet evidence`` when an estimate failed its convergence report
EXIT_NOT_CONVERGED = 3
#: seconds between the per-λ progress lines of one TI run
PROGRESS_INTERVAL = 5.0

#: convergence variants: label -> description (what each changes: Evidence._ti_plan)
VARIANTS: dict[str, str] = {
    "k0.5": "reference k x0.5",
    "k2": "reference k x2",
    "bridges2": "2x lambda points",
    "samples2": "2x samples per lambda",
    "reverse": "reverse sweep",
    "seed2": "another seed",
}

class Evidence:
    """One evidence calculation in a directory: plan, run (resumably) and summarise.

    Parameters
    ----------
    cfg : ResolvedConfig
        From :func:`thermonet.evidence.config.load`.
    out : Path
        The run directory.
    quiet : bool
        No progress lines.
    stream : file-like, optional
        Where progress lines go (stderr by default).
    world : World, optional
        The processes sharing the tasks (:func:`thermonet.parallel.world`); rank 0 alone
        speaks and writes the directory's own files. Default: this process alone.
    """

    def __init__(self, cfg: cfgmod.ResolvedConfig, out: Path, *, quiet: bool = False,
                 stream: Any = None, world: World | None = None) -> None:
        self.cfg = cfg
        self.out = Path(out)
        self.world = LOCAL if world is None else world
        self.quiet = quiet or not self.world.is_root
        self.stream = stream if stream is not None else sys.stderr
        self.ev = cfg["evidence"]
        self.models: list[Model] = []
        self.minima: dict[tuple[str, int], Minimum] = {}
        self._refs: dict[tuple[str, int], Any] = {}
        self._ref_locks: dict[tuple[str, int], threading.Lock] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._done = 0
        self._total = 0
        self._t0 = time.monotonic()

    # progress

    def _say(self, msg: str) -> None:
        log.debug(msg)
        if not self.quiet:
            with self._lock:
                self.stream.write(msg + "\n")
                self.stream.flush()

    def _finished(self, what: str, seconds: float) -> None:
        with self._lock:
            self._done += 1
            done, total = self._done, self._total
        count = f"{done}/{total}" if self.world.size == 1 else f"rank 0: {done}"
        self._say(f"[{count}] {what}  ({seconds:.1f} s, elapsed "
                  f"{time.monotonic() - self._t0:.0f} s)")

    # paths

    def _min_path(self, model: str, j: int) -> Path:
        return self.out / "minima" / model / f"min{j:03d}.npy"

    def _ti_dir(self, model: str, j: int, label: str) -> Path:
        return self.out / "ti" / model / f"min{j:03d}" / label

    def _laplace_path(self, model: str, j: int) -> Path:
        return self.out / "laplace" / model / f"min{j:03d}.json"

    # labels

    def checks(self, j: int) -> bool:
        """Whether minimum ``j`` (of each model) gets the convergence report."""
        k = self.ev.get("convergence_minima", 0)
        return bool(self.ev["convergence"]) and (k == 0 or j < k)

    def ti_labels(self, j: int) -> list[str]:
        """The TI runs of minimum ``j``: its repeats, then the report's variants."""
        labels = [f"rep{r:03d}" for r in range(self.ev["repeats"])]
        if self.checks(j):
            labels += [f"conv-{v}" for v in VARIANTS]
        return labels

    # phase 1: minima

    def _find_minimum(self, m: Minimum) -> tuple[Any, Any]:
        path = self._min_path(m.model.name, m.index)
        info_path = path.with_suffix(".json")
        pot = m.model.potential.copy()          # each thread its own scratch space
        if path.is_file() and info_path.is_file():
            theta = np.load(path, allow_pickle=False)
            info = read_json(info_path)
            e = pot.energy(theta)
            if not (e == info["energy"] or abs(e - info["energy"]) <= 1e-9 * max(
                    1.0, abs(info["energy"]))):
                raise CheckpointMismatchError(
                    f"minimum {m.index} of {m.model.name} in {path} has E = {e:.10g} now but "
                    f"{info['energy']:.10g} when stored; the data or architecture changed. "
                    "Choose another --out")
            return theta, info
        t0 = time.monotonic()
        if m.model.settings["params"]:
            theta, source = loaded_vectors(m.model, m.index + 1)[m.index]
            info = {"source": source, "energy": float(pot.energy(theta))}
        else:
            mini = build_minimiser(self.cfg)
            draw = np.random.default_rng(np.random.SeedSequence(self.ev["seed"],
                                                                spawn_key=(m.index,)))
            theta0 = m.model.arch.initial_draw(draw)
            res = mini.minimise(pot, theta0, prior=m.model.prior)
            theta = np.asarray(res.theta, dtype=np.float64)
            info = {"source": f"standard initial draw, seed {self.ev['seed']}, draw {m.index}",
                    "minimiser": self.cfg["minimiser"]["name"],
                    "energy": float(pot.energy(theta)), "n_steps": int(res.n_steps),
                    "max_abs_grad": float(res.max_abs_grad), "reason": str(res.reason),
                    "converged": bool(getattr(res, "converged", True))}
        info["n_outside_box"] = m.model.prior.n_outside(theta)
        info["seconds"] = time.monotonic() - t0
        if info["n_outside_box"]:
            fix = ("check the params file" if m.model.settings["params"] else
                   "minimise inside the box (minimiser.respect_box = true with rmin)")
            raise ConfigError(f"minimum {m.index} of {m.model.name} has "
                              f"{info['n_outside_box']} parameter(s) outside the prior box "
                              f"|w_i| < sigma_i/2, where the evidence integrand is 0; {fix}")
        import io

        buf = io.BytesIO()
        np.save(buf, theta)
        write_bytes(path, buf.getvalue())
        write_json(info_path, info)
        extra = (f", {info['n_steps']} steps ({info['reason']})" if "n_steps" in info else "")
        self._finished(f"minimum {m.index} of {m.model.name}: E(w0) = {info['energy']:.6g}"
                       f"{extra}", info["seconds"])
        return theta, info

    # phase 2: TI and Laplace

    def _reference(self, m: Minimum) -> Any:
        """The reference of the baseline run (repeat 0) of this minimum, for the convergence
        variants: fitted once with the stream repeat 0 itself fits with (child 0 of its seed),
        so it is the very reference repeat 0 used; stored as reference.npz for a resume."""
        from thermonet.evidence.ti.integration import Reference, fit_reference, ti_streams

        key = (m.model.name, m.index)
        with self._lock:
            lock = self._ref_locks.setdefault(key, threading.Lock())
        with lock:
            if key in self._refs:
                return self._refs[key]
            path = self._ti_dir(m.model.name, m.index, "reference.npz")
            if path.is_file():
                ref = Reference.load(path)
            else:
                t0 = time.monotonic()
                seed0 = task_seed(self.ev["seed"], m.model.name, m.index, "rep000")
                ref = fit_reference(m.model.potential.copy(), m.theta, m.model.prior,
                                    evcfg.ti_config(self.cfg), ti_streams(seed0)[0])
                ref.save(path)
                self._say(f"    reference of {m.model.name} minimum {m.index} fitted for the "
                          f"convergence report ({time.monotonic() - t0:.1f} s)")
            self._refs[key] = ref
            return ref

    def _ti_plan(self, m: Minimum, label: str) -> tuple[Any, int, Any]:
        """(TIConfig, seed, reference or None) of one TI task.

        Repeats fit their own reference from their own seed. The variants k0.5, k2, bridges2,
        samples2 and reverse reuse repeat 0's seed and fitted reference and change one
        setting each (reverse of a two-way baseline: its reverse sweep alone); seed2 is a
        fully independent run (its own reference fit)."""
        base = evcfg.ti_config(self.cfg)
        name, j = m.model.name, m.index
        if label.startswith("rep"):
            return base, task_seed(self.ev["seed"], name, j, label), None
        variant = label[len("conv-"):]
        seed0 = task_seed(self.ev["seed"], name, j, "rep000")
        changes: dict[str, Any] = {
            "k0.5": {"k_scale": 0.5 * base.k_scale},
            "k2": {"k_scale": 2.0 * base.k_scale},
            "bridges2": {"n_bridges": 2 * base.n_bridges + 2},
            "samples2": {"n_samples": 2 * base.n_samples},
            "reverse": {"reverse": not base.reverse, "both_directions": False},
        }.get(variant, {})
        if variant == "seed2":
            return base, task_seed(self.ev["seed"], name, j, label), None
        if not changes:
            raise ValueError(f"unknown convergence variant {variant!r}")  # pragma: no cover
        return evcfg.ti_config(self.cfg, **changes), seed0, self._reference(m)

    def _run_ti(self, m: Minimum, label: str) -> None:
        from thermonet.evidence.ti.integration import thermodynamic_integration

        run_dir = self._ti_dir(m.model.name, m.index, label)
        if (run_dir / RESULT_NAME).is_file():
            return
        t0 = time.monotonic()
        config, seed, reference = self._ti_plan(m, label)
        run_dir.mkdir(parents=True, exist_ok=True)
        what = f"TI {m.model.name} minimum {m.index} {label}"
        try:
            res = thermodynamic_integration(m.model.potential.copy(), m.theta, m.model.prior,
                                            config, seed=seed, reference=reference,
                                            run_dir=run_dir,
                                            progress=self._lambda_progress(what))
        except ConvergenceError as err:
            if not label.startswith("conv-"):
                raise
            # a convergence variant that cannot even run is a failed check, not a crash
            res = EvidenceResult("ti", config.temperature, m.model.n_params,
                                 float(m.info["energy"]) if m.info else math.nan, math.nan,
                                 math.nan, m.model.prior.log_volume, {"error": str(err)})
            log.warning("%s failed: %s", what, err)
        d = res.as_dict()
        d["seed"] = seed
        d["label"] = label
        d["seconds"] = time.monotonic() - t0
        write_json(run_dir / RESULT_NAME, d)
        self._finished(f"{what}: log ∫ = {pm(res.log_integral, res.log_integral_error)}",
                       d["seconds"])

    def _lambda_progress(self, what: str) -> Callable[..., None]:
        return lambda_progress(what, self._stop, self._say, log, PROGRESS_INTERVAL)

    def _run_laplace(self, m: Minimum) -> None:
        from thermonet.evidence.laplace.approximation import laplace_evidence

        path = self._laplace_path(m.model.name, m.index)
        if path.is_file():
            return
        t0 = time.monotonic()
        options = dict(self.cfg["laplace"])
        method = options.pop("method")
        seed = task_seed(self.ev["seed"], m.model.name, m.index, "laplace")
        res = laplace_evidence(m.model.potential.copy(), m.theta, m.model.prior,
                               self.ev["temperature"], method=method, seed=seed, **options)
        d = res.as_dict()
        d["seed"] = seed
        d["seconds"] = time.monotonic() - t0
        write_json(path, d)
        self._finished(f"Laplace {m.model.name} minimum {m.index}: log ∫ = "
                       f"{res.log_integral:.6g}", d["seconds"])

    def _pool(self, jobs: list[Callable[[], None]]) -> None:
        def interrupted() -> None:
            # Ctrl-C: running TI runs stop after their current λ point (checkpointed)
            self._stop.set()
            self._say("stopping: the running TI runs end after their current λ point; "
                      "re-run the same command to continue")

        run_jobs(jobs, self.ev["workers"], on_interrupt=interrupted)

    def _share(self, fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
        return share_tasks(self.world, fn, items, self._pool)

    def run(self) -> dict[str, Any]:
        """Do (or continue) every task, then write and return the summary."""
        from thermonet.kernels import threads

        job = self.world
        job.on_root(lambda: prepare_dir(self.cfg, self.out))
        check_shared(job, self.out / CONFIG_NAME)
        self.models = build_models(self.cfg)
        n_min = self.ev["n_minima"]
        for model in self.models:
            for j in range(n_min):
                self.minima[(model.name, j)] = Minimum(model, j)
        mins = list(self.minima.values())
        todo_min = [m for m in mins if not self._min_path(m.model.name, m.index).is_file()]
        todo_ti = [(m, lab) for m in mins for lab in self.ti_labels(m.index)
                   if not (self._ti_dir(m.model.name, m.index, lab) / RESULT_NAME).is_file()]
        todo_lap = [m for m in mins if self.ev["laplace"]
                    and not self._laplace_path(m.model.name, m.index).is_file()]
        self._total = len(todo_min) + len(todo_ti) + len(todo_lap)
        if self._total:
            self._say(f"evidence: {len(self.models)} model(s) x {n_min} minimum/minima; "
                      f"{self._total} task(s) to do ({len(todo_min)} minimisations, "
                      f"{len(todo_ti)} TI runs, {len(todo_lap)} Laplace) on "
                      + (f"{job.size} MPI ranks x " if job.size > 1 else "")
                      + f"{self.ev['workers']} worker(s)")
        with threads.blas_single():
            for m, (theta, info) in zip(mins, self._share(self._find_minimum, mins),
                                        strict=True):
                m.theta, m.info = theta, info
            # the references the convergence variants share, fitted before them (once each)
            need = [m for m in mins if any(n is m and lab.startswith("conv-")
                                           and lab != "conv-seed2" for n, lab in todo_ti)]
            for m, ref in zip(need, self._share(self._reference, need), strict=True):
                self._refs[(m.model.name, m.index)] = ref
            jobs: list[Callable[[], None]] = [partial(self._run_laplace, m) for m in todo_lap]
            jobs += [partial(self._run_ti, m, lab) for m, lab in todo_ti]
            self._share(lambda task: task(), jobs)
        summary = self.summarise()
        job.on_root(lambda: write_summary(self.out, summary))
        return summary

    # phase 3: the summary

    def summarise(self) -> dict[str, Any]:
        """Collect every stored result of this configuration into the summary."""
        ev = self.ev
        rows = []
        for m in self.minima.values():
            rows.append(self._summarise_minimum(m))
        models = []
        for model in self.models:
            mine = [r for r in rows if r["model"] == model.name]
            models.append(between_minima(model.name, mine, model.settings))
        factors = bayes_factors(rows, [m.name for m in self.models], models)
        checked = bool(ev["convergence"])
        converged = all(r["converged"] is not False for r in rows)
        return {
            "format": "thermonet.evidence", "format_version": 1,
            "config": self.cfg.data,
            "temperature": ev["temperature"], "method": self.cfg["ti"].get("method"),
            "data": self.cfg["data"]["name"], "repeats": ev["repeats"],
            "n_minima": ev["n_minima"], "tolerance": ev["tolerance"],
            "convergence_checked": checked, "converged": converged if checked else None,
            "convergence_minima": ev.get("convergence_minima", 0) if checked else None,
            "rows": rows, "models": models, "bayes_factors": factors,
        }

    def _summarise_minimum(self, m: Minimum) -> dict[str, Any]:
        ev = self.ev
        name, j = m.model.name, m.index
        reps = []
        for r in range(ev["repeats"]):
            d = read_json(self._ti_dir(name, j, f"rep{r:03d}") / RESULT_NAME)
            reps.append(d)
        li = np.array([d["log_integral"] for d in reps])
        le = np.array([d["log_integral_error"] for d in reps])
        n = len(reps)
        if n >= 2:
            mean, sd = float(li.mean()), float(li.std(ddof=1))
            err = sd
        else:
            mean, sd, err = float(li[0]), math.nan, float(le[0])
        lv = float(reps[0]["log_volume"])
        row: dict[str, Any] = {
            "model": name, "minimum": j, "n_params": int(reps[0]["n_params"]),
            "energy0": float(m.info["energy"]) if m.info else float(reps[0]["energy0"]),
            "minimum_info": m.info,
            "log_volume": lv, "log_integral": mean, "log_integral_error": err,
            "log_integral_sd": sd, "log_integral_sem": sd / math.sqrt(n) if n >= 2 else err,
            "log_evidence": mean - lv, "log_evidence_error": err,
            "repeats": [{"seed": d["seed"], "log_integral": d["log_integral"],
                         "log_integral_error": d["log_integral_error"],
                         "seconds": d.get("seconds")} for d in reps],
            "ti_details": reps[0].get("details", {}),
            **summary_entry(m.model.arch, m.theta),
        }
        row["signature"] = signature_of(m.model.arch, m.theta, row["energy0"])
        lap_path = self._laplace_path(name, j)
        if ev["laplace"] and lap_path.is_file():
            lap = read_json(lap_path)
            row["laplace"] = lap
            row["laplace_log_evidence"] = lap["log_integral"] - lap["log_volume"]
        else:
            row["laplace"] = None
            row["laplace_log_evidence"] = None
        if self.checks(j):
            found = [(v, desc, read_json(self._ti_dir(name, j, f"conv-{v}") / RESULT_NAME))
                     for v, desc in VARIANTS.items()]
            row.update(convergence_entry(reps[0], found, ev["tolerance"]))
        else:
            row.update(convergence=None, converged=None, failed=[])
        return row


def run_evidence(cfg: cfgmod.ResolvedConfig, out: str | Path, *, quiet: bool = False,
                 stream: Any = None, world: World | None = None) -> dict[str, Any]:
    """Run (or continue) the evidence calculation of ``cfg`` in ``out`` (shared by the ranks
    of ``world``, every one of which returns the summary); return the summary."""
    return Evidence(cfg, Path(out), quiet=quiet, stream=stream, world=world).run()


__all__ = ["CONFIG_NAME", "EXIT_NOT_CONVERGED", "PROGRESS_INTERVAL", "RESULT_NAME", "VARIANTS",
           "Evidence", "Minimum", "Model", "agreement", "bayes_factors", "build_models",
           "format_convergence",
           "format_table", "pm", "prepare_dir", "result_from_dict", "run_evidence", "task_seed",
           "write_summary"]
