"""Run a configuration: build every component from the registries, sample, checkpoint, resume.

Every run, single-chain or replica exchange, goes through one path: a ladder of K slots
(K = 1 for a single chain) driven by :class:`~thermonet.samplers.rehmc.ReplicaExchangeHMC`
with the configured inner sampler. Iteration i (1-based, counted from the start of the run):

1. if ``adapt_every`` and ``(i - 1) % adapt_every == 0``: adapt every slot's dt (extra
   trajectories, not part of the chain);
2. one replica-exchange iteration (``n_trajectories`` transitions per slot, then swaps);
3. record the iteration; every ``sample_every`` iterations also the parameters;
4. every ``checkpoint_every`` iterations (and at the end): write the trace segment, then the
   checkpoint.

The schedule depends only on the absolute iteration number, and every random stream is
restored from the checkpoint, so a resumed run continues bit for bit as the uninterrupted run
would have.
"""

from __future__ import annotations

import logging
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from thermonet import __version__
from thermonet import checkpoint as ckpt
from thermonet import config as cfgmod
from thermonet.errors import CheckpointMismatchError, ConfigError, ThermonetError

log = logging.getLogger("thermonet.run")

#: keys that may differ on resume (they do not change the chain)
EXTENDABLE = ("run.n_iterations", "run.checkpoint_every", "run.workers")


@dataclass
class Components:
    """Everything built from a resolved configuration."""

    cfg: cfgmod.ResolvedConfig
    split: Any
    arch: Any
    prior: Any
    potential: Any
    minimiser: Any
    sampler: Any       # ReplicaExchangeHMC (K = 1 for a single chain)
    plugins: dict[str, Any] = field(default_factory=dict)


def build(cfg: cfgmod.ResolvedConfig) -> Components:
    """Load data and construct the architecture, prior, minimiser and sampler."""
    from thermonet import registry
    from thermonet.api.parallel import make_executor
    from thermonet.data import load_data
    from thermonet.priors import BoxPrior
    from thermonet.samplers.rehmc import ReplicaExchangeHMC

    built = cfgmod.build_plugin_configs(cfg)
    arch_settings = {k: v for k, v in cfg["architecture"].items() if k != "name"}
    arch_cls = registry.load("architecture", cfg["architecture"]["name"])
    arch = arch_cls(**{k: (list(v) if isinstance(v, tuple) else v)
                       for k, v in arch_settings.items()})
    uses_data = cfg["data"]["name"] != "none"
    split = load_data(cfg["data"]["name"], test=cfg["data"]["test"]) if uses_data else None
    potential = arch.potential(split.train) if split is not None else arch.potential()
    prior = BoxPrior.for_architecture(arch)
    g = cfg["prior"]
    if g["gaussian_std"] is not None:
        from thermonet.priors import GaussianPrior, PriorPotential

        gauss = GaussianPrior.for_architecture(arch, g["gaussian_std"])
        scale = 1.0 if g["gaussian_tempered"] else float(cfg["sampler"].get("temperature", 1.0))
        potential = PriorPotential(potential, gauss, scale)
    mcls = registry.load("minimiser", cfg["minimiser"]["name"])
    minimiser = mcls(config=built["minimiser"])
    s = cfg["sampler"]
    masses = arch.fan_in().astype(np.float64) if s["mass"] == "fan_in" else None
    executor = make_executor(cfg["run"]["workers"])
    if s["name"] == "rehmc":
        sampler = ReplicaExchangeHMC(potential, prior=prior, masses=masses,
                                     config=built["sampler"], executor=executor)
    else:
        inner = {k: v for k, v in s.items()
                 if k not in ("name", *cfgmod.SAMPLER_RUNNER_KEYS, *cfgmod.SINGLE_CHAIN_KEYS)}
        sampler = ReplicaExchangeHMC(potential, prior=prior, masses=masses,
                                     temperatures=(s["temperature"],),
                                     n_trajectories=s["n_trajectories"], sampler=s["name"],
                                     inner=inner, executor=executor)
    plugins = {}
    for section, role in cfgmod.PLUGIN_SECTIONS.items():
        names = [cfg[section]["name"]]
        if section == "sampler" and s["name"] == "rehmc":
            names.append(s["sampler"])
        for name in names:
            plugins[f"{role}:{name}"] = registry.available(role)[name].as_dict()
    return Components(cfg, split, arch, prior, potential, minimiser, sampler, plugins)


