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
do not depend on ``workers``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import sys
import threading
import time
import zlib
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from thermonet import config as cfgmod
from thermonet.errors import CheckpointMismatchError, ConfigError, ConvergenceError
from thermonet.evidence import config as evcfg
from thermonet.evidence._result import EvidenceResult

log = logging.getLogger("thermonet.evidence")

CONFIG_NAME = "evidence.toml"
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


# --- small helpers ------------------------------------------------------------------------------

def _write_bytes_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, (tuple, set)):
        return list(obj)
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON-serialisable")


def _write_json_atomic(path: Path, obj: Any) -> None:
    text = json.dumps(obj, indent=1, sort_keys=True, default=_jsonable, allow_nan=True)
    _write_bytes_atomic(path, (text + "\n").encode("utf-8"))


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def task_seed(seed: int, model: str, minimum: int, label: str) -> int:
    """The seed of one task: a function of its identity only (never of the schedule)."""
    ss = np.random.SeedSequence([seed, zlib.crc32(model.encode()), minimum,
                                 zlib.crc32(label.encode())])
    return int(ss.generate_state(1, dtype=np.uint32)[0])


def result_from_dict(d: dict[str, Any]) -> EvidenceResult:
    """Rebuild an :class:`EvidenceResult` from ``as_dict()`` output."""
    return EvidenceResult(method=d["method"], temperature=float(d["temperature"]),
                          n_params=int(d["n_params"]), energy0=float(d["energy0"]),
                          log_integral=float(d["log_integral"]),
                          log_integral_error=float(d["log_integral_error"]),
                          log_volume=float(d["log_volume"]), details=d.get("details", {}))


def agreement(base: float, base_err: float, value: float, value_err: float,
              tolerance: float) -> dict[str, Any]:
    """The convergence criterion: ``|value - base| < tolerance * sqrt(base_err² + value_err²)``.

    A non-finite estimate or error never agrees. Returns the difference, the allowed bound and
    whether it passed.
    """
    delta = value - base
    allowed = tolerance * math.sqrt(base_err**2 + value_err**2)
    ok = all(math.isfinite(x) for x in (base, base_err, value, value_err)) and \
        abs(delta) < allowed
    return {"delta": delta, "allowed": allowed, "passed": bool(ok)}


# --- the directory ------------------------------------------------------------------------------

def prepare_dir(cfg: cfgmod.ResolvedConfig, out: Path) -> cfgmod.ResolvedConfig:
    """Create ``out`` or check that it holds this configuration; store the configuration.

    A directory holding a different evidence configuration (other than the extendable keys
    :data:`thermonet.evidence.config.EXTENDABLE`), or a sampling run, is refused.
    """
    from thermonet import checkpoint as ckpt

    out = Path(out)
    if (out / ckpt.CHECKPOINT).exists():
        raise ConfigError(f"{out} holds a `thermonet run` sampling run, not an evidence "
                          "calculation; choose another --out")
    stored_path = out / CONFIG_NAME
    if stored_path.is_file():
        import tomllib

        try:
            stored = evcfg.resolve(tomllib.loads(stored_path.read_text(encoding="utf-8")))
        except (ConfigError, tomllib.TOMLDecodeError) as err:
            raise CheckpointMismatchError(f"{stored_path} cannot be read back ({err}); choose "
                                          "another --out") from None
        changed = cfgmod.diff(stored, cfg, ignore=evcfg.EXTENDABLE)
        if changed:
            what = "; ".join(f"{k}: {a!r} -> {b!r}" for k, a, b in changed[:4])
            more = f" and {len(changed) - 4} more" if len(changed) > 4 else ""
            raise CheckpointMismatchError(
                f"{out} holds an evidence calculation with a different configuration ({what}"
                f"{more}); re-run with the same config to continue it, or choose another --out")
    elif out.is_dir() and any(out.iterdir()):
        raise ConfigError(f"{out} is not empty and holds no evidence calculation; choose "
                          "another --out")
    out.mkdir(parents=True, exist_ok=True)
    _write_bytes_atomic(stored_path, cfg.to_toml().encode("utf-8"))
    return cfg


