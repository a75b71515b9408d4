#!/usr/bin/env python
"""HMC acceptance near the prior: the paper's end-point box test against reflecting walls.

Starts from one draw of M(3)'s box prior on D50 and runs 20 trajectories of L = 20 at each
(wall, T, dt), printing the acceptance rate and the energy after the last trajectory. Near
beta = 0 a replica is close to uniform in the box, so the end-point test (reject if any of the
13,970 coordinates ends outside) rejects almost everything unless dt is tiny, while reflecting
walls leave dt to the energy's curvature. The counts are deterministic for a seed. Usage::

    python benchmarks/bench_walls.py
"""

from __future__ import annotations

import argparse

import numpy as np
from harness import cpu_model, versions


def main() -> int:
    """Run HMC from a prior draw at every (wall, T, dt) and print acceptance and energy."""
    from thermonet.architectures.mlp import M3
    from thermonet.data import load_dataset
    from thermonet.priors import BoxPrior
    from thermonet.samplers.hmc import HMC

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trajectories", type=int, default=20)
    ap.add_argument("--leapfrog", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    v = versions()
    print(f"machine : {cpu_model()}; python {v['python']}, numpy {v['numpy']}, "
          f"numba {v['numba']}")
    arch = M3()
    pot = arch.potential(load_dataset("D50"))
    prior = BoxPrior.for_architecture(arch)
    rng = np.random.default_rng(args.seed)
    theta0 = prior.sample(rng)
    print(f"start   : one prior draw, E = {pot.energy(theta0):.1f}; "
          f"{args.trajectories} trajectories of L = {args.leapfrog} per cell")
    steps = (1e-3, 3e-3, 1e-2, 3e-2)
    print(f"{'wall':9s} {'T':>7s} " + " ".join(f"{'dt=' + format(dt, 'g'):>9s}" for dt in steps))
    for wall in ("endpoint", "reflect"):
        for t in (1e3, 93.5, 10.0, 1.0):
            cells = []
            for dt in steps:
                hmc = HMC(pot, prior=prior, temperature=t,
                          config=HMC.Config(n_leapfrog=args.leapfrog, step_size=dt, wall=wall))
                state = hmc.init(theta0.copy())
                accepted = 0
                for _ in range(args.trajectories):
                    state, info = hmc.step(state, rng)
                    accepted += bool(info.is_accepted)
                cells.append(f"{accepted / args.trajectories:9.2f}")
            print(f"{wall:9s} {t:7g} " + " ".join(cells))
    return 0


if __name__ == "__main__":
    from thermonet.kernels import configure

    configure()    # as the command line does: before any kernel is imported
    raise SystemExit(main())
