#!/usr/bin/env python
"""The engine's own cost under MPI against the thread executor, at equal work.

One replica-exchange iteration over K slots is timed with work so small (a Gaussian energy,
one leapfrog step, one transition per slot) that what is left is the executor: handing out the
slots, gathering their states, setting the streams, the swaps. Three cases, each on the serial
executor, on R threads, and on R MPI ranks (``mpiexec -n R``), R = 2, 4, 8:

* ``overhead``: K = 8 slots of 2 parameters: the engine's cost per iteration;
* ``payload``: K = 112 slots (Table 1's ladder) of 13,970 parameters (M(3)): per iteration
  the ranks gather 112 HMC states (theta and gradient: 25 MB), as a Table 1 run does;
* ``swaps``: K = 8 slots, 10,000 random-pairs swap attempts per iteration against 0: the cost
  of one swap attempt (every rank decides every swap from the gathered energies).

This machine has 2 cores, so 4 and 8 ranks or threads are oversubscribed: those figures bound
the overhead from above (a rank waits for a core), they are not a speed-up. Medians and
minima of ``--iterations`` iterations after 3 warm-up iterations. Usage::

    python benchmarks/bench_mpi.py                 # everything (a few minutes)
    python benchmarks/bench_mpi.py --ranks 2 4     # fewer
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

CASES = {"overhead": (8, 2, None), "payload": (112, 13970, None),
         "swaps": (8, 2, 10000), "noswaps": (8, 2, 0)}


def engine(case: str, executor):
    """The replica-exchange engine of ``case`` on ``executor``."""
    from thermonet import registry
    from thermonet.priors import BoxPrior
    from thermonet.tempering import Ladder, RandomPairs, ReplicaExchange
    from thermonet.testsystems import Gaussian

    k, n, n_swaps = CASES[case]
    arch = Gaussian(n=n)
    hmc = registry.load("sampler", "hmc")
    config = hmc.Config(n_leapfrog=1, step_size=0.1)
    return ReplicaExchange(hmc, arch.potential(), Ladder.geometric(1.0, 10.0, k),
                           prior=BoxPrior.for_architecture(arch), sampler_config=config,
                           swap=RandomPairs(n_swaps), executor=executor)


def measure(case: str, executor, iterations: int) -> dict:
    """Seconds per iteration (median, min) on ``executor``; the same on every rank. BLAS is
    capped at one thread, as the runner does, so every executor does the same arithmetic."""
    from thermonet.kernels import threads

    with threads.blas_single():
        return _measure(case, executor, iterations)


def _measure(case: str, executor, iterations: int) -> dict:
    eng = engine(case, executor)
    streams = eng.make_streams(1)
    state = eng.init(0.1 * streams.swap.standard_normal(eng.potential.n_params))
    times = []
    for i in range(iterations + 3):
        t0 = time.perf_counter()
        state, _ = eng.step(state, streams, iteration=i + 1)
        times.append(time.perf_counter() - t0)
    times = times[3:]
    return {"median": statistics.median(times), "min": min(times),
            "energy": float(state.slots[0].energy)}


def worker(case: str, iterations: int) -> None:
    """Under mpiexec: every rank runs; rank 0 prints the result as JSON."""
    from thermonet.parallel import make_executor, world

    result = measure(case, make_executor(1, "mpi"), iterations)
    if world("mpi").is_root:
        print(json.dumps(result))


def mpi_run(mpiexec: str, ranks: int, case: str, iterations: int) -> dict:
    """Run :func:`worker` on ``ranks`` MPI ranks and return rank 0's result."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([mpiexec, "-n", str(ranks), sys.executable, __file__, "--worker", case,
                          "--iterations", str(iterations)], env=env, check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    """Time every case on the serial, thread and MPI executors and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--worker", choices=list(CASES))
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.iterations)
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from harness import cpu_model, versions

    from thermonet.parallel import SerialExecutor, ThreadExecutor

    beside = Path(sys.executable).parent / "mpiexec"
    mpiexec = str(beside) if beside.is_file() else shutil.which("mpiexec")
    if mpiexec is None:
        sys.exit("no mpiexec: pip install 'thermonet[mpi]'")
    import mpi4py

    print(f"# {cpu_model()}, {os.cpu_count()} logical cores (shared machine); mpi4py "
          f"{mpi4py.__version__}; {versions()}")
    print("# ms per iteration, median (min); 4 and 8 ranks/threads oversubscribe 2 cores")
    print(f"{'case':>9} {'R':>2} {'serial':>16} {'threads':>16} {'mpi':>16} {'mpi/threads':>11}")
    results = {}
    for case in CASES:
        serial = measure(case, SerialExecutor(), args.iterations)
        for r in args.ranks:
            threads = measure(case, ThreadExecutor(r), args.iterations)
            over_mpi = mpi_run(mpiexec, r, case, args.iterations)
            # the same energy after the same iterations: equal work, equal result
            assert over_mpi["energy"] == serial["energy"] == threads["energy"], (
                case, serial, threads, over_mpi)
            results[(case, r)] = (serial, threads, over_mpi)

            def f(x):
                return f"{1e3 * x['median']:7.3f} ({1e3 * x['min']:6.3f})"

            print(f"{case:>9} {r:>2} {f(serial)} {f(threads)} {f(over_mpi)} "
                  f"{over_mpi['median'] / threads['median']:11.2f}")
    for r in args.ranks:
        per_swap = {}
        for name, i in (("threads", 1), ("mpi", 2)):
            with_swaps = results[("swaps", r)][i]["median"]
            without = results[("noswaps", r)][i]["median"]
            per_swap[name] = (with_swaps - without) / CASES["swaps"][2]
        print(f"per swap attempt, R = {r}: threads {1e6 * per_swap['threads']:.2f} us, "
              f"mpi {1e6 * per_swap['mpi']:.2f} us")


if __name__ == "__main__":
    main()
