"""A new run's replicas: drawn, minimised and burnt in (Baldock & Marzari 2019, Sec. 3.3.2),
in groups whose results are kept in ``initialisation.h5`` so that an interrupted
initialisation continues where it stopped (``thermonet resume``), with the same result.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from thermonet import config as cfgmod
from thermonet import interrupt, parallel
from thermonet.errors import CheckpointMismatchError
from thermonet.io import checkpoint as ckpt
from thermonet.io import rundir
from thermonet.io.initialisation import (
    INITIALISATION,
    PartialInitialisation,
    read_partial,
    write_partial,
)
from thermonet.io.lock import DirLock
from thermonet.io.outputs import check_output_dir
from thermonet.runner.components import (
    EXTENDABLE,
    Components,
    one_chain_if_unset,
    stack_slots,
    unstack_slots,
)
from thermonet.tempering import REState, Streams

log = logging.getLogger("thermonet.run")

#: the finished replicas are saved at most this often (seconds) while a run initialises
SAVE_EVERY_S = 30.0
#: replicas per group, per worker: larger groups share the work out better, smaller ones lose
#: less to an interruption
GROUP_PER_WORKER = 4


def initial_state(components: Components, streams: Streams, *, run_dir: Path | None = None,
                  world: parallel.World = parallel.LOCAL,
                  partial: PartialInitialisation | None = None) -> REState:
    """The replicas after the initialisation: minimised (or read from ``[init] params``) and
    burnt in. With ``run_dir``, the finished replicas are saved to its ``initialisation.h5``
    (by ``world``'s root) at most every :data:`SAVE_EVERY_S` seconds; ``partial``: the
    replicas an earlier attempt finished, which are not run again."""
    cfg = components.cfg
    engine = components.engine
    init = cfg["init"]
    if init["params"]:
        from thermonet.params import load_params

        theta = load_params(init["params"], components.arch.n_params,
                            index=init["params_index"])
        state = engine.init(theta)
        slots = tuple(engine.samplers[k].adapt(state.slots[k], streams.slots[k], factor=0.1)
                      for k in range(engine.n_slots))
        return REState(slots, state.replica_k)
    done = restore_partial(partial, engine, streams) if partial is not None else {}
    if done:
        log.info("%d of %d replica(s) were initialised before the interruption; "
                 "initialising the other %d", len(done), engine.n_slots,
                 engine.n_slots - len(done))
    before = partial.seconds if partial is not None else 0.0
    t0 = last = time.monotonic()

    def save(finished: dict[int, Any]) -> None:
        nonlocal last
        now = time.monotonic()
        # every rank must take the same branch: on_root is collective under MPI
        if run_dir is None or not any(world.allgather(now - last >= SAVE_EVERY_S)):
            return
        log.info("initialised %d of %d replica(s) in %.0f s; saved to %s", len(finished),
                 engine.n_slots, before + now - t0, INITIALISATION)
        order = sorted(finished)
        part = PartialInitialisation(
            config_toml=cfg.to_toml(), n_slots=engine.n_slots,
            done=np.asarray(order, dtype=np.int64),
            slots=stack_slots(tuple(finished[k] for k in order)),
            rng_states=[dict(streams.slots[k].bit_generator.state) for k in order],
            seconds=before + now - t0)
        world.on_root(lambda: save_partial(run_dir, part))
        last = time.monotonic()

    minimiser = components.minimiser if init["minimise"] else None
    return engine.burn_in(components.arch.initial_draw, streams, minimiser=minimiser,
                          blocks=tuple(init["burn_in"]), done=done, save=save,
                          group=GROUP_PER_WORKER * max(int(engine.executor.n_workers), 1))


def save_partial(run_dir: Path, part: PartialInitialisation) -> None:
    """Write ``initialisation.h5``, an OSError becoming the one-line storage error."""
    try:
        write_partial(run_dir, part)
    except OSError as err:
        raise rundir.write_error(err, Path(run_dir) / INITIALISATION, Path(run_dir),
                                 None) from None


def restore_partial(partial: PartialInitialisation, engine: Any, streams: Streams
                    ) -> dict[int, Any]:
    """The finished slots of ``partial`` by index, their streams set to the states saved with
    them."""
    if partial.n_slots != engine.n_slots:
        raise CheckpointMismatchError(f"{INITIALISATION} holds replicas of {partial.n_slots} "
                                      f"slots; this run has {engine.n_slots}")
    states = unstack_slots(type(engine.samplers[0]).State, partial.slots, len(partial.done))
    done = {}
    for k, state, stream in zip(partial.done.tolist(), states, partial.rng_states,
                                strict=True):
        streams.slots[k].bit_generator.state = stream
        done[int(k)] = state
    return done


def continued_config(run_dir: Path, partial: PartialInitialisation, n_iterations: int | None,
                     workers: int | None, executor: str | None) -> cfgmod.RunConfig:
    """The configuration to continue an interrupted initialisation with: ``config.toml``
    with the command-line options, which may change only what does not change the chain."""
    commandline: dict[str, Any] = {}
    for key, value in (("run.n_iterations", n_iterations), ("run.workers", workers),
                       ("run.executor", executor)):
        if value is not None:
            commandline[key] = value
    # an initialisation begun before run.chains existed ran one chain
    cfg = cfgmod.resolve(one_chain_if_unset(cfgmod.read_toml(Path(run_dir) / ckpt.CONFIG)),
                         commandline, "commandline", warn_legacy=False)
    stored = cfgmod.ResolvedConfig(one_chain_if_unset(cfgmod.parse_toml(partial.config_toml)),
                                   {})
    changed = cfgmod.diff(stored, cfg, ignore=EXTENDABLE)
    if changed:
        what = "; ".join(f"{k}: {a!r} -> {b!r}" for k, a, b in changed)
        raise CheckpointMismatchError(
            f"cannot resume {run_dir}: its config.toml differs from the configuration its "
            f"initialisation started with ({what}); restore it, or start again with "
            f"`thermonet run {Path(run_dir) / ckpt.CONFIG} --out {run_dir} --overwrite`")
    return cfg


def claim_new(run_dir: Path, cfg: cfgmod.RunConfig, overwrite: bool) -> DirLock:
    """Check that ``run_dir`` may hold a new run, create it and take its lock (everything is
    checked before anything is written)."""
    check_output_dir(run_dir)
    if run_dir.is_dir():   # before creating or locking anything in it
        rundir.check_new_run(run_dir, overwrite=True, n_iterations=0)
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = DirLock(run_dir).acquire()
    try:
        rundir.check_new_run(run_dir, overwrite=overwrite, n_iterations=cfg["run"]["n_iterations"])
    except BaseException:
        lock.release()
        raise
    return lock


def interrupted(signum: int, run_dir: Path, seconds: float) -> interrupt.RunInterrupted:
    """The error (and log line) of a stop request during the initialisation."""
    name = interrupt.signal_name(signum)
    log.info("interrupted by %s during initialisation after %.1f s", name, seconds)
    if (Path(run_dir) / INITIALISATION).exists():
        how = (f"the replicas finished are kept in {Path(run_dir) / INITIALISATION}; continue "
               f"with `thermonet resume {run_dir}`")
    else:
        how = (f"no replica was saved yet, so only that work is lost; start it again with "
               f"`thermonet run {Path(run_dir) / ckpt.CONFIG} --out {run_dir} --overwrite`")
    return interrupt.RunInterrupted(
        signum, f"stopped by {name} during the initialisation of {run_dir} after {seconds:.1f} s "
        f"(no checkpoint yet; {how})")


__all__ = ["GROUP_PER_WORKER", "SAVE_EVERY_S", "claim_new", "continued_config", "initial_state",
           "interrupted", "read_partial", "restore_partial", "save_partial"]
