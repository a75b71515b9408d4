"""MacKay's moderated outputs against HMC's posterior predictive on a small MNIST network
(docs/evidence.md, "Moderated outputs against HMC").

    python scripts/mackay_classify_hmc_check.py [--data D500] [--hidden 3] [--alpha 1.0]
        [--draws 4000] [--step-size 0.15] [--n-test 1000]

A 256-H-10 ``mlp`` (tanh hidden units, softmax outputs) with a Gaussian prior per layer's
weights and per layer's biases, all at the fixed weight decay ``--alpha`` (re-estimation
does not converge on these data: docs/evidence.md), ``w_MP`` by L-BFGS and Newton steps on
the Gauss-Newton curvature (Cholesky), then HMC at the same ``alpha``
(:func:`thermonet.evidence.mackay.hmc.sampled_class_probabilities`, seed 1, started at
``w_MP``). On the first ``--n-test`` test images: mean and largest ``|Delta p|`` against HMC
(also in HMC standard errors) of MacKay's moderated outputs ("probit"), the linearised
Gaussian's Monte-Carlo average ("mc") and the plain softmax at ``w_MP``, and every
predictive's test log loss and error; then whether HMC stayed in ``w_MP``'s basin (``M(w) -
M(w_MP)`` and the white distance against their Gaussian values ``d/2`` and ``d``).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from thermonet.data import load_data
from thermonet.evidence.mackay.framework import evaluate_at
from thermonet.evidence.mackay.classify import GaussianPriorClassifier, moderated_outputs
from thermonet.evidence.mackay.hmc import sampled_class_probabilities
from thermonet.registry import get_architecture


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def main(argv: list[str] | None = None) -> int:
    """Print the comparison."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="D500")
    ap.add_argument("--hidden", type=int, default=3)
    ap.add_argument("--alpha", type=float, default=1.0)
    ap.add_argument("--draws", type=int, default=4000)
    ap.add_argument("--burn", type=int, default=200)
    ap.add_argument("--step-size", type=float, default=0.15)
    ap.add_argument("--leapfrog", type=int, default=20)
    ap.add_argument("--n-test", type=int, default=1000)
    a = ap.parse_args(argv)
    split = load_data(a.data)
    x, y = split.test.x[:a.n_test], np.asarray(split.test.y[:a.n_test])
    arch = get_architecture("mlp", n_inputs=int(split.train.x.shape[1]), hidden=[a.hidden],
                            n_outputs=10, hidden_activation="tanh")
    pot = GaussianPriorClassifier(arch.potential(split.train), arch.param_groups(),
                                  curvature="gauss-newton")
    n_groups = len(pot.hyper_model().groups)
    t0 = time.process_time()
    theta0 = np.random.default_rng(0).normal(0.0, 0.3, pot.n_params)
    r = evaluate_at(pot, theta0, [a.alpha] * n_groups, factorisation="cholesky")
    m_mp = pot.energy(r.theta)
    preds = {"w_MP softmax": _softmax(pot.outputs(r.theta, x))}
    preds["moderated probit"] = moderated_outputs(r, pot, x)[0]
    preds["linearised mc"] = moderated_outputs(r, pot, x, method="mc", n_samples=4000,
                                               seed=2)[0]
    t1 = time.process_time()
    s = sampled_class_probabilities(r, pot, x, n_draws=a.draws, burn=a.burn,
                                    n_leapfrog=a.leapfrog, step_size=a.step_size, seed=1)
    t2 = time.process_time()
    preds["HMC"] = s.p
    d = pot.n_params
    print(f"{a.data}, 256-{a.hidden}-10 tanh, d = {d}, alpha = {a.alpha} (fixed), "
          f"gamma = {r.gamma:.1f}, M(w_MP) = {m_mp:.2f}, train error "
          f"{np.mean(np.argmax(pot.outputs(r.theta), 1) != split.train.y):.3f}")
    print(f"HMC: {s.n_draws} draws after {a.burn}, dt = {a.step_size}, L = {a.leapfrog}, "
          f"acceptance {s.acceptance:.3f}; se of p: median {np.median(s.p_se):.2e}, "
          f"max {np.max(s.p_se):.2e}")
    excess = s.energy - m_mp
    half = s.energy.size // 2
    print(f"basin: M - M(w_MP) mean {excess.mean():.1f} (Gaussian d/2 = {d / 2:.1f}), first/"
          f"second half {excess[:half].mean():.1f}/{excess[half:].mean():.1f}; white distance^2 "
          f"mean {s.white_sq.mean():.1f} (Gaussian d = {d}), max {s.white_sq.max():.1f}")
    se = np.maximum(s.p_se, 1e-300)
    print("| predictive | mean abs dp vs HMC | max abs dp vs HMC | median / max abs dp in HMC se "
          "| test log loss | test error |")
    print("|---|---|---|---|---|---|")
    for name, p in preds.items():
        dp = np.abs(p - s.p)
        loss = -np.mean(np.log(np.maximum(p[np.arange(y.size), y], 1e-300)))
        err = np.mean(np.argmax(p, 1) != y)
        z = dp / se
        cmp = ("- | - | -" if name == "HMC" else
               f"{dp.mean():.4f} | {dp.max():.3f} | {np.median(z):.1f} / {np.max(z):.0f}")
        print(f"| {name} | {cmp} | {loss:.4f} | {err:.3f} |")
    print(f"CPU time: framework and moderation {t1 - t0:.0f} s, HMC {t2 - t1:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
