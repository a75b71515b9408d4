"""MacKay's eq. (7) for the paper's classifiers on D500 at fixed weight decays
(docs/results.md, "MacKay 1992: M(1) against M(3) with a Gaussian prior").

    python scripts/mackay_mnist_fixed.py 1.0 M1 M3

For each architecture: a Gaussian prior of precision ALPHA on every layer, w_MP by L-BFGS from
a N(0, 0.3^2) start (seed 0), the Gauss-Newton Hessian, and the evidence terms, gamma and the
training and test error rates (official test set) of w_MP.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from thermonet.data import load_data
from thermonet.evidence.mackay.framework import evaluate_at, log_symmetry_factor
from thermonet.evidence.mackay.classify import GaussianPriorClassifier
from thermonet.evidence.mackay.models import layer_groups
from thermonet.registry import get_architecture


def main(alpha: float, names: list[str]) -> int:
    """Print one line per architecture."""
    split = load_data("D500", test="official")
    for name in names:
        arch = get_architecture(name)
        groups = layer_groups(arch)
        pot = GaussianPriorClassifier(arch.potential(split.train), groups,
                                      curvature="gauss-newton")
        theta0 = np.random.default_rng(0).normal(0.0, 0.3, pot.n_params)
        t0 = time.perf_counter()
        sym = log_symmetry_factor([int(h) for h in arch.widths[1:-1]], "logistic")
        r = evaluate_at(pot, theta0, [alpha] * len(groups), newton_steps=0, log_symmetry=sym)
        errors = []
        for data in (split.train, split.test):
            logits = arch.potential(data).logits(r.theta, None)
            errors.append(float(np.mean(np.argmax(logits, 1) != data.y)))
        print(f"{name} alpha={alpha}: ln L {r.log_likelihood:.2f} Occam_w {r.log_occam_w:.2f} "
              f"eq7 {r.log_evidence_fixed:.2f} symmetry {r.log_symmetry:.2f} gamma "
              f"{r.gamma:.1f} positive definite {r.positive_definite} train error "
              f"{errors[0]:.4f} test error {errors[1]:.4f} ({time.perf_counter() - t0:.0f} s)",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(float(sys.argv[1]), sys.argv[2:]))
