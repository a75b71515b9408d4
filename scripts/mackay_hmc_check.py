"""MacKay's Gaussian predictive against HMC's on robot-arm networks (docs/evidence.md).

    python scripts/mackay_hmc_check.py 2 4 6

For each number of tanh hidden units: MacKay's framework from seed 0 (re-estimated alpha_c,
beta), then 4000 HMC transitions of the posterior at those hyperparameters
(:func:`thermonet.evidence.mackay.hmc.sampled_predictive`, seed 1) and, over the 200 test
inputs, the difference of the predictive means in HMC standard errors, the ratio of the
parameter parts of the predictive variances, the ratio of the total predictive standard
deviations and the test squared error of both predictive means.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from thermonet.architectures.regression import RegressionMLP
from thermonet.data import load_data
from thermonet.evidence.mackay.framework import mackay_evidence, predictive
from thermonet.evidence.mackay.hmc import sampled_predictive


def main(widths: list[int]) -> int:
    """Print the comparison for each width."""
    split = load_data("robot-arm")
    x, y = split.test.x, np.asarray(split.test.y)
    for h in widths:
        arch = RegressionMLP(n_inputs=2, hidden=[h], n_outputs=2)
        t0 = time.perf_counter()
        r = mackay_evidence(arch, split.train, seed=0, max_iter=100, tol=1e-4)
        pot = arch.potential(split.train)
        m, v = predictive(r, pot, x)
        t1 = time.perf_counter()
        s = sampled_predictive(r, pot, x, n_draws=4000, burn=200, seed=1)
        t2 = time.perf_counter()
        z = np.abs(s.mean - m) / s.mean_se
        noise = 1.0 / r.beta
        ratio = (s.var - noise) / (v - noise)
        print(f"H = {h}: converged {r.converged}, log evidence {r.log_evidence:.2f}, gamma "
              f"{r.gamma:.2f}, noise sd {noise ** 0.5:.4f}, HMC acceptance {s.acceptance:.2f}")
        print(f"  |mean difference| / se: median {np.median(z):.2f}, max {np.max(z):.2f}; "
              f"largest |mean difference| {np.max(np.abs(s.mean - m)):.2e}")
        print(f"  parameter variance HMC/Gaussian: median {np.median(ratio):.3f} (5-95%: "
              f"{np.percentile(ratio, 5):.3f}-{np.percentile(ratio, 95):.3f}), its relative "
              f"se (median) {np.median(s.var_se / (s.var - noise)):.3f}")
        print(f"  total predictive sd HMC/Gaussian: median {np.median(np.sqrt(s.var / v)):.4f}; "
              f"test error of the means: Gaussian {np.mean(np.sum((m - y) ** 2, 1)):.5f}, HMC "
              f"{np.mean(np.sum((s.mean - y) ** 2, 1)):.5f}")
        print(f"  wall time: framework {t1 - t0:.1f} s, HMC {t2 - t1:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main([int(a) for a in sys.argv[1:]] or [2, 4, 6]))
