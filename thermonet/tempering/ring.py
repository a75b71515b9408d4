"""Stabilised variational parallel tempering: two legs joined at the target, one ring of swaps.

The *fixed* leg is the usual ladder from the target ``exp(-E/T_min) box`` (slot 0) up to the
prior rung; the *variational* leg runs from the same target (slot 0, ``b = 1``) to a Gaussian
reference ``q`` (its last slot, ``b = 0``, drawn exactly; :mod:`thermonet.tempering.reference`).
The ring orders every rung as

    q (b = 0) ... b -> 1 (target) | target (T_min) ... prior (T = inf)

and the swap scheme (``deo`` by default) runs over all of its adjacent pairs. Within a leg a
pair swaps by the leg's own rule; the pair across the join holds two copies of the same target,
so its acceptance is exactly 1. Restarts still come from the prior, and the fixed leg's
stepping-stone ``log Z(T_min)`` stays the model evidence; the variational leg's gives the same
number independently (:func:`thermonet.analysis.free_energy.variational_log_z`). This is the
two-reference form of Surjanovic et al. (2022, Sec. 4) that Pigeons.jl calls stabilised
variational PT: a poor ``q`` cannot make the scheme worse than the fixed leg alone, beyond the
cost of the extra rungs.

Random streams: the fixed leg's slots, then the variational leg's, then one swap stream for the
ring (:meth:`VariationalRing.make_streams`); every slot draws only from its own stream, so the
result does not depend on the executor or the number of workers.

``q`` is fitted in warm-up only (:func:`fit_reference`) and then frozen; its parameters belong
in a checkpoint (:meth:`GaussianReference.to_dict`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from thermonet.errors import ConfigError
from thermonet.parallel import Executor, make_executor
from thermonet.tempering.exchange import REInfo, ReplicaExchange, REState, Streams, make_streams
from thermonet.tempering.ladder import Ladder
from thermonet.tempering.ladder_adaptation import equalised_betas, rejection_rates
from thermonet.tempering.reference import GaussianReference, ReferencePath, path_ladder_temperatures
from thermonet.tempering.swaps import DeterministicEvenOdd, NoSwaps, swap_log_acceptance
from thermonet.types import FloatArray, IntArray


class RingState(NamedTuple):
    """State of a two-leg ring."""

    fixed: REState          #: the prior leg (slot 0 the target, last slot the prior)
    variational: REState    #: the variational leg (slot 0 the target, last slot q)
    replica_r: IntArray     #: (K_f + K_v,) the replica at each ring position


class RingInfo(NamedTuple):
    """One iteration of a ring: each leg's :class:`REInfo` after the ring's swaps (energies,
    swap energies, replicas and the leg's own pairs' swap counts), the join's counts and the
    replicas in ring order."""

    fixed: REInfo
    variational: REInfo
    join_attempted: int
    replica_r: IntArray


class VariationalRing:
    """Two replica-exchange legs, prior and variational, joined at the target.

    Parameters
    ----------
    sampler_cls : type
        The sampler of every rung (on the variational leg it runs on the path potential).
    potential : thermonet.api.Potential
        The untempered energy E(w).
    ladder : Ladder
        The fixed leg, from ``T_min`` (the target) to a prior rung.
    reference : GaussianReference
        The variational leg's starting (or frozen) reference.
    path : sequence of float
        The variational leg's coordinates ``b``, strictly descending from 1 to 0.
    prior : BoxPrior
    sampler_config, n_trajectories, masses : as for :class:`ReplicaExchange`
    swap : swap scheme over the ring (default: :class:`DeterministicEvenOdd`)
    executor, workers : as for :class:`ReplicaExchange`; both legs share the executor.
    """

    def __init__(self, sampler_cls: type, potential: Any, ladder: Ladder,
                 reference: GaussianReference, path: Sequence[float], *, prior: Any,
                 sampler_config: Any = None, n_trajectories: int = 1, masses: Any = None,
                 swap: Any = None, executor: Executor | None = None, workers: int = 1) -> None:
        if not ladder.has_prior_rung:
            raise ConfigError("the fixed leg of a variational ring needs a prior rung "
                              "(ladder.prior_rung = true): it supplies the restarts")
        if prior is None:
            raise ConfigError("a variational ring needs the box prior (the fixed leg's "
                              "reference and the support of every rung); this run has none")
        self.executor = executor if executor is not None else make_executor(workers)
        common: dict[str, Any] = dict(prior=prior, masses=masses,
                                      sampler_config=sampler_config,
                                      n_trajectories=n_trajectories, swap=NoSwaps(),
                                      executor=self.executor)
        self.sampler_cls = sampler_cls
        self.potential = potential
        self.prior = prior
        self.t_min = float(ladder.temperature_k[0])
        self.fixed = ReplicaExchange(sampler_cls, potential, ladder, **common)
        if getattr(self.fixed.samplers[0], "hyper_model", None) is not None:
            raise ConfigError("a variational ring needs a sampler whose state is the weights "
                              "alone; this one samples hyperparameters too")
        self.reference = reference
        self._common = common
        self.variational = ReplicaExchange(
            ReferencePath(sampler_cls, reference, self.t_min), potential.copy(),
            Ladder(path_ladder_temperatures(path)), **common)
        self.swap = swap if swap is not None else DeterministicEvenOdd()

    # -- layout ---------------------------------------------------------------------------

    @property
    def n_fixed(self) -> int:
        """K_f, rungs of the fixed leg."""
        return self.fixed.n_slots

    @property
    def n_variational(self) -> int:
        """K_v, rungs of the variational leg."""
        return self.variational.n_slots

    @property
    def n_ring(self) -> int:
        """K_f + K_v, rungs of the ring."""
        return self.n_fixed + self.n_variational

    @property
    def join(self) -> int:
        """The ring pair across the join (variational slot 0, fixed slot 0)."""
        return self.n_variational - 1

    @property
    def path(self) -> FloatArray:
        """The variational leg's coordinates ``b`` (slot order: 1 first, 0 last)."""
        return self.variational.beta_k

    def position(self, r: int) -> tuple[ReplicaExchange, int]:
        """The leg and slot at ring position ``r`` (0: q, last: the prior)."""
        if r < self.n_variational:
            return self.variational, self.n_variational - 1 - r
        return self.fixed, r - self.n_variational

    def make_streams(self, seed: Any) -> Streams:
        """K_f + K_v + 1 streams from one seed: the fixed leg's slots, the variational leg's,
        then the ring's swap stream."""
        return make_streams(seed, self.n_ring)

    def leg_streams(self, streams: Streams) -> tuple[Streams, Streams]:
        """Each leg's view of the ring's streams (the legs draw nothing from ``swap``)."""
        return (Streams(streams.slots[:self.n_fixed], streams.swap),
                Streams(streams.slots[self.n_fixed:], streams.swap))

    # -- starting points ------------------------------------------------------------------

    def burn_in(self, draw: Any, streams: Streams, **options: Any) -> RingState:
        """Both legs' :meth:`ReplicaExchange.burn_in`, each slot from its own stream."""
        fs, vs = self.leg_streams(streams)
        fixed = self.fixed.burn_in(draw, fs, **options)
        variational = self.variational.burn_in(draw, vs, **options)
        return RingState(fixed, variational, np.arange(self.n_ring, dtype=np.int64))

    def init(self, theta0: Any) -> RingState:
        """Every rung at ``theta0`` (one vector)."""
        return RingState(self.fixed.init(theta0), self.variational.init(theta0),
                         np.arange(self.n_ring, dtype=np.int64))

    # -- one iteration --------------------------------------------------------------------

    def step(self, state: RingState, streams: Streams, *, iteration: int | None = None
             ) -> tuple[RingState, RingInfo]:
        """Transitions at every rung of both legs, then the scheme's swaps over the ring."""
        fs, vs = self.leg_streams(streams)
        fixed, f_info = self.fixed.step(state.fixed, fs, iteration=iteration)
        var, v_info = self.variational.step(state.variational, vs, iteration=iteration)
        slots = {id(self.fixed): list(fixed.slots), id(self.variational): list(var.slots)}
        replica_r = state.replica_r.copy()
        n_pairs = self.n_ring - 1
        attempted = np.zeros(n_pairs, dtype=np.int64)
        accepted = np.zeros(n_pairs, dtype=np.int64)
        for r in self.swap.pairs(n_pairs, streams.swap, iteration):
            r = int(r)
            attempted[r] += 1
            accepted[r] += self._try_swap(slots, replica_r, r, streams.swap)
        f_slots, v_slots = slots[id(self.fixed)], slots[id(self.variational)]
        info = RingInfo(self._leg_info(self.fixed, f_info, f_slots, replica_r, attempted,
                                       accepted),
                        self._leg_info(self.variational, v_info, v_slots, replica_r,
                                       attempted, accepted),
                        int(attempted[self.join]), replica_r.copy())
        return (RingState(fixed._replace(slots=tuple(f_slots)),
                          var._replace(slots=tuple(v_slots)), replica_r), info)

    def _try_swap(self, slots: dict[int, list[Any]], replica_r: IntArray, r: int,
                  rng: np.random.Generator) -> bool:
        (leg_a, a), (leg_b, b) = self.position(r), self.position(r + 1)
        sa, sb = slots[id(leg_a)], slots[id(leg_b)]
        if leg_a is not leg_b:
            # both ends of the join are the target exp(-E/T_min) box: acceptance exactly 1;
            # each side re-evaluates the configuration under its own potential
            new_a = leg_a.samplers[a].take_configuration(sa[a], sb[b], self.t_min)
            new_b = leg_b.samplers[b].init(sa[a].theta)._replace(step_size=sb[b].step_size)
        else:
            beta = leg_a.beta_k
            log_a = swap_log_acceptance(beta[a], beta[b], leg_a.samplers[a].swap_energy(sa[a]),
                                        leg_b.samplers[b].swap_energy(sb[b]))
            if not (math.log(rng.random()) < log_a):
                return False
            t = leg_a.temperatures
            new_a = leg_a.samplers[a].take_configuration(sa[a], sb[b], float(t[b]))
            new_b = leg_b.samplers[b].take_configuration(sb[b], sa[a], float(t[a]))
        sa[a], sb[b] = new_a, new_b
        replica_r[r], replica_r[r + 1] = replica_r[r + 1], replica_r[r]
        return True

    def _leg_info(self, leg: ReplicaExchange, info: REInfo, slots: list[Any],
                  replica_r: IntArray, attempted: IntArray, accepted: IntArray) -> REInfo:
        # the leg's own pairs (j, j+1) in its slot order, and its replicas, from the ring's
        if leg is self.fixed:
            ring = np.arange(self.n_variational, self.n_ring)
            pairs = slice(self.n_variational, self.n_ring - 1)
            att, acc = attempted[pairs], accepted[pairs]
        else:
            ring = np.arange(self.n_variational - 1, -1, -1)
            pairs = slice(0, self.n_variational - 1)
            att, acc = attempted[pairs][::-1], accepted[pairs][::-1]
        return info._replace(
            energy_k=np.array([s.energy for s in slots]),
            swap_energy_k=np.array([leg.samplers[k].swap_energy(s)
                                    for k, s in enumerate(slots)]),
            swap_attempted_k=att.copy(), swap_accepted_k=acc.copy(),
            replica_k=replica_r[ring].copy())

    # -- warm-up: a new reference, new rungs ----------------------------------------------

    def with_reference(self, reference: GaussianReference, state: RingState,
                       path: Sequence[float] | FloatArray | None = None
                       ) -> tuple[VariationalRing, RingState]:
        """The same ring with the variational leg on ``reference`` (and on ``path``, if
        given); its states keep their configurations and step sizes. The fixed leg, its states
        and the streams are shared."""
        new = object.__new__(VariationalRing)
        new.__dict__.update(self.__dict__)
        new.reference = reference
        new.variational = ReplicaExchange(
            ReferencePath(self.sampler_cls, reference, self.t_min), self.potential.copy(),
            Ladder(path_ladder_temperatures(self.path if path is None else path)),
            **self._common)
        slots = tuple(new.variational.samplers[k].init(s.theta)._replace(step_size=s.step_size)
                      for k, s in enumerate(state.variational.slots))
        return new, state._replace(variational=state.variational._replace(slots=slots))

    def set_fixed_ladder(self, ladder: Ladder, state: RingState) -> RingState:
        """Move the fixed leg's rungs (same number); states keep their configurations."""
        self.fixed.set_ladder(ladder)
        slots = tuple(self.fixed.samplers[k].init(s.theta)._replace(step_size=s.step_size)
                      for k, s in enumerate(state.fixed.slots))
        return state._replace(fixed=state.fixed._replace(slots=slots))

    def adapt(self, state: RingState, streams: Streams, **options: Any) -> RingState:
        """Both legs' step sizes (:meth:`ReplicaExchange.adapt`)."""
        fs, vs = self.leg_streams(streams)
        return state._replace(fixed=self.fixed.adapt(state.fixed, fs, **options),
                              variational=self.variational.adapt(state.variational, vs,
                                                                 **options))


