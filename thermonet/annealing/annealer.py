"""The :class:`Annealer`: the cooling loop with validation-based early stopping and
checkpoints after every temperature."""

from __future__ import annotations

import json
import logging
import math
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from thermonet import __version__
from thermonet import config as cfgmod
from thermonet.annealing.config import resolve_config, sampler_config
from thermonet.annealing.schedule import best_index, running_average, schedule_of, stop_index
from thermonet.annealing.store import (
    ANNEAL_FORMAT,
    ANNEAL_FORMAT_VERSION,
    ANNEAL_H5,
    ANNEAL_JSON,
    chain_state,
    read_anneal,
    write_chain,
)
from thermonet.annealing.validation import hold_out, make_validation, without
from thermonet.errors import CheckpointMismatchError, ConfigError
from thermonet.io.atomic import temp_path, write_h5, write_text
from thermonet.io.h5 import write_header
from thermonet.io.jsonable import utc_now
from thermonet.types import FloatArray

log = logging.getLogger("thermonet.anneal")


@dataclass
class Setup:
    """Everything built from a resolved anneal configuration."""

    cfg: cfgmod.ResolvedConfig
    arch: Any
    split: Any                 #: the training set and the full test set (as load_data gives)
    validation: Any            #: Dataset, disjoint from split.train and from test
    test: Any                  #: the test set used for the reported numbers (no validation)
    prior: Any
    potential: Any
    val_potential: Any
    masses: FloatArray | None
    sampler_cls: type
    sampler_config: Any
    schedule: FloatArray
    seeds: list[np.random.SeedSequence] = field(default_factory=list)


def build(cfg: cfgmod.ResolvedConfig) -> Setup:
    """Load the data, carve the validation set, build the architecture, prior and sampler."""
    from thermonet import registry
    from thermonet.data import DataSplit, load_data
    from thermonet.priors import BoxPrior

    seeds = np.random.SeedSequence(cfg["run"]["seed"]).spawn(3)
    arch = registry.get_architecture(cfg["architecture"]["name"],
                                     **{k: v for k, v in cfg["architecture"].items()
                                        if k != "name"})
    split = load_data(cfg["data"]["name"], test=cfg["data"]["test"])
    a = cfg["anneal"]
    if split.train.task == "regression":
        val, rest = hold_out(split.train, a["n_validation"], seeds[2], a["validation_pool"])
        split = DataSplit(rest, split.test, split.test_kind)
        test = split.test
    else:
        val = make_validation(split.train, a["n_validation"], seeds[2], a["validation_pool"])
        test = split.test
        if split.test_kind == "complement":
            test = without(test, val.indices, f"{test.name}-validation")
        DataSplit(split.train, test, split.test_kind)    # validates
    prior = BoxPrior.for_architecture(arch)
    s = cfg["sampler"]
    masses = cfgmod.sampler_masses(arch, s["mass"])
    sampler_cls = registry.load("sampler", s["name"])
    return Setup(cfg, arch, split, val, test, prior, arch.potential(split.train),
                 arch.potential(val), masses, sampler_cls, sampler_config(sampler_cls, s),
                 schedule_of(cfg), seeds)


#: columns of the per-temperature table (anneal.h5 table/<column>, anneal.json "table")
TABLE_COLUMNS = ("temperature", "step_size", "acceptance", "n_divergent", "energy_mean",
                 "energy_std", "val_error_mean", "val_error_std", "val_energy_mean",
                 "val_error_min", "val_energy_at_min", "running_average", "seconds")


@dataclass
class AnnealResult:
    """Outcome of an anneal (also what ``anneal.json`` holds)."""

    table: dict[str, FloatArray]
    best_theta: FloatArray
    best: dict[str, Any]
    stop_reason: str
    summary: dict[str, Any]