# --- building the models ------------------------------------------------------------------------

@dataclass
class Model:
    """One model of the comparison: architecture, potential and box prior."""

    name: str
    settings: dict[str, Any]
    arch: Any
    potential: Any
    prior: Any

    @property
    def n_params(self) -> int:
        return int(self.arch.n_params)


def build_models(cfg: cfgmod.ResolvedConfig) -> list[Model]:
    """Load the data once and build every model's potential and prior."""
    from thermonet import registry
    from thermonet.priors import BoxPrior

    data = cfg["data"]
    split = None
    if data["name"] != "none":
        from thermonet.data import load_data

        split = load_data(data["name"], test=data["test"])
    models = []
    for name, m in cfg["model"].items():
        settings = {k: (list(v) if isinstance(v, tuple) else v) for k, v in m.items()
                    if k not in evcfg.MODEL_KEYS}
        arch = registry.load("architecture", m["architecture"])(**settings)
        pot = arch.potential(split.train) if split is not None else arch.potential()
        models.append(Model(name, dict(m), arch, pot, BoxPrior.for_architecture(arch)))
    return models


def _build_minimiser(cfg: cfgmod.ResolvedConfig) -> Any:
    from thermonet import registry

    table = dict(cfg["minimiser"])
    name = table.pop("name")
    return registry.load("minimiser", name)(**table)


def _loaded_vectors(model: Model, n: int) -> list[tuple[np.ndarray, str]]:
    from thermonet.params import load_params

    out: list[tuple[np.ndarray, str]] = []
    for path in model.settings["params"]:
        p = Path(path)
        rows = evcfg._rows(p)
        for r in range(rows):
            if len(out) >= n:
                return out
            theta = load_params(p, model.n_params, index=r if rows > 1 else None)
            out.append((theta, f"{p}" + (f" row {r}" if rows > 1 else "")))
    return out


# --- the calculation ----------------------------------------------------------------------------

