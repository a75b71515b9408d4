#!/usr/bin/env python
r"""Round trips per million gradients: the paper's ladder against NRPT with an adapted ladder.

M(3) on the paper's D50 over T in [0.01, 100], HMC with the same trajectory length at every
rung, the same seed, and the same gradient budget:

* paper: 112 fixed geometric rungs, random adjacent pairs after propagation (Alg. 2, Table 1),
  step sizes adapted every 25 iterations as the paper does;
* nrpt: K geometric rungs plus a prior rung at beta = 0, deterministic even-odd swaps, the
  ladder adapted in warm-up rounds (Syed et al. 2022, Alg. 4) and then frozen, with the
  warm-up's gradients charged to its budget;
* adaptive: nrpt, then ``--budget-iterations`` more warm-up iterations measuring each rung's
  energy autocorrelation, from which the trajectories per rung are re-allocated at the same
  total (``[ladder] local_budget = "adaptive"``, :mod:`thermonet.tempering.local_budget`),
  those iterations charged too. With ``--trajectories 1`` there is nothing to re-allocate
  (every rung keeps at least one), so compare at 2 or more.

Counts are deterministic for a seed; the wall time is printed for scale only. A round trip is
cold end -> hot end -> cold end; a restart is an arrival at the cold end of a replica that was
regenerated at the prior rung. Usage::

    python benchmarks/bench_nrpt.py            # budget 2e6 gradients per scheme
    python benchmarks/bench_nrpt.py --quick    # 4e5
    python benchmarks/bench_nrpt.py --quick --trajectories 2 --schemes nrpt adaptive

``--runs FIRST_DIR SECOND_DIR`` compares two finished ``thermonet run`` directories instead
(the long runs of docs/performance.md, made with the run's full warm-up; or two NRPT runs
with other local moves, as docs/lab/2026-11-28-m3-masses.md): it charges each run its
warm-up gradients (mass estimation and an adaptive local budget's measurement included),
cuts the longer run at the shorter one's total so that both spend the same number of
gradients (or both at ``--budget``; one directory alone is counted at ``--budget``, to set a
run beside counts already published), counts round trips and restarts in that budget, and
sets them beside what the same swap rejection rates allow under efficient
local exploration (ELE): the expectation for NRPT, an upper bound for random pairs
(:func:`thermonet.analysis.ideal_exchange.random_pairs_bound`)::

    thermonet run sample_runs/nrpt_M3_D50.toml --out runs/rt_nrpt \
        --set run.n_iterations=30000 --set run.sample_every=2000
    thermonet run sample_runs/nrpt_M3_D50.toml --out runs/rt_paper \
        --set run.n_iterations=17000 --set run.sample_every=2000 \
        --set ladder.n_temperatures=112 --set ladder.prior_rung=false \
        --set ladder.swap_scheme=random-pairs --set ladder.adapt_rounds=0
    python benchmarks/bench_nrpt.py --runs runs/rt_nrpt runs/rt_paper

The paper's scheme as Table 1 runs it (ten trajectories of L = 100 per rung and iteration,
the end-point box test, step sizes adapted every 25 iterations), at the same budget::

    thermonet run sample_runs/fig3_M3_D50.toml --out runs/rt_table1 --seed 1 \
        --set run.n_iterations=810 --set run.sample_every=0
    python benchmarks/bench_nrpt.py --runs runs/rt_nrpt runs/rt_table1

It also prints the 95 % interval of the measured ratio
(:func:`thermonet.stats.rate_ratio_interval`).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from harness import cpu_model, vector_flags, versions

T_MIN, T_MAX = 0.01, 100.0


def round_trips(replica_nk: np.ndarray) -> int:
    """Cold -> hot -> cold trips of all replicas (slot 0 cold, slot K-1 hot)."""
    from thermonet.analysis import round_trips as count

    return int(count(replica_nk))


def run_scheme(name: str, budget: float, n_leapfrog: int, k_nrpt: int, seed: int,
               wall: str, n_trajectories: int = 1, budget_iterations: int = 200) -> dict:
    """Run scheme ``name`` on M(3) for ``budget`` gradients and return its round trips and costs."""
    from thermonet.architectures.mlp import M3
    from thermonet.data import load_dataset
    from thermonet.priors import BoxPrior
    from thermonet.samplers.hmc import HMC
    from thermonet.tempering import DeterministicEvenOdd, Ladder, RandomPairs, ReplicaExchange
    from thermonet.tempering.warmup import WarmUp, adapt_ladder

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
                         workers=2, n_trajectories=1 if name == "paper" else n_trajectories)
    streams = re.make_streams(seed)
    t0 = time.perf_counter()
    state = re.burn_in(arch.initial_draw, streams, blocks=(5,))
    finite = np.isfinite(re.ladder.temperature_k)

    def per_iteration_now() -> int:        # a prior draw: 1 gradient
        n = re.n_trajectories_k
        return int(n[finite].sum()) * n_leapfrog + int(n[~finite].sum())

    per_iteration = per_iteration_now()
    spent = 0.0
    barrier = float("nan")
    counts = ""
    if name in ("nrpt", "adaptive"):
        state, rounds = adapt_ladder(re, state, streams, rounds=6, first_length=8)
        spent += sum(r["iterations"] for r in rounds) * per_iteration
        barrier = rounds[-1]["barrier"]
    if name == "adaptive":
        warm = WarmUp(re, budget_iterations=budget_iterations)
        state, _ = warm.run(state, streams, warm.start(sum(r["iterations"] for r in rounds)))
        spent += budget_iterations * per_iteration
        per_iteration = per_iteration_now()
        counts = " ".join(str(c) for c in re.n_trajectories_k[finite])
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
            "barrier": barrier, "wall_s": elapsed, "counts": counts}


def bound_repeats(n_iterations: int) -> int:
    """Simulated ladders for :func:`random_pairs_bound`: about 4e5 iterations in all, 16-1024."""
    return int(min(1024, max(16, 400_000 // max(n_iterations, 1))))


def run_costs(run_dir: str) -> dict:
    """A finished run's gradients per production iteration, its warm-up's gradients
    (ladder rounds, mass estimation, the re-tunes along the chain after them, the corrected
    rounds; not the initialisation, which both schemes share), and its trace."""
    import tomllib

    from thermonet.analysis import summarise
    from thermonet.io.trace import read_trace

    with open(f"{run_dir}/config.toml", "rb") as fh:
        cfg = tomllib.load(fh)
    s = summarise(run_dir)
    temps = np.asarray(s["temperatures"], dtype=np.float64)
    finite = int(np.isfinite(temps).sum())
    length = int(cfg["sampler"]["n_leapfrog"])
    per_iteration = finite * int(cfg["ladder"]["n_trajectories"]) * length \
        + (temps.size - finite)                       # a prior draw: one gradient, at most
    rounds = s.get("ladder_rounds") or []
    retune = s.get("step_size_retune") or []
    warm_iterations = sum(r["iterations"] for r in rounds) + sum(r["iterations"] for r in retune)
    # per-rung masses: their estimation iterations and the dt re-tune after them
    masses = int(cfg["ladder"].get("adapt_masses", 0)) if s.get("per_rung_masses") else 0
    warm_iterations += masses
    # an adaptive local budget measures each rung's rho1 over these iterations, at the
    # uniform scheme's gradients per iteration (the allocation keeps the total)
    adaptive = cfg["ladder"].get("local_budget") == "adaptive"
    warm_iterations += int(cfg["ladder"].get("local_budget_iterations", 0)) if adaptive else 0
    tune = (len(rounds) + (masses > 0)) \
        * int(cfg["sampler"].get("warmup_transitions", 0)) * finite * length
    label = f"{cfg['ladder']['swap_scheme']}, {cfg['ladder']['n_trajectories']} traj" \
        + (", masses" if masses else "") + (", adaptive" if adaptive else "")
    return {"dir": run_dir, "scheme": cfg["ladder"]["swap_scheme"], "label": label,
            "slots": temps.size,
            "per_iteration": per_iteration,
            "warmup": warm_iterations * per_iteration + tune,
            "barrier": rounds[-1]["barrier"] if rounds else float("nan"),
            "trace": read_trace(run_dir)}


def compare_runs(run_dirs: list[str], budget: float | None = None) -> int:
    """Round trips of one or two finished runs at an equal gradient budget (module
    docstring): the smaller run's total, or ``budget`` if given (at most that total)."""
    from thermonet.analysis.ideal_exchange import ideal_passages, random_pairs_bound
    from thermonet.analysis.mixing import replica_passages, swap_barrier
    from thermonet.stats import rate_ratio_interval

    if len(run_dirs) not in (1, 2):
        raise SystemExit(f"--runs got {len(run_dirs)} directories; expected one or two")
    runs = [run_costs(d) for d in run_dirs]
    total = min(r["warmup"] + r["per_iteration"] * len(r["trace"]["iteration"]) for r in runs)
    if budget is not None and budget > total:
        raise SystemExit(f"--budget {budget:.4g} exceeds the gradients of the run(s), "
                         f"{total:.4g}; expected at most that (or no --budget)")
    budget = total if budget is None else float(budget)
    v = versions()
    print(f"machine : {cpu_model()}, {vector_flags()}; python {v['python']}, "
          f"numpy {v['numpy']}, numba {v['numba']}")
    print(f"budget  : {budget:.4g} gradients per scheme (warm-up charged; initialisation not)")
    print(f"{'scheme':22s} {'slots':>5s} {'grad/it':>7s} {'warm-up':>9s} {'iters':>6s} "
          f"{'trips':>5s} {'restarts':>8s} {'trips/1e6':>9s} {'ELE trips':>10s} "
          f"{'ELE/1e6':>8s} {'Lambda':>6s}")
    rates, trips_of = [], []
    for r in runs:
        n = int((budget - r["warmup"]) // r["per_iteration"])
        tr = r["trace"]
        p = replica_passages(tr["replica_k"][:n])
        rejection = swap_barrier(tr["swap_attempted_k"][:n], tr["swap_accepted_k"][:n]).rejection
        if r["scheme"] == "random-pairs":
            # a short run (the Table 1 local sampler affords ~800 iterations) needs many
            # simulated ladders to resolve a mean far below one trip
            ele = random_pairs_bound(rejection, n, repeats=bound_repeats(n))
            label = "<="
        else:
            ele = ideal_passages(rejection, n, scheme=r["scheme"])
            label = "~"
        trips = int(p.round_trips.sum())
        trips_of.append(trips)
        rates.append((trips / budget * 1e6, ele.round_trips / budget * 1e6))
        print(f"{r['label']:22s} {r['slots']:5d} {r['per_iteration']:7d} {r['warmup']:9.3g} "
              f"{n:6d} {trips:5d} {int(p.restarts.sum()):8d} {rates[-1][0]:9.3f} "
              f"{label + format(ele.round_trips, '.1f'):>10s} {rates[-1][1]:8.3f} "
              f"{r['barrier']:6.3g}")
    if len(runs) == 1:
        return 0
    low, high = rate_ratio_interval(trips_of[0], trips_of[1])
    (first, _), (second, second_ele) = rates
    names = f"{runs[0]['label']} / {runs[1]['label']}"
    print(f"{names}, measured: {first / second:.1f}x" if second else
          f"{names}, measured: the second made no round trip (the first {first:.3f} per "
          f"1e6 gradients)")
    print(f"  95 % interval of the ratio (Poisson counts, equal budgets): {low:.1f}-"
          + (f"{high:.1f}x" if np.isfinite(high) else "inf"))
    print(f"first measured / the second's ELE: {first / second_ele:.1f}x" if second_ele
          else "the second's ELE: 0 round trips in this budget")
    return 0


def main() -> int:
    """Run the schemes (or compare two run directories) and print the table and ratios."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", nargs="+", metavar="RUN_DIR",
                    help="count one finished run directory, or compare two at an equal "
                         "gradient budget (--budget: at that budget instead of the smaller "
                         "run's total)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--budget", type=float, default=None, help="gradients per scheme")
    ap.add_argument("--leapfrog", type=int, default=10)
    ap.add_argument("--rungs", type=int, default=24, help="finite rungs of the NRPT ladder")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--trajectories", type=int, default=1,
                    help="trajectories per rung and swap round of nrpt and adaptive (the "
                         "uniform budget adaptive re-allocates)")
    ap.add_argument("--budget-iterations", type=int, default=200,
                    help="warm-up iterations measuring rho1 for adaptive")
    ap.add_argument("--schemes", nargs="+", default=["paper", "nrpt", "adaptive"],
                    choices=("paper", "nrpt", "adaptive"))
    ap.add_argument("--wall", default="reflect", choices=("reflect", "endpoint"),
                    help="box wall of NRPT's HMC (the paper scheme keeps its end-point test)")
    args = ap.parse_args()
    if args.runs:
        return compare_runs(args.runs, args.budget)
    budget = args.budget or (4e5 if args.quick else 2e6)
    v = versions()
    print(f"machine : {cpu_model()}, {vector_flags()}; python {v['python']}, "
          f"numpy {v['numpy']}, numba {v['numba']}")
    print(f"problem : M(3) on D50, T in [{T_MIN}, {T_MAX}], HMC L = {args.leapfrog}, "
          f"budget {budget:.3g} gradients per scheme, seed {args.seed}, NRPT wall "
          f"{args.wall!r} with dt jitter 0.2, {args.trajectories} trajectories per swap round")
    rows = [run_scheme(s, budget, args.leapfrog, args.rungs, args.seed, args.wall,
                       args.trajectories, args.budget_iterations) for s in args.schemes]
    print(f"{'scheme':8s} {'rungs':>5s} {'iters':>6s} {'gradients':>10s} {'trips':>6s} "
          f"{'restarts':>8s} {'per 1e6 grad':>12s} {'Lambda':>7s} {'wall s':>7s}")
    for r in rows:
        print(f"{r['scheme']:8s} {r['rungs']:5d} {r['iterations']:6d} {r['gradients']:10.3g} "
              f"{r['round_trips']:6d} {r['restarts']:8d} {r['per_million']:12.2f} "
              f"{r['barrier']:7.3g} {r['wall_s']:7.1f}")
    for r in rows:
        if r["counts"]:
            print(f"{r['scheme']}: trajectories per finite rung, cold to hot: {r['counts']}")
    by = {r["scheme"]: r for r in rows}
    for a, b in (("nrpt", "paper"), ("adaptive", "nrpt")):
        if a not in by or b not in by:
            continue
        if by[b]["round_trips"]:
            print(f"ratio {a} / {b}: {by[a]['per_million'] / by[b]['per_million']:.1f}x "
                  "(round trips are Poisson counts: +- sqrt(n) each)")
        else:
            print(f"ratio {a} / {b}: {b} made no round trip in {by[b]['gradients']:.3g} "
                  f"gradients ({a}: {by[a]['round_trips']})")
    return 0


if __name__ == "__main__":
    from thermonet.kernels import configure

    configure()    # as the command line does: before any kernel is imported
    raise SystemExit(main())
