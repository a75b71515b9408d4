"""The components of a run, built from a resolved configuration or restored from a checkpoint.

:func:`build` loads the data and constructs the architecture, prior, minimiser and tempering
engine through the plugin registry; :func:`warm_up_plan` gives a new run's warm-up (its
initialisation is :mod:`thermonet.runner.initialisation`); :func:`resume_config`,
:func:`unstack_slots` and :func:`restore_streams` give a resumed run back exactly what its
checkpoint saved.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from thermonet import config as cfgmod
from thermonet.errors import CheckpointMismatchError
from thermonet.io import checkpoint as ckpt
from thermonet.parallel import make_executor
from thermonet.tempering import Ladder, ReplicaExchange, Streams
from thermonet.tempering.device import DeviceReplicaExchange
from thermonet.tempering.warmup import WarmUp

log = logging.getLogger("thermonet.run")

#: keys that may differ on resume (they do not change the chain)
EXTENDABLE = ("run.n_iterations", "run.checkpoint_every", "run.workers", "run.executor")


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


def build(cfg: cfgmod.RunConfig, ladder: Ladder | None = None) -> Components:
    """Load data and construct the architecture, prior, minimiser and engine.

    Plugins come from the registry; their ``Config`` objects and the ladder are the ones the
    configuration built (``cfg.configs``, ``cfg.ladder``); ``ladder`` replaces the latter
    (a resumed run's adapted ladder, from its checkpoint).
    """
    from thermonet import registry
    from thermonet.kernels import configure

    configure()
    from thermonet.data import load_configured
    from thermonet.priors import BoxPrior

    if not isinstance(cfg, cfgmod.RunConfig):
        cfg = cfgmod.resolve(cfg.data, warn_legacy=False)
    arch = registry.get_architecture(cfg["architecture"]["name"],
                                     **{k: v for k, v in cfg["architecture"].items()
                                        if k != "name"})
    uses_data = cfg["data"]["name"] != "none"
    split = load_configured(cfg["data"], cfg["run"]["seed"]) if uses_data else None
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
    rungs = ladder if ladder is not None else cfg.ladder
    potential, executor = _engine_parts(cfg, potential, rungs.n_temperatures)
    engine_cls = DeviceReplicaExchange if cfg["run"]["engine"] == "jax" else ReplicaExchange
    engine = engine_cls(sampler_cls, potential, rungs,
                             prior=prior, masses=masses,
                             sampler_config=cfg.configs["sampler"],
                             n_trajectories=cfg["ladder"]["n_trajectories"],
                             band=cfg["ladder"]["slow_band"],
                             band_trajectories=cfg["ladder"]["slow_band_trajectories"],
                             swap=cfg.swap, executor=executor,
                             chains=cfg["run"]["chains"])
    plugins = {}
    for section, role in cfgmod.PLUGIN_SECTIONS.items():
        name = cfg[section]["name"]
        plugins[f"{role}:{name}"] = registry.available(role)[name].as_dict()
    return Components(cfg, split, arch, prior, potential, minimiser, engine, plugins)


def _engine_parts(cfg: cfgmod.RunConfig, potential: Any, n_slots: int) -> tuple[Any, Any]:
    """The potential the samplers see and the executor of the slots, for ``[run] engine``."""
    if cfg["run"]["engine"] != "jax":
        return potential, make_executor(cfg["run"]["workers"], cfg["run"]["executor"])
    from thermonet import accel
    from thermonet.errors import ConfigError
    from thermonet.parallel import mpi

    if cfg["run"]["executor"] == "mpi" or (mpi.launcher_size() or 1) > 1:
        raise ConfigError("engine = 'jax' advances the whole ladder in one process; it "
                                 "does not run under MPI (executor = 'mpi' or several ranks); "
                                 "start one process, or use engine = 'numba' with MPI")
    parts = accel.jax_engine_parts(potential, n_slots)
    where = accel.device_description()
    if where.startswith("cpu"):
        log.warning("engine = 'jax': JAX sees no GPU here, so the ladder runs on the CPU, "
                    "about 2-3x slower than engine = 'numba' (docs/gpu.md)")
    else:
        log.info("engine = 'jax' on %s", where)
    return parts


def stack_slots(slots: tuple[Any, ...]) -> dict[str, np.ndarray]:
    """Every field of the per-slot sampler states, stacked over slots (the checkpoint's form)."""
    fields = slots[0]._fields
    return {name: np.stack([np.asarray(getattr(slot, name)) for slot in slots])
            for name in fields}


def unstack_slots(state_cls: type, arrays: dict[str, np.ndarray], n: int) -> tuple[Any, ...]:
    """The ``n`` sampler states of class ``state_cls`` from their stacked fields."""
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


def restore_streams(streams: Streams, states: list[dict[str, Any]]) -> None:
    """Set every random stream to its checkpointed state."""
    generators = streams.all()
    if len(states) != len(generators):
        raise CheckpointMismatchError(f"checkpoint holds {len(states)} random streams; this run "
                                      f"needs {len(generators)}")
    for generator, state in zip(generators, states, strict=True):
        generator.bit_generator.state = state


def _blas_decided() -> bool:
    """Whether the backend is chosen or free to choose (set by ``THERMONET_BLAS``): an
    automatic choice waits for a kernel that calls a product, since it may measure."""
    from thermonet.kernels.matmul import backend

    return backend.chosen() or backend.requested() != "auto"


def blas_backend() -> str:
    """The kernels' BLAS backend in this process (stamped into checkpoints); "" while no
    kernel has called for an automatic choice (a run whose kernels call no matrix product
    never makes one)."""
    from thermonet.kernels.matmul import backend

    return str(backend.BACKEND) if _blas_decided() else ""


def blas_choice() -> dict[str, Any]:
    """How this process's BLAS backend was chosen (recorded in checkpoints beside it); empty
    fields while none is (:func:`blas_backend`)."""
    from thermonet.kernels.matmul import backend

    if not _blas_decided():
        return {"how": "", "reason": "no kernel of this run calls a matrix product", "rates": {}}
    choice = backend.choice()
    return {key: choice[key] for key in ("how", "reason", "rates")}


def resume_config(run_dir: Path, ck: ckpt.Checkpoint, n_iterations: int | None,
                  workers: int | None, executor: str | None = None
                  ) -> tuple[cfgmod.RunConfig, bool]:
    """The configuration to continue with, resolved once: the run's config.toml (which may
    extend the run, EXTENDABLE keys, but not change it) and the command-line options, checked
    table by table against the checkpointed configuration. Returns it and whether config.toml
    must be rewritten."""
    stored, renamed = cfgmod.translate_legacy(cfgmod.parse_toml(ck.config_toml), warn=False)
    stored = one_chain_if_unset(stored)
    # resolved again, so that a key added since the run was written (a new [ladder] table, a
    # plugin's new option) takes today's default on both sides instead of reading as a change
    stored = cfgmod.resolve(stored, warn_legacy=False).data
    on_disk = run_dir / ckpt.CONFIG
    doc = stored
    if on_disk.is_file():
        doc, _ = cfgmod.translate_legacy(cfgmod.read_toml(on_disk), warn=False)
        doc = one_chain_if_unset(doc)
    commandline: dict[str, Any] = {}
    if n_iterations is not None:
        commandline["run.n_iterations"] = n_iterations
    if workers is not None:
        commandline["run.workers"] = workers
    if executor is not None:
        commandline["run.executor"] = executor
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


def one_chain_if_unset(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` (a run's stored configuration) with ``run.chains = 1`` when it has no
    ``run.chains``: a run written before the key existed ran one chain, whatever today's
    default."""
    run = doc.get("run", {})
    if isinstance(run, dict) and "chains" not in run:
        return {**doc, "run": {**run, "chains": 1}}
    return doc


def data_notes(components: Components) -> list[str]:
    """What a run's log should say about its data beyond the name (a user file's
    standardisation constants)."""
    split = components.split
    if split is None or "standardisation" not in split.train.provenance:
        return []
    return [f"data standardised by the training set's "
            f"{split.train.provenance['standardisation']}"]


def warm_up_plan(components: Components) -> WarmUp:
    """The warm-up ``[ladder]`` asks for: ``adapt_rounds`` ladder rounds from
    ``adapt_round_length`` iterations, then ``adapt_masses`` iterations of mass estimation,
    then ``retune_rounds`` rounds of ``retune_iterations`` iterations, each measuring the
    acceptance for a step-size correction, then (``local_budget = "adaptive"``)
    ``local_budget_iterations`` iterations measuring each rung's energy autocorrelation for
    the trajectories per rung."""
    cfg = components.cfg
    lad = cfg["ladder"]
    return WarmUp(components.engine, rounds=lad["adapt_rounds"],
                  first_length=lad["adapt_round_length"], anchors=lad["anchors"],
                  mass_iterations=lad["adapt_masses"],
                  retune_iterations=lad["retune_iterations"],
                  retune_rounds=lad["retune_rounds"],
                  budget_iterations=(lad["local_budget_iterations"]
                                     if lad["local_budget"] == "adaptive" else 0),
                  budget_bounds=tuple(lad["local_budget_bounds"]),
                  adapt_factor=cfg["run"]["adapt_factor"])


__all__ = ["EXTENDABLE", "Components", "blas_backend", "blas_choice", "build", "data_notes",
           "one_chain_if_unset", "restore_streams", "resume_config", "stack_slots", "unstack_slots",
           "warm_up_plan"]