# --- progress ---------------------------------------------------------------------------------

class Progress:
    """A progress line with ETA and live rates on a terminal; periodic log lines otherwise."""

    def __init__(self, total: int, start: int, quiet: bool = False,
                 stream: Any = None, interval: float = 10.0) -> None:
        self.total, self.start = total, start
        self.quiet = quiet
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = interval
        self.t0 = time.monotonic()
        self.last = 0.0

    def update(self, done: int, acc: float, swap: float, energy: float) -> None:
        if self.quiet:
            return
        now = time.monotonic()
        rate = (done - self.start) / max(now - self.t0, 1e-9)
        eta = (self.total - done) / rate if rate > 0 else float("inf")
        eta_s = time.strftime("%H:%M:%S", time.gmtime(eta)) if np.isfinite(eta) else "--"
        msg = (f"iteration {done}/{self.total}  acc {acc:.2f}  swap {swap:.2f}  "
               f"E(T_min) {energy:.4g}  {rate:.2f} it/s  ETA {eta_s}")
        if self.tty:
            width = 24
            filled = int(width * done / max(self.total, 1))
            self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {msg}\x1b[K")
            self.stream.flush()
            if done >= self.total:
                self.stream.write("\n")
        elif now - self.last >= self.interval or done >= self.total:
            self.last = now
            log.info(msg)


# --- state <-> checkpoint -----------------------------------------------------------------------

def _stack_slots(slots: tuple[Any, ...]) -> dict[str, np.ndarray]:
    fields = slots[0]._fields
    return {f: np.stack([np.asarray(getattr(s, f)) for s in slots]) for f in fields}


def _unstack_slots(state_cls: type, arrays: dict[str, np.ndarray], n: int) -> tuple[Any, ...]:
    out = []
    for k in range(n):
        values = {}
        for f in state_cls._fields:
            if f not in arrays:
                raise CheckpointMismatchError(f"checkpoint has no state field {f!r} of "
                                              f"{state_cls.__name__}; was it made by another "
                                              "sampler?")
            v = arrays[f][k]
            values[f] = v.item() if np.ndim(v) == 0 else np.ascontiguousarray(v)
        out.append(state_cls(**values))
    return tuple(out)


def _restore_streams(streams: list[np.random.Generator], states: list[dict[str, Any]]) -> None:
    if len(states) != len(streams):
        raise CheckpointMismatchError(f"checkpoint holds {len(states)} random streams; this run "
                                      f"needs {len(streams)}")
    for g, st in zip(streams, states, strict=True):
        g.bit_generator.state = st


# --- the run ------------------------------------------------------------------------------------

class Run:
    """A run directory and the machinery to advance it."""

    def __init__(self, run_dir: Path, comp: Components, state: Any, streams: list[Any],
                 iteration: int, run_uuid: str, counters: dict[str, Any],
                 created: str = "") -> None:
        self.dir = run_dir
        self.c = comp
        self.state = state
        self.streams = streams
        self.iteration = iteration
        self.run_uuid = run_uuid
        self.counters = counters
        self.created = created

    # construction

    @classmethod
    def create(cls, cfg: cfgmod.ResolvedConfig, run_dir: Path, *, overwrite: bool = False,
               quiet: bool = False) -> Run:
        """Set up a new run directory, initialise the replicas and write iteration 0."""
        run_dir = Path(run_dir)
        if (run_dir / ckpt.CHECKPOINT).exists() and not overwrite:
            try:
                done = ckpt.read_checkpoint(run_dir).iteration
                what = f"a run (iteration {done} of {cfg['run']['n_iterations']})"
            except ThermonetError:
                what = "a checkpoint"
            raise ConfigError(f"{run_dir} already holds {what}. Continue it with `thermonet "
                              f"resume {run_dir}`, pass --overwrite to discard it, or choose "
                              "another --out")
        run_dir.mkdir(parents=True, exist_ok=True)
        if overwrite:
            for name in (ckpt.CHECKPOINT, ckpt.CONFIG, ckpt.LOG):
                (run_dir / name).unlink(missing_ok=True)
            ckpt.trim(run_dir, -1)
        _attach_log(run_dir)
        _write_text_atomic(run_dir / ckpt.CONFIG, cfg.to_toml())
        comp = build(cfg)
        re = comp.sampler
        streams = re.make_streams(cfg["run"]["seed"], re.n_slots)
        t0 = time.monotonic()
        log.info("initialising %d replica(s) of %s on %s", re.n_slots, comp.arch.describe(),
                 cfg["data"]["name"])
        state = _initial_state(comp, streams)
        counters = {"elapsed_s": time.monotonic() - t0, "init_s": time.monotonic() - t0}
        run = cls(run_dir, comp, state, streams, 0, str(uuid.uuid4()), counters)
        run.write_checkpoint()
        return run

    @classmethod
    def open(cls, run_dir: Path, *, n_iterations: int | None = None,
             workers: int | None = None) -> Run:
        """Reopen a run directory at its last checkpoint (trimming anything after it)."""
        run_dir = Path(run_dir)
        ck = ckpt.read_checkpoint(run_dir)
        import tomllib

        stored = cfgmod.resolve(tomllib.loads(ck.config_toml))
        overrides: dict[str, Any] = {}
        on_disk = run_dir / ckpt.CONFIG
        if on_disk.is_file():
            # the run's config.toml may extend the run (EXTENDABLE keys) but not change it
            edited = cfgmod.resolve(cfgmod.read_toml(on_disk))
            changed = cfgmod.diff(stored, edited, ignore=EXTENDABLE)
            if changed:
                what = "; ".join(f"{k}: {a!r} -> {b!r}" for k, a, b in changed)
                raise CheckpointMismatchError(
                    f"cannot resume {run_dir}: its config.toml differs from the checkpointed "
                    f"configuration ({what}). Restore it, or start a new run with --out")
            for key in EXTENDABLE:
                section, name = key.split(".")
                if edited[section][name] != stored[section][name]:
                    overrides[key] = edited[section][name]
        if n_iterations is not None:
            overrides["run.n_iterations"] = n_iterations
        if workers is not None:
            overrides["run.workers"] = workers
        cfg = cfgmod.resolve(tomllib.loads(ck.config_toml), overrides, "commandline")
        cfg.sources = {**stored.sources, **{k: "commandline" for k in overrides}}
        n_iterations = cfg["run"]["n_iterations"]
        if overrides:
            _write_text_atomic(run_dir / ckpt.CONFIG, cfg.to_toml())
        ckpt.trim(run_dir, ck.iteration)
        _attach_log(run_dir)
        comp = build(cfg)
        re = comp.sampler
        if len(ck.temperatures) != re.n_slots or not np.array_equal(ck.temperatures,
                                                                      re.temperatures):
            raise CheckpointMismatchError(f"cannot resume {run_dir}: the ladder changed")
        streams = re.make_streams(cfg["run"]["seed"], re.n_slots)
        _restore_streams(streams, ck.rng_states)
        inner_cls = type(re.samplers[0])
        slots = _unstack_slots(inner_cls.State, ck.slots, re.n_slots)
        # the data or architecture must give the stored energies back exactly
        for k, st in enumerate(slots):
            e = re.samplers[k].potential.energy(st.theta)
            if not (e == st.energy or abs(e - st.energy) <= 1e-9 * max(1.0, abs(st.energy))):
                raise CheckpointMismatchError(
                    f"cannot resume {run_dir}: E(theta) of slot {k} is {e:.10g} now but "
                    f"{st.energy:.10g} in the checkpoint; the data set or architecture "
                    "changed. Start a new run with --out")
        now = ckpt._blas_backend()
        if ck.blas_backend and ck.blas_backend != now:
            log.warning("the checkpoint was written with BLAS backend %r and this process uses "
                        "%r: the continuation is statistically equivalent but will not repeat "
                        "an uninterrupted run bit for bit (set THERMONET_BLAS=%s to match)",
                        ck.blas_backend, now, ck.blas_backend)
        from thermonet.samplers.rehmc import REState

        state = REState(slots, np.asarray(ck.replica_k, dtype=np.int64))
        if n_iterations < ck.iteration:
            raise ConfigError(f"--iterations {n_iterations} is below the {ck.iteration} "
                              "iterations already done")
        return cls(run_dir, comp, state, streams, ck.iteration, ck.run_uuid, ck.counters,
                   ck.created_utc)

    # advancing

    def write_checkpoint(self) -> None:
        cfg = self.c.cfg
        ck = ckpt.Checkpoint(
            iteration=self.iteration, run_uuid=self.run_uuid, config_toml=cfg.to_toml(),
            config_sources=cfg.sources, plugins=self.c.plugins,
            rng_states=[g.bit_generator.state for g in self.streams],
            slots=_stack_slots(self.state.slots), replica_k=self.state.replica_k,
            temperatures=self.c.sampler.temperatures, counters=self.counters,
            created_utc=self.created)
        ckpt.write_checkpoint(self.dir, ck)

    def run(self, *, quiet: bool = False, stream: Any = None) -> Run:
        """Advance to ``run.n_iterations`` total iterations."""
        from thermonet.kernels import threads

        with threads.blas_single():
            return self._run(quiet, stream)

    def _run(self, quiet: bool, stream: Any) -> Run:
        r = self.c.cfg["run"]
        re = self.c.sampler
        total = r["n_iterations"]
        rows: dict[str, list[Any]] = {}
        samples: list[tuple[int, np.ndarray]] = []
        progress = Progress(total, self.iteration, quiet=quiet, stream=stream)
        t_last = time.monotonic()
        acc_n = acc_d = sw_n = sw_d = 0
        while self.iteration < total:
            i = self.iteration + 1
            if r["adapt_every"] and (i - 1) % r["adapt_every"] == 0 and i > 1:
                self.state = re.adapt(self.state, self.streams, factor=r["adapt_factor"])
            self.state, info = re.step(self.state, self.streams)
            self.iteration = i
            rows.setdefault("iteration", []).append(i)
            for name, value in info._asdict().items():
                rows.setdefault(name, []).append(np.asarray(value))
            if r["sample_every"] and i % r["sample_every"] == 0:
                samples.append((i, np.stack([s.theta for s in self.state.slots])))
            acc_n += int(info.n_accepted_k.sum())
            acc_d += re.n_slots * re.config.n_trajectories
            sw_n += int(info.swap_accepted_k.sum())
            sw_d += int(info.swap_attempted_k.sum())
            if i % r["checkpoint_every"] == 0 or i == total:
                now = time.monotonic()
                self.counters["elapsed_s"] = self.counters.get("elapsed_s", 0.0) + now - t_last
                t_last = now
                ckpt.write_segment(self.dir, self.run_uuid, rows, samples)
                self.write_checkpoint()
                rows, samples = {}, []
            progress.update(i, acc_n / max(acc_d, 1), sw_n / max(sw_d, 1),
                            float(info.energy_k[0]))
        log.info("run finished at iteration %d", self.iteration)
        return self


def _initial_state(comp: Components, streams: list[Any]) -> Any:
    cfg = comp.cfg
    re = comp.sampler
    init = cfg["init"]
    if init["params"]:
        from thermonet.params import load_params
        from thermonet.samplers.rehmc import REState

        theta = load_params(init["params"], comp.arch.n_params)
        state = re.init(theta)
        slots = tuple(re.samplers[k].adapt(state.slots[k], streams[k], factor=0.1)
                      for k in range(re.n_slots))
        return REState(slots, state.replica_k)
    minimiser = comp.minimiser if init["minimise"] else None
    return re.initialise(comp.arch.initial_draw, streams, minimiser=minimiser,
                         burn_in=tuple(init["burn_in"]))


def _write_text_atomic(path: Path, text: str) -> None:
    import os

    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _attach_log(run_dir: Path) -> None:
    """Send thermonet's log records to run_dir/thermonet.log as well."""
    root = logging.getLogger("thermonet")
    path = str((Path(run_dir) / ckpt.LOG).resolve())
    for h in list(root.handlers):
        if isinstance(h, logging.FileHandler):
            if h.baseFilename == path:
                return
            root.removeHandler(h)
            h.close()
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.INFO)
    root.addHandler(handler)
    if root.getEffectiveLevel() > logging.INFO:
        root.setLevel(logging.INFO)


def detach_log() -> None:
    root = logging.getLogger("thermonet")
    for h in list(root.handlers):
        if isinstance(h, logging.FileHandler):
            root.removeHandler(h)
            h.close()


__all__ = ["Run", "build", "Components", "Progress", "EXTENDABLE", "__version__"]
