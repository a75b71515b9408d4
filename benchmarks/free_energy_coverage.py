"""Coverage of the free-energy error bars on a Gaussian in a box, over many fixed seeds.

For each seed, one non-reversible PT run (deo swaps, a prior rung) on a 3-D Gaussian in the box
|w_i| < 3 gives log Z at every rung by stepping stone (SS) and by the trapezoid rule over beta
(TI), each with three standard errors: rungs jointly (batch means of each iteration's summed
contributions, the default), the same series' error from its integrated autocorrelation time
(``iat``), and rungs as independent (``indep``, earlier releases). Coverage is the
fraction of runs with |estimate - exact| < 2 sigma at the coldest rung and at T = 1; exact is
the closed-form log Z for SS and, for TI, the trapezoid rule applied to the exact <E>(beta), so
that the quadrature error (a bias of the estimator, not noise) does not enter. A 2-sigma
interval should cover ~95.4 % (the batch-means error has 19 degrees of freedom, so a t
interval of 2 s.e. covers ~94 %); the binomial error of a coverage p over n runs is
sqrt(p (1 - p) / n).

    python benchmarks/free_energy_coverage.py --seeds 200 --iterations 800 --processes 2

Seeds are 1000 + i; the result does not depend on --processes.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from scipy import special

STIFFNESS = np.array([1.0, 3.0, 10.0])
HALF_WIDTH = 3.0


def exact_log_z(beta: float) -> float:
    """Log ∫ exp(-beta sum k_i w_i^2 / 2) dw / (2a)^n over the box |w_i| < a."""
    if beta == 0.0:
        return 0.0
    s = np.sqrt(beta * STIFFNESS / 2)
    return float(np.sum(np.log(special.erf(HALF_WIDTH * s) * np.sqrt(np.pi) / s
                               / (2 * HALF_WIDTH))))


def exact_mean_energy(beta: float) -> float:
    """<E>_beta = -d log Z / d beta (central difference; beta = 0: the box's k a^2 / 6)."""
    if beta == 0.0:
        return float(np.sum(STIFFNESS) * HALF_WIDTH ** 2 / 6)
    h = 1e-5 * beta
    return -(exact_log_z(beta + h) - exact_log_z(beta - h)) / (2 * h)


def one_run(args: tuple[int, int, int, int]) -> dict[str, float]:
    """One seed's deviations from the exact values and its four error bars."""
    seed, n_iterations, n_rungs, discard = args
    from thermonet.analysis.free_energy import free_energies
    from thermonet.priors import BoxPrior
    from thermonet.samplers.hmc import HMC
    from thermonet.stats import mean_and_error
    from thermonet.tempering import DeterministicEvenOdd, Ladder, ReplicaExchange
    from thermonet.testsystems import Gaussian

    arch = Gaussian(3, stiffness=list(STIFFNESS), prior_scale=2 * HALF_WIDTH)
    ladder = Ladder.geometric(0.1, 50.0, n_rungs).with_prior_rung()
    re = ReplicaExchange(HMC, arch.potential(), ladder, prior=BoxPrior.for_architecture(arch),
                         swap=DeterministicEvenOdd(),
                         sampler_config=HMC.Config(n_leapfrog=5, step_size=0.2))
    streams = re.make_streams(seed)
    st = re.burn_in(arch.initial_draw, streams, blocks=(20,))
    rows = []
    for i in range(1, n_iterations + discard + 1):
        st, info = re.step(st, streams, iteration=i)
        if i > discard:
            rows.append(info.energy_k)
    beta = re.ladder.beta_k
    fe = free_energies(beta, np.array(rows))
    exact_ss = np.array([exact_log_z(b) for b in beta])
    means = np.array([exact_mean_energy(b) for b in beta])
    exact_ti = np.zeros_like(exact_ss)
    for j in range(beta.size - 2, -1, -1):
        exact_ti[j] = exact_ti[j + 1] - 0.5 * (beta[j] - beta[j + 1]) * (means[j] + means[j + 1])
    # the same joint series, with the standard error from the integrated autocorrelation
    # time (Sokal's window) instead of batch means: a check of the batch-means error
    e = np.array(rows)
    d = beta[:-1] - beta[1:]
    r = np.exp(-d[None] * (e[:, 1:] - e[:, 1:].min(axis=0)))
    ss_series = np.cumsum((r / r.mean(axis=0))[:, ::-1], axis=1)[:, ::-1]
    ti_series = np.cumsum((-0.5 * d[None] * (e[:, :-1] + e[:, 1:]))[:, ::-1], axis=1)[:, ::-1]
    out = {}
    for where, j in (("cold", 0), ("t1", int(np.argmin(abs(1.0 / beta[:-1] - 1.0))))):
        out[f"ss_iat_{where}"] = mean_and_error(ss_series[:, j])[1]
        out[f"ti_iat_{where}"] = mean_and_error(ti_series[:, j])[1]
        out[f"ss_dev_{where}"] = float(fe.log_z_ss_k[j] - exact_ss[j])
        out[f"ss_joint_{where}"] = float(fe.log_z_ss_err_k[j])
        out[f"ss_indep_{where}"] = float(fe.log_z_ss_indep_err_k[j])
        out[f"ti_dev_{where}"] = float(fe.log_z_ti_k[j] - exact_ti[j])
        out[f"ti_joint_{where}"] = float(fe.log_z_ti_err_k[j])
        out[f"ti_indep_{where}"] = float(fe.log_z_ti_indep_err_k[j])
    return out


def main() -> None:
    """Run every seed and print the coverage table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--iterations", type=int, default=800)
    ap.add_argument("--rungs", type=int, default=10, help="finite rungs, T in [0.1, 50]")
    ap.add_argument("--discard", type=int, default=100)
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--json", default=None, help="write the per-seed numbers here")
    a = ap.parse_args()
    jobs = [(1000 + i, a.iterations, a.rungs, a.discard) for i in range(a.seeds)]
    with ProcessPoolExecutor(a.processes) as pool:
        runs = list(pool.map(one_run, jobs, chunksize=4))
    n = len(runs)
    print(f"{n} runs (seeds 1000..{999 + n}), {a.iterations} iterations after {a.discard}, "
          f"{a.rungs} finite rungs + prior rung, deo swaps; Gaussian k = {STIFFNESS.tolist()} "
          f"in |w| < {HALF_WIDTH}")
    print(f"{'estimator':<10} {'rung':<5} {'error bar':<12} {'coverage':>9} {'+-':>6} "
          f"{'rms(dev)/rms(sigma)':>20}")
    for est in ("ss", "ti"):
        for where in ("cold", "t1"):
            dev = np.array([r[f"{est}_dev_{where}"] for r in runs])
            for kind in ("indep", "joint", "iat"):
                sig = np.array([r[f"{est}_{kind}_{where}"] for r in runs])
                cover = float(np.mean(np.abs(dev) < 2 * sig))
                ratio = float(np.sqrt(np.mean(dev ** 2)) / np.sqrt(np.mean(sig ** 2)))
                print(f"{est.upper():<10} {where:<5} {kind:<12} {cover:>9.3f} "
                      f"{math.sqrt(cover * (1 - cover) / n):>6.3f} {ratio:>20.2f}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"args": vars(a), "runs": runs}, fh)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
