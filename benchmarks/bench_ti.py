#!/usr/bin/env python
"""Speed of thermodynamic integration: M(3) on the paper's D500, one thread.

Usage::

    python benchmarks/bench_ti.py            # ~3 min on an idle machine
    python benchmarks/bench_ti.py --quick    # fewer rounds, a shorter minimisation

What is measured, all in this one process (BLAS capped at one thread, Numba at one thread):

1. **Per-step cost of a trajectory, L = 100** (dt = 1e-4 with reflecting walls, so every
   trajectory runs its L steps), in interleaved rounds, each round running back to back:

   * ``raw grad``: L calls of ``potential.energy_and_grad`` from Python (the reference cost);
   * ``base traj``: the MLP's own compiled trajectory (what TI uses at λ = 0);
   * ``bridge traj (compiled)``: :class:`thermonet.evidence.ti.integration.BridgePotential`
     at λ = 0.5, which runs :func:`thermonet.kernels.bridge.mlp_bridge_trajectory`;
   * ``bridge traj (Python)``: the same bridge through the generic
     ``thermonet.api.Potential.trajectory`` (one ``energy_and_grad`` call per step).

   The overheads are medians of the ratios of adjacent calls (robust to the machine's speed
   drifting between rounds), and ``other`` is the number of cores other processes used.

2. **A short TI run** (``thermodynamic_integration``) from a minimum of E on D500 (found with
   the paper's Algorithm 3, RMin), on a few λ points with the full trajectory length L = 100:
   wall time per gradient evaluation including everything (HMC, dt adaptation, recording,
   checkpoint-free), and the extrapolated wall time of the paper's setting: 102 λ × (100 +
   100) trajectories × 100 steps = 2.04e6 gradients, plus the k fit (2000 trajectories) and
   the initial burn-in (1500 trajectories), i.e. 2.39e6 gradients before dt adaptation.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

from harness import machine_busy

L_STEPS = 100
DT = 1e-4


class Meter:
    """Wall time of a call and the cores other processes used meanwhile."""

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = {}
        self.other: list[float] = []

    def run(self, name: str, f) -> None:
        m0, c0, t0 = machine_busy(), time.process_time(), time.perf_counter()
        f()
        t1, c1, m1 = time.perf_counter(), time.process_time(), machine_busy()
        self.times.setdefault(name, []).append(t1 - t0)
        if m0 is not None and m1 is not None:
            self.other.append(max(0.0, (m1 - m0) - (c1 - c0)) / (t1 - t0))


def main() -> int:
    """Time the trajectories and a short TI run on M(3) / D500 and print (and save) the results."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--min-steps", type=int, default=None,
                    help="RMin steps for the minimum (default 4000, --quick 1000)")
    ap.add_argument("--json", default=None, help="also write the results to this file")
    args = ap.parse_args()
    rounds = args.rounds or (5 if args.quick else 15)
    min_steps = args.min_steps or (1000 if args.quick else 4000)

    import numpy as np
    import scipy.linalg.cython_blas  # noqa: F401  (load scipy's OpenBLAS before capping)
    from threadpoolctl import threadpool_limits

    keep = threadpool_limits(limits=1, user_api="blas")  # noqa: F841
    import numba

    numba.set_num_threads(1)
    import thermonet as tn
    from thermonet.api import Potential
    from thermonet.evidence.ti.integration import (
        BridgePotential,
        Reference,
        TIConfig,
        thermodynamic_integration,
    )
    from thermonet.kernels import leapfrog as lf
    from thermonet.minimisers.rmin import RMin

    split = tn.load_data("D500")
    arch = tn.get_architecture("M3")
    pot = arch.potential(split.train)
    prior = tn.BoxPrior.for_architecture(arch)
    n = pot.n_params
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    mres = RMin(max_steps=min_steps, grad_tol=1e-4).minimise(pot, arch.initial_draw(rng))
    w0 = mres.theta
    t_min = time.perf_counter() - t0
    e0 = pot.energy(w0)
    print(f"M3 on D500: {n} parameters, {pot.n_data} data points; RMin {min_steps} steps "
          f"in {t_min:.1f} s: E(w0) = {e0:.4g}")

    # -- 1. per-step cost ------------------------------------------------------------------
    ref = Reference(w0, np.full(n, 5.0), np.zeros(n, bool), e0)
    bridge = BridgePotential(pot, ref, 0.5)
    half = prior.half_width
    inv = np.ones(n)
    g = np.empty(n)
    p0 = rng.standard_normal(n)
    _, gb0 = bridge.energy_and_grad(w0)
    gb0 = gb0.copy()
    gr0 = pot.energy_and_grad(w0)[1].copy()

    def raw() -> None:
        for _ in range(L_STEPS):
            pot.energy_and_grad(w0, g)

    def base_traj() -> None:
        pot.trajectory(w0.copy(), p0.copy(), gr0.copy(), inv, DT, L_STEPS, lf.WALL_REFLECT,
                       half, 10.0)

    def bridge_compiled() -> None:
        r = bridge.trajectory(w0.copy(), p0.copy(), gb0.copy(), inv, DT, L_STEPS,
                              lf.WALL_REFLECT, half, 10.0)
        assert r[1] == L_STEPS and r[2] == lf.OK

    def bridge_python() -> None:
        r = Potential.trajectory(bridge, w0.copy(), p0.copy(), gb0.copy(), inv, DT, L_STEPS,
                                 lf.WALL_REFLECT, half, 10.0)
        assert r[1] == L_STEPS and r[2] == lf.OK

    calls = [("raw grad", raw), ("base traj", base_traj),
             ("bridge traj (compiled)", bridge_compiled), ("bridge traj (Python)", bridge_python)]
    for _, f in calls:  # warm-up (compilation, caches)
        f()
    meter = Meter()
    for _ in range(rounds):
        for name, f in calls:
            meter.run(name, f)
    print(f"\n1. per-step cost, L = {L_STEPS}, {rounds} interleaved rounds "
          f"(other processes: median {statistics.median(meter.other):.2f} cores, "
          f"max {max(meter.other):.2f})")
    print(f"{'':28s} {'best ms/step':>13s} {'median':>8s} {'overhead vs raw (median ratio)':>32s}")
    out: dict = {"n_params": n, "n_data": int(pot.n_data), "rounds": rounds,
                 "other_cores_median": statistics.median(meter.other), "per_step": {}}
    for name, _ in calls:
        ts = meter.times[name]
        ratio = statistics.median(a / b for a, b in zip(ts, meter.times["raw grad"], strict=True))
        print(f"{name:28s} {1e3 * min(ts) / L_STEPS:13.3f} "
              f"{1e3 * statistics.median(ts) / L_STEPS:8.3f} {100 * (ratio - 1):+31.1f}%")
        out["per_step"][name] = {"best_ms": 1e3 * min(ts) / L_STEPS,
                                 "median_ms": 1e3 * statistics.median(ts) / L_STEPS,
                                 "overhead_vs_raw": ratio - 1}
    r_c = statistics.median(a / b for a, b in zip(meter.times["bridge traj (compiled)"],
                                                    meter.times["base traj"], strict=True))
    r_p = statistics.median(a / b for a, b in zip(meter.times["bridge traj (Python)"],
                                                    meter.times["base traj"], strict=True))
    print(f"bridge over the MLP's own compiled trajectory: compiled {100 * (r_c - 1):+.1f}%, "
          f"Python {100 * (r_p - 1):+.1f}%")
    out["bridge_vs_base"] = {"compiled": r_c - 1, "python": r_p - 1}

    # -- 2. a short TI ---------------------------------------------------------------------
    cfg = TIConfig(n_bridges=2, n_burn_in=2, n_samples=3, n_leapfrog=L_STEPS,
                   kfit_burn_in=5, kfit_samples=5, initial_burn_in=3, readapt_every=1,
                   step_size=0.01)
    t0 = time.perf_counter()
    r = thermodynamic_integration(pot, w0, prior, cfg, seed=1)
    wall = time.perf_counter() - t0
    n_grad = r.details["gradient_evaluations"]
    per_grad = wall / n_grad
    raw_ms = statistics.median(meter.times["raw grad"]) / L_STEPS
    full = 102 * 200 * 100
    extra = (2000 + 1500) * 100
    print(f"\n2. short TI: {len(r.details['lambdas'])} λ points, (2 + 3) trajectories each, "
          f"L = {L_STEPS}, with dt adaptation at every λ: {wall:.1f} s, {n_grad} gradient "
          f"evaluations, {1e3 * per_grad:.3f} ms per gradient ({per_grad / raw_ms:.2f} x the "
          f"median raw gradient of part 1)")
    print(f"   acceptance per λ {r.details['acceptance']}, dt {r.details['step_size']}")
    print(f"   extrapolated paper setting: {full:.3g} gradients (sampling + burn-in) -> "
          f"{full * per_grad / 3600:.2f} h; with the k fit and initial burn-in "
          f"({full + extra:.3g}) -> {(full + extra) * per_grad / 3600:.2f} h, plus dt "
          "adaptation (10+ trajectories per re-adaptation)")
    out["short_ti"] = {"wall_s": wall, "gradient_evaluations": n_grad,
                       "ms_per_gradient": 1e3 * per_grad,
                       "extrapolated_hours_sampling": full * per_grad / 3600,
                       "extrapolated_hours_with_kfit": (full + extra) * per_grad / 3600}
    out["machine"] = {"python": sys.version.split()[0], "numpy": np.__version__,
                      "numba": numba.__version__, "platform": platform.platform(),
                      "cpus": os.cpu_count()}
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    from thermonet.kernels import configure

    configure()    # as the command line does: before any kernel is imported
    raise SystemExit(main())
