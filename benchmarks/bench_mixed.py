#!/usr/bin/env python
"""Mixed precision end to end: HMC on M(3) with float32 gradients in the dynamics (and float64
energies in every accept test) against float64, in trajectories per CPU second and ESS of the
training energy per CPU second.

For each data set (D500, D5000 by default) and seed: a draw of the standard initialisation,
float64 dual-averaging adaptation of dt at temperature T and ``--burn`` trajectories; then,
from that same state with the same random stream and the same frozen dt, ``--trajectories``
trajectories with ``precision = "float64"`` and again with ``precision = "mixed"``. Every run
is one thread (BLAS and Numba); times are the process's CPU time, so other load on the
machine matters less than for wall times. The ESS is the rank-normalised bulk ESS of the
training energy (``thermonet.analysis.convergence.ess_bulk``) over the production
trajectories. Prints one row per (data, seed, precision) and the ratios mixed / float64 per
data set with their spread over the seeds and their geometric mean with a 95 % interval.
Pick ``--temperature`` where a chain of ``--burn`` trajectories reaches its stationary
distribution (M(3) on D500: T = 10, not T <= 3; docs/performance.md), or the ESS measures
the relaxation, not the sampler. Usage::

    python benchmarks/bench_mixed.py [--data D500 D5000] [--seeds 3] [--trajectories 600]
                                     [--burn 200] [--temperature 1.0]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from harness import cpu_model, limit_blas, vector_flags, versions


def run_chain(sampler, state, seed: int, n: int) -> tuple[float, float, float, np.ndarray]:
    """``n`` transitions from ``state``: CPU seconds, acceptance, ESS, energies."""
    rng = np.random.default_rng(seed)
    energies = np.empty(n)
    accepted = 0
    t0 = time.process_time()
    for i in range(n):
        state, info = sampler.step(state, rng)
        accepted += bool(info.is_accepted)
        energies[i] = state.energy
    cpu = time.process_time() - t0
    from thermonet.analysis.convergence import ess_bulk

    return cpu, accepted / n, float(ess_bulk(energies[None])), energies


def geometric(ratios: list[float]) -> str:
    """``; geometric mean G (95 % interval a-b)``: the mean of the log ratios with Student's
    t interval over the seeds. An ESS ratio is skewed (one seed's low float64 ESS gives a
    large ratio), so its log is the quantity to average."""
    if len(ratios) < 2:
        return ""
    from scipy import stats

    logs = np.log(ratios)
    m = float(logs.mean())
    half = float(stats.t.ppf(0.975, len(logs) - 1) * logs.std(ddof=1) / np.sqrt(len(logs)))
    return (f"; geometric mean {np.exp(m):.2f} (95 % interval {np.exp(m - half):.2f}-"
            f"{np.exp(m + half):.2f})")


def main() -> int:
    """Print the tables."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", nargs="+", default=["D500", "D5000"])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--trajectories", type=int, default=600)
    ap.add_argument("--burn", type=int, default=200)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--leapfrog", type=int, default=20)
    args = ap.parse_args()

    import numba

    from thermonet.data import load_data
    from thermonet.priors import BoxPrior
    from thermonet.registry import get_architecture, get_sampler

    numba.set_num_threads(1)
    v = versions()
    print(f"machine : {cpu_model()}; {vector_flags()}; "
          f"llvm cpu {v.get('llvm_cpu')}")
    print(f"versions: python {v['python']}, numpy {v['numpy']}, numba {v['numba']}; "
          f"blas {v.get('blas')}")
    print(f"M(3), T = {args.temperature}, L = {args.leapfrog}, reflecting walls, dt jitter 0.2, "
          f"{args.trajectories} trajectories after {args.burn} (float64, dt adapted), 1 thread")
    print(f"{'data':>6} {'seed':>4} {'precision':>9} {'dt':>9} {'accept':>7} {'traj/CPU s':>11} "
          f"{'ESS':>7} {'ESS/CPU s':>10} {'<E>':>10}")
    arch = get_architecture("M3")
    prior = BoxPrior.for_architecture(arch)
    hmc = get_sampler("hmc")
    with limit_blas(1):
        for name in args.data:
            pot = arch.potential(load_data(name, test="official").train)
            ratios: dict[str, list[float]] = {"traj": [], "ess": [], "ess_s": []}
            for seed in range(args.seeds):
                rng = np.random.default_rng(seed)
                warm = hmc(pot, prior=prior, temperature=args.temperature,
                           n_leapfrog=args.leapfrog, step_size=1e-3, wall="reflect",
                           step_size_jitter=0.2, adapt_method="dual-averaging")
                state = warm.init(arch.initial_draw(rng))
                for _ in range(3):
                    state = warm.adapt(state, rng)
                    for _ in range(args.burn // 3):
                        state, _ = warm.step(state, rng)
                row = {}
                for precision in ("float64", "mixed"):
                    sampler = hmc(pot, prior=prior, temperature=args.temperature,
                                  n_leapfrog=args.leapfrog, step_size=state.step_size,
                                  wall="reflect", step_size_jitter=0.2, adapt_method="fixed",
                                  precision=precision)
                    start = sampler.init(state.theta, step_size=state.step_size)
                    sampler.step(start, np.random.default_rng(99))       # compile
                    cpu, acc, ess, e = run_chain(sampler, start, 1000 + seed,
                                                 args.trajectories)
                    row[precision] = (cpu, ess)
                    print(f"{name:>6} {seed:>4} {precision:>9} {state.step_size:>9.2e} "
                          f"{acc:>7.3f} {args.trajectories / cpu:>11.2f} {ess:>7.1f} "
                          f"{ess / cpu:>10.3f} {e.mean():>10.2f}", flush=True)
                (c64, e64), (c32, e32) = row["float64"], row["mixed"]
                ratios["traj"].append(c64 / c32)
                ratios["ess"].append(e32 / e64)
                ratios["ess_s"].append((e32 / c32) / (e64 / c64))
            for key, label in (("traj", "trajectories per CPU s"), ("ess", "ESS"),
                               ("ess_s", "ESS per CPU s")):
                vals = ratios[key]
                spread = statistics.stdev(vals) if len(vals) > 1 else float("nan")
                print(f"{name}: mixed / float64, {label}: {statistics.mean(vals):.2f} "
                      f"(sd {spread:.2f} over {len(vals)} seeds; "
                      f"{', '.join(f'{x:.2f}' for x in vals)}){geometric(vals)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
