"""Replica-exchange Hamiltonian Monte Carlo: the paper's Algorithm 2.

A ladder of temperatures ``T_0 < ... < T_{K-1}`` (slot k holds temperature T_k and its own
step size); each iteration runs ``n_trajectories`` transitions of an inner sampler (HMC, or any
sampler plugin) at every slot, then attempts exchanges of configurations between adjacent slots
with probability ``min(1, exp((1/T_j - 1/T_{j+1}) (E_j - E_{j+1})))``.

Random streams: slot k draws only from stream k, the swaps only from stream K. The streams are
spawned from one seed, and the slots' work is independent within an iteration, so the result is
bitwise the same for any number of workers.

References
----------
Baldock & Marzari, arXiv:1904.04154, Alg. 2 and Table 1; original-code-spec.md §6 (the even/odd
sweep before propagation of the original code).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

import numpy as np

from thermonet._types import FloatArray, IntArray
from thermonet.api import Sampler, as_theta, build_config
from thermonet.api.parallel import Executor, make_executor
from thermonet.errors import ConfigError

SWAP_SCHEMES = ("random-pairs", "even-odd")


def geometric_ladder(t_min: float, t_max: float, n: int) -> FloatArray:
    """``T_i = t_min (t_max/t_min)^(i/(n-1))``, i = 0..n-1 (original ``ith_temperature``)."""
    if n == 1:
        return np.array([float(t_min)])
    return t_min * (t_max / t_min) ** (np.arange(n) / (n - 1))


@dataclass(frozen=True)
class REHMCConfig:
    """Settings of :class:`ReplicaExchangeHMC`.

    Attributes
    ----------
    n_temperatures, t_min, t_max :
        The geometric ladder (N_T, T_min, T_max). Table 1: 112 on [1e-2, 1e2] (Figs. 2-3);
        84 on [10^-1.5, 10^1.5] (Fig. 4).
    temperatures : sequence of float, optional
        An explicit ascending ladder instead of the geometric one.
    n_trajectories : int
        N_traj, inner transitions per slot per iteration (10).
    swap_scheme : {"random-pairs", "even-odd"}
        "random-pairs" (paper Alg. 2): after propagation, ``n_swaps`` attempts on uniformly
        chosen adjacent pairs. "even-odd" (the original code): before propagation, one sweep of
        disjoint pairs starting at slot 0 or 1 with probability 1/2.
    n_swaps : int, optional
        Attempts per iteration for "random-pairs" (default: N_T).
    sampler : str
        Registry name of the inner sampler ("hmc").
    inner : mapping
        Settings of the inner sampler (e.g. ``{"n_leapfrog": 100, "wall": "reflect"}``).
    workers : int
        Threads running slots in parallel (when no executor is passed). Never changes the
        result.
    """

    n_temperatures: int = 16
    t_min: float = 1e-2
    t_max: float = 1.0
    temperatures: tuple[float, ...] | None = None
    n_trajectories: int = 10
    swap_scheme: str = "random-pairs"
    n_swaps: int | None = None
    sampler: str = "hmc"
    inner: Mapping[str, Any] = field(default_factory=dict)
    workers: int = 1

    def __post_init__(self) -> None:
        if self.temperatures is not None:
            t = np.asarray(self.temperatures, dtype=np.float64)
            if t.ndim != 1 or t.size < 1 or not np.all(np.isfinite(t)) or np.any(t <= 0) or \
                    np.any(np.diff(t) <= 0):
                raise ConfigError(f"temperatures = {list(self.temperatures)}; expected a "
                                  "strictly ascending list of positive numbers")
            object.__setattr__(self, "temperatures", tuple(float(v) for v in t))
            object.__setattr__(self, "n_temperatures", int(t.size))
            object.__setattr__(self, "t_min", float(t[0]))
            object.__setattr__(self, "t_max", float(t[-1]))
        if not (isinstance(self.n_temperatures, (int, np.integer)) and self.n_temperatures >= 1):
            raise ConfigError(f"n_temperatures = {self.n_temperatures!r}; expected an integer "
                              ">= 1")
        if not (np.isfinite(self.t_min) and self.t_min > 0):
            raise ConfigError(f"t_min = {self.t_min!r}; expected a positive temperature")
        if not (np.isfinite(self.t_max) and self.t_max >= self.t_min):
            raise ConfigError(f"t_max = {self.t_max!r} is below t_min = {self.t_min!r}; expected "
                              "t_min <= t_max")
        if self.n_temperatures > 1 and self.t_max == self.t_min:
            raise ConfigError(f"t_min = t_max = {self.t_min} with {self.n_temperatures} "
                              "temperatures; expected t_min < t_max")
        if self.n_trajectories < 1:
            raise ConfigError(f"n_trajectories = {self.n_trajectories}; expected >= 1")
        if self.swap_scheme not in SWAP_SCHEMES:
            raise ConfigError(f"swap_scheme = {self.swap_scheme!r}; expected one of "
                              f"{SWAP_SCHEMES}")
        if self.n_swaps is not None and self.n_swaps < 0:
            raise ConfigError(f"n_swaps = {self.n_swaps}; expected >= 0")
        if self.workers < 1:
            raise ConfigError(f"workers = {self.workers}; expected >= 1")

    def ladder(self) -> FloatArray:
        if self.temperatures is not None:
            return np.array(self.temperatures)
        return geometric_ladder(self.t_min, self.t_max, self.n_temperatures)


class REState(NamedTuple):
    """State of a replica-exchange run; slot k is temperature k (ascending)."""

    slots: tuple[Any, ...]   #: inner sampler state at each slot
    replica_k: IntArray      #: (K,) which replica (walker id) sits at slot k


class REInfo(NamedTuple):
    """Diagnostics of one replica-exchange iteration."""

    energy_k: FloatArray          #: (K,) E at each slot after the iteration
    n_accepted_k: IntArray        #: (K,) accepted inner transitions this iteration
    n_divergent_k: IntArray       #: (K,) divergent inner transitions this iteration
    step_size_k: FloatArray       #: (K,)
    swap_attempted_k: IntArray    #: (K-1,) attempts on pair (k, k+1)
    swap_accepted_k: IntArray     #: (K-1,) accepted exchanges on pair (k, k+1)
    replica_k: IntArray           #: (K,) replica at each slot after the iteration


class ReplicaExchangeHMC(Sampler):
    """Replica exchange over a temperature ladder with an inner sampler at each slot.

    ``step`` takes a sequence of K + 1 generators (see :meth:`make_streams`): one per slot and
    one for the swaps.
    """

    name: ClassVar[str] = "rehmc"
    Config: ClassVar[type] = REHMCConfig
    State: ClassVar[type] = REState
    Info: ClassVar[type] = REInfo

    def __init__(self, potential: Any, *, prior: Any = None, temperature: float = 1.0,
                 masses: Any = None, config: Any = None, executor: Executor | None = None,
                 **settings: Any) -> None:
        super().__init__(potential, prior=prior, temperature=temperature, masses=masses,
                         config=config, **settings)
        c = self.config
        #: runs the slots of an iteration; defaults to ``workers`` threads
        self.executor = executor if executor is not None else make_executor(c.workers)
        self.temperatures = c.ladder()
        self.beta_k = 1.0 / self.temperatures
        from thermonet import registry

        inner_cls = registry.load("sampler", c.sampler)
        if issubclass(inner_cls, ReplicaExchangeHMC):
            raise ConfigError("the inner sampler of replica exchange cannot itself be 'rehmc'")
        inner_cfg = build_config(inner_cls.Config, dict(c.inner),
                                 f"sampler {c.sampler!r} (replica_exchange.inner)")
        # one potential per slot: each owns its scratch space, so slots can run in threads
        self.samplers = [inner_cls(potential if k == 0 else potential.copy(), prior=prior,
                                   temperature=float(t), masses=self.masses, config=inner_cfg)
                         for k, t in enumerate(self.temperatures)]

    @property
    def n_slots(self) -> int:
        return len(self.samplers)

    @staticmethod
    def make_streams(seed: Any, n_slots: int) -> list[np.random.Generator]:
        """K + 1 independent generators from one seed (slots, then the swap stream)."""
        ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
        return [np.random.Generator(np.random.PCG64(s)) for s in ss.spawn(n_slots + 1)]

    def init(self, theta0: Any) -> REState:
        """``theta0``: one vector for every slot, or an array of shape (K, n_params)."""
        arr = np.asarray(theta0, dtype=np.float64)
        n = self.potential.n_params
        if arr.ndim == 1:
            arr = np.broadcast_to(arr, (self.n_slots, n))
        if arr.shape != (self.n_slots, n):
            raise ConfigError(f"initial parameters have shape {arr.shape}; expected ({n},) or "
                              f"({self.n_slots}, {n})")
        slots = tuple(s.init(as_theta(arr[k], n)) for k, s in enumerate(self.samplers))
        return REState(slots, np.arange(self.n_slots, dtype=np.int64))

    def initialise(self, draw: Any, streams: Sequence[np.random.Generator], *,
                   minimiser: Any = None, burn_in: Sequence[int] = (20, 80)) -> REState:
        """The paper's initialisation (Sec. 3.3.2; original-code-spec.md §5), per slot:

        1. draw w with ``draw(rng)`` (the standard initialisation U(±1/sqrt(k_i))) from the
           slot's own stream;
        2. minimise it with ``minimiser`` (Alg. 3), if given;
        3. burn in: for each count n in ``burn_in``, adapt dt coarsely (factor 0.1), then run n
           trajectories at the slot's temperature.

        Finally every slot's dt is adapted once more (factor 0.1), as the original
        ``build_pt``. Slots run in parallel on the executor; the result does not depend on it.
        """
        n = self.potential.n_params

        def run(k: int) -> Any:
            rng = streams[k]
            sampler = self.samplers[k]
            theta = as_theta(draw(rng), n, what="initial draw")
            if minimiser is not None:
                theta = minimiser.minimise(sampler.potential, theta, prior=self.prior).theta
            st = sampler.init(theta)
            for n_traj in burn_in:
                st = sampler.adapt(st, rng, factor=0.1)
                for _ in range(int(n_traj)):
                    st, _ = sampler.step(st, rng)
            return sampler.adapt(st, rng, factor=0.1)

        slots = tuple(self.executor.map(run, range(self.n_slots)))
        return REState(slots, np.arange(self.n_slots, dtype=np.int64))

    # -- one iteration -------------------------------------------------------------------

    def _propagate(self, state: REState, streams: Sequence[np.random.Generator]
                   ) -> tuple[list[Any], IntArray, IntArray]:
        n_traj = self.config.n_trajectories

        def run(k: int) -> tuple[Any, int, int]:
            st, acc, div = state.slots[k], 0, 0
            for _ in range(n_traj):
                st, info = self.samplers[k].step(st, streams[k])
                acc += bool(info.is_accepted)
                div += bool(getattr(info, "is_divergent", False))
            return st, acc, div

        results = self.executor.map(run, range(self.n_slots))
        slots = [r[0] for r in results]
        return (slots, np.array([r[1] for r in results], dtype=np.int64),
                np.array([r[2] for r in results], dtype=np.int64))

    def _try_swap(self, slots: list[Any], replica_k: IntArray, j: int,
                  rng: np.random.Generator) -> bool:
        """Attempt to exchange the configurations of slots j and j+1 (Alg. 2)."""
        e_j, e_k = slots[j].energy, slots[j + 1].energy
        log_a = (self.beta_k[j] - self.beta_k[j + 1]) * (e_j - e_k)
        log_u = math.log(rng.random())
        if not (log_u < log_a):
            return False
        a, b = self.samplers[j], self.samplers[j + 1]
        new_j = a.take_configuration(slots[j], slots[j + 1], b.temperature)
        new_k = b.take_configuration(slots[j + 1], slots[j], a.temperature)
        slots[j], slots[j + 1] = new_j, new_k
        replica_k[j], replica_k[j + 1] = replica_k[j + 1], replica_k[j]
        return True

    def _swaps(self, slots: list[Any], replica_k: IntArray, rng: np.random.Generator
               ) -> tuple[IntArray, IntArray]:
        n_pairs = self.n_slots - 1
        attempted = np.zeros(max(n_pairs, 0), dtype=np.int64)
        accepted = np.zeros(max(n_pairs, 0), dtype=np.int64)
        if n_pairs < 1:
            return attempted, accepted
        if self.config.swap_scheme == "even-odd":
            start = int(rng.random() < 0.5)
            pairs: Sequence[int] = range(start, n_pairs, 2)
        else:
            n = self.n_slots if self.config.n_swaps is None else self.config.n_swaps
            pairs = rng.integers(0, n_pairs, size=n)
        for j in pairs:
            attempted[j] += 1
            accepted[j] += self._try_swap(slots, replica_k, int(j), rng)
        return attempted, accepted

    def step(self, state: REState, streams: Sequence[np.random.Generator]
             ) -> tuple[REState, REInfo]:
        """One iteration of Algorithm 2."""
        if len(streams) != self.n_slots + 1:
            raise ConfigError(f"replica exchange needs {self.n_slots + 1} random streams "
                              f"(one per slot and one for swaps); got {len(streams)}")
        replica_k = state.replica_k.copy()
        swap_rng = streams[self.n_slots]
        if self.config.swap_scheme == "even-odd":
            slots = list(state.slots)
            attempted, accepted = self._swaps(slots, replica_k, swap_rng)
            slots, n_acc, n_div = self._propagate(REState(tuple(slots), replica_k), streams)
        else:
            slots, n_acc, n_div = self._propagate(state, streams)
            attempted, accepted = self._swaps(slots, replica_k, swap_rng)
        new = REState(tuple(slots), replica_k)
        info = REInfo(np.array([s.energy for s in slots]), n_acc, n_div,
                      np.array([s.step_size for s in slots]), attempted, accepted,
                      replica_k.copy())
        return new, info

    def adapt(self, state: REState, streams: Sequence[np.random.Generator],
              factor: float = 0.9, **options: Any) -> REState:
        """Adapt every slot's step size (in parallel over slots, own stream each)."""

        def run(k: int) -> Any:
            return self.samplers[k].adapt(state.slots[k], streams[k], factor=factor)

        return state._replace(slots=tuple(self.executor.map(run, range(self.n_slots))))
