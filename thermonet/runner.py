"""Run a configuration: build every component from the registry, sample, checkpoint, resume.

Every run, single-chain or replica exchange, goes through one path: the tempering engine
(:class:`~thermonet.tempering.ReplicaExchange`) over the configured ladder of K slots (K = 1 for
a single chain) with the configured per-temperature sampler. Iteration i (1-based, counted from
the start of the run):

1. if ``adapt_every`` and ``(i - 1) % adapt_every == 0`` (i > 1): adapt every slot's dt (extra
   trajectories, not part of the chain);
2. one replica-exchange iteration (``n_trajectories`` transitions per slot, and the swaps);
3. record the iteration; every ``sample_every`` iterations also the parameters;
4. every ``checkpoint_every`` iterations (and at the end): write the trace segment, then the
   checkpoint.

The schedule depends only on the absolute iteration number, and every random stream is
restored from the checkpoint, so a resumed run continues bit for bit as the uninterrupted run
would have.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from thermonet import __version__
from thermonet import config as cfgmod
from thermonet.errors import CheckpointMismatchError, ConfigError, ThermonetError
from thermonet.io import checkpoint as ckpt
from thermonet.io import trace
from thermonet.io.atomic import write_text
from thermonet.tempering import Ladder, REInfo, ReplicaExchange, REState, Streams
from thermonet.tempering.warmup import adapt_ladder

log = logging.getLogger("thermonet.run")

#: the trailing axis of each recorded field (slot or pair), as the engine's Info declares
INFO_AXES: dict[str, str] = REInfo.axes()

#: keys that may differ on resume (they do not change the chain)
EXTENDABLE = ("run.n_iterations", "run.checkpoint_every", "run.workers")


@dataclass
class Components:
    """Everything built from a resolved configuration."""

    cfg: cfgmod.RunConfig
    split: Any
    arch: Any
    prior: Any
    potential: Any
    minimiser: Any
    engine: ReplicaExchange
    plugins: dict[str, Any] = field(default_factory=dict)

    @property
    def sampler(self) -> ReplicaExchange:
        """The engine (the name of earlier releases)."""
        return self.engine


class RunProgress(NamedTuple):
    """What :meth:`Run.run` reports to its progress callback after every iteration."""

    iteration: int            #: iterations done
    total: int                #: ``run.n_iterations``
    start: int                #: the iteration this call of :meth:`Run.run` started from
    acceptance: float         #: fraction of accepted transitions since ``start``
    swap_acceptance: float    #: fraction of accepted swaps since ``start``
    energy: float             #: E at the coldest slot


def build(cfg: cfgmod.RunConfig, ladder: Ladder | None = None) -> Components:
    """Load data and construct the architecture, prior, minimiser and engine.

    Plugins come from the registry; their ``Config`` objects and the ladder are the ones the
    configuration built (``cfg.configs``, ``cfg.ladder``); ``ladder`` replaces the latter
    (a resumed run's adapted ladder, from its checkpoint).
    """
    from thermonet import registry
    from thermonet.kernels import configure

    configure()
    from thermonet.data import load_data
    from thermonet.priors import BoxPrior

    if not isinstance(cfg, cfgmod.RunConfig):
        cfg = cfgmod.resolve(cfg.data, warn_legacy=False)
    arch = registry.get_architecture(cfg["architecture"]["name"],
                                     **{k: v for k, v in cfg["architecture"].items()
                                        if k != "name"})
    uses_data = cfg["data"]["name"] != "none"
    split = load_data(cfg["data"]["name"], test=cfg["data"]["test"]) if uses_data else None
    potential = arch.potential(split.train) if split is not None else arch.potential()
    prior = BoxPrior.for_architecture(arch)
    gaussian = cfg["prior"]
    if gaussian["gaussian_std"] is not None:
        from thermonet.priors import GaussianPrior, PriorPotential

        gauss = GaussianPrior.for_architecture(arch, gaussian["gaussian_std"])
        # untempered: only for a one-rung ladder (checked by the configuration)
        scale = 1.0 if gaussian["gaussian_tempered"] else float(cfg.ladder.temperature_k[0])
        potential = PriorPotential(potential, gauss, scale)
    minimiser_cls = registry.load("minimiser", cfg["minimiser"]["name"])
    minimiser = minimiser_cls(config=cfg.configs["minimiser"])
    sampler_cls = registry.load("sampler", cfg["sampler"]["name"])
    masses = cfgmod.sampler_masses(arch, cfg["sampler"]["mass"])
    engine = ReplicaExchange(sampler_cls, potential, ladder if ladder is not None else cfg.ladder,
                             prior=prior, masses=masses,
                             sampler_config=cfg.configs["sampler"],
                             n_trajectories=cfg["ladder"]["n_trajectories"], swap=cfg.swap,
                             workers=cfg["run"]["workers"])
    plugins = {}
    for section, role in cfgmod.PLUGIN_SECTIONS.items():
        name = cfg[section]["name"]
        plugins[f"{role}:{name}"] = registry.available(role)[name].as_dict()
    return Components(cfg, split, arch, prior, potential, minimiser, engine, plugins)


# --- state <-> checkpoint -----------------------------------------------------------------------

def _stack_slots(slots: tuple[Any, ...]) -> dict[str, np.ndarray]:
    fields = slots[0]._fields
    return {name: np.stack([np.asarray(getattr(slot, name)) for slot in slots])
            for name in fields}


def _unstack_slots(state_cls: type, arrays: dict[str, np.ndarray], n: int) -> tuple[Any, ...]:
    out = []
    for k in range(n):
        values = {}
        for name in state_cls._fields:  # type: ignore[attr-defined]
            if name not in arrays:
                raise CheckpointMismatchError(f"checkpoint has no state field {name!r} of "
                                              f"{state_cls.__name__}; was it made by another "
                                              "sampler?")
            value = arrays[name][k]
            values[name] = value.item() if np.ndim(value) == 0 else np.ascontiguousarray(value)
        out.append(state_cls(**values))
    return tuple(out)


def _restore_streams(streams: Streams, states: list[dict[str, Any]]) -> None:
    generators = streams.all()
    if len(states) != len(generators):
        raise CheckpointMismatchError(f"checkpoint holds {len(states)} random streams; this run "
                                      f"needs {len(generators)}")
    for generator, state in zip(generators, states, strict=True):
        generator.bit_generator.state = state


def _blas_backend() -> str:
    from thermonet.kernels import blas

    return str(blas.BACKEND)


def _resume_config(run_dir: Path, ck: ckpt.Checkpoint, n_iterations: int | None,
                   workers: int | None) -> tuple[cfgmod.RunConfig, bool]:
    """The configuration to continue with, resolved once: the run's config.toml (which may
    extend the run, EXTENDABLE keys, but not change it) and the command-line options, checked
    table by table against the checkpointed configuration. Returns it and whether config.toml
    must be rewritten."""
    stored, renamed = cfgmod.translate_legacy(cfgmod.parse_toml(ck.config_toml), warn=False)
    if renamed:
        # written before [ladder] existed: its ladder table lacks the keys of today's defaults
        stored = cfgmod.resolve(stored, warn_legacy=False).data
    on_disk = run_dir / ckpt.CONFIG
    doc = stored
    if on_disk.is_file():
        doc, _ = cfgmod.translate_legacy(cfgmod.read_toml(on_disk), warn=False)
    commandline: dict[str, Any] = {}
    if n_iterations is not None:
        commandline["run.n_iterations"] = n_iterations
    if workers is not None:
        commandline["run.workers"] = workers
    cfg = cfgmod.resolve(doc, commandline, "commandline", warn_legacy=False)
    changed = cfgmod.diff(cfgmod.ResolvedConfig(stored, {}), cfg, ignore=EXTENDABLE)
    if changed:
        what = "; ".join(f"{k}: {a!r} -> {b!r}" for k, a, b in changed)
        raise CheckpointMismatchError(
            f"cannot resume {run_dir}: its config.toml differs from the checkpointed "
            f"configuration ({what}). Restore it, or start a new run with --out")
    # the origins recorded when the run was created, except for what this resume extends
    cfg.sources.update({renamed.get(k, k): v for k, v in ck.config_sources.items()})
    extended = False
    for key in EXTENDABLE:
        section, name = key.split(".")
        if cfg[section][name] != stored.get(section, {}).get(name):
            cfg.sources[key] = "commandline" if key in commandline else "config"
            extended = True
    return cfg, extended or bool(renamed)


# --- the run ------------------------------------------------------------------------------------

class Run:
    """A run directory and the machinery to advance it."""

    def __init__(self, run_dir: Path, components: Components, state: REState, streams: Streams,
                 iteration: int, run_uuid: str, counters: dict[str, Any],
                 created: str = "") -> None:
        self.dir = run_dir
        self.components = components
        self.state = state
        self.streams = streams
        self.iteration = iteration
        self.run_uuid = run_uuid
        self.counters = counters
        self.created = created

    @property
    def c(self) -> Components:
        """Short alias of :attr:`components`."""
        return self.components

    # construction

    @classmethod
    def create(cls, cfg: cfgmod.RunConfig, run_dir: Path, *, overwrite: bool = False,
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
            trace.trim(run_dir, -1)
        _attach_log(run_dir)
        write_text(run_dir / ckpt.CONFIG, cfg.to_toml())
        components = build(cfg)
        engine = components.engine
        streams = engine.make_streams(cfg["run"]["seed"])
        t0 = time.monotonic()
        log.info("initialising %d replica(s) of %s on %s", engine.n_slots,
                 components.arch.describe(), cfg["data"]["name"])
        state = _initial_state(components, streams)
        counters: dict[str, Any] = {"init_s": time.monotonic() - t0}
        lad = cfg["ladder"]
        if lad["adapt_rounds"]:
            log.info("adapting the ladder: %d rounds from %d iterations", lad["adapt_rounds"],
                     lad["adapt_round_length"])
            state, rounds = adapt_ladder(engine, state, streams, rounds=lad["adapt_rounds"],
                                         first_length=lad["adapt_round_length"],
                                         anchors=lad["anchors"],
                                         adapt_factor=cfg["run"]["adapt_factor"])
            counters["ladder_rounds"] = rounds
            log.info("ladder frozen: barrier estimate Lambda = %.3g (last round)",
                     rounds[-1]["barrier"])
        counters["elapsed_s"] = time.monotonic() - t0
        run = cls(run_dir, components, state, streams, 0, str(uuid.uuid4()), counters)
        run.write_checkpoint()
        return run

    @classmethod
    def open(cls, run_dir: Path, *, n_iterations: int | None = None,
             workers: int | None = None) -> Run:
        """Reopen a run directory at its last checkpoint (trimming anything after it)."""
        run_dir = Path(run_dir)
        ck = ckpt.read_checkpoint(run_dir)
        cfg, rewrite = _resume_config(run_dir, ck, n_iterations, workers)
        adapted = bool(cfg["ladder"]["adapt_rounds"])
        same_ends = (len(ck.temperatures) == cfg.ladder.n_temperatures
                     and ck.temperatures[0] == cfg.ladder.temperature_k[0]
                     and ck.temperatures[-1] == cfg.ladder.temperature_k[-1])
        if not same_ends or not (adapted or np.array_equal(ck.temperatures,
                                                           cfg.ladder.temperature_k)):
            raise CheckpointMismatchError(f"cannot resume {run_dir}: the ladder changed")
        if cfg["run"]["n_iterations"] < ck.iteration:
            raise ConfigError(f"--iterations {cfg['run']['n_iterations']} is below the "
                              f"{ck.iteration} iterations already done")
        if rewrite:
            write_text(run_dir / ckpt.CONFIG, cfg.to_toml())
        trace.trim(run_dir, ck.iteration)
        _attach_log(run_dir)
        # an adapted ladder was frozen at the end of the warm-up: the checkpoint holds it
        components = build(cfg, Ladder(ck.temperatures) if adapted else None)
        engine = components.engine
        streams = engine.make_streams(cfg["run"]["seed"])
        _restore_streams(streams, ck.rng_states)
        slots = _unstack_slots(type(engine.samplers[0]).State, ck.slots, engine.n_slots)
        # the data or architecture must give the stored energies back exactly
        for k, slot in enumerate(slots):
            energy = engine.samplers[k].potential.energy(slot.theta)
            tolerance = 1e-9 * max(1.0, abs(slot.energy))
            if not (energy == slot.energy or abs(energy - slot.energy) <= tolerance):
                raise CheckpointMismatchError(
                    f"cannot resume {run_dir}: E(theta) of slot {k} is {energy:.10g} now but "
                    f"{slot.energy:.10g} in the checkpoint; the data set or architecture "
                    "changed. Start a new run with --out")
        now = _blas_backend()
        if ck.blas_backend and ck.blas_backend != now:
            log.warning("the checkpoint was written with BLAS backend %r and this process uses "
                        "%r: the continuation is statistically equivalent but will not repeat "
                        "an uninterrupted run bit for bit (set THERMONET_BLAS=%s to match)",
                        ck.blas_backend, now, ck.blas_backend)
        state = REState(slots, np.asarray(ck.replica_k, dtype=np.int64))
        return cls(run_dir, components, state, streams, ck.iteration, ck.run_uuid, ck.counters,
                   ck.created_utc)

    # advancing

    def write_checkpoint(self) -> None:
        """Write the checkpoint of the current iteration (atomically)."""
        cfg = self.components.cfg
        ck = ckpt.Checkpoint(
            iteration=self.iteration, run_uuid=self.run_uuid, config_toml=cfg.to_toml(),
            config_sources=cfg.sources, plugins=self.components.plugins,
            rng_states=[dict(generator.bit_generator.state)
                        for generator in self.streams.all()],
            slots=_stack_slots(self.state.slots), replica_k=self.state.replica_k,
            temperatures=self.components.engine.ladder.temperature_k, counters=self.counters,
            created_utc=self.created, blas_backend=_blas_backend())
        ckpt.write_checkpoint(self.dir, ck)

    def run(self, progress: Callable[[RunProgress], None] | None = None, *,
            quiet: bool = False) -> Run:
        """Advance to ``run.n_iterations`` total iterations.

        Parameters
        ----------
        progress : callable, optional
            Called with a :class:`RunProgress` after every iteration (the command line shows
            it; see :class:`thermonet.cli.options.RunProgress`).
        quiet : bool
            Ignored (progress is shown only through ``progress``).
        """
        from thermonet.kernels import threads

        with threads.blas_single():
            return self._run(progress)

    def _run(self, progress: Callable[[RunProgress], None] | None) -> Run:
        settings = self.components.cfg["run"]
        engine = self.components.engine
        total = settings["n_iterations"]
        start = self.iteration
        rows: dict[str, list[Any]] = {}
        samples: list[tuple[int, np.ndarray]] = []
        t_last = time.monotonic()
        n_accepted = n_transitions = n_swaps_accepted = n_swaps_attempted = 0
        while self.iteration < total:
            i = self.iteration + 1
            adapt_every = settings["adapt_every"]
            if adapt_every and (i - 1) % adapt_every == 0 and i > 1:
                self.state = engine.adapt(self.state, self.streams,
                                          factor=settings["adapt_factor"])
            self.state, info = engine.step(self.state, self.streams, iteration=i)
            self.iteration = i
            rows.setdefault("iteration", []).append(i)
            for name, value in info._asdict().items():
                rows.setdefault(name, []).append(np.asarray(value))
            if settings["sample_every"] and i % settings["sample_every"] == 0:
                samples.append((i, np.stack([s.theta for s in self.state.slots])))
            n_accepted += int(info.n_accepted_k.sum())
            n_transitions += engine.n_slots * engine.n_trajectories
            n_swaps_accepted += int(info.swap_accepted_k.sum())
            n_swaps_attempted += int(info.swap_attempted_k.sum())
            if i % settings["checkpoint_every"] == 0 or i == total:
                now = time.monotonic()
                self.counters["elapsed_s"] = self.counters.get("elapsed_s", 0.0) + now - t_last
                t_last = now
                trace.write_segment(self.dir, self.run_uuid, rows, samples, axes=INFO_AXES)
                self.write_checkpoint()
                rows, samples = {}, []
            if progress is not None:
                progress(RunProgress(i, total, start, n_accepted / max(n_transitions, 1),
                                     n_swaps_accepted / max(n_swaps_attempted, 1),
                                     float(info.energy_k[0])))
        log.info("run finished at iteration %d", self.iteration)
        return self


def run(config: str | Path, out: str | Path, *, overrides: dict[str, Any] | None = None,
        overwrite: bool = False,
        progress: Callable[[RunProgress], None] | None = None) -> Run:
    """Run the configuration file ``config`` into the run directory ``out``, as
    ``thermonet run CONFIG --out OUT`` does, and return the finished :class:`Run`.

    Parameters
    ----------
    config : path
        A run configuration (TOML; docs/config.md).
    out : path
        The run directory (created; see ``overwrite``).
    overrides : dict, optional
        Dotted settings applied over the file, as ``--set``: ``{"run.n_iterations": 20}``.
    overwrite : bool
        Replace an existing run directory.
    progress : callable, optional
        Called with a :class:`RunProgress` after every iteration.
    """
    cfg = cfgmod.load(config, overrides)
    try:
        return Run.create(cfg, Path(out), overwrite=overwrite).run(progress)
    finally:
        detach_log()


def _initial_state(components: Components, streams: Streams) -> REState:
    cfg = components.cfg
    engine = components.engine
    init = cfg["init"]
    if init["params"]:
        from thermonet.params import load_params

        theta = load_params(init["params"], components.arch.n_params)
        state = engine.init(theta)
        slots = tuple(engine.samplers[k].adapt(state.slots[k], streams.slots[k], factor=0.1)
                      for k in range(engine.n_slots))
        return REState(slots, state.replica_k)
    minimiser = components.minimiser if init["minimise"] else None
    return engine.burn_in(components.arch.initial_draw, streams, minimiser=minimiser,
                          blocks=tuple(init["burn_in"]))


def _attach_log(run_dir: Path) -> None:
    """Send thermonet's log records to run_dir/thermonet.log as well."""
    root = logging.getLogger("thermonet")
    path = str((Path(run_dir) / ckpt.LOG).resolve())
    for handler in list(root.handlers):
        if isinstance(handler, logging.FileHandler):
            if handler.baseFilename == path:
                return
            root.removeHandler(handler)
            handler.close()
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.INFO)
    root.addHandler(handler)
    if root.getEffectiveLevel() > logging.INFO:
        root.setLevel(logging.INFO)


def detach_log() -> None:
    """Stop sending thermonet's log records to a run directory's log file."""
    root = logging.getLogger("thermonet")
    for handler in list(root.handlers):
        if isinstance(handler, logging.FileHandler):
            root.removeHandler(handler)
            handler.close()


__all__ = ["EXTENDABLE", "Components", "Run", "RunProgress", "__version__", "build", "detach_log"]
