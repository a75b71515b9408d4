"""The warm-up of a replica-exchange run: ladder adaptation in rounds, per-rung masses, a
measured step-size correction, then a frozen ladder; resumable at its checkpoints.

Round r runs ``first_length * 2**r`` iterations of the engine on the current ladder, measures
each pair's swap rejection rate, and moves the rungs to equalise it
(:func:`thermonet.tempering.ladder_adaptation.equalised_betas`); the slots keep their
configurations and re-tune their step sizes at the new temperatures. Optionally a diagonal
mass matrix per rung is then estimated and installed (:func:`adapt_masses`). Optionally the
engine then runs ``retune_rounds`` rounds of ``retune_iterations`` iterations exactly as in
production (swaps on, step sizes frozen), measures each rung's acceptance rate over every
replica that passed it, and after each round corrects each rung's step size towards the
sampler's target (:meth:`thermonet.api.Sampler.correct_step_size`): the re-tune along the
chain before it sees only the replica sitting at the rung and ends on a short dual-averaging
window, so its rates scatter around the target by more than production can tolerate. The
correction uses an asymptotic law of the acceptance, accurate near the target only, so a
second round corrects what the first could not. Optionally the engine then runs
``budget_iterations`` more iterations as in production, measures each rung's lag-1
autocorrelation of the energy across one round of local moves, and re-allocates the
trajectories per rung at the same total (:mod:`thermonet.tempering.local_budget`). After the
warm-up the ladder, masses, step sizes and trajectory counts are frozen, so production is an
exact Markov chain. Each round's ladder,
rejection rates and barrier estimate ``Lambda = sum_j r_j`` are returned for the run's record.

Resuming: :class:`WarmUp` runs the same steps as a sequence of phases (sample the round, then
re-tune the step sizes) and hands its position (:class:`WarmUpState`: plain numbers and the
running sums of the phase) to a ``save`` callback at every phase boundary and every ``every``
iterations inside a sampling phase. The engine's state, streams, ladder and masses plus that
position are everything the rest of the warm-up depends on, so a run restored from any of these
points finishes the warm-up bit for bit as an uninterrupted one. A step-size re-tune along the
chain (HMC's ``adapt_method = "chain"``) is checkpointed every ``every`` transitions per rung
with each rung's dual-averaging state; a re-tune a sampler cannot split is one unit (a stop
during it resumes from the checkpoint just before it).

References
----------
S. Syed, A. Bouchard-Côté, G. Deligiannidis & A. Doucet, JRSS B 84 (2022) 321, Alg. 4.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from thermonet.errors import CheckpointMismatchError
from thermonet.tempering.exchange import REInfo, ReplicaExchange, REState, Streams
from thermonet.tempering.ladder import Ladder
from thermonet.tempering.ladder_adaptation import equalised_betas, rejection_rates
from thermonet.tempering.local_budget import COLUMNS, allocate, describe, lag1_sums, rho1
from thermonet.tempering.prior_rung import PriorRung

#: the stages of a warm-up, in order
STAGES = ("ladder", "masses", "retune", "budget", "done")
#: how a stage is named in messages
STAGE_NAMES = {"ladder": "the ladder adaptation", "masses": "the mass estimation",
               "retune": "the step-size correction",
               "budget": "the local-budget measurement", "done": "the end of the warm-up"}
#: the phases of a stage: sample with the current ladder, then re-tune the step sizes
PHASES = ("sample", "tune")


def anchor_slots(ladder: Ladder, temperatures: Sequence[float]) -> list[int]:
    """The slots of ``ladder`` at the given temperatures (matched to 1e-12 relative)."""
    t = ladder.temperature_k
    return [int(np.flatnonzero(np.isclose(t, float(a), rtol=1e-12, atol=0.0))[0])
            for a in temperatures]


@dataclass
class WarmUpState:
    """Where a warm-up stands, in plain numbers and arrays (a checkpoint stores it).

    ``sums`` holds the running sums of the sampling phase: swap attempts and acceptances per
    pair in a ladder round (``attempted``, ``accepted``), the parameters and their squares
    per rung while the masses are estimated (``total``, ``total_sq``), accepted transitions
    per rung while the acceptance is measured (``accepted``); while the local budget is
    measured, each rung's pair sums (``pairs``, (K, 6):
    :func:`~thermonet.tempering.local_budget.lag1_sums`) and the last iteration's
    ``energy`` and ``replica``;
    in a re-tune, the samplers' carry (``carry``, (K, m): HMC's dual-averaging state per
    rung).
    """

    stage: str = "done"       #: one of :data:`STAGES`
    phase: str = "sample"     #: one of :data:`PHASES`
    round: int = 0            #: ladder or correction round (0-based) in those stages
    done: int = 0             #: iterations (sample) or transitions per rung (tune) done
    iteration: int = 0        #: warm-up iterations so far (the swap scheme's clock)
    records: list[dict[str, Any]] = field(default_factory=list)   #: one per finished round
    sums: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        """Whether nothing is left to do."""
        return self.stage == "done"

    def position(self) -> dict[str, Any]:
        """Everything but ``sums`` and ``records``, JSON-ready."""
        return {"stage": self.stage, "phase": self.phase, "round": self.round,
                "done": self.done, "iteration": self.iteration}

    def counters(self) -> dict[str, Any]:
        """The records a run keeps in its checkpoint: ``ladder_rounds`` (one per ladder
        round), ``step_size_retune`` (one per correction round) and ``local_budget`` (the
        measured autocorrelations and the frozen trajectories per rung), where there are
        any."""
        out: dict[str, Any] = {
            "ladder_rounds": [r for r in self.records if "barrier" in r],
            "step_size_retune": [r for r in self.records if r.get("stage") == "retune"]}
        budget = [r for r in self.records if r.get("stage") == "budget"]
        if budget:
            out["local_budget"] = budget[-1]
        return {k: v for k, v in out.items() if v}

    def where(self, rounds: int) -> str:
        """Where the warm-up stands, for a message (``rounds``: the plan's ladder rounds)."""
        if self.stage == "ladder":
            return f"round {self.round + 1} of {rounds} of the ladder adaptation"
        return STAGE_NAMES[self.stage]

    def summary(self) -> list[str]:
        """What the finished stages did, a line each: the frozen ladder's barrier, each
        step-size correction's measured acceptance."""
        lines = []
        rounds = self.counters()
        if "ladder_rounds" in rounds:
            lines.append(f"ladder frozen: barrier estimate Lambda = "
                         f"{rounds['ladder_rounds'][-1]['barrier']:.3g} (last round)")
        for r in rounds.get("step_size_retune", []):
            rate = [a for a in r["acceptance"] if a is not None]
            lines.append(f"step sizes corrected (round {r['round']}) from the acceptance over "
                         f"{r['iterations']} iterations (measured {min(rate):.2f}-"
                         f"{max(rate):.2f})")
        if "local_budget" in rounds:
            b = rounds["local_budget"]
            rho = [x for x in b["rho1"] if x is not None]
            lines.append(f"local budget frozen from rho1 {min(rho, default=0):.2f}-"
                         f"{max(rho, default=0):.2f} over {b['iterations']} iterations: "
                         f"{describe(b['trajectories'], [x is not None for x in b['rho1']])}")
        return lines

    @classmethod
    def restore(cls, position: dict[str, Any], records: list[dict[str, Any]],
                sums: dict[str, np.ndarray] | None) -> WarmUpState:
        """The state saved as ``position()``, ``records`` and ``sums`` (from a checkpoint)."""
        try:
            ws = cls(str(position["stage"]), str(position["phase"]), int(position["round"]),
                     int(position["done"]), int(position["iteration"]), list(records),
                     {k: np.array(v, dtype=np.float64) for k, v in (sums or {}).items()})
        except (KeyError, TypeError, ValueError) as err:
            raise CheckpointMismatchError(f"the checkpoint's warm-up position {position!r} is "
                                          f"incomplete ({err}); expected the keys stage, phase, "
                                          "round, done, iteration") from None
        if ws.stage not in STAGES or ws.phase not in PHASES:
            raise CheckpointMismatchError(f"the checkpoint's warm-up position {position!r} "
                                          f"names an unknown stage or phase; expected {STAGES} "
                                          f"and {PHASES}")
        return ws


def planned_iterations(*, rounds: int = 0, first_length: int = 8, mass_iterations: int = 0,
                       retune_iterations: int = 0, retune_rounds: int = 2,
                       budget_iterations: int = 0) -> int:
    """Engine iterations of a warm-up with :class:`WarmUp`'s parameters, known before it runs
    (what ``thermonet run`` announces): ``first_length * (2**rounds - 1)`` in the ladder rounds,
    then the mass estimation, the step-size correction rounds and the budget measurement."""
    total = int(first_length) * (2 ** int(rounds) - 1) if rounds > 0 else 0
    if retune_iterations > 0 and retune_rounds > 0:
        total += int(retune_iterations) * int(retune_rounds)
    return total + max(int(mass_iterations), 0) + max(int(budget_iterations), 0)


class WarmUp:
    """The warm-up plan of one run: ``rounds`` ladder rounds from ``first_length`` iterations,
    then ``mass_iterations`` iterations of mass estimation (0: none), then ``retune_rounds``
    rounds of ``retune_iterations`` iterations, each measuring every rung's acceptance before
    a correction of its step size (0 iterations: none), then ``budget_iterations`` iterations
    measuring each rung's energy autocorrelation before the trajectories per rung are
    re-allocated within ``budget_bounds`` (0: none).

    Parameters
    ----------
    engine : ReplicaExchange
        Its ladder and masses are changed in place.
    anchors : temperatures that never move (besides the two ends)
    adapt_factor : the step-size re-tune's factor (:meth:`ReplicaExchange.adapt`)
    """

    def __init__(self, engine: ReplicaExchange, *, rounds: int = 0, first_length: int = 8,
                 anchors: Sequence[float] = (), mass_iterations: int = 0,
                 retune_iterations: int = 0, retune_rounds: int = 2,
                 budget_iterations: int = 0, budget_bounds: tuple[int, int] = (1, 16),
                 adapt_factor: float = 0.9) -> None:
        self.engine = engine
        self.rounds = int(rounds)
        self.first_length = int(first_length)
        self.anchors = tuple(float(a) for a in anchors)
        self.mass_iterations = int(mass_iterations)
        self.retune_iterations = int(retune_iterations)
        self.retune_rounds = int(retune_rounds)
        self.budget_iterations = int(budget_iterations)
        self.budget_bounds = (int(budget_bounds[0]), int(budget_bounds[1]))
        self.adapt_factor = adapt_factor

    @property
    def planned_iterations(self) -> int:
        """Engine iterations from :meth:`start` to the end (:func:`planned_iterations`)."""
        return planned_iterations(rounds=self.rounds, first_length=self.first_length,
                                  mass_iterations=self.mass_iterations,
                                  retune_iterations=self.retune_iterations,
                                  retune_rounds=self.retune_rounds,
                                  budget_iterations=self.budget_iterations)

    def start(self, iteration: int = 0) -> WarmUpState:
        """The position before anything is done (``finished`` if there is nothing to do)."""
        ws = WarmUpState(iteration=int(iteration))
        ws.stage = self._stage_after(None)
        return ws

    def _stage_after(self, stage: str | None) -> str:
        """The first stage after ``stage`` (None: the first) that has work to do."""
        wanted = {"ladder": self.rounds > 0, "masses": self.mass_iterations > 0,
                  "retune": self.retune_iterations > 0 and self.retune_rounds > 0,
                  "budget": self.budget_iterations > 0, "done": True}
        later = STAGES if stage is None else STAGES[STAGES.index(stage) + 1:]
        return next(s for s in later if wanted[s])

    def length(self, ws: WarmUpState) -> int:
        """Iterations of the current sampling phase."""
        if ws.stage == "ladder":
            return self.first_length * 2 ** ws.round
        if ws.stage == "retune":
            return self.retune_iterations
        if ws.stage == "budget":
            return self.budget_iterations
        return self.mass_iterations

    def run(self, state: REState, streams: Streams, ws: WarmUpState, *, every: int = 0,
            save: Callable[[REState, WarmUpState], None] | None = None,
            stop: Callable[[], bool] = lambda: False) -> tuple[REState, WarmUpState]:
        """Advance from ``ws`` to the end, or to the first ``save`` after ``stop()`` turns
        true; return the state and the position reached (``ws`` is updated in place)."""
        while not ws.finished:
            if ws.phase == "sample":
                n = self.length(ws)
                while ws.done < n:
                    ws.iteration += 1
                    state, info = self.engine.step(state, streams, iteration=ws.iteration)
                    self._accumulate(ws, state, info)
                    ws.done += 1
                    if ws.done < n and save is not None and (
                            (every and ws.done % every == 0) or stop()):
                        save(state, ws)
                        if stop():
                            return state, ws
                state = self._finish_sampling(ws, state)
                if ws.stage in ("retune", "budget"):
                    self._next_stage(ws)     # the measurement is the whole stage: no re-tune
            else:
                state, stopped = self._tune(state, streams, ws, every, save, stop)
                if stopped:
                    return state, ws
                self._next_stage(ws)
            if save is not None:
                save(state, ws)
            if stop():
                break
        return state, ws

    def _tune(self, state: REState, streams: Streams, ws: WarmUpState, every: int,
              save: Callable[[REState, WarmUpState], None] | None,
              stop: Callable[[], bool]) -> tuple[REState, bool]:
        """Re-tune the step sizes at the current ladder and masses: in parts of ``every``
        transitions per rung when the samplers' warm-up can be split (the dual-averaging
        states are the carry), else in one :meth:`ReplicaExchange.adapt`. Returns the state
        and whether it stopped on request."""
        n = self.engine.adapt_transitions()
        if not n:
            return self.engine.adapt(state, streams, factor=self.adapt_factor), False
        while ws.done < n:
            end = min(n, ws.done + every) if every else n
            state, carry = self.engine.adapt_part(state, streams, ws.done, end,
                                                  ws.sums.get("carry"))
            ws.done, ws.sums = end, {"carry": carry}
            if ws.done < n and save is not None:
                save(state, ws)
                if stop():
                    return state, True
        return state, False

    def _accumulate(self, ws: WarmUpState, state: REState, info: REInfo) -> None:
        if ws.stage == "ladder":
            if not ws.sums:
                ws.sums = {"attempted": np.zeros(self.engine.n_slots - 1),
                           "accepted": np.zeros(self.engine.n_slots - 1)}
            ws.sums["attempted"] += info.swap_attempted_k
            ws.sums["accepted"] += info.swap_accepted_k
            return
        if ws.stage == "retune":
            if not ws.sums:
                ws.sums = {"accepted": np.zeros(self.engine.n_slots)}
            ws.sums["accepted"] += info.n_accepted_k
            return
        if ws.stage == "budget":
            if ws.sums:
                lag1_sums(ws.sums["pairs"], ws.sums["energy"], ws.sums["replica"],
                          info.energy_k, info.replica_k,
                          swaps_first=bool(self.engine.swap.before_propagation))
            else:
                ws.sums = {"pairs": np.zeros((self.engine.n_slots, len(COLUMNS)))}
            ws.sums["energy"] = np.array(info.energy_k, dtype=np.float64)
            ws.sums["replica"] = np.array(info.replica_k, dtype=np.float64)
            return
        theta = np.stack([s.theta for s in state.slots])
        if not ws.sums:
            ws.sums = {"total": np.zeros_like(theta), "total_sq": np.zeros_like(theta)}
        ws.sums["total"] += theta
        ws.sums["total_sq"] += theta * theta

    def _finish_sampling(self, ws: WarmUpState, state: REState) -> REState:
        """Move the rungs (a ladder round) or install the masses, then go to the re-tune; or
        correct the step sizes from the measured acceptance (the end of the stage)."""
        engine = self.engine
        if ws.stage == "budget":
            sampled = [not isinstance(sm, PriorRung) for sm in engine.samplers]
            rho = rho1(ws.sums["pairs"])
            before = engine.n_trajectories_k
            lo, hi = self.budget_bounds
            counts = allocate(rho, before, sampled, lo=lo, hi=hi)
            engine.set_trajectories(counts)
            ws.records.append({
                "stage": "budget", "iterations": ws.done,
                "rho1": [float(r) if ok and np.isfinite(r) else None
                         for r, ok in zip(rho, sampled, strict=True)],
                "measured_with": [int(c) for c in before],
                "trajectories": [int(c) for c in counts]})
            return state
        if ws.stage == "retune":
            sampled = [not isinstance(sm, PriorRung) for sm in engine.samplers]
            n = ws.done * engine.n_trajectories_k        # transitions per rung
            record: dict[str, Any] = {
                "stage": "retune", "round": ws.round + 1, "iterations": ws.done,
                "measured_at": _per_slot([st.step_size for st in state.slots], sampled),
                "acceptance": _per_slot(ws.sums["accepted"] / np.maximum(n, 1), sampled),
                "transitions": _per_slot(n, sampled)}
            rounds = [r for r in ws.records if r.get("stage") == "retune"] + [record]
            measured = [[(r["measured_at"][k], r["acceptance"][k], r["transitions"][k])
                         for r in rounds] if ok else [] for k, ok in enumerate(sampled)]
            state = engine.correct_step_sizes(state, measured)
            record["step_size"] = _per_slot([st.step_size for st in state.slots], sampled)
            ws.records.append(record)
            return state
        if ws.stage == "ladder":
            rejection = rejection_rates(ws.sums["attempted"], ws.sums["accepted"])
            ws.records.append({"round": ws.round + 1, "iterations": ws.done,
                               "temperatures": [float(t) for t in engine.ladder.temperature_k],
                               "rejection": [float(x) for x in rejection],
                               "barrier": float(rejection.sum())})
            beta = equalised_betas(engine.ladder.beta_k, rejection,
                                   anchor_slots(engine.ladder, self.anchors))
            with np.errstate(divide="ignore"):
                engine.set_ladder(Ladder(1.0 / beta))
        else:
            engine.set_masses(list(mass_estimate(ws.sums["total"], ws.sums["total_sq"],
                                                 ws.done)))
        ws.phase, ws.done, ws.sums = "tune", 0, {}
        return state

    def _next_stage(self, ws: WarmUpState) -> None:
        ws.phase, ws.done, ws.sums = "sample", 0, {}
        if ((ws.stage == "ladder" and ws.round + 1 < self.rounds)
                or (ws.stage == "retune" and ws.round + 1 < self.retune_rounds)):
            ws.round += 1
        else:
            ws.stage = self._stage_after(ws.stage)
            if ws.stage == "retune":
                ws.round = 0


def _per_slot(values: Any, sampled: Sequence[bool]) -> list[float | None]:
    """``values`` as floats for JSON, None at the slots without a sampler of their own."""
    return [float(v) if ok else None for v, ok in zip(values, sampled, strict=True)]


def mass_estimate(total: np.ndarray, total_sq: np.ndarray, n: int) -> np.ndarray:
    """Per-rung masses from the sums of ``n`` draws: the inverse variances, regularised
    towards 1 as Stan does (``var_reg = n/(n+5) var + 1e-3 * 5/(n+5)``)."""
    mean = total / n
    var = np.maximum(total_sq / n - mean * mean, 0.0) * n / max(n - 1, 1)
    reg = (n / (n + 5.0)) * var + 1e-3 * (5.0 / (n + 5.0))
    return np.asarray(1.0 / reg)


def adapt_ladder(engine: ReplicaExchange, state: REState, streams: Streams, *, rounds: int,
                 first_length: int, anchors: Sequence[float] = (),
                 adapt_factor: float = 0.9) -> tuple[REState, list[dict[str, Any]]]:
    """Run ``rounds`` rounds of ladder adaptation on ``engine`` (its ladder is changed in
    place); return the state at the end and one record per round."""
    warm = WarmUp(engine, rounds=rounds, first_length=first_length, anchors=anchors,
                  adapt_factor=adapt_factor)
    ws = warm.start()
    state, ws = warm.run(state, streams, ws)
    return state, ws.records


def adapt_masses(engine: ReplicaExchange, state: REState, streams: Streams, *,
                 n_iterations: int, first_iteration: int = 1,
                 adapt_factor: float = 0.9) -> REState:
    """Estimate a diagonal mass matrix per rung from ``n_iterations`` iterations and install it.

    The masses of rung k are the inverse of the variances of the parameters sampled there,
    regularised towards 1 (:func:`mass_estimate`), so that HMC's momenta match each
    direction's scale at that temperature (the layers of M(3) differ in scale by an order of
    magnitude, and the spread grows with T). The step sizes are then re-tuned. Like the
    ladder, the masses are frozen before production.
    """
    warm = WarmUp(engine, mass_iterations=n_iterations, adapt_factor=adapt_factor)
    state, _ = warm.run(state, streams, warm.start(int(first_iteration) - 1))
    return state


__all__ = ["PHASES", "STAGES", "STAGE_NAMES", "WarmUp", "WarmUpState", "adapt_ladder",
           "adapt_masses", "anchor_slots", "mass_estimate", "planned_iterations"]
