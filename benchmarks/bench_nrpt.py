#!/usr/bin/env python
"""Round trips per million gradients: the paper's ladder against NRPT with an adapted ladder.

M(3) on the paper's D50 over T in [0.01, 100], HMC with the same trajectory length at every
rung, the same seed, and the same gradient budget:

* paper: 112 fixed geometric rungs, random adjacent pairs after propagation (Alg. 2, Table 1),
  step sizes adapted every 25 iterations as the paper does;
* nrpt: K geometric rungs plus a prior rung at beta = 0, deterministic even-odd swaps, the
  ladder adapted in warm-up rounds (Syed et al. 2022, Alg. 4) and then frozen, with the
  warm-up's gradients charged to its budget.

Counts are deterministic for a seed; the wall time is printed for scale only. A round trip is
cold end -> hot end -> cold end; a restart is an arrival at the cold end of a replica that was
regenerated at the prior rung. Usage::

    python benchmarks/bench_nrpt.py            # budget 2e6 gradients per scheme
    python benchmarks/bench_nrpt.py --quick    # 4e5
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from harness import cpu_model, versions

T_MIN, T_MAX = 0.01, 100.0


def round_trips(replica_nk: np.ndarray) -> int:
    """Cold -> hot -> cold trips of all replicas (slot 0 cold, slot K-1 hot)."""
    from thermonet.analysis import round_trips as count

    return int(count(replica_nk))


def run_scheme(name: str, budget: float, n_leapfrog: int, k_nrpt: int, seed: int,
               wall: str) -> dict:
    from thermonet.architectures.mlp import M3
    from thermonet.data import load_dataset
    from thermonet.priors import BoxPrior
    from thermonet.samplers.hmc import HMC
    from thermonet.tempering import DeterministicEvenOdd, Ladder, RandomPairs, ReplicaExchange
    from thermonet.tempering.warmup import adapt_ladder

    arch = M3()
    pot = arch.potential(load_dataset("D50"))
    prior = BoxPrior.for_architecture(arch)
    if name == "paper":
        config = HMC.Config(n_leapfrog=n_leapfrog)
    else:
        config = HMC.Config(n_leapfrog=n_leapfrog, wall=wall, step_size_jitter=0.2)
    if name == "paper":
        ladder, swap = Ladder.geometric(T_MIN, T_MAX, 112), RandomPairs()
    else:
        ladder = Ladder.geometric(T_MIN, T_MAX, k_nrpt).with_prior_rung()
        swap = DeterministicEvenOdd()
    re = ReplicaExchange(HMC, pot, ladder, prior=prior, sampler_config=config, swap=swap,
                         workers=2)
    streams = re.make_streams(seed)
    t0 = time.perf_counter()
    state = re.burn_in(arch.initial_draw, streams, blocks=(5,))
    finite = int(np.isfinite(re.ladder.temperature_k).sum())
    per_iteration = finite * n_leapfrog + (re.n_slots - finite)   # a prior draw: 1 gradient
    spent = 0.0
    barrier = float("nan")
    if name == "nrpt":
        state, rounds = adapt_ladder(re, state, streams, rounds=6, first_length=8)
        spent += sum(r["iterations"] for r in rounds) * per_iteration
        barrier = rounds[-1]["barrier"]
    replica = []
    i = 0
    while spent + per_iteration <= budget:
        i += 1
        if name == "paper" and i % 25 == 1 and i > 1:
            state = re.adapt(state, streams, factor=0.9)
        state, info = re.step(state, streams, iteration=i)
        replica.append(info.replica_k)
        spent += per_iteration
    elapsed = time.perf_counter() - t0
    trips = round_trips(np.array(replica)) if replica else 0
    from thermonet.analysis.mixing import replica_passages

    restarts = int(replica_passages(np.array(replica)).restarts.sum()) if replica else 0
    return {"scheme": name, "rungs": re.n_slots, "iterations": i, "gradients": spent,
            "round_trips": trips, "restarts": restarts, "per_million": trips / spent * 1e6,
            "barrier": barrier, "wall_s": elapsed}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--budget", type=float, default=None, help="gradients per scheme")
    ap.add_argument("--leapfrog", type=int, default=10)
    ap.add_argument("--rungs", type=int, default=24, help="finite rungs of the NRPT ladder")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--wall", default="reflect", choices=("reflect", "endpoint"),
                    help="box wall of NRPT's HMC (the paper scheme keeps its end-point test)")
    args = ap.parse_args()
    budget = args.budget or (4e5 if args.quick else 2e6)
    v = versions()
    print(f"machine : {cpu_model()}; python {v['python']}, numpy {v['numpy']}, "
          f"numba {v['numba']}")
    print(f"problem : M(3) on D50, T in [{T_MIN}, {T_MAX}], HMC L = {args.leapfrog}, "
          f"budget {budget:.3g} gradients per scheme, seed {args.seed}, NRPT wall "
          f"{args.wall!r} with dt jitter 0.2")
    rows = [run_scheme(s, budget, args.leapfrog, args.rungs, args.seed, args.wall)
            for s in ("paper", "nrpt")]
    print(f"{'scheme':8s} {'rungs':>5s} {'iters':>6s} {'gradients':>10s} {'trips':>6s} "
          f"{'restarts':>8s} {'per 1e6 grad':>12s} {'Lambda':>7s} {'wall s':>7s}")
    for r in rows:
        print(f"{r['scheme']:8s} {r['rungs']:5d} {r['iterations']:6d} {r['gradients']:10.3g} "
              f"{r['round_trips']:6d} {r['restarts']:8d} {r['per_million']:12.2f} "
              f"{r['barrier']:7.3g} {r['wall_s']:7.1f}")
    paper, nrpt = rows
    if paper["round_trips"]:
        print(f"ratio nrpt / paper: {nrpt['per_million'] / paper['per_million']:.1f}x")
    else:
        print(f"ratio nrpt / paper: paper made no round trip in {paper['gradients']:.3g} "
              f"gradients (nrpt: {nrpt['round_trips']})")
    return 0


if __name__ == "__main__":
    from thermonet.kernels import configure

    configure()    # as the command line does: before any kernel is imported
    raise SystemExit(main())
