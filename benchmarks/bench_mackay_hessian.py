#!/usr/bin/env python
"""The exact Hessian of the regression MLP against the finite-difference one.

For robot-arm networks (2 inputs, H tanh hidden units, 2 outputs, the 200 training cases) at
one random parameter vector: the compiled closed form
(:mod:`thermonet.kernels.mlp_regression_hessian`, via ``curvature.hessian(method="auto")``)
and central differences of the compiled gradient with one Richardson step
(``method="fd"``: 4 gradients per column), both symmetrised as the framework uses them.
Prints per-call seconds (min and median of ``--repeats`` timed loops, BLAS capped at one
thread), the ratio, and the largest difference between the two matrices. Then, end to end,
one re-estimation of the framework (``mackay_evidence``, seed 0) per width of
``--networks`` with each Hessian: with the exact one level 1 is a trust-region Newton
minimisation, with differences L-BFGS, as in ``thermonet mackay --hessian``. Last, for
networks with two or more hidden layers (``--deep``, e.g. ``16,16`` = 2-16-16-2, on the same
200 cases) the R-operator (:mod:`thermonet.kernels.mlp_hessian`, ``method="auto"``, one
thread) against the same differences. Usage::

    python benchmarks/bench_mackay_hessian.py [--hidden 2 8 16 20] [--repeats 7] [--networks 3 6]
        [--deep 16,16 40,40] [--deep-repeats 3]

(an empty ``--hidden`` or ``--networks`` skips that table).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from harness import calibrate, cpu_model, limit_blas, timed_loop, vector_flags, versions


def main() -> int:
    """Print the tables."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hidden", type=int, nargs="*", default=[2, 8, 16, 20])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--min-time", type=float, default=0.3)
    ap.add_argument("--networks", type=int, nargs="*", default=[3, 6])
    ap.add_argument("--deep", nargs="*", default=["16,16", "40,40"])
    ap.add_argument("--deep-repeats", type=int, default=3)
    args = ap.parse_args()

    from thermonet.architectures.regression import RegressionMLP
    from thermonet.data import load_data
    from thermonet.evidence.laplace.curvature import hessian
    from thermonet.evidence.mackay.framework import mackay_evidence

    v = versions()
    print(f"machine : {cpu_model()}; {vector_flags()}; "
          f"llvm cpu {v.get('llvm_cpu')}")
    print(f"versions: python {v['python']}, numpy {v['numpy']}, scipy {v['scipy']}, "
          f"numba {v['numba']}; blas {v.get('blas')}")
    split = load_data("robot-arm")

    def timing(f):
        n, _ = calibrate(f, args.min_time)
        runs = [timed_loop(f, n) for _ in range(args.repeats)]
        per = [1.0 / r["rate"] for r in runs]
        other = [r["other"] for r in runs if r["other"] is not None]
        return min(per), statistics.median(per), statistics.median(other) if other else \
            float("nan")

    if args.hidden:
        print(f"{'H':>3} {'d':>4} {'exact min':>11} {'exact med':>11} {'fd min':>11} "
              f"{'fd med':>11} {'fd/exact':>9} {'max|diff|/max|H|':>17} {'other cores':>11}")
    with limit_blas(1):
        for h in args.hidden:
            arch = RegressionMLP(n_inputs=2, hidden=[h], n_outputs=2)
            pot = arch.potential(split.train)
            pot.set_hyperparameters([1.0, 1.0, 1.0, 400.0], 1.0)
            theta = np.random.default_rng(h).normal(0.0, 0.5, pot.n_params)
            res = {name: timing(lambda name=name, pot=pot, theta=theta:
                                hessian(pot, theta, method=name)) for name in ("auto", "fd")}
            a, b = hessian(pot, theta), hessian(pot, theta, method="fd")
            diff = float(np.max(np.abs(a - b)) / np.max(np.abs(a)))
            print(f"{h:>3} {pot.n_params:>4} {res['auto'][0]:>11.3e} {res['auto'][1]:>11.3e} "
                  f"{res['fd'][0]:>11.3e} {res['fd'][1]:>11.3e} "
                  f"{res['fd'][1] / res['auto'][1]:>9.1f} {diff:>17.1e} "
                  f"{max(res['auto'][2], res['fd'][2]):>11.2f}")
        if args.networks:
            print(f"{'H':>3} {'hessian':>8} {'seconds':>9} {'cpu s':>7} {'cycles':>6} "
                  f"{'log evidence':>13} {'converged':>9}")
        for h in args.networks:
            arch = RegressionMLP(n_inputs=2, hidden=[h], n_outputs=2)
            for name in ("auto", "fd"):
                t0, c0 = time.perf_counter(), time.process_time()
                r = mackay_evidence(arch, split.train, seed=0, max_iter=100, tol=1e-4,
                                    hessian_method=name)
                print(f"{h:>3} {name:>8} {time.perf_counter() - t0:>9.2f} "
                      f"{time.process_time() - c0:>7.2f} {r.n_iter:>6} "
                      f"{r.log_evidence:>13.3f} {r.converged!s:>9}", flush=True)
        if args.deep:
            args.repeats = args.deep_repeats
            print(f"{'network':>10} {'d':>5} {'rop min':>10} {'rop med':>10} {'fd min':>10} "
                  f"{'fd med':>10} {'fd/rop':>7} {'max|diff|/max|H|':>17} "
                  f"{'asym rop':>9} {'asym fd':>9} {'other cores':>11}")
        for spec in args.deep:
            hidden = [int(w) for w in spec.split(",")]
            arch = RegressionMLP(n_inputs=2, hidden=hidden, n_outputs=2)
            pot = arch.potential(split.train)
            hyper = np.ones(arch.initial_hyper().shape[0])
            hyper[-1] = 400.0
            pot.set_hyperparameters(hyper, 1.0)
            theta = np.random.default_rng(sum(hidden)).normal(0.0, 0.5, pot.n_params)
            info_r: dict = {}
            info_f: dict = {}
            a = hessian(pot, theta, info=info_r)
            b = hessian(pot, theta, method="fd", info=info_f)
            assert info_r["hessian_method"] == "rop"
            diff = float(np.max(np.abs(a - b)) / np.max(np.abs(a)))
            res = {name: timing(lambda name=name, pot=pot, theta=theta:
                                hessian(pot, theta, method=name)) for name in ("auto", "fd")}
            name = "2-" + "-".join(map(str, hidden)) + "-2"
            print(f"{name:>10} {pot.n_params:>5} {res['auto'][0]:>10.3e} "
                  f"{res['auto'][1]:>10.3e} {res['fd'][0]:>10.3e} {res['fd'][1]:>10.3e} "
                  f"{res['fd'][1] / res['auto'][1]:>7.1f} {diff:>17.1e} "
                  f"{info_r['asymmetry']:>9.1e} {info_f['asymmetry']:>9.1e} "
                  f"{max(res['auto'][2], res['fd'][2]):>11.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
