#!/usr/bin/env python
"""Does the ~0.5 s calibration pick the same matrix-product backend as the full benchmark?

Usage::

    python benchmarks/bench_calibration.py                 # N = 500, 5000; 1 and 2 threads
    python benchmarks/bench_calibration.py --quick         # N = 500 only, 3 rounds

1. The calibration itself (``thermonet.kernels.matmul.calibration.measure`` and
   ``measure_own``, what a first run does), repeated ``--repeats`` times: the time of one
   128-row block of the M(3) products for each backend (``numpy``, ``own`` and, if installed,
   ``mkl``) and the choice.
2. The full M(3) float64 energy+gradient (``bench_mlp.py``'s thermonet worker) with each
   backend forced by ``THERMONET_BLAS``, in interleaved rounds, best round; 1-thread workers
   pinned to one CPU, as in ``bench_mlp.py``.
3. For every (N, threads): which backend the full measurement finds faster, the ratio, and
   whether the calibration chose it.

Without MKL the choice is between ``numpy`` and ``own``.
"""  # noqa: D400 - the summary is the question answered, and the --help description

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

from bench_mlp import Worker
from harness import cpu_model, vector_flags, versions


def calibration_table(repeats: int) -> list[dict]:
    """Run the backend calibration ``repeats`` times: each run's rates, choice and seconds."""
    from thermonet.kernels.matmul import backend, calibration

    dgemms = backend.candidates()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        rates = calibration.measure(dgemms)
        rates["own"] = calibration.measure_own()
        out.append({"rates": rates, "choice": calibration.choose(rates),
                    "seconds": time.perf_counter() - t0})
    return out


def main(argv=None) -> int:
    """Compare the calibration's backend choice with the full benchmark's and print the tables."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sizes", default=None, help="comma-separated N (default 500,5000)")
    ap.add_argument("--rounds", type=int, default=None, help="timing rounds (default 7)")
    ap.add_argument("--repeats", type=int, default=3, help="calibrations to run")
    ap.add_argument("--no-pin", dest="pin", action="store_false")
    args = ap.parse_args(argv)
    args.sizes = [int(s) for s in (args.sizes or ("500" if args.quick else "500,5000"))
                  .split(",")]
    rounds = args.rounds or (3 if args.quick else 7)
    min_time = 0.15 if args.quick else 0.3

    import thermonet.kernels

    thermonet.kernels.configure()
    from thermonet.kernels.matmul import backend

    ver = versions()
    print("calibration against the full M(3) benchmark")
    print(f"machine : {cpu_model()} (LLVM: {ver.get('llvm_cpu')}); {os.cpu_count()} logical "
          f"CPUs; {vector_flags()}; {platform.system()} "
          f"{platform.release()}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in ver.items()
                                   if v is not None and k != "llvm_cpu"))
    lib, why = backend.load_mkl()
    print(f"MKL     : {backend.mkl_version(lib)}" if lib is not None else f"MKL     : {why}")
    names = ["numpy", "own"] + (["mkl"] if lib is not None else [])
    print()

    cal = calibration_table(args.repeats)
    print("1. calibration (one 128-row block of M(3) products, 1 thread, fastest round), us")
    print(f"{'run':>4} " + " ".join(f"{n:>8}" for n in names) + f" {'choice':>7} {'seconds':>8}")
    for i, c in enumerate(cal):
        r = c["rates"]
        print(f"{i + 1:>4} " + " ".join(f"{r[n]['us_per_block']:>8.1f}" for n in names)
              + f" {c['choice']:>7} {c['seconds']:>8.2f}")
    print(flush=True)

    ns = argparse.Namespace(sizes=args.sizes, pin=args.pin)
    specs = [(b, t) for t in (1, 2) for b in names]
    workers = {}
    for b, t in specs:
        w = Worker(f"{b}/{t}", "thermonet", ns, t, ["--dtype", "float64"],
                   {"THERMONET_BLAS": b})
        if w.wait_ready():
            workers[(b, t)] = w
        else:
            print(f"  {w.label}: failed to start: {w.error}", file=sys.stderr)
    best: dict = {}
    try:
        for r in range(rounds):
            print(f"round {r + 1}/{rounds} ...", flush=True)
            for key in list(workers)[r % len(workers):] + list(workers)[:r % len(workers)]:
                for n in workers[key].keys:
                    m = workers[key].time(n, min_time)
                    k = (*key, int(n))
                    if m["rate"] > best.get(k, {"rate": 0.0})["rate"]:
                        best[k] = m
    finally:
        for w in workers.values():
            w.close()

    print("\n2. full M(3) float64 energy+gradient, evals/s (best round; other = cores used by "
          "other processes)")
    print(f"{'N':>5} {'thr':>3} " + " ".join(f"{n:>9}" for n in names)
          + f" {'faster':>7} {'calibration':>12} {'same':>5} {'other':>6}")
    cal_choice = cal[-1]["choice"]
    agree = True
    for n in args.sizes:
        for t in (1, 2):
            rows = {b: best.get((b, t, n)) for b in names}
            if not all(rows.values()):
                continue
            faster = max(names, key=lambda b: rows[b]["rate"])
            same = faster == cal_choice
            agree &= same
            other = max(rows[b].get("other") or 0.0 for b in names)
            print(f"{n:>5} {t:>3} " + " ".join(f"{rows[b]['rate']:>9.1f}" for b in names)
                  + f" {faster:>7} {cal_choice:>12} {'yes' if same else 'NO':>5} {other:>6.2f}")
    print(f"\nthe calibration's choice ({cal_choice}) {'matches' if agree else 'DOES NOT match'} "
          "the full benchmark's winner in every configuration above")
    return 0


if __name__ == "__main__":
    sys.exit(main())
