#!/usr/bin/env python
"""Does a per-rung diagonal mass matrix from warm-up help NRPT on M(3)?

M(3) on D50, NRPT (deo swaps) over T in [t_min, t_max] plus a prior rung, ladder adapted in
warm-up rounds; then either unit masses or per-rung masses estimated from ``--mass-iters``
warm-up iterations (:func:`thermonet.tempering.warmup.adapt_masses`); then production. Prints
per scheme: restarts, round trips, the barrier, and dt / acceptance at the coldest and hottest
finite rungs. Counts are deterministic for a seed; wall time is for scale only.

    python benchmarks/bench_masses.py --iters 400
"""  # noqa: D400 - the summary is the question answered, and the --help description

from __future__ import annotations

import argparse
import time

import numpy as np
from harness import cpu_model


def run(masses: bool, args) -> dict:
    """Run NRPT on M(3) with unit or per-rung masses and return its mixing and step statistics."""
    from thermonet.analysis.mixing import replica_passages
    from thermonet.architectures.mlp import M3
    from thermonet.data import load_dataset
    from thermonet.priors import BoxPrior
    from thermonet.samplers.hmc import HMC
    from thermonet.tempering import DeterministicEvenOdd, Ladder, ReplicaExchange
    from thermonet.tempering.warmup import adapt_ladder, adapt_masses

    arch = M3()
    pot = arch.potential(load_dataset("D50"))
    ladder = Ladder.geometric(args.t_min, args.t_max, args.rungs).with_prior_rung()
    re = ReplicaExchange(HMC, pot, ladder, prior=BoxPrior.for_architecture(arch),
                         sampler_config=HMC.Config(n_leapfrog=args.leapfrog,
                                                   step_size_jitter=0.2),
                         swap=DeterministicEvenOdd(), workers=2)
    streams = re.make_streams(args.seed)
    t0 = time.perf_counter()
    st = re.burn_in(arch.initial_draw, streams, blocks=(5,))
    st, rounds = adapt_ladder(re, st, streams, rounds=4, first_length=8)
    warm = sum(r["iterations"] for r in rounds)
    if masses:
        st = adapt_masses(re, st, streams, n_iterations=args.mass_iters, first_iteration=warm + 1)
        warm += args.mass_iters
    replica, acc, dt = [], [], []
    for i in range(1, args.iters + 1):
        st, info = re.step(st, streams, iteration=warm + i)
        replica.append(info.replica_k)
        acc.append(info.n_accepted_k)
        dt.append(info.step_size_k)
    passages = replica_passages(np.array(replica))
    a = np.mean(acc, axis=0)
    d = np.mean(dt, axis=0)
    finite = int(np.isfinite(re.ladder.temperature_k).sum())
    return {"masses": masses, "restarts": int(np.sum(passages.restarts)),
            "round_trips": int(np.sum(passages.round_trips)), "barrier": rounds[-1]["barrier"],
            "acc_cold": float(a[0]), "acc_hot": float(a[finite - 1]),
            "dt_cold": float(d[0]), "dt_hot": float(d[finite - 1]),
            "wall_s": time.perf_counter() - t0}


def main() -> int:
    """Run both mass schemes and print one table row for each."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iters", type=int, default=400)
    ap.add_argument("--mass-iters", type=int, default=100)
    ap.add_argument("--rungs", type=int, default=16)
    ap.add_argument("--t-min", type=float, default=0.1)
    ap.add_argument("--t-max", type=float, default=10.0)
    ap.add_argument("--leapfrog", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    print(f"machine: {cpu_model()}; M3 on D50, {args.rungs} rungs on [{args.t_min}, "
          f"{args.t_max}] + prior rung, deo, L = {args.leapfrog}, {args.iters} iterations")
    print(f"{'masses':10s} {'restarts':>8s} {'trips':>6s} {'Lambda':>7s} {'acc T_min':>9s} "
          f"{'acc T_max':>9s} {'dt T_min':>9s} {'dt T_max':>9s} {'wall s':>7s}")
    for masses in (False, True):
        r = run(masses, args)
        print(f"{'per rung' if masses else 'unit':10s} {r['restarts']:8d} {r['round_trips']:6d} "
              f"{r['barrier']:7.3g} {r['acc_cold']:9.2f} {r['acc_hot']:9.2f} "
              f"{r['dt_cold']:9.2e} {r['dt_hot']:9.2e} {r['wall_s']:7.1f}")
    return 0


if __name__ == "__main__":
    from thermonet.kernels import configure

    configure()
    raise SystemExit(main())