@dataclass
class _Minimum:
    model: Model
    index: int
    theta: np.ndarray | None = None
    info: dict[str, Any] | None = None


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
    """

    def __init__(self, cfg: cfgmod.ResolvedConfig, out: Path, *, quiet: bool = False,
                 stream: Any = None) -> None:
        self.cfg = cfg
        self.out = Path(out)
        self.quiet = quiet
        self.stream = stream if stream is not None else sys.stderr
        self.ev = cfg["evidence"]
        self.models: list[Model] = []
        self.minima: dict[tuple[str, int], _Minimum] = {}
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
        self._say(f"[{done}/{total}] {what}  ({seconds:.1f} s, elapsed "
                  f"{time.monotonic() - self._t0:.0f} s)")

    # paths

    def _min_path(self, model: str, j: int) -> Path:
        return self.out / "minima" / model / f"min{j:03d}.npy"

    def _ti_dir(self, model: str, j: int, label: str) -> Path:
        return self.out / "ti" / model / f"min{j:03d}" / label

    def _laplace_path(self, model: str, j: int) -> Path:
        return self.out / "laplace" / model / f"min{j:03d}.json"

    # labels

    def ti_labels(self) -> list[str]:
        labels = [f"rep{r:03d}" for r in range(self.ev["repeats"])]
        if self.ev["convergence"]:
            labels += [f"conv-{v}" for v in VARIANTS]
        return labels

    # phase 1: minima

    def _find_minimum(self, m: _Minimum) -> None:
        path = self._min_path(m.model.name, m.index)
        info_path = path.with_suffix(".json")
        pot = m.model.potential.copy()          # each thread its own scratch space
        if path.is_file() and info_path.is_file():
            theta = np.load(path, allow_pickle=False)
            info = _read_json(info_path)
            e = pot.energy(theta)
            if not (e == info["energy"] or abs(e - info["energy"]) <= 1e-9 * max(
                    1.0, abs(info["energy"]))):
                raise CheckpointMismatchError(
                    f"minimum {m.index} of {m.model.name} in {path} has E = {e:.10g} now but "
                    f"{info['energy']:.10g} when stored; the data or architecture changed. "
                    "Choose another --out")
            m.theta, m.info = theta, info
            return
        t0 = time.monotonic()
        if m.model.settings["params"]:
            theta, source = _loaded_vectors(m.model, m.index + 1)[m.index]
            info = {"source": source, "energy": float(pot.energy(theta))}
        else:
            mini = _build_minimiser(self.cfg)
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
        _write_bytes_atomic(path, buf.getvalue())
        _write_json_atomic(info_path, info)
        m.theta, m.info = theta, info
        extra = (f", {info['n_steps']} steps ({info['reason']})" if "n_steps" in info else "")
        self._finished(f"minimum {m.index} of {m.model.name}: E(w0) = {info['energy']:.6g}"
                       f"{extra}", info["seconds"])

    # phase 2: TI and Laplace

    def _reference(self, m: _Minimum) -> Any:
        """The reference of the baseline run (repeat 0) of this minimum, for the convergence
        variants: fitted once with the stream repeat 0 itself fits with (child 0 of its seed),
        so it is the very reference repeat 0 used; stored as reference.npz for a resume."""
        from thermonet.evidence.ti import Reference, fit_reference

        key = (m.model.name, m.index)
        with self._lock:
            lock = self._ref_locks.setdefault(key, threading.Lock())
        with lock:
            if key in self._refs:
                return self._refs[key]
            path = self._ti_dir(m.model.name, m.index, "reference.npz")
            if path.is_file():
                with np.load(path, allow_pickle=False) as z:
                    ref = Reference(z["w0"], z["k"], z["uniform"], float(z["energy0"]))
            else:
                t0 = time.monotonic()
                seed0 = task_seed(self.ev["seed"], m.model.name, m.index, "rep000")
                child = np.random.SeedSequence(seed0).spawn(2)[0]
                ref = fit_reference(m.model.potential.copy(), m.theta, m.model.prior,
                                    evcfg.ti_config(self.cfg),
                                    np.random.Generator(np.random.PCG64(child)))
                import io

                buf = io.BytesIO()
                np.savez(buf, w0=ref.w0, k=ref.k, uniform=ref.uniform,
                         energy0=np.float64(ref.energy0))
                _write_bytes_atomic(path, buf.getvalue())
                self._say(f"    reference of {m.model.name} minimum {m.index} fitted for the "
                          f"convergence report ({time.monotonic() - t0:.1f} s)")
            self._refs[key] = ref
            return ref

    def _ti_plan(self, m: _Minimum, label: str) -> tuple[Any, int, Any]:
        """(TIConfig, seed, reference or None) of one TI task.

        Repeats fit their own reference from their own seed. The variants k0.5, k2, bridges2,
        samples2 and reverse reuse repeat 0's seed and fitted reference and change one
        setting each; seed2 is a fully independent run (its own reference fit)."""
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
            "reverse": {"reverse": not base.reverse},
        }.get(variant, {})
        if variant == "seed2":
            return base, task_seed(self.ev["seed"], name, j, label), None
        if not changes:
            raise ValueError(f"unknown convergence variant {variant!r}")  # pragma: no cover
        return evcfg.ti_config(self.cfg, **changes), seed0, self._reference(m)

    def _run_ti(self, m: _Minimum, label: str) -> None:
        from thermonet.evidence.ti import thermodynamic_integration

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
        _write_json_atomic(run_dir / RESULT_NAME, d)
        self._finished(f"{what}: log ∫ = {_pm(res.log_integral, res.log_integral_error)}",
                       d["seconds"])

    def _lambda_progress(self, what: str) -> Callable[..., None]:
        """The TI engine's per-λ callback: a line per λ point, at most one every
        ``PROGRESS_INTERVAL`` seconds per run (all of them with -v)."""
        state = {"last": 0.0}

        def progress(j: int, n_points: int, info: dict[str, Any]) -> None:
            if self._stop.is_set():
                raise KeyboardInterrupt
            now = time.monotonic()
            line = (f"    {what}: λ point {j + 1}/{n_points} (λ = {info.get('lambda', math.nan):.4f})"
                    f"  <dJ/dλ> = {info.get('mean', math.nan):.6g} ± {info.get('sem', math.nan):.2g}"
                    f"  acc {info.get('acceptance', math.nan):.2f}"
                    f"  dt {info.get('step_size', math.nan):.3g}")
            if now - state["last"] < PROGRESS_INTERVAL and j + 1 < n_points:
                log.debug(line)
                return
            state["last"] = now
            self._say(line)

        return progress

    def _run_laplace(self, m: _Minimum) -> None:
        from thermonet.evidence.laplace import laplace_evidence

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
        _write_json_atomic(path, d)
        self._finished(f"Laplace {m.model.name} minimum {m.index}: log ∫ = "
                       f"{res.log_integral:.6g}", d["seconds"])

    def _pool(self, jobs: list[Callable[[], None]]) -> None:
        """Run ``jobs`` on ``workers`` threads; on an error, let the running ones finish (so
        their results are stored), then raise it."""
        if not jobs:
            return
        workers = self.ev["workers"]
        if workers == 1:
            for job in jobs:
                job()
            return
        with ThreadPoolExecutor(max_workers=workers) as ex:
            futures = [ex.submit(job) for job in jobs]
            try:
                _done, pending = wait(futures, return_when=FIRST_EXCEPTION)
            except KeyboardInterrupt:
                # Ctrl-C: running TI runs stop after their current λ point (checkpointed)
                self._stop.set()
                for f in futures:
                    f.cancel()
                self._say("stopping: the running TI runs end after their current λ point; "
                          "re-run the same command to continue")
                wait(futures)
                raise
            for f in pending:
                f.cancel()
            wait(futures)
            for f in futures:
                if f.done() and not f.cancelled() and f.exception() is not None:
                    raise f.exception()  # type: ignore[misc]

    def run(self) -> dict[str, Any]:
        """Do (or continue) every task, then write and return the summary."""
        from thermonet.kernels import threads

        prepare_dir(self.cfg, self.out)
        self.models = build_models(self.cfg)
        n_min = self.ev["n_minima"]
        for model in self.models:
            for j in range(n_min):
                self.minima[(model.name, j)] = _Minimum(model, j)
        labels = self.ti_labels()
        mins = list(self.minima.values())
        todo_min = [m for m in mins if not self._min_path(m.model.name, m.index).is_file()]
        todo_ti = [(m, lab) for m in mins for lab in labels
                   if not (self._ti_dir(m.model.name, m.index, lab) / RESULT_NAME).is_file()]
        todo_lap = [m for m in mins if self.ev["laplace"]
                    and not self._laplace_path(m.model.name, m.index).is_file()]
        self._total = len(todo_min) + len(todo_ti) + len(todo_lap)
        if self._total:
            self._say(f"evidence: {len(self.models)} model(s) x {n_min} minimum/minima; "
                      f"{self._total} task(s) to do ({len(todo_min)} minimisations, "
                      f"{len(todo_ti)} TI runs, {len(todo_lap)} Laplace) on "
                      f"{self.ev['workers']} worker(s)")
        with threads.blas_single():
            self._pool([(lambda m=m: self._find_minimum(m)) for m in mins])
            jobs: list[Callable[[], None]] = [(lambda m=m: self._run_laplace(m))
                                              for m in todo_lap]
            jobs += [(lambda m=m, lab=lab: self._run_ti(m, lab)) for m, lab in todo_ti]
            self._pool(jobs)
        summary = self.summarise()
        write_summary(self.out, summary)
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
            models.append(_between_minima(model.name, mine))
        factors = _bayes_factors(rows, [m.name for m in self.models])
        checked = bool(ev["convergence"])
        converged = all(r["converged"] is not False for r in rows)
        return {
            "format": "thermonet.evidence", "format_version": 1,
            "config": self.cfg.data,
            "temperature": ev["temperature"], "method": self.cfg["ti"].get("method"),
            "data": self.cfg["data"]["name"], "repeats": ev["repeats"],
            "n_minima": ev["n_minima"], "tolerance": ev["tolerance"],
            "convergence_checked": checked, "converged": converged if checked else None,
            "rows": rows, "models": models, "bayes_factors": factors,
        }

    def _summarise_minimum(self, m: _Minimum) -> dict[str, Any]:
        ev = self.ev
        name, j = m.model.name, m.index
        reps = []
        for r in range(ev["repeats"]):
            d = _read_json(self._ti_dir(name, j, f"rep{r:03d}") / RESULT_NAME)
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
        }
        lap_path = self._laplace_path(name, j)
        if ev["laplace"] and lap_path.is_file():
            lap = _read_json(lap_path)
            row["laplace"] = lap
            row["laplace_log_evidence"] = lap["log_integral"] - lap["log_volume"]
        else:
            row["laplace"] = None
            row["laplace_log_evidence"] = None
        if ev["convergence"]:
            base = reps[0]
            variants = []
            for v, desc in VARIANTS.items():
                d = _read_json(self._ti_dir(name, j, f"conv-{v}") / RESULT_NAME)
                a = agreement(base["log_integral"], base["log_integral_error"],
                              d["log_integral"], d["log_integral_error"], ev["tolerance"])
                variants.append({"variant": v, "description": desc, "seed": d["seed"],
                                 "log_integral": d["log_integral"],
                                 "log_integral_error": d["log_integral_error"], **a})
            row["convergence"] = {"baseline": {"log_integral": base["log_integral"],
                                               "log_integral_error":
                                                   base["log_integral_error"]},
                                  "variants": variants}
            row["converged"] = all(v["passed"] for v in variants)
            row["failed"] = [v["variant"] for v in variants if not v["passed"]]
        else:
            row["convergence"] = None
            row["converged"] = None
            row["failed"] = []
        return row


def _between_minima(name: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """How much the log evidence moves between minima of one model."""
    le = np.array([r["log_evidence"] for r in rows])
    out: dict[str, Any] = {"model": name, "n_minima": len(rows)}
    if len(rows) >= 2:
        out.update(mean=float(le.mean()), sd=float(le.std(ddof=1)),
                   min=float(le.min()), max=float(le.max()),
                   range=float(le.max() - le.min()))
    else:
        out.update(mean=float(le[0]), sd=math.nan, min=float(le[0]), max=float(le[0]),
                   range=0.0)
    return out


def _bayes_factors(rows: list[dict[str, Any]], names: list[str]) -> list[dict[str, Any]]:
    """ln[p(B|D)/p(A|D)] for every model B against the first model A, at minimum 0 of each
    (TI and Laplace), and from the means over minima with the between-minima spread."""
    by = {(r["model"], r["minimum"]): r for r in rows}
    out = []
    if len(names) < 2:
        return out
    a = names[0]
    for b in names[1:]:
        ra, rb = by[(a, 0)], by[(b, 0)]
        f = {"numerator": b, "denominator": a,
             "ti": rb["log_evidence"] - ra["log_evidence"],
             "ti_error": math.hypot(ra["log_evidence_error"], rb["log_evidence_error"]),
             "converged": (None if ra["converged"] is None and rb["converged"] is None
                           else bool(ra["converged"] is not False
                                     and rb["converged"] is not False)),
             "laplace": (rb["laplace_log_evidence"] - ra["laplace_log_evidence"]
                         if ra["laplace_log_evidence"] is not None
                         and rb["laplace_log_evidence"] is not None else None)}
        ma = [r["log_evidence"] for r in rows if r["model"] == a]
        mb = [r["log_evidence"] for r in rows if r["model"] == b]
        if len(ma) >= 2 and len(mb) >= 2:
            f["ti_over_minima"] = float(np.mean(mb) - np.mean(ma))
            f["ti_over_minima_sd"] = float(math.hypot(np.std(ma, ddof=1), np.std(mb, ddof=1)))
        out.append(f)
    return out


def write_summary(out: Path, summary: dict[str, Any]) -> None:
    """summary.json, summary.h5 and table.txt, each written atomically."""
    _write_json_atomic(out / "summary.json", summary)
    _write_bytes_atomic(out / "table.txt", (format_table(summary) + "\n\n"
                                            + format_convergence(summary) + "\n")
                        .encode("utf-8"))
    _write_h5(out / "summary.h5", summary)


def _write_h5(path: Path, summary: dict[str, Any]) -> None:
    import h5py

    tmp = path.with_name(path.name + ".tmp")
    with h5py.File(tmp, "w") as fh:
        fh.attrs["format"] = "thermonet.evidence"
        fh.attrs["format_version"] = 1
        fh.attrs["summary_json"] = json.dumps(summary, default=_jsonable, allow_nan=True)
        for r in summary["rows"]:
            g = fh.create_group(f"model/{r['model']}/min{r['minimum']:03d}")
            for key in ("n_params", "energy0", "log_volume", "log_integral",
                        "log_integral_error", "log_evidence", "log_evidence_error"):
                g.attrs[key] = r[key]
            if r["laplace_log_evidence"] is not None:
                g.attrs["laplace_log_evidence"] = r["laplace_log_evidence"]
                g.attrs["laplace_log_integral"] = r["laplace"]["log_integral"]
            g.attrs["converged"] = ("unchecked" if r["converged"] is None
                                    else "yes" if r["converged"] else "NO")
            g["repeat_log_integral"] = np.array([x["log_integral"] for x in r["repeats"]])
            g["repeat_log_integral_error"] = np.array([x["log_integral_error"]
                                                       for x in r["repeats"]])
            g["repeat_seed"] = np.array([x["seed"] for x in r["repeats"]], dtype=np.int64)
            for key, value in (r.get("ti_details") or {}).items():
                arr = _numeric(value)
                if arr is not None:
                    g.create_dataset(f"ti_details/{key}", data=arr)
            if r["convergence"]:
                vs = r["convergence"]["variants"]
                c = g.create_group("convergence")
                c["variant"] = np.array([v["variant"] for v in vs], dtype="S")
                for key in ("log_integral", "log_integral_error", "delta", "allowed"):
                    c[key] = np.array([v[key] for v in vs], dtype=np.float64)
                c["passed"] = np.array([v["passed"] for v in vs], dtype=bool)
    with open(tmp, "rb+") as fh2:
        os.fsync(fh2.fileno())
    os.replace(tmp, path)


def _numeric(value: Any) -> np.ndarray | None:
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError):
        return None
    if arr.dtype.kind in "fiub" and arr.size > 0:
        return arr
    return None


# --- formatting ---------------------------------------------------------------------------------

def _short(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.5g}"
    return str(v)


def _decimals(err: float) -> int:
    if not math.isfinite(err) or err <= 0:
        return 2
    return int(min(6, max(0, 1 - math.floor(math.log10(err)))))


def _pm(value: float, err: float) -> str:
    if not math.isfinite(value):
        return str(value)
    d = _decimals(err)
    e = "nan" if not math.isfinite(err) else f"{err:.{d}f}"
    return f"{value:.{d}f} ± {e}"


def _status(row: dict[str, Any]) -> str:
    if row["converged"] is None:
        return "unchecked"
    if row["converged"]:
        return "ok"
    return "NOT CONVERGED (" + ", ".join(row["failed"]) + ")"


def format_table(summary: dict[str, Any]) -> str:
    """The model table and the log Bayes factors, as printed by ``thermonet evidence``."""
    lines = []
    t = summary["temperature"]
    spread = "mean ± sd of" if summary["repeats"] >= 2 else "one run of"
    lines.append(f"evidence on {summary['data']}, T = {t:g}, TI method {summary['method']}; "
                 f"TI: {spread} {summary['repeats']} run(s) per minimum")
    if t != 1.0:
        lines.append("note: at T != 1 'log evidence' is log ∫ e^(-E/T) - log ∏σ, not p(D|M)")
    head = (f"{'model':<8} {'min':>3} {'d':>7} {'E(w0)':>10} {'log ∫ (TI)':>22} "
            f"{'log ∏σ':>11} {'log evidence (TI)':>22} {'Laplace':>11} {'Lap-TI':>9}  check")
    lines.append(head)
    lines.append("-" * len(head))
    for r in summary["rows"]:
        flag = "" if r["converged"] is not False else " !"
        lap = r["laplace_log_evidence"]
        lap_s = f"{lap:.2f}" if lap is not None else "-"
        dl = f"{lap - r['log_evidence']:+.2f}" if lap is not None else "-"
        lines.append(
            f"{r['model']:<8} {r['minimum']:>3} {r['n_params']:>7} {r['energy0']:>10.3g} "
            f"{_pm(r['log_integral'], r['log_integral_error']) + flag:>22} "
            f"{r['log_volume']:>11.2f} "
            f"{_pm(r['log_evidence'], r['log_evidence_error']) + flag:>22} "
            f"{lap_s:>11} {dl:>9}  {_status(r)}")
    for m in summary["models"]:
        if m["n_minima"] >= 2:
            lines.append(f"between the {m['n_minima']} minima of {m['model']}: log evidence "
                         f"mean {m['mean']:.2f}, sd {m['sd']:.2f}, range {m['range']:.2f} "
                         f"({m['min']:.2f} to {m['max']:.2f})")
    for f in summary["bayes_factors"]:
        b, a = f["numerator"], f["denominator"]
        mark = ("" if f["converged"] else "   NOT CONVERGED" if f["converged"] is False
                else "   (unchecked: no convergence report)")
        lap = f"; Laplace {f['laplace']:.2f}" if f["laplace"] is not None else ""
        lines.append(f"ln[p({b}|D)/p({a}|D)] = {_pm(f['ti'], f['ti_error'])} "
                     f"(TI, minimum 0 of each{lap}){mark}")
        if "ti_over_minima" in f:
            lines.append(f"ln[p({b}|D)/p({a}|D)] over minima = {f['ti_over_minima']:.2f} ± "
                         f"{f['ti_over_minima_sd']:.2f} (mean ± between-minima sd)")
    if summary["convergence_checked"] and not summary["converged"]:
        lines.append("NOT CONVERGED: estimates marked ! disagree with a convergence variant "
                     "beyond the tolerance; see the convergence report. Do not use them as "
                     "clean numbers.")
    return "\n".join(lines)


def format_convergence(summary: dict[str, Any]) -> str:
    """The convergence report table."""
    if not summary["convergence_checked"]:
        return ("convergence report: not run (--no-convergence); the numbers above are "
                "unchecked")
    tol = summary["tolerance"]
    lines = [(f"convergence report: each variant must agree with the baseline TI run "
             f"(repeat 0): |Δ| < {tol:g}·sqrt(σ_base² + σ_variant²)")]
    head = (f"{'model':<8} {'min':>3} {'variant':<22} {'log ∫':>22} {'Δ':>10} "
            f"{'allowed':>9}  agrees")
    lines.append(head)
    lines.append("-" * len(head))
    for r in summary["rows"]:
        c = r["convergence"]
        b = c["baseline"]
        lines.append(f"{r['model']:<8} {r['minimum']:>3} {'baseline':<22} "
                     f"{_pm(b['log_integral'], b['log_integral_error']):>22}")
        for v in c["variants"]:
            lines.append(f"{r['model']:<8} {r['minimum']:>3} {v['description']:<22} "
                         f"{_pm(v['log_integral'], v['log_integral_error']):>22} "
                         f"{v['delta']:>+10.3g} {v['allowed']:>9.3g}  "
                         f"{'yes' if v['passed'] else 'NO'}")
    return "\n".join(lines)


def run_evidence(cfg: cfgmod.ResolvedConfig, out: str | Path, *, quiet: bool = False,
                 stream: Any = None) -> dict[str, Any]:
    """Run (or continue) the evidence calculation of ``cfg`` in ``out``; return the summary."""
    return Evidence(cfg, Path(out), quiet=quiet, stream=stream).run()


__all__ = [
    "EXIT_NOT_CONVERGED",
    "VARIANTS",
    "Evidence",
    "agreement",
    "format_convergence",
    "format_table",
    "run_evidence",
    "task_seed",
]
