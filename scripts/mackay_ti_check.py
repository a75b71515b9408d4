"""MacKay's Gaussian-approximation evidence against thermodynamic integration on robot-arm
networks (docs/evidence.md, docs/results.md).

    python scripts/mackay_ti_check.py 1 2 3 4 6 [--bridges 100 --samples 100 --repeats 2]

For each number of tanh hidden units: MacKay's framework from seed 0 (re-estimated alpha_c,
beta; the sweep's settings), then the integral behind its eq. (7) at those hyperparameters by
thermodynamic integration around the same w_MP (:func:`thermonet.evidence.mackay.versus_ti.
ti_cross_check`, seeds 1, 2, ...), and the difference in TI standard errors. Both are the
evidence of the one basin; the symmetry term is left out of both.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from thermonet.architectures.regression import RegressionMLP
from thermonet.data import load_data
from thermonet.evidence.mackay.framework import mackay_evidence
from thermonet.evidence.mackay.versus_ti import ti_cross_check
from thermonet.evidence.ti.config import TIConfig


def main() -> int:
    """Print the comparison for each width."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("hidden", type=int, nargs="+")
    ap.add_argument("--bridges", type=int, default=100)
    ap.add_argument("--samples", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--box", type=float, default=10.0,
                    help="half-width of the box in white standard deviations")
    args = ap.parse_args()
    split = load_data("robot-arm")
    config = TIConfig(n_bridges=args.bridges, n_samples=args.samples)
    print(f"{'H':>3} {'d':>4} {'gamma':>7} {'eq. 7 (Laplace)':>16} {'TI':>10} {'TI err':>8} "
          f"{'TI - Laplace':>13} {'z':>6} {'TI s':>6} {'conv':>5}", flush=True)
    for h in args.hidden:
        arch = RegressionMLP(n_inputs=2, hidden=[h], n_outputs=2)
        r = mackay_evidence(arch, split.train, seed=0, max_iter=100, tol=1e-4)
        pot = arch.potential(split.train)
        for rep in range(args.repeats):
            t0 = time.perf_counter()
            c = ti_cross_check(r, pot, config=config, seed=1 + rep, box_sigmas=args.box)
            print(f"{h:>3} {pot.n_params:>4} {r.gamma:>7.2f} {c.laplace:>16.3f} {c.ti:>10.3f} "
                  f"{c.ti_error:>8.3f} {c.difference:>13.3f} {c.z:>6.1f} "
                  f"{time.perf_counter() - t0:>6.0f} {r.converged!s:>5}", flush=True)
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    raise SystemExit(main())