def fit_reference(ring: VariationalRing, state: RingState, streams: Streams, *, rounds: int,
                  iterations: int, first_iteration: int = 1, adapt_ladders: bool = True,
                  adapt_step_sizes: bool = True
                  ) -> tuple[VariationalRing, RingState, list[dict[str, Any]]]:
    """Warm-up of a ring: ``rounds`` rounds of ``iterations`` iterations each; after each,
    ``q`` is refitted by moment matching to the configurations both target rungs held in
    the round (Surjanovic et al. 2022, Sec. 3.2), and with ``adapt_ladders`` both legs' rungs
    are moved to equal steps of their measured barriers (Syed et al. 2022, Alg. 4). After the
    last round everything is frozen. Returns the ring, its state, and per round the fit, each
    leg's rejection rates and barrier."""
    records: list[dict[str, Any]] = []
    it = int(first_iteration)
    for _ in range(int(rounds)):
        samples = []
        att_f = np.zeros(ring.n_fixed - 1)
        acc_f = np.zeros(ring.n_fixed - 1)
        att_v = np.zeros(ring.n_variational - 1)
        acc_v = np.zeros(ring.n_variational - 1)
        for _ in range(int(iterations)):
            state, info = ring.step(state, streams, iteration=it)
            it += 1
            samples.append(state.fixed.slots[0].theta)
            samples.append(state.variational.slots[0].theta)
            att_f += info.fixed.swap_attempted_k
            acc_f += info.fixed.swap_accepted_k
            att_v += info.variational.swap_attempted_k
            acc_v += info.variational.swap_accepted_k
        rej_f, rej_v = rejection_rates(att_f, acc_f), rejection_rates(att_v, acc_v)
        reference = GaussianReference.fit(np.array(samples), ring.reference.half_width)
        path = equalised_betas(ring.path, rej_v) if adapt_ladders else ring.path
        if adapt_ladders:
            beta = equalised_betas(ring.fixed.beta_k, rej_f)
            with np.errstate(divide="ignore"):
                state = ring.set_fixed_ladder(Ladder(1.0 / beta), state)
        ring, state = ring.with_reference(reference, state, path)
        if adapt_step_sizes:
            state = ring.adapt(state, streams)
        records.append({"reference": reference.to_dict(),
                        "rejection_fixed": rej_f.tolist(), "rejection_variational":
                        rej_v.tolist(), "barrier_fixed": float(rej_f.sum()),
                        "barrier_variational": float(rej_v.sum()), "path": list(map(float, path))})
    return ring, state, records


__all__ = ["RingInfo", "RingState", "VariationalRing", "fit_reference"]
