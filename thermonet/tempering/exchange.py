"""Replica exchange over a temperature ladder: the paper's Algorithm 2, and the engine of every
run (a single chain is a one-rung ladder).

Each iteration runs ``n_trajectories`` transitions of a per-temperature sampler at every slot
and attempts exchanges of configurations between adjacent slots with probability
``min(1, exp((beta_j - beta_{j+1}) (E_j - E_{j+1})))``; which pairs, and whether before or after
the transitions, is the swap scheme's choice (:mod:`thermonet.tempering.swaps`).

Random streams: slot k draws only from ``streams.slots[k]``, the swaps only from
``streams.swap``. The streams are spawned from one seed (:func:`make_streams`) and the slots'
work is independent within an iteration, so the result is bitwise the same for any executor and
any number of workers. Each slot's stream comes back with the slot's result
(:meth:`ReplicaExchange._map_slots`), so an executor may run a slot in another process (MPI)
and every process still holds every stream as a one-process run would.

Independent chains of a one-rung run (``chains``) are slots at the one temperature that never
swap: slot c draws only from ``streams.slots[c]``, so chain 0 is the one-chain run.

This module takes the sampler class from its caller (the runner gets it from the registry), so
it depends on no concrete plugin.

References
----------
Baldock & Marzari, arXiv:1904.04154, Alg. 2, Sec. 3.3.2 (initialisation) and Table 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, NamedTuple

import numpy as np

from thermonet.api import as_theta
from thermonet.errors import ConfigError
from thermonet.parallel import Executor, make_executor
from thermonet.tempering.ladder import Ladder, trajectories_per_rung
from thermonet.tempering.prior_rung import PriorRung
from thermonet.tempering.start import check_energy, check_in_box
from thermonet.tempering.swaps import RandomPairs, swap_log_acceptance
from thermonet.types import FloatArray, IntArray


class Streams(NamedTuple):
    """The random streams of a replica-exchange run: one per slot and one for the swaps."""

    slots: tuple[np.random.Generator, ...]   #: (K,) slot k's generator
    swap: np.random.Generator                #: the swap scheme's generator

    def all(self) -> list[np.random.Generator]:
        """Every generator in checkpoint order: the slots, then the swap stream."""
        return [*self.slots, self.swap]


def make_streams(seed: Any, n_slots: int) -> Streams:
    """K + 1 independent generators spawned from one seed (slots first, then the swaps)."""
    seq = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    gens = [np.random.Generator(np.random.PCG64(s)) for s in seq.spawn(n_slots + 1)]
    return Streams(tuple(gens[:n_slots]), gens[n_slots])


class REState(NamedTuple):
    """State of a replica-exchange run; slot k is temperature k (ascending)."""

    slots: tuple[Any, ...]   #: the per-temperature sampler's state at each slot
    replica_k: IntArray      #: (K,) which replica (walker id) sits at slot k


class REInfo(NamedTuple):
    """Diagnostics of one replica-exchange iteration (:meth:`axes` names each field's axis
    for the trace)."""

    energy_k: FloatArray          #: (K,) E at each slot after the iteration
    n_accepted_k: IntArray        #: (K,) accepted transitions this iteration
    n_divergent_k: IntArray       #: (K,) divergent transitions this iteration
    step_size_k: FloatArray       #: (K,)
    swap_attempted_k: IntArray    #: (K-1,) attempts on pair (k, k+1)
    swap_accepted_k: IntArray     #: (K-1,) accepted exchanges on pair (k, k+1)
    replica_k: IntArray           #: (K,) replica at each slot after the iteration
    #: (K,) the energy the temperature divides at each slot (``Sampler.swap_energy``): equal
    #: to ``energy_k`` unless the target has untempered terms (a regression network's prior),
    #: and what the free energies along the ladder are computed from
    swap_energy_k: FloatArray

    @classmethod
    def axes(cls) -> dict[str, str]:
        """The trailing axis of each field: ``slot`` (K values) or ``pair`` (K - 1)."""
        return {"energy_k": "slot", "n_accepted_k": "slot", "n_divergent_k": "slot",
                "step_size_k": "slot", "swap_attempted_k": "pair", "swap_accepted_k": "pair",
                "replica_k": "slot", "swap_energy_k": "slot"}


class ReplicaExchange:
    """Replica exchange over ``ladder`` with one ``sampler_cls`` sampler at each slot.

    Parameters
    ----------
    sampler_cls : type
        A sampler class (the :class:`thermonet.api.Sampler` contract); one instance per slot.
        Or a callable with the class's signature that builds one (a variational leg's
        :class:`~thermonet.tempering.reference.ReferencePath`).
    potential : thermonet.api.Potential
        The untempered energy E(w); slot k > 0 works on ``potential.copy()`` (own scratch).
    ladder : Ladder
        The temperatures, slot k at ``ladder.temperature_k[k]``.
    prior : BoxPrior, optional
    masses : ndarray of float64, shape (n_params,), optional
    sampler_config : the sampler's ``Config``, optional
        Used as given by every slot (built once by the caller; None: the sampler's defaults).
    n_trajectories : int
        Transitions per slot per iteration (N_traj of Table 1).
    band, band_trajectories : (float, float) and int, optional
        ``band_trajectories`` transitions instead at the rungs with T in ``band`` (see
        :func:`~thermonet.tempering.ladder.trajectories_per_rung`; exact for any counts).
    swap : swap scheme, optional
        See :mod:`thermonet.tempering.swaps` (default: :class:`RandomPairs` with K attempts).
    executor : Executor, optional
        Runs the slots of an iteration (default: ``workers`` threads). Never changes the result.
    workers : int
        Threads when no executor is given.
    chains : int
        Independent chains of a one-rung ladder: slot c is chain c, every slot at the one
        temperature, each with its own stream and no swaps (more than one on a ladder of
        several rungs is refused). Chain 0 is the one-chain run (its stream is the first).
    """

    State: ClassVar[type] = REState
    Info: ClassVar[type] = REInfo

    def __init__(self, sampler_cls: type | Callable[..., Any], potential: Any, ladder: Ladder,
                 *, prior: Any = None, masses: Any = None, sampler_config: Any = None,
                 n_trajectories: int = 1,
                 band: Sequence[float] = (), band_trajectories: int = 0,
                 swap: Any = None, executor: Executor | None = None, workers: int = 1,
                 chains: int = 1) -> None:
        if not isinstance(ladder, Ladder):
            raise TypeError(f"ladder must be a thermonet.tempering.Ladder; got "
                            f"{type(ladder).__name__}")
        if not (isinstance(n_trajectories, (int, np.integer)) and n_trajectories >= 1):
            raise ConfigError(f"n_trajectories = {n_trajectories}; expected >= 1")
        if executor is None and workers < 1:
            raise ConfigError(f"workers = {workers}; expected >= 1")
        if not (isinstance(chains, (int, np.integer)) and chains >= 1
                and (chains == 1 or ladder.n_temperatures == 1)):
            raise ConfigError(f"chains = {chains} on a ladder of {ladder.n_temperatures} "
                              "rungs; expected 1, or any number >= 1 on one rung")
        #: independent chains at the one rung (1: a ladder's slots are its rungs)
        self.chains = int(chains)
        self.potential = potential
        self.prior = prior
        self.ladder = ladder
        self.n_trajectories = int(n_trajectories)
        if band_trajectories and not (len(band) == 2 and band[0] <= band[1]
                                      and band_trajectories >= 1):
            raise ConfigError(f"band = {list(band)}, band_trajectories = {band_trajectories}; "
                              "expected [T_low, T_high] with T_low <= T_high and >= 1")
        self.band = tuple(float(b) for b in band)
        self.band_trajectories = int(band_trajectories)
        self.swap = swap if swap is not None else RandomPairs()
        #: runs the slots of an iteration
        self.executor = executor if executor is not None else make_executor(workers)
        config = sampler_config
        config_cls = getattr(sampler_cls, "Config", None)
        if config is None and config_cls is not None:
            config = config_cls()
        self.sampler_cls = sampler_cls
        self.sampler_config = config
        self.masses_given = masses
        #: per-slot masses set by the warm-up (:meth:`set_masses`); None: ``masses`` everywhere
        self.masses_k: list[Any] | None = None
        #: per-slot transitions per iteration set by the warm-up (:meth:`set_trajectories`);
        #: None: ``n_trajectories`` and the band
        self.trajectories_k: IntArray | None = None
        self.samplers: list[Any] = []
        self._build_samplers(ladder)
        self.masses = self.samplers[0].masses

    def _build_samplers(self, ladder: Ladder) -> None:
        # one potential per slot: each owns its scratch space, so slots can run in threads;
        # a rung at T = inf is the prior itself, drawn exactly
        old = self.samplers
        samplers = []
        for k, t in enumerate(np.repeat(ladder.temperature_k, self.chains)):
            potential = old[k].potential if k < len(old) else (
                self.potential if k == 0 else self.potential.copy())
            finite = float(t) if math.isfinite(t) else 1.0
            sampler = self.sampler_cls(potential, prior=self.prior, temperature=finite,
                                       masses=(self.masses_given if self.masses_k is None
                                               else self.masses_k[k]),
                                       config=self.sampler_config)
            samplers.append(PriorRung(sampler, self.prior) if math.isinf(t) else sampler)
        self.samplers = samplers
        self.ladder = ladder

    def set_masses(self, masses_k: Sequence[Any]) -> None:
        """Give slot k the masses ``masses_k[k]`` (shape ``(n_params,)``, positive): the
        warm-up's per-rung estimate (:func:`thermonet.tempering.warmup.adapt_masses`). Each
        slot keeps its potential; the momenta are redrawn at every transition, so a state
        stays valid."""
        if len(masses_k) != self.n_slots:
            raise ConfigError(f"{len(masses_k)} mass arrays for {self.n_slots} slots")
        self.masses_k = [np.ascontiguousarray(m, dtype=np.float64) for m in masses_k]
        self._build_samplers(self.ladder)

    def set_trajectories(self, counts_k: Sequence[int] | IntArray) -> None:
        """Run ``counts_k[k]`` transitions per iteration at slot k (integers >= 1): the
        warm-up's per-rung local budget (:mod:`thermonet.tempering.local_budget`). Any fixed
        count per slot leaves each slot's distribution invariant."""
        counts = np.asarray(counts_k)
        if (counts.shape != (self.n_slots,) or not np.issubdtype(counts.dtype, np.integer)
                or np.any(counts < 1)):
            raise ConfigError(f"per-slot trajectories {counts.tolist()}; expected {self.n_slots} "
                              "integers >= 1")
        self.trajectories_k = counts.astype(np.int64)
        self._build_samplers(self.ladder)    # an engine caching per-ladder constants renews them

    def set_ladder(self, ladder: Ladder) -> None:
        """Move the rungs to ``ladder`` (same number of rungs): each slot keeps its potential
        (and scratch) and gets a sampler at its new temperature. Used by the warm-up's ladder
        adaptation; a run's production ladder is fixed."""
        if ladder.n_temperatures != self.ladder.n_temperatures:
            raise ConfigError(f"the new ladder has {ladder.n_temperatures} rungs; this engine "
                              f"has {self.ladder.n_temperatures}")
        self._build_samplers(ladder)

    @property
    def n_slots(self) -> int:
        """K, the number of slots (ladder rungs, or the chains of a one-rung ladder)."""
        return len(self.samplers)

    @property
    def slot_temperature_k(self) -> FloatArray:
        """The temperature of each slot (the rungs; a one-rung ladder's once per chain)."""
        return np.repeat(self.ladder.temperature_k, self.chains)

    @property
    def n_trajectories_k(self) -> IntArray:
        """Transitions per iteration at each slot of the current ladder."""
        if self.trajectories_k is not None:
            return self.trajectories_k.copy()
        return trajectories_per_rung(self.slot_temperature_k, self.n_trajectories,
                                     self.band, self.band_trajectories)

    @property
    def temperatures(self) -> FloatArray:
        """The ladder's temperatures (``ladder.temperature_k``)."""
        return self.ladder.temperature_k

    @property
    def beta_k(self) -> FloatArray:
        """The ladder's inverse temperatures (``ladder.beta_k``)."""
        return self.ladder.beta_k

    def make_streams(self, seed: Any) -> Streams:
        """The K + 1 streams of this ladder from one seed (see :func:`make_streams`)."""
        return make_streams(seed, self.n_slots)

    # -- starting points -------------------------------------------------------------------

    def init(self, theta0: Any) -> REState:
        """``theta0``: one vector for every slot, or an array of shape (K, n_params)."""
        arr = np.asarray(theta0, dtype=np.float64)
        n = self.potential.n_params
        if arr.ndim == 1:
            arr = np.broadcast_to(arr, (self.n_slots, n))
        if arr.shape != (self.n_slots, n):
            raise ConfigError(f"initial parameters have shape {arr.shape}; expected ({n},) or "
                              f"({self.n_slots}, {n})")
        thetas = [as_theta(arr[k], n) for k in range(self.n_slots)]
        for k, theta in enumerate(thetas):
            check_in_box(theta, self.prior, f"the initial parameters of slot {k}")
        check_energy(self.samplers[0].potential, thetas[0], "the initial parameters")
        slots = tuple(s.init(thetas[k]) for k, s in enumerate(self.samplers))
        return REState(slots, np.arange(self.n_slots, dtype=np.int64))

    def burn_in(self, draw: Callable[[np.random.Generator], Any], streams: Streams, *,
                minimiser: Any = None, blocks: Sequence[int] = (20, 80),
                done: Mapping[int, Any] | None = None, group: int = 0,
                save: Callable[[dict[int, Any]], None] | None = None) -> REState:
        """Initialise every slot as the paper does (Sec. 3.3.2).

        Per slot:

        1. draw w with ``draw(rng)`` (the standard initialisation U(±1/sqrt(k_i))) from the
           slot's own stream;
        2. minimise it with ``minimiser`` (Alg. 3), if given;
        3. burn in: for each count n in ``blocks``, adapt dt coarsely (factor 0.1), then run n
           transitions at the slot's temperature.

        Finally every slot's dt is adapted once more (factor 0.1), as the paper's code does.
        Slots run in parallel on the executor; the result does not depend on it.

        To make the initialisation resumable, slots may run in groups of ``group`` (0: all at
        once); after each group but the last, ``save`` receives every finished slot's state by
        index (the slots' streams then hold their states after the initialisation). ``done``:
        slots already finished (their streams set by the caller), which are not run again.
        Neither changes the result: each slot draws only from its own stream.
        """
        n = self.potential.n_params
        rngs = _slot_streams(streams, self.n_slots)

        def run(k: int) -> Any:
            rng = rngs[k]
            sampler = self.samplers[k]
            if isinstance(sampler, PriorRung):
                return sampler.draw(rng)
            theta = as_theta(draw(rng), n, what="initial draw")
            check_in_box(theta, self.prior, f"the initial draw of slot {k}")
            check_energy(sampler.potential, theta, f"the initial draw of slot {k}")
            if minimiser is not None:
                theta = minimiser.minimise(sampler.potential, theta, prior=self.prior).theta
            state = sampler.init(theta)
            for n_steps in blocks:
                state = sampler.adapt(state, rng, factor=0.1)
                for _ in range(int(n_steps)):
                    state, _ = sampler.step(state, rng)
            return sampler.adapt(state, rng, factor=0.1)

        finished = dict(done or {})
        todo = [k for k in range(self.n_slots) if k not in finished]
        size = group if group > 0 else max(len(todo), 1)
        for start in range(0, len(todo), size):
            part = todo[start:start + size]
            finished.update(zip(part, self._map_slots(run, rngs, part), strict=True))
            if save is not None and len(finished) < self.n_slots:
                save(finished)
        slots = tuple(finished[k] for k in range(self.n_slots))
        return REState(slots, np.arange(self.n_slots, dtype=np.int64))

    def initialise(self, draw: Callable[[np.random.Generator], Any], streams: Streams, *,
                   minimiser: Any = None, burn_in: Sequence[int] = (20, 80)) -> REState:
        """Alias of :meth:`burn_in` (``burn_in`` there is ``blocks`` here)."""
        return self.burn_in(draw, streams, minimiser=minimiser, blocks=burn_in)

    # -- one iteration ---------------------------------------------------------------------

    def _propagate(self, slots: Sequence[Any], rngs: Sequence[np.random.Generator]
                   ) -> tuple[list[Any], IntArray, IntArray]:
        n_traj = self.n_trajectories_k

        def run(k: int) -> tuple[Any, int, int]:
            state, n_accepted, n_divergent = slots[k], 0, 0
            for _ in range(int(n_traj[k])):
                state, info = self.samplers[k].step(state, rngs[k])
                n_accepted += bool(info.is_accepted)
                n_divergent += bool(getattr(info, "is_divergent", False))
            return state, n_accepted, n_divergent

        results = self._map_slots(run, rngs)
        return ([r[0] for r in results], np.array([r[1] for r in results], dtype=np.int64),
                np.array([r[2] for r in results], dtype=np.int64))

    def _try_swap(self, slots: list[Any], replica_k: IntArray, j: int,
                  rng: np.random.Generator) -> bool:
        """Attempt to exchange the configurations of slots j and j+1 (Alg. 2)."""
        beta = self.ladder.beta_k
        low, high = self.samplers[j], self.samplers[j + 1]
        # the tempered part of each slot's energy (all of it, except with hyperparameters)
        log_a = swap_log_acceptance(beta[j], beta[j + 1], low.swap_energy(slots[j]),
                                    high.swap_energy(slots[j + 1]))
        log_u = math.log(rng.random())
        if not (log_u < log_a):
            return False
        t = self.ladder.temperature_k
        new_j = low.take_configuration(slots[j], slots[j + 1], float(t[j + 1]))
        new_k = high.take_configuration(slots[j + 1], slots[j], float(t[j]))
        slots[j], slots[j + 1] = new_j, new_k
        replica_k[j], replica_k[j + 1] = replica_k[j + 1], replica_k[j]
        return True

    def _swaps(self, slots: list[Any], replica_k: IntArray, rng: np.random.Generator,
               iteration: int | None) -> tuple[IntArray, IntArray]:
        n_pairs = self.ladder.n_temperatures - 1     # independent chains never swap
        attempted = np.zeros(max(n_pairs, 0), dtype=np.int64)
        accepted = np.zeros(max(n_pairs, 0), dtype=np.int64)
        if n_pairs < 1:
            return attempted, accepted
        for j in self.swap.pairs(n_pairs, rng, iteration):
            attempted[j] += 1
            accepted[j] += self._try_swap(slots, replica_k, int(j), rng)
        return attempted, accepted

    def step(self, state: REState, streams: Streams, *, iteration: int | None = None
             ) -> tuple[REState, REInfo]:
        """One iteration of Algorithm 2: transitions at every slot and the scheme's swaps.

        ``iteration`` (1, 2, ...) is needed by schemes that alternate deterministically
        (``deo``); the runner and :func:`thermonet.sample` pass it.
        """
        rngs = _slot_streams(streams, self.n_slots)
        swap_rng = streams.swap if isinstance(streams, Streams) else streams[self.n_slots]
        replica_k = state.replica_k.copy()
        if self.swap.before_propagation:
            slots = list(state.slots)
            attempted, accepted = self._swaps(slots, replica_k, swap_rng, iteration)
            slots, n_acc, n_div = self._propagate(slots, rngs)
        else:
            slots, n_acc, n_div = self._propagate(state.slots, rngs)
            attempted, accepted = self._swaps(slots, replica_k, swap_rng, iteration)
        info = REInfo(np.array([s.energy for s in slots]), n_acc, n_div,
                      np.array([s.step_size for s in slots]), attempted, accepted,
                      replica_k.copy(),
                      np.array([self.samplers[k].swap_energy(s) for k, s in enumerate(slots)]))
        return REState(tuple(slots), replica_k), info

    def adapt(self, state: REState, streams: Streams, factor: float = 0.9,
              **options: Any) -> REState:
        """Adapt every slot's step size (in parallel over slots, own stream each)."""
        rngs = _slot_streams(streams, self.n_slots)

        def run(k: int) -> Any:
            return self.samplers[k].adapt(state.slots[k], rngs[k], factor=factor, **options)

        return state._replace(slots=tuple(self._map_slots(run, rngs)))

    def correct_step_sizes(self, state: REState,
                           measured_k: Sequence[Sequence[tuple[float, float, float]]]
                           ) -> REState:
        """Every sampled slot's step size corrected from its measurements ``measured_k[k]``
        (``(step size, acceptance rate, transitions)`` per round, oldest first;
        :meth:`thermonet.api.Sampler.correct_step_size`); a prior rung has none. No
        randomness."""
        slots = tuple(s if isinstance(self.samplers[k], PriorRung)
                      else self.samplers[k].correct_step_size(s, measured_k[k])
                      for k, s in enumerate(state.slots))
        return state._replace(slots=slots)

    def _map_slots(self, fn: Callable[[int], Any], rngs: Sequence[np.random.Generator],
                   ks: Sequence[int] | None = None) -> list[Any]:
        """``[fn(k) for k in ks]`` (default: every slot) on the executor, where ``fn(k)`` draws
        only from ``rngs[k]``. Each stream's state travels back with its slot's result and is
        set here, so after the call this process holds every advanced stream even if another
        process ran the slot (a no-op for threads)."""
        def run(k: int) -> tuple[Any, Any]:
            return fn(k), rngs[k].bit_generator.state

        ks = range(self.n_slots) if ks is None else ks
        out = self.executor.map(run, ks)
        for k, (_, stream) in zip(ks, out, strict=True):
            rngs[k].bit_generator.state = stream
        return [result for result, _ in out]


    def adapt_transitions(self) -> int:
        """Transitions per slot of :meth:`adapt` that :meth:`adapt_part` can split (every
        sampled slot's :meth:`~thermonet.api.Sampler.adapt_transitions`, if they agree);
        0: :meth:`adapt` is one unit."""
        counts = {int(s.adapt_transitions()) for s in self.samplers
                  if not isinstance(s, PriorRung)}
        return counts.pop() if len(counts) == 1 else 0

    def adapt_part(self, state: REState, streams: Streams, start: int, stop: int,
                   carry_k: FloatArray | None) -> tuple[REState, FloatArray]:
        """Transitions ``start .. stop - 1`` of :meth:`adapt` at every slot (in parallel, own
        stream each). ``carry_k`` (K, m): what the part before returned (None at 0); the
        rows of slots without a carry (a prior rung) are NaN."""
        rngs = _slot_streams(streams, self.n_slots)

        def run(k: int) -> tuple[Any, Any]:
            sampler = self.samplers[k]
            if isinstance(sampler, PriorRung):
                return state.slots[k], None
            carry = None if carry_k is None else carry_k[k]
            return sampler.adapt_part(state.slots[k], rngs[k], start, stop, carry)

        results = self._map_slots(run, rngs)
        width = max((len(c) for _, c in results if c is not None), default=0)
        out = np.full((self.n_slots, width), np.nan)
        for k, (_, c) in enumerate(results):
            if c is not None:
                out[k] = c
        return state._replace(slots=tuple(r[0] for r in results)), out


def _slot_streams(streams: Any, n_slots: int) -> Sequence[np.random.Generator]:
    """The per-slot generators of ``streams``: a :class:`Streams`, or (for callers written
    against the older sampler-style API) a sequence of K + 1 generators."""
    if isinstance(streams, Streams):
        if len(streams.slots) != n_slots:
            raise ConfigError(f"replica exchange has {n_slots} slots; the streams have "
                              f"{len(streams.slots)}")
        return streams.slots
    if len(streams) != n_slots + 1:
        raise ConfigError(f"replica exchange needs {n_slots + 1} random streams (one per slot "
                          f"and one for swaps); got {len(streams)}")
    return streams
