#!/usr/bin/env python
"""Per-call times of the compiled kernel paths, through the public API only, so that two
checkouts can be compared (a change to the kernels must not slow them down).

Usage::

    PYTHONPATH=/path/to/checkout python benchmarks/bench_kernel_paths.py [--rounds 5]

Prints one JSON object: for each path the best of ``--rounds`` timed loops (each about
``--min-time`` seconds, after a warm-up call that also compiles or loads the kernels), in
microseconds per call. One thread, the process pinned to one CPU, BLAS capped at 1. Run it
alternately from the two checkouts (A B A B ...) and compare medians over the runs: the
shared machine's load drifts, the alternation spreads it over both.

Paths (the figures of bench_mlp, bench_hmc and bench_regression, reduced to the kernels):

* ``mlp_grad_N``: ``MLPPotential.energy_and_grad`` of M(3) on N random cases;
* ``mlp_traj_N``: ``MLPPotential.trajectory``, L = 100 float64 steps without walls (N = 50:
  one block, the fused kick path; N = 500: several blocks), ``mlp_traj_reflect_500`` with
  reflecting walls and ``mlp_traj_mixed_500`` with float32 gradients;
* ``hmc_step_500``: one ``HMC.step`` (momenta, trajectory, accept/reject);
* ``reg_grad`` / ``reg_traj`` / ``reg_traj_blocked`` / ``scale_traj``: the robot-arm 2-16-2
  regression network on its 200 cases, energy and gradient and an L = 200 trajectory with the
  shallow kernel, the blocked kernel, and in scale-factor coordinates;
* ``bridge_traj_500``: ``MLPPotential.bridge_trajectory``, the thermodynamic-integration
  bridge's compiled trajectory (L = 100, reflecting walls, λ = 0.4; the start's gradient is
  the MLP's, which only changes the path, not the work).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np


def best_us(f, min_time: float, rounds: int) -> float:
    """Microseconds per call of ``f``: the best of ``rounds`` loops of about ``min_time`` s."""
    f()
    t0 = time.perf_counter()
    f()
    count = max(1, int(min_time / max(time.perf_counter() - t0, 1e-7)))
    best = np.inf
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(count):
            f()
        best = min(best, (time.perf_counter() - t0) / count)
    return 1e6 * best


def mlp_paths(paths: dict) -> None:
    """The M(3) classifier's paths, into ``paths``."""
    from thermonet.architectures.mlp import M3
    from thermonet.priors import BoxPrior
    from thermonet.samplers.hmc import HMC

    arch = M3()
    prior = BoxPrior.for_architecture(arch)
    rng = np.random.default_rng(1)
    for n in (50, 500):
        x = rng.normal(size=(n, 256))
        y = rng.integers(0, 10, n).astype(np.int64)
        pot = arch.potential(x=x, y=y)
        theta = arch.initial_draw(rng)
        g = np.empty_like(theta)
        paths[f"mlp_grad_{n}"] = lambda pot=pot, th=theta, g=g: pot.energy_and_grad(th, g)
        _, g0 = pot.energy_and_grad(theta)
        g0 = g0.copy()
        p0 = rng.standard_normal(theta.shape[0])
        inv, hw = np.ones_like(theta), prior.half_width
        buf = [np.empty_like(theta) for _ in range(3)]

        def traj(wall, precision, pot=pot, th0=theta, p0=p0, g0=g0, buf=buf, inv=inv, hw=hw):
            t, p, g = buf
            np.copyto(t, th0)
            np.copyto(p, p0)
            np.copyto(g, g0)
            return pot.trajectory(t, p, g, inv, 0.002, 100, wall, hw, 10.0, precision)

        paths[f"mlp_traj_{n}"] = lambda traj=traj: traj(0, "float64")
        if n == 500:
            paths["mlp_traj_reflect_500"] = lambda traj=traj: traj(1, "float64")
            paths["mlp_traj_mixed_500"] = lambda traj=traj: traj(0, "float32")
            hmc = HMC(pot, prior=prior, temperature=1.0, n_leapfrog=100, step_size=0.002)
            box = [hmc.init(theta)]
            srng = np.random.default_rng(7)

            def step(hmc=hmc, box=box, srng=srng):
                box[0], _ = hmc.step(box[0], srng)

            paths["hmc_step_500"] = step
            w0, k_ref, e0 = theta.copy(), np.full(theta.shape[0], 3.0), float(pot.energy(theta))
            scratch = np.empty_like(theta)

            def btraj(pot=pot, th0=theta, p0=p0, g0=g0, buf=buf, inv=inv, hw=hw,
                      ref=(w0, k_ref, e0, scratch)):
                t, p, g = buf
                np.copyto(t, th0)
                np.copyto(p, p0)
                np.copyto(g, g0)
                return pot.bridge_trajectory(t, p, g, inv, 0.002, 100, 1, hw, 10.0, 0.4, *ref)

            paths["bridge_traj_500"] = btraj


def regression_paths(paths: dict) -> None:
    """The robot-arm regression network's paths, into ``paths``."""
    from thermonet.architectures.regression import RegressionMLP
    from thermonet.data import load_data

    split = load_data("robot-arm")
    rng = np.random.default_rng(0)
    for key, options in (("reg_traj", {}), ("reg_traj_blocked", {"kernel": "blocked"}),
                         ("scale_traj", {"parameterisation": "scale"})):
        pot = RegressionMLP(2, [16], 2, **options).potential(split.train)
        n = pot.n_params
        theta = np.concatenate([rng.normal(0, 0.5, 67), np.zeros(n - 67)])
        p0 = rng.normal(size=n)
        inv, hw = np.ones(n), np.full(n, 1e8)
        _, g0 = pot.energy_and_grad(theta)
        g0 = g0.copy()
        buf = [np.empty(n) for _ in range(3)]

        def traj(pot=pot, th0=theta, p0=p0, g0=g0, buf=buf, inv=inv, hw=hw):
            t, p, g = buf
            np.copyto(t, th0)
            np.copyto(p, p0)
            np.copyto(g, g0)
            return pot.trajectory(t, p, g, inv, 0.0005, 200, 0, hw, 1e30)

        paths[key] = traj
        if key == "reg_traj":
            g = np.empty(n)
            paths["reg_grad"] = lambda pot=pot, th=theta, g=g: pot.energy_and_grad(th, g)


def main() -> None:
    """Time every path and print the JSON object."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=0.3, help="seconds per timed loop")
    ap.add_argument("--only", default="", help="comma-separated path names (default: all)")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    from threadpoolctl import threadpool_limits

    from thermonet.kernels import configure

    configure()
    with threadpool_limits(1):
        paths: dict = {}
        mlp_paths(paths)
        regression_paths(paths)
        only = [p for p in args.only.split(",") if p]
        out = {k: round(best_us(f, args.min_time, args.rounds), 2)
               for k, f in paths.items() if not only or k in only}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
