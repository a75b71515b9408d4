"""Run a configuration: build every component from the registry, sample, checkpoint, resume.

Every run, single-chain or replica exchange, goes through one path: the tempering engine
(:class:`~thermonet.tempering.ReplicaExchange`) over the configured ladder of K slots (K = 1 for
a single chain) with the configured per-temperature sampler. Iteration i (1-based, counted from
the start of the run):

1. if ``adapt_every`` and ``(i - 1) % adapt_every == 0`` (i > 1): adapt every slot's dt (extra
   trajectories, not part of the chain);
2. one replica-exchange iteration (``n_trajectories`` transitions per slot, and the swaps);
3. record the iteration; every ``sample_every`` iterations also the parameters;
4. every ``checkpoint_every`` iterations and at the end: the trace segment, then the checkpoint.

The schedule depends only on the absolute iteration number and every random stream is
restored from the checkpoint, so a resumed run continues bit for bit.

Under MPI (``mpiexec -n R thermonet run``) every rank runs this loop, the engine's executor
sharing each iteration's slots among the ranks; rank 0 alone locks and writes the directory
(``world.on_root``, whose failure every rank raises), and a stop request on any rank stops all
of them after the same iteration (``world.agree``).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from thermonet import config as cfgmod
from thermonet import interrupt, parallel
from thermonet.errors import CheckpointError, CheckpointMismatchError, ConfigError
from thermonet.io import checkpoint as ckpt
from thermonet.io import rundir, trace
from thermonet.io.atomic import write_text
from thermonet.io.initialisation import remove_partial
from thermonet.io.lock import DirLock
from thermonet.runner.compile_notice import warm_kernels
from thermonet.runner.components import (
    Components,
    blas_backend,
    blas_choice,
    build,
    data_notes,
    restore_streams,
    resume_config,
    stack_slots,
    unstack_slots,
    warm_up_plan,
)
from thermonet.runner.initialisation import (
    claim_new,
    continued_config,
    initial_state,
    interrupted,
    read_partial,
)
from thermonet.runner.progress import FROZEN_WINDOW, RunProgress, rate, unit
from thermonet.runner.runlog import attach_log, detach_log
from thermonet.tempering import Ladder, REInfo, REState, Streams
from thermonet.tempering.warmup import WarmUpState

log = logging.getLogger("thermonet.run")

#: the trailing axis of each recorded field (slot or pair), as the engine's Info declares
INFO_AXES: dict[str, str] = REInfo.axes()



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
        self.lock: DirLock | None = None
        #: the iteration of the checkpoint on disk (None: not written yet)
        self.committed: int | None = None
        #: the processes advancing this run (one, or the ranks of an MPI job)
        self.world = parallel.world_of(components.engine.executor)
        #: where an unfinished warm-up stands (None: over, or none configured)
        self.warmup: WarmUpState | None = None

    @property
    def c(self) -> Components:
        """Short alias of :attr:`components`."""
        return self.components

    # construction

    @classmethod
    def create(cls, cfg: cfgmod.RunConfig, run_dir: Path, *, overwrite: bool = False,
               quiet: bool = False, partial: Any = None) -> Run:
        """Set up a new run directory, initialise the replicas and write iteration 0.

        Everything is checked before anything is written: a directory that holds a run (even
        one interrupted during initialisation) is refused unless ``overwrite``, and a file of a
        run's name that thermonet did not write is refused always. The directory stays locked
        (:class:`~thermonet.io.lock.DirLock`) until :meth:`run` returns or :meth:`close`.
        ``partial``: the replicas an interrupted initialisation of ``run_dir`` finished
        (:func:`~thermonet.io.initialisation.read_partial`), kept as they are.
        """
        run_dir = Path(run_dir)
        world = parallel.world(cfg["run"]["executor"])
        parallel.require_same_backend(world)        # before anything is written
        lock = world.on_root(lambda: DirLock(run_dir).acquire() if partial is not None
                             else claim_new(run_dir, cfg, overwrite))
        try:
            with interrupt.handling() as stop:
                return cls._initialise(cfg, run_dir, lock, stop, overwrite, world, partial)
        except BaseException:
            if lock is not None:
                lock.release()
            raise

    @classmethod
    def _initialise(cls, cfg: cfgmod.RunConfig, run_dir: Path, lock: DirLock | None,
                    stop: interrupt.StopSignals, overwrite: bool, world: parallel.World,
                    partial: Any = None) -> Run:
        def start() -> None:
            if overwrite:
                rundir.clear(run_dir)
            attach_log(run_dir)
            _write(run_dir / ckpt.CONFIG, run_dir, None, lambda: write_text(
                run_dir / ckpt.CONFIG, cfg.to_toml()))

        world.on_root(start)
        t0 = time.monotonic()
        try:
            # nothing to save yet: a signal may stop the initialisation at once
            with stop.immediate():
                components = build(cfg)
                engine = components.engine
                streams = engine.make_streams(cfg["run"]["seed"])
                log.info("initialising %d replica(s) of %s on %s", engine.n_slots,
                         components.arch.describe(), cfg["data"]["name"])
                warm_kernels(engine.samplers[0], components.arch.initial_draw(
                    np.random.default_rng(0)), components.arch.describe())
                # after the first compiles: a kernel that calls a product chooses the backend
                log.info("matrix products: %s (%s)", blas_backend() or "none",
                         blas_choice()["reason"])
                for line in data_notes(components):
                    log.info("%s", line)
                state = initial_state(components, streams, run_dir=run_dir, world=world,
                                      partial=partial)
                t0 -= partial.seconds if partial is not None else 0.0
                counters: dict[str, Any] = {"init_s": time.monotonic() - t0}
        except interrupt.RunInterrupted as err:
            raise interrupted(err.signum, run_dir, time.monotonic() - t0) from None
        signum = world.agree(stop.signum)
        if signum is not None:   # a KeyboardInterrupt swallowed inside a library
            raise parallel.mark_collective(
                interrupted(signum, run_dir, time.monotonic() - t0))
        counters["elapsed_s"] = time.monotonic() - t0
        run = cls(run_dir, components, state, streams, 0, str(uuid.uuid4()), counters)
        run.lock = lock
        warm = warm_up_plan(components).start()
        # the warm-up runs in run(), checkpointed: from here on nothing done is lost
        run.warmup = None if warm.finished else warm
        run.write_checkpoint()
        world.on_root(lambda: remove_partial(run_dir))   # the checkpoint holds it all now
        return run

    @classmethod
    def open(cls, run_dir: Path, *, n_iterations: int | None = None,
             workers: int | None = None, executor: str | None = None) -> Run:
        """Reopen a run directory at its last checkpoint (trimming anything after it).

        Everything is checked first (configuration, ladder, iterations, the trace's run ids,
        the stored energies); only then are config.toml rewritten (if the run is extended) and
        the records after the checkpoint removed. The directory stays locked until :meth:`run`
        returns or :meth:`close`. ``workers`` and ``executor`` may differ from the run's: they
        never change the result.
        """
        run_dir = Path(run_dir)
        if not (run_dir / ckpt.CHECKPOINT).exists():
            partial = read_partial(run_dir)
            if partial is not None and rundir.config_owner(run_dir / ckpt.CONFIG) == "thermonet":
                return cls.create(continued_config(run_dir, partial, n_iterations, workers,
                                                   executor), run_dir, partial=partial)
            message = rundir.interrupted_initialisation(run_dir)
            if message:
                raise CheckpointError(message)
            ckpt.read_checkpoint(run_dir)     # the one-line "no checkpoint" error
        world = parallel.world(executor or "auto")
        lock = world.on_root(lambda: DirLock(run_dir).acquire())
        try:
            run, rewrite = cls._reopen(run_dir, n_iterations, workers, executor)
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        run.lock = lock
        world.barrier()    # every rank has read the checkpoint before rank 0 trims the trace

        def tidy() -> None:
            if rewrite:
                write_text(run_dir / ckpt.CONFIG, run.components.cfg.to_toml())
            trace.trim(run_dir, run.iteration)
            rundir.remove_legacy_temps(run_dir)
            remove_partial(run_dir)     # left if a kill came right after the first checkpoint
            attach_log(run_dir)

        world.on_root(tidy)
        return run

    @classmethod
    def _reopen(cls, run_dir: Path, n_iterations: int | None, workers: int | None,
                executor: str | None) -> tuple[Run, bool]:
        ck = ckpt.read_checkpoint(run_dir)
        cfg, rewrite = resume_config(run_dir, ck, n_iterations, workers, executor)
        adapted = bool(cfg["ladder"]["adapt_rounds"])
        same_ends = (len(ck.temperatures) == cfg.ladder.n_temperatures
                     and ck.temperatures[0] == cfg.ladder.temperature_k[0]
                     and ck.temperatures[-1] == cfg.ladder.temperature_k[-1])
        if not same_ends or not (adapted or np.array_equal(ck.temperatures,
                                                           cfg.ladder.temperature_k)):
            raise CheckpointMismatchError(f"cannot resume {run_dir}: the ladder changed")
        if cfg["run"]["n_iterations"] < ck.iteration:
            raise ConfigError(f"--iterations {cfg['run']['n_iterations']} is below the "
                              f"{ck.iteration} iterations already done; expected a total of at "
                              f"least {ck.iteration}; nothing was changed")
        rundir.check_segments(run_dir, ck.run_uuid)
        # an adapted ladder was frozen at the end of the warm-up: the checkpoint holds it
        components = build(cfg, Ladder(ck.temperatures) if adapted else None)
        engine = components.engine
        if ck.masses_k is not None:          # per-rung masses frozen at the end of the warm-up
            engine.set_masses(list(ck.masses_k))
        if "local_budget" in ck.counters:    # trajectories per rung frozen in the warm-up
            engine.set_trajectories(ck.counters["local_budget"]["trajectories"])
        streams = engine.make_streams(cfg["run"]["seed"])
        restore_streams(streams, ck.rng_states)
        slots = unstack_slots(type(engine.samplers[0]).State, ck.slots, engine.n_slots)
        warm_kernels(engine.samplers[0], slots[0].theta, components.arch.describe())
        # the data or architecture must give the stored energies back exactly
        for k, slot in enumerate(slots):
            energy = engine.samplers[k].state_energy(slot)
            tolerance = 1e-9 * max(1.0, abs(slot.energy))
            if not (energy == slot.energy or abs(energy - slot.energy) <= tolerance):
                raise CheckpointMismatchError(
                    f"cannot resume {run_dir}: E(theta) of slot {k} is {energy:.10g} now but "
                    f"{slot.energy:.10g} in the checkpoint; the data set or architecture "
                    "changed. Start a new run with --out")
        now = blas_backend()
        parallel.require_same_backend(parallel.world_of(engine.executor))
        if ck.blas_backend and now and ck.blas_backend != now:
            log.warning("the checkpoint was written with BLAS backend %r and this process uses "
                        "%r: the continuation is statistically equivalent but will not repeat "
                        "an uninterrupted run bit for bit (`thermonet resume` keeps the "
                        "checkpoint's backend unless THERMONET_BLAS is set; set "
                        "THERMONET_BLAS=%s to match)",
                        ck.blas_backend, now, ck.blas_backend)
        state = REState(slots, np.asarray(ck.replica_k, dtype=np.int64))
        run = cls(run_dir, components, state, streams, ck.iteration, ck.run_uuid, ck.counters,
                  ck.created_utc)
        run.committed = ck.iteration
        if "warmup" in ck.counters:
            records = [*ck.counters.get("ladder_rounds", []),
                       *ck.counters.get("step_size_retune", []),
                       *([ck.counters["local_budget"]] if "local_budget" in ck.counters
                         else [])]
            run.warmup = WarmUpState.restore(ck.counters["warmup"], records, ck.warmup)
        return run, rewrite

    def close(self) -> None:
        """Release the run directory's lock (:meth:`run` does on return)."""
        if self.lock is not None:
            self.lock.release()

    # advancing

    def write_checkpoint(self) -> None:
        """Write the checkpoint of the current iteration (atomically)."""
        cfg = self.components.cfg
        warm = self.warmup
        if warm is None:
            self.counters.pop("warmup", None)
        else:
            self.counters["warmup"] = warm.position()
        ck = ckpt.Checkpoint(
            iteration=self.iteration, run_uuid=self.run_uuid, config_toml=cfg.to_toml(),
            config_sources=cfg.sources, plugins=self.components.plugins,
            rng_states=[dict(generator.bit_generator.state)
                        for generator in self.streams.all()],
            slots=stack_slots(self.state.slots), replica_k=self.state.replica_k,
            temperatures=self.components.engine.ladder.temperature_k, counters=self.counters,
            created_utc=self.created, blas_backend=blas_backend(), blas_choice=blas_choice(),
            masses_k=(None if self.components.engine.masses_k is None
                      else np.stack(self.components.engine.masses_k)),
            warmup=None if warm is None else dict(warm.sums))
        self.world.on_root(lambda: _write(self.dir / ckpt.CHECKPOINT, self.dir, self.committed,
                                          lambda: ckpt.write_checkpoint(self.dir, ck)))
        self.committed = self.iteration

    def _recorded_fields(self) -> tuple[str, ...]:
        """The sampler's state fields recorded at every iteration (``Sampler.recorded_fields``)."""
        return tuple(getattr(self.components.engine.sampler_cls, "recorded_fields", ()))

    def _state_axes(self) -> dict[str, str]:
        return {f"{name}_k": "slot,value" for name in self._recorded_fields()}

    def _commit(self, rows: dict[str, list[Any]], samples: list[tuple[int, np.ndarray]]) -> None:
        """Write the records since the last checkpoint as a segment, then the checkpoint."""
        if rows.get("iteration"):
            segment = trace.segment_name(rows["iteration"][0], rows["iteration"][-1])
            axes = {**INFO_AXES, **self._state_axes()}
            self.world.on_root(lambda: _write(
                self.dir / trace.TRACE_DIR / segment, self.dir, self.committed,
                lambda: trace.write_segment(self.dir, self.run_uuid, rows, samples,
                                            axes=axes)))
        self.write_checkpoint()

    def run(self, progress: Callable[[RunProgress], None] | None = None, *,
            quiet: bool = False) -> Run:
        """Advance to ``run.n_iterations`` total iterations.

        SIGINT and SIGTERM stop the run at the next safe point: the current iteration is
        finished and checkpointed, then :class:`~thermonet.interrupt.RunInterrupted` is raised.
        The run directory's lock is released on return.

        Parameters
        ----------
        progress : callable, optional
            Called with a :class:`RunProgress` after every iteration (the command line shows
            it; see :class:`thermonet.cli.options.RunProgress`).
        quiet : bool
            Ignored (progress is shown only through ``progress``).
        """
        from thermonet.kernels import threads

        if self.lock is None and self.world.is_root:
            self.lock = DirLock(self.dir)
        if self.lock is not None:
            self.lock.acquire()
        try:
            with threads.blas_single(), interrupt.handling() as stop:
                return self._run(progress if self.world.is_root else None, stop)
        finally:
            if self.lock is not None:
                self.lock.release()

    def _run(self, progress: Callable[[RunProgress], None] | None,
             stop: interrupt.StopSignals) -> Run:
        settings = self.components.cfg["run"]
        engine = self.components.engine
        if self.warmup is not None:
            self._warm_up(stop)
        total = settings["n_iterations"]
        start = self.iteration
        rows: dict[str, list[Any]] = {}
        samples: list[tuple[int, np.ndarray]] = []
        t_last = time.monotonic()
        n_accepted = n_transitions = n_swaps_accepted = n_swaps_attempted = 0
        # recent acceptances per slot, for a loud flag on a rung that has stopped moving (a
        # prior rung draws exactly and always accepts, so it never shows)
        recent = np.zeros((FROZEN_WINDOW, engine.n_slots), dtype=np.int64)
        sampled = np.isfinite(engine.ladder.temperature_k)
        world = self.world
        recorded = self._recorded_fields()
        while self.iteration < total:
            signum = world.agree(stop.signum)
            if signum is not None:    # arrived after this iteration's commit point
                if rows:
                    t_last = self._add_elapsed(t_last)
                    self._commit(rows, samples)
                self._stop(signum, total)
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
            for name in recorded:
                rows.setdefault(f"{name}_k", []).append(
                    np.stack([np.asarray(getattr(s, name)) for s in self.state.slots]))
            if settings["sample_every"] and i % settings["sample_every"] == 0:
                samples.append((i, np.stack([s.theta for s in self.state.slots])))
            n_accepted += int(info.n_accepted_k.sum())
            n_transitions += int(engine.n_trajectories_k.sum())
            n_swaps_accepted += int(info.swap_accepted_k.sum())
            n_swaps_attempted += int(info.swap_attempted_k.sum())
            # a stop request commits the iterations done so far: the schedule depends only on
            # the absolute iteration, so a checkpoint off the usual grid resumes identically
            if (i % settings["checkpoint_every"] == 0 or i == total
                    or world.agree(stop.signum) is not None):
                t_last = self._add_elapsed(t_last)
                self._commit(rows, samples)
                rows, samples = {}, []
            recent[(i - start - 1) % FROZEN_WINDOW] = info.n_accepted_k
            if progress is not None:
                frozen: tuple[int, ...] = ()
                if i - start >= FROZEN_WINDOW:
                    frozen = tuple(int(k) for k in np.flatnonzero(
                        (recent.sum(axis=0) == 0) & sampled))
                progress(RunProgress(i, total, start, n_accepted / max(n_transitions, 1),
                                     rate(n_swaps_accepted, n_swaps_attempted),
                                     float(info.energy_k[0]), frozen,
                                     unit(settings.get("chains"))))
        log.info("run finished at iteration %d", self.iteration)
        return self

    def _warm_up(self, stop: interrupt.StopSignals) -> None:
        """Finish the warm-up, checkpointing at every phase boundary and every
        ``checkpoint_every`` iterations; a stop request ends it at the next checkpoint."""
        assert self.warmup is not None
        warm = warm_up_plan(self.components)
        if self.warmup.stage == "ladder" and self.warmup.round == 0 and not self.warmup.done:
            log.info("adapting the ladder: %d rounds from %d iterations", warm.rounds,
                     warm.first_length)
        t_last = time.monotonic()

        def save(state: REState, position: WarmUpState) -> None:
            nonlocal t_last
            self.state = state
            self.warmup = None if position.finished else position
            self.counters.update(position.counters())
            t_last = self._add_elapsed(t_last)
            self.write_checkpoint()

        self.state, position = warm.run(self.state, self.streams, self.warmup,
                                        every=self.components.cfg["run"]["checkpoint_every"],
                                        save=save, stop=lambda: stop.requested)
        if not position.finished:
            assert stop.signum is not None
            name = interrupt.signal_name(stop.signum)
            where = position.where(warm.rounds)
            log.info("stopped by %s during the warm-up (%s)", name, where)
            raise interrupt.RunInterrupted(
                stop.signum, f"stopped by {name} during the warm-up ({where}); the checkpoint "
                f"{self.dir / ckpt.CHECKPOINT} is complete; continue with `thermonet resume "
                f"{self.dir}`")
        for line in position.summary():
            log.info("%s", line)

    def _add_elapsed(self, since: float) -> float:
        now = time.monotonic()
        self.counters["elapsed_s"] = self.counters.get("elapsed_s", 0.0) + now - since
        return now

    def _stop(self, signum: int, total: int) -> None:
        name = interrupt.signal_name(signum)
        log.info("stopped by %s at iteration %d", name, self.iteration)
        raise parallel.mark_collective(interrupt.RunInterrupted(
            signum, f"stopped by {name} at iteration {self.iteration} of {total}; the "
            f"checkpoint {self.dir / ckpt.CHECKPOINT} is complete; continue with `thermonet "
            f"resume {self.dir}`"))

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

def _write(path: Path, run_dir: Path, committed: int | None, write: Callable[[], Any]) -> None:
    """Run ``write`` (which writes ``path``), turning an OSError into a one-line error that says
    what is kept (the checkpoint of iteration ``committed``) and how to go on."""
    try:
        write()
    except OSError as err:
        raise rundir.write_error(err, path, run_dir, committed) from None


__all__ = ["Run", "run"]