class Annealer:
    """Simulated annealing with HMC and validation-based early stopping, with checkpoints.

    Use :meth:`create` for a new anneal in a directory, :meth:`open` to continue one, then
    :meth:`run`.
    """

    def __init__(self, out_dir: Path, setup: Setup, chain: Any, rng: np.random.Generator,
                 n_done: int, table: dict[str, list[float]], best_theta: FloatArray | None,
                 best: dict[str, Any], run_uuid: str, status: str, stop_reason: str,
                 counters: dict[str, Any], created: str) -> None:
        self.dir = Path(out_dir)
        self.s = setup
        self.chain = chain
        self.rng = rng
        self.n_done = n_done
        self.table = table
        self.best_theta = best_theta
        self.best = best
        self.run_uuid = run_uuid
        self.status = status
        self.stop_reason = stop_reason
        self.counters = counters
        self.created = created

    # -- construction --------------------------------------------------------------------

    def _sampler(self, temperature: float) -> Any:
        return self.s.sampler_cls(self.s.potential, prior=self.s.prior,
                                  temperature=float(temperature), masses=self.s.masses,
                                  config=self.s.sampler_config)

    @classmethod
    def create(cls, cfg: cfgmod.ResolvedConfig, out_dir: str | Path, *,
               overwrite: bool = False) -> Annealer:
        """Set up a new anneal in ``out_dir``: initial parameters, checkpoint at 0 temperatures."""
        out = Path(out_dir)
        path = out / ANNEAL_H5
        if path.exists() and not overwrite:
            raise ConfigError(f"{out} already holds an anneal ({path}); continue it with "
                              "--resume, pass --overwrite to discard it, or choose another --out")
        t0, c0 = time.monotonic(), time.process_time()
        setup = build(cfg)             # data errors surface before anything is removed
        out.mkdir(parents=True, exist_ok=True)
        for name in (ANNEAL_H5, ANNEAL_JSON, temp_path(out / ANNEAL_H5).name):
            (out / name).unlink(missing_ok=True)
        a = cfg["anneal"]
        rng_init = np.random.default_rng(setup.seeds[0])
        if a["start"] == "params":
            from thermonet.params import load_params

            theta = load_params(a["params"], setup.arch.n_params)
        else:
            theta = setup.arch.initial_draw(rng_init)
            if a["start"] == "minimum":
                from thermonet import registry

                mcls = registry.load("minimiser", cfg["minimiser"]["name"])
                mini = mcls(**{k: (tuple(v) if isinstance(v, list) else v)
                               for k, v in cfg["minimiser"].items() if k != "name"})
                theta = mini.minimise(setup.potential, theta, prior=setup.prior).theta
        rng = np.random.default_rng(setup.seeds[1])
        self = cls(out, setup, None, rng, 0, {c: [] for c in TABLE_COLUMNS}, None, {},
                   str(uuid.uuid4()), "running", "", {"elapsed_s": 0.0}, utc_now())
        self.chain = self._sampler(setup.schedule[0]).init(theta)
        self.counters["init_s"] = time.monotonic() - t0
        self.counters["elapsed_s"] = self.counters["init_s"]
        self.counters["cpu_s"] = time.process_time() - c0
        self.write()
        return self

    @classmethod
    def open(cls, out_dir: str | Path, cfg: cfgmod.ResolvedConfig | None = None) -> Annealer:
        """Reopen the anneal in ``out_dir`` at its last completed temperature.

        ``cfg``, if given, must equal the stored configuration.
        """
        out = Path(out_dir)
        ck = read_anneal(out / ANNEAL_H5, full=True)
        stored = resolve_config(cfgmod.parse_toml(ck["config_toml"]))
        if cfg is not None:
            changed = cfgmod.diff(stored, cfg)
            if changed:
                what = "; ".join(f"{k}: {a!r} -> {b!r}" for k, a, b in changed)
                raise CheckpointMismatchError(
                    f"cannot resume {out}: the configuration differs from the stored one "
                    f"({what}). Use the same configuration, or start anew with --overwrite "
                    "or another --out")
        temp_path(out / ANNEAL_H5).unlink(missing_ok=True)
        setup = build(stored)
        if not np.array_equal(setup.validation.indices, ck["validation_indices"]):
            raise CheckpointMismatchError(
                f"cannot resume {out}: the validation images differ from the stored ones (the "
                f"pool is now {setup.validation.provenance['pool']!r}; was the full MNIST "
                "added or removed?). Restore the data, or start anew with --overwrite")
        chain = chain_state(setup.sampler_cls, ck["chain"])
        e = setup.potential.energy(chain.theta)
        if not (e == chain.energy or abs(e - chain.energy) <= 1e-9 * max(1.0, abs(chain.energy))):
            raise CheckpointMismatchError(
                f"cannot resume {out}: E(theta) is {e:.10g} now but {chain.energy:.10g} in the "
                "checkpoint; the data set or architecture changed. Start anew with --overwrite")
        rng = np.random.default_rng(setup.seeds[1])
        rng.bit_generator.state = ck["rng"]
        table = {k: [float(v) for v in ck["table"].get(k, [])] for k in TABLE_COLUMNS}
        return cls(out, setup, chain, rng, ck["n_done"], table, ck.get("theta"), ck["best"],
                   ck["run_uuid"], ck["status"], ck["stop_reason"], ck["counters"],
                   ck["created_utc"])

    # -- running ---------------------------------------------------------------------------

    @property
    def is_done(self) -> bool:
        return self.status != "running"

    def _validation(self, theta: FloatArray) -> tuple[float, float]:
        """Error and energy per point on the validation set; the energy is -ln p(D_val|w)
        without a regression network's prior term."""
        from thermonet.evaluation import prediction_error

        v = self.s.validation
        pot = self.s.val_potential
        energy = getattr(pot, "likelihood_energy", pot.energy)(theta)
        return prediction_error(self.s.arch, theta, v), float(energy) / len(v)

    def run(self, *, max_temperatures: int | None = None,
            progress: Callable[[Annealer], Any] | None = None) -> Annealer:
        """Anneal until the stopping rule fires or the schedule ends.

        Parameters
        ----------
        max_temperatures : int, optional
            Do at most this many temperatures in this call (then return, checkpointed): an
            interruption at a temperature boundary.
        progress : callable, optional
            ``progress(self)`` after every temperature.
        """
        from thermonet.kernels import threads

        with threads.blas_single():
            return self._run(max_temperatures, progress)

    def _run(self, max_temperatures: int | None,
             progress: Callable[[Annealer], Any] | None) -> Annealer:
        n_new = 0
        while not self.is_done and (max_temperatures is None or n_new < max_temperatures):
            self._one_temperature(self.n_done)
            n_new += 1
            if progress is not None:
                progress(self)
        if self.is_done and "test" not in self.best:
            self._finish()
        return self

    def _one_temperature(self, k: int) -> None:
        a = self.s.cfg["anneal"]
        t0, c0 = time.monotonic(), time.process_time()
        temp = float(self.s.schedule[k])
        sampler = self._sampler(temp)
        state = self.chain
        factor = 0.1 if k == 0 else a["adapt_factor"]
        state = sampler.adapt(state, self.rng, factor=factor)
        n_acc = n_div = 0
        e_n, verr_n, ven_n = [], [], []
        best_key = (math.inf, math.inf)
        best_theta: FloatArray | None = None
        best_j = -1
        for j in range(a["n_trajectories"]):
            if j > 0 and a["adapt_every"] and j % a["adapt_every"] == 0:
                state = sampler.adapt(state, self.rng, factor=a["adapt_factor"])
            state, info = sampler.step(state, self.rng)
            n_acc += bool(info.is_accepted)
            n_div += bool(info.is_divergent)
            err, ven = self._validation(state.theta)
            if (err, ven) < best_key:
                best_key, best_theta, best_j = (err, ven), state.theta.copy(), j
            if j >= a["burn_in"]:
                e_n.append(state.energy)
                verr_n.append(err)
                ven_n.append(ven)
        self.chain = state
        row = {
            "temperature": temp, "step_size": float(state.step_size),
            "acceptance": n_acc / a["n_trajectories"], "n_divergent": float(n_div),
            "energy_mean": float(np.mean(e_n)), "energy_std": float(np.std(e_n)),
            "val_error_mean": float(np.mean(verr_n)), "val_error_std": float(np.std(verr_n)),
            "val_energy_mean": float(np.mean(ven_n)),
            "val_error_min": best_key[0], "val_energy_at_min": best_key[1],
        }
        curve = [*self.table["val_error_mean"], row["val_error_mean"]]
        row["running_average"] = float(running_average(curve, a["window"])[-1])
        prev = (self.best.get("val_error", math.inf), self.best.get("val_energy_per_point",
                                                                     math.inf))
        if best_key < prev:
            self.best_theta = best_theta
            self.best = {"val_error": best_key[0], "val_energy_per_point": best_key[1],
                         "temperature_index": k, "temperature": temp, "trajectory": best_j}
        self.n_done = k + 1
        stop = stop_index(curve, a["patience"], a["window"], a["min_delta"])
        if stop is not None:
            k_best = best_index(running_average(curve, a["window"]), a["min_delta"])
            self.status = "stopped"
            self.stop_reason = (f"the average validation error did not improve for "
                                f"{a['patience']} temperature(s) after T = "
                                f"{self.s.schedule[k_best]:.6g}")
        elif self.n_done == len(self.s.schedule):
            self.status, self.stop_reason = "finished", "end of the schedule"
        row["seconds"] = time.monotonic() - t0
        for c in TABLE_COLUMNS:
            self.table[c].append(float(row[c]))
        self.counters["elapsed_s"] = self.counters.get("elapsed_s", 0.0) + row["seconds"]
        self.counters["cpu_s"] = self.counters.get("cpu_s", 0.0) + time.process_time() - c0
        self.write()

    def _finish(self) -> None:
        """Evaluate the best parameters on the training and test sets; write the results."""
        from thermonet.evaluation import evaluate, prediction_error

        if self.best_theta is None:     # cannot happen: a finished anneal did a temperature
            raise ConfigError("the anneal finished without completing a temperature")
        arch, theta = self.s.arch, self.best_theta
        test = self.s.test
        pot_test = arch.potential(test)
        e_test = float(getattr(pot_test, "likelihood_energy", pot_test.energy)(theta))
        full = evaluate(arch, self.s.split, theta, self.s.prior)
        self.best.update({
            "train_energy": full["train_energy"],
            "train_error": full["train_error"],
            "test": {"set": test.name, "kind": self.s.split.test_kind, "n": len(test),
                     "energy_per_point": e_test / len(test),
                     "error": prediction_error(arch, theta, test)},
            "test_full": {"set": full["test_set"], "n": full["n_test"],
                          "energy_per_point": full["test_energy_per_point"],
                          "error": full["test_error"]},
            "in_prior_box": full["in_prior_box"],
        })
        self.write()
        summary = self.summary()
        write_text(self.dir / ANNEAL_JSON, json.dumps(summary, indent=1, sort_keys=True) + "\n")

    def result(self) -> AnnealResult:
        """The outcome (after :meth:`run` has finished)."""
        if self.best_theta is None:
            raise ConfigError("the anneal has not completed a temperature yet; run it first")
        return AnnealResult({k: np.asarray(v) for k, v in self.table.items()},
                            self.best_theta, dict(self.best), self.stop_reason, self.summary())

    def summary(self) -> dict[str, Any]:
        """A JSON-serialisable summary (what ``anneal.json`` holds)."""
        def num(v: Any) -> Any:
            return None if isinstance(v, float) and not math.isfinite(v) else v

        s = self.s
        return {
            "format": ANNEAL_FORMAT, "thermonet_version": __version__, "run_uuid": self.run_uuid,
            "status": self.status, "stop_reason": self.stop_reason,
            "architecture": s.arch.describe(), "train_set": s.split.train.name,
            "n_train": len(s.split.train),
            "validation": {"set": s.validation.name, "n": len(s.validation),
                           "pool": s.validation.provenance["pool"]},
            "error_kind": ("squared" if s.validation.task == "regression"
                           else "classification"),
            "test": {"set": s.test.name, "kind": s.split.test_kind, "n": len(s.test)},
            "schedule": [float(t) for t in s.schedule],
            "n_temperatures_done": self.n_done,
            "table": {k: [num(x) for x in v] for k, v in self.table.items()},
            "best": {k: num(v) for k, v in self.best.items()},
            "elapsed_s": self.counters.get("elapsed_s", 0.0),
            "cpu_s": self.counters.get("cpu_s", 0.0),
            "init_s": self.counters.get("init_s", 0.0),
            "config": s.cfg.data,
        }

    # -- checkpoint ------------------------------------------------------------------------

    def write(self) -> Path:
        """Atomically replace ``DIR/anneal.h5`` (the checkpoint and the result)."""
        path = self.dir / ANNEAL_H5
        s = self.s

        def write(fh: Any) -> None:
            write_header(fh, ANNEAL_FORMAT, ANNEAL_FORMAT_VERSION)
            fh.attrs["run_uuid"] = self.run_uuid
            fh.attrs["n_done"] = np.int64(self.n_done)
            fh.attrs["status"] = self.status
            fh.attrs["stop_reason"] = self.stop_reason
            fh.attrs["config_toml"] = s.cfg.to_toml()
            fh.attrs["config_sources"] = json.dumps(s.cfg.sources, sort_keys=True)
            fh.attrs["rng"] = json.dumps(self.rng.bit_generator.state)
            fh.attrs["counters"] = json.dumps(self.counters, sort_keys=True)
            fh.attrs["best"] = json.dumps(self.best, sort_keys=True)
            fh.attrs["created_utc"] = self.created
            fh.attrs["updated_utc"] = utc_now()
            if self.best_theta is not None:
                d = fh.create_dataset("theta", data=self.best_theta)
                d.attrs["axes"] = "param"
                d.attrs["description"] = "parameters with the lowest validation error"
            write_chain(fh.create_group("chain"), self.chain)
            fh.create_dataset("schedule/temperature_k", data=s.schedule).attrs["axes"] = "k"
            t = fh.create_group("table")
            t.attrs["axes"] = "k (completed temperatures, hottest first)"
            for c in TABLE_COLUMNS:
                t.create_dataset(c, data=np.asarray(self.table[c], dtype=np.float64))
            v = fh.create_group("validation")
            v.create_dataset("indices", data=s.validation.indices).attrs["axes"] = "d"
            v.attrs["pool"] = s.validation.provenance["pool"]
            v.attrs["name"] = s.validation.name

        write_h5(path, write)
        return path
