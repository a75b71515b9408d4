#!/usr/bin/env python
r"""Restarts per million gradients: the prior-only ladder against the two-leg ring with a
variational reference (thermonet.tempering.ring), on the quickstart's network or M(3).

By default 256-12-10 on the paper's D50, from the box prior to T = 1, HMC with the quickstart's
settings (L = 15, four trajectories per swap round, dt jitter 0.2, reflecting walls, step sizes
by dual averaging along the chain), the same seed and the same number of rungs; ``--arch M3``
(with ``--leapfrog``, ``--trajectories``, ``--data``) takes the paper's deep network instead:

* prior: 23 rungs and the prior rung, the ladder adapted in 4 rounds of 8, 16, 32, 64
  iterations (Syed et al. 2022, Alg. 4) and then frozen;
* ring: a fixed leg of 11 rungs and the prior rung, and a variational leg of 11 rungs and q;
  q fitted by moment matching to both target rungs and both legs' rungs equalised after each
  of 4 rounds of the same lengths, then frozen.

Every gradient is charged: the trajectories, one per prior or q draw, and on the ring the
re-evaluation of a configuration that a swap brings into a variational rung (its potential
depends on b). The warm-up's gradients are charged too, and production runs until the budget
is spent. A restart is an arrival at a target rung of a replica whose last visit to an end of
the ladder was to the prior (or, on the ring, to q); a round trip is a journey from a target
rung to an end of the ladder and back. Counts are deterministic for a seed; the wall time is
printed for scale only. Usage::

    python benchmarks/bench_vref.py                 # budget 3e6 gradients per scheme
    python benchmarks/bench_vref.py --budget 1e6
    python benchmarks/bench_vref.py --arch M3 --leapfrog 10 --trajectories 2 --rungs 32 \
        --budget 1e7 --workers 1 --scheme prior     # and --scheme ring in a second process
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from harness import cpu_model, vector_flags, versions

L, N_TRAJ, FIRST = 15, 4, 8
ROUNDS = 4   # warm-up rounds (--rounds)
ARCH, DATA, WORKERS = "quickstart", "D50", 2   # --arch, --data, --workers


def restarts(replica_nr: np.ndarray, targets: set[int], ends: set[int]) -> int:
    """Arrivals at a target position of replicas last seen at an end (positions per row)."""
    fresh: dict[int, bool] = {}
    count = 0
    for row in replica_nr:
        for pos, rep in enumerate(row):
            if pos in ends:
                fresh[int(rep)] = True
            elif pos in targets and fresh.get(int(rep), False):
                count += 1
                fresh[int(rep)] = False
    return count


def round_trips(replica_nr: np.ndarray, targets: set[int], ends: set[int]) -> int:
    """Completed journeys target -> an end -> target of each replica (positions per row)."""
    phase: dict[int, int] = {}     # 1: seen at a target, 2: then at an end
    count = 0
    for row in replica_nr:
        for pos, rep in enumerate(row):
            r, ph = int(rep), phase.get(int(rep), 0)
            if pos in targets:
                count += ph == 2
                phase[r] = 1
            elif pos in ends and ph >= 1:
                phase[r] = 2
    return count


def _problem():
    from thermonet.data import load_dataset
    from thermonet.priors import BoxPrior
    from thermonet.registry import get_architecture
    from thermonet.samplers.hmc import HMC

    arch = (get_architecture("mlp", hidden=[12]) if ARCH == "quickstart"
            else get_architecture(ARCH))
    pot = arch.potential(load_dataset(DATA))
    prior = BoxPrior.for_architecture(arch)
    config = HMC.Config(n_leapfrog=L, step_size_jitter=0.2, wall="reflect",
                        adapt_method="chain", target_accept=0.65, warmup_transitions=100)
    return arch, pot, prior, HMC, config


def run_prior(budget: float, seed: int, rungs: int) -> dict:
    """The prior-only ladder: warm-up, then production until ``budget`` gradients."""
    from thermonet.tempering import DeterministicEvenOdd, Ladder, ReplicaExchange
    from thermonet.tempering.warmup import adapt_ladder

    arch, pot, prior, hmc, config = _problem()
    re = ReplicaExchange(hmc, pot, Ladder.geometric(1.0, 100.0, rungs - 1).with_prior_rung(),
                         prior=prior, sampler_config=config, n_trajectories=N_TRAJ,
                         swap=DeterministicEvenOdd(), workers=WORKERS)
    streams = re.make_streams(seed)
    t0 = time.perf_counter()
    state = re.burn_in(arch.initial_draw, streams, blocks=(5, 10))
    per_it = (rungs - 1) * N_TRAJ * L + 1
    state, rounds = adapt_ladder(re, state, streams, rounds=ROUNDS, first_length=FIRST)
    warm = sum(r["iterations"] for r in rounds)
    spent = warm * per_it + ROUNDS * (rungs - 1) * 100 * L     # + the dt re-tunes
    rows, att, acc = [], 0, 0
    i = warm
    while spent + per_it <= budget:
        i += 1
        state, info = re.step(state, streams, iteration=i)
        rows.append(info.replica_k)
        att, acc = att + info.swap_attempted_k, acc + info.swap_accepted_k
        spent += per_it
    rej = 1.0 - acc / np.maximum(att, 1)
    return {"scheme": "prior", "rungs": re.n_slots, "iterations": len(rows), "gradients": spent,
            "warm-up": warm * per_it, "restarts": restarts(np.array(rows), {0},
                                                          {re.n_slots - 1}),
            "round_trips": round_trips(np.array(rows), {0}, {re.n_slots - 1}),
            "barrier": float(rej.sum()), "barrier_var": float("nan"),
            "wall_s": time.perf_counter() - t0}


def run_ring(budget: float, seed: int, rungs: int) -> dict:
    """The two-leg ring: warm-up with the reference fits, then production to ``budget``."""
    from thermonet.tempering import Ladder
    from thermonet.tempering.reference import GaussianReference
    from thermonet.tempering.ring import VariationalRing, fit_reference

    arch, pot, prior, hmc, config = _problem()
    half = rungs // 2
    ring = VariationalRing(hmc, pot, Ladder.geometric(1.0, 100.0, half - 1).with_prior_rung(),
                           GaussianReference.of_box(prior.sigma / 2),
                           np.linspace(1.0, 0.0, half), prior=prior, sampler_config=config,
                           n_trajectories=N_TRAJ, workers=WORKERS)
    streams = ring.make_streams(seed)
    t0 = time.perf_counter()
    state = ring.burn_in(arch.initial_draw, streams, blocks=(5, 10))
    sampled = ring.n_ring - 2
    per_it = sampled * N_TRAJ * L + 2
    spent, i = 0.0, 0
    for r in range(ROUNDS):
        n = FIRST * 2 ** r
        ring, state, _ = fit_reference(ring, state, streams, rounds=1, iterations=n,
                                       first_iteration=i + 1)
        i += n
        spent += n * (per_it + 2 * (ring.n_variational - 1)) + sampled * 100 * L
    warm = spent
    rows, att_f, acc_f, att_v, acc_v = [], 0, 0, 0, 0
    while spent + per_it <= budget:
        i += 1
        state, info = ring.step(state, streams, iteration=i)
        rows.append(info.replica_r)
        f, v = info.fixed, info.variational
        att_f, acc_f = att_f + f.swap_attempted_k, acc_f + f.swap_accepted_k
        att_v, acc_v = att_v + v.swap_attempted_k, acc_v + v.swap_accepted_k
        # a configuration swapped into a variational rung, or across the join, is re-evaluated
        spent += per_it + 2 * int(v.swap_accepted_k.sum()) + 2 * info.join_attempted
    rej_f = 1.0 - acc_f / np.maximum(att_f, 1)
    rej_v = 1.0 - acc_v / np.maximum(att_v, 1)
    targets = {ring.n_variational - 1, ring.n_variational}
    profile = " ".join(f"{b:.3f}:{x:.2f}" for b, x in zip(ring.path[1:], rej_v, strict=True))
    print(f"ring variational leg, b and the rejection of the pair (b_prev, b): {profile}")
    print("ring fixed leg, T and the rejection of the pair (T_prev, T): " + " ".join(
        f"{t:.3g}:{x:.2f}" for t, x in zip(ring.fixed.temperatures[1:], rej_f, strict=True)))
    return {"scheme": "ring", "rungs": ring.n_ring, "iterations": len(rows), "gradients": spent,
            "warm-up": warm, "restarts": restarts(np.array(rows), targets,
                                                  {0, ring.n_ring - 1}),
            "restarts_prior": restarts(np.array(rows), targets, {ring.n_ring - 1}),
            "round_trips": round_trips(np.array(rows), targets, {0, ring.n_ring - 1}),
            "barrier": float(rej_f.sum()), "barrier_var": float(rej_v.sum()),
            "wall_s": time.perf_counter() - t0}


def main() -> int:
    """Run the schemes and print one row each."""
    global ROUNDS, L, N_TRAJ, ARCH, DATA, WORKERS
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--budget", type=float, default=3e6, help="gradients per scheme")
    ap.add_argument("--rungs", type=int, default=24, help="rungs per scheme, ends included")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=ROUNDS,
                    help="warm-up rounds of 8, 16, 32, ... iterations")
    ap.add_argument("--scheme", choices=("prior", "ring", "both"), default="both")
    ap.add_argument("--arch", default=ARCH,
                    help="'quickstart' (256-12-10) or a registered architecture, e.g. M3")
    ap.add_argument("--data", default=DATA, help="a data set name, e.g. D50 or D500")
    ap.add_argument("--leapfrog", type=int, default=L, help="leapfrog steps L")
    ap.add_argument("--trajectories", type=int, default=N_TRAJ,
                    help="trajectories per swap round")
    ap.add_argument("--workers", type=int, default=WORKERS)
    args = ap.parse_args()
    ROUNDS, L, N_TRAJ = args.rounds, args.leapfrog, args.trajectories
    ARCH, DATA, WORKERS = args.arch, args.data, args.workers
    v = versions()
    print(f"machine : {cpu_model()} ({vector_flags()}); python "
          f"{v['python']}, numpy {v['numpy']}, numba {v['numba']}")
    name = "256-12-10" if ARCH == "quickstart" else ARCH
    print(f"problem : {name} on {DATA}, T in [1, inf], HMC L = {L} x {N_TRAJ}, budget "
          f"{args.budget:.3g} gradients per scheme, {args.rungs} rungs, seed {args.seed}, "
          f"{ROUNDS} warm-up rounds")
    runs = {"prior": [run_prior], "ring": [run_ring], "both": [run_prior, run_ring]}
    print(f"{'scheme':6s} {'rungs':>5s} {'iters':>6s} {'gradients':>10s} {'restarts':>8s} "
          f"{'per 1e6':>8s} {'trips':>5s} {'Lambda':>7s} {'Lambda_q':>8s} {'wall s':>7s}",
          flush=True)
    for fn in runs[args.scheme]:
        r = fn(args.budget, args.seed, args.rungs)
        extra = f" (from the prior: {r['restarts_prior']})" if "restarts_prior" in r else ""
        print(f"{r['scheme']:6s} {r['rungs']:5d} {r['iterations']:6d} {r['gradients']:10.3g} "
              f"{r['restarts']:8d} {r['restarts'] / r['gradients'] * 1e6:8.2f} "
              f"{r['round_trips']:5d} {r['barrier']:7.3g} {r['barrier_var']:8.3g} "
              f"{r['wall_s']:7.1f}{extra}",
              flush=True)
    return 0


if __name__ == "__main__":
    from thermonet.kernels import configure

    configure()    # as the command line does: before any kernel is imported
    raise SystemExit(main())
