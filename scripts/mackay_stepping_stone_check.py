"""MacKay's eq. (7) against the stepping-stone evidence of a tempering run (docs/results.md).

    python scripts/mackay_stepping_stone_check.py runs/ss_H1 runs/ss_H2 ...

Each run is an ``mlp-regression`` ladder from the prior rung to T = 1 at fixed
hyperparameters (``hierarchical = false``, ``group_precisions`` and ``noise_std`` set to
MacKay's re-estimated ``alpha_c`` and ``beta``, e.g. ``sample_runs/robot_arm_model_evidence.toml``).
For each: the run's log Z(T = 1) by stepping stone (every basin, symmetric copies included)
and its mixing verdict; MacKay's eq. (7) at the same hyperparameters around the w_MP that his
framework finds from seed 0, plus the symmetry term ``ln(H! 2^H)``; and, when the run stored
samples, eq. (7) plus the symmetry term at every distinct minimum of ``M(w)`` reached by
minimising from the T = 1 samples (the basins the run visited), with their log-sum-exp.
A run with Gamma hyperpriors (``hierarchical = true``) is compared instead with MacKay's full
log evidence, his Occam factors for the hyperparameters taken with the run's Gamma priors.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from thermonet.analysis.model_evidence import run_log_evidence
from thermonet.api.hyper import GammaPrior
from thermonet.architectures.regression import RegressionMLP
from thermonet.config.schema import parse_toml
from thermonet.data import load_data
from thermonet.evidence.mackay.framework import evaluate_at, log_symmetry_factor, mackay_evidence
from thermonet.io.checkpoint import read_checkpoint
from thermonet.io.trace import read_trace


def _distinct(values: list[float], tol: float = 1e-3) -> list[int]:
    """Indices of the values that differ from every earlier kept one by more than ``tol``."""
    kept: list[int] = []
    for i, v in enumerate(values):
        if all(abs(v - values[j]) > tol for j in kept):
            kept.append(i)
    return kept


def hierarchical(run_dir: Path, a: dict, ev: Any, ref: Any) -> None:
    """A run with Gamma hyperpriors: its log Z(T = 1) is ln p(D|H) with the hyperparameters
    integrated out. MacKay's log evidence integrates them with a prior flat in ln alpha_c,
    ln beta (his Occam factors); with the run's Gamma priors instead, add each prior's
    density in log space at the re-estimated values."""
    group = GammaPrior(float(a.get("hyper_width", 0.05)), float(a.get("hyper_shape", 0.5)))
    noise = GammaPrior(float(a.get("noise_width", 0.05)), float(a.get("noise_shape", 0.5)))
    hyper = [*ref.alpha, ref.beta]
    priors = [group] * len(ref.alpha) + [noise]
    log_prior = sum(p.log_density(h) + math.log(h) for p, h in zip(priors, hyper, strict=True))
    print(f"{run_dir}: H = {a['hidden']}, hyperparameters integrated out over Gamma priors, "
          f"{ev.iterations_used} iterations used, {ev.verdict}")
    print(f"  stepping stone ln p(D|H)               {ev.log_z_ss:10.3f} ± {ev.log_z_ss_err:.3f}")
    print(f"  MacKay's log evidence (flat in ln h)   {ref.log_evidence:10.3f}   (converged: "
          f"{ref.converged})")
    print(f"  + ln p(ln h) of the Gamma priors       {ref.log_evidence + log_prior:10.3f}   "
          f"({log_prior:+.3f}; stepping stone - this: "
          f"{ev.log_z_ss - ref.log_evidence - log_prior:+.3f})")


def check(run_dir: Path, max_starts: int) -> None:
    """Print the comparison for one run."""
    ck = read_checkpoint(run_dir)
    cfg = parse_toml(ck.config_toml)
    a = cfg["architecture"]
    arch = RegressionMLP(n_inputs=int(a.get("n_inputs", 2)), hidden=a["hidden"],
                         n_outputs=int(a.get("n_outputs", 2)),
                         hidden_activation=a.get("hidden_activation", "tanh"))
    split = load_data(cfg["data"]["name"])
    sym = log_symmetry_factor([int(h) for h in a["hidden"]], arch.hidden_activation)
    ev = run_log_evidence(run_dir)
    pot = arch.potential(split.train)
    ref = mackay_evidence(arch, split.train, seed=0, max_iter=100, tol=1e-4)
    if a.get("hierarchical", True):
        hierarchical(run_dir, a, ev, ref)
        return
    hyper = [*a["group_precisions"], 1.0 / float(a["noise_std"]) ** 2]
    seed0 = evaluate_at(pot, ref.theta, hyper, log_symmetry=sym)
    print(f"{run_dir}: H = {a['hidden']}, {ev.iterations_used} iterations used, "
          f"{ev.verdict}")
    print(f"  stepping stone log Z(T = 1)       {ev.log_z_ss:10.3f} ± {ev.log_z_ss_err:.3f}")
    print(f"  eq. (7) + ln(H! 2^H), seed-0 w_MP {seed0.log_evidence_fixed + sym:10.3f}   "
          f"(-ln L = {-seed0.log_likelihood:.2f})")
    tr = read_trace(run_dir, samples=True)
    theta = np.asarray(tr["samples_theta"])
    if theta.shape[0] == 0:
        print("  no stored samples: basins not searched")
        return
    keep = theta[theta.shape[0] // 5:, 0, :]
    picks = np.linspace(0, keep.shape[0] - 1, min(max_starts, keep.shape[0])).astype(int)
    results = [evaluate_at(pot, keep[i], hyper, log_symmetry=sym) for i in picks]
    ok = sorted((r for r in results if r.factorised.positive_definite),
                key=lambda r: -r.log_evidence_fixed)
    values = [r.log_evidence_fixed for r in ok]
    logs = []
    for i in _distinct(values):
        r = ok[i]
        n_same = sum(1 for v in values if abs(v - values[i]) <= 1e-3)
        logs.append(r.log_evidence_fixed + sym)
        print(f"  basin from the T = 1 samples: eq. (7) + sym {logs[-1]:10.3f}   (-ln L = "
              f"{-r.log_likelihood:.2f}; reached from {n_same} of {len(ok)} starts)")
    if not logs:
        print("  no minimum with a positive definite Hessian from the samples")
        return
    top = max(logs)
    lse = top + math.log(sum(math.exp(v - top) for v in logs))
    print(f"  log-sum-exp over these basins    {lse:10.3f}   "
          f"(stepping stone - this: {ev.log_z_ss - lse:+.3f})")


def main() -> int:
    """Print the comparison for every run given."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--starts", type=int, default=40,
                    help="T = 1 samples to minimise from (evenly spaced after the first 20 %%)")
    args = ap.parse_args()
    for run in args.runs:
        check(run, args.starts)
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
