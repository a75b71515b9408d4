"""Bayesian learning on the robot arm by Rasmussen's recipe (docs/regression.md).

    python scripts/robot_arm.py sample_runs/robot_arm.toml [--seed N] [--transitions N]

Prints the test squared error of the averaged outputs (Neal 1993's measure: the squared error
summed over the two outputs, averaged over the 200 test cases), of single networks, the
acceptance rate, the hyperparameters' posterior means and the wall time.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import tomllib

from thermonet.architectures.regression import RegressionMLP
from thermonet.data import load_data
from thermonet.samplers.hmc_gibbs import GibbsHMC


def main() -> None:
    """Run the recipe and print its figures as JSON."""
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--seed", type=int)
    ap.add_argument("--transitions", type=int)
    ap.add_argument("--burn-in", type=int)
    args = ap.parse_args()
    with open(args.config, "rb") as fh:
        cfg = tomllib.load(fh)
    run = cfg["run"]
    seed = run["seed"] if args.seed is None else args.seed
    n_tr = run["transitions"] if args.transitions is None else args.transitions
    burn = run["burn_in"] if args.burn_in is None else args.burn_in
    split = load_data(cfg["data"]["name"])
    arch_cfg = {k: v for k, v in cfg["architecture"].items() if k != "name"}
    arch = RegressionMLP(2, n_outputs=2, **arch_cfg)
    pot = arch.potential(split.train)
    rng = np.random.default_rng(seed)
    theta = arch.initial_draw(rng)
    t0 = time.perf_counter()
    ini = cfg["initial"]
    s0 = GibbsHMC(pot, n_leapfrog=ini["n_leapfrog"], step_size=ini["step_size"],
                  fixed_hyper_transitions=ini["transitions"])
    state = s0.init(theta)
    for _ in range(ini["transitions"]):
        state, _ = s0.step(state, rng)
    sc = {k: v for k, v in cfg["sampler"].items() if k != "name"}
    s = GibbsHMC(pot, **sc)
    state = s.init(state.theta, hyper=state.hyper)
    test_out = np.zeros_like(split.test.y)
    single, train_err, hyp = [], [], []
    n_avg = n_acc = 0
    for i in range(n_tr):
        state, info = s.step(state, rng)
        n_acc += info.is_accepted
        if i >= burn and (i - burn) % run["thin"] == 0:
            f = arch.predict(state.theta, split.test.x)
            test_out += f
            n_avg += 1
            single.append(float(np.mean(np.sum((f - split.test.y) ** 2, axis=1))))
            tr = arch.predict(state.theta, split.train.x)
            train_err.append(float(np.mean(np.sum((tr - split.train.y) ** 2, axis=1))))
            hyp.append(state.hyper.copy())
    wall = time.perf_counter() - t0
    avg = test_out / n_avg
    names = s.hyper_model.names()
    h = np.array(hyp)
    print(json.dumps({
        "seed": seed, "transitions": n_tr, "burn_in": burn, "networks_averaged": n_avg,
        "leapfrog_per_transition": cfg["sampler"]["n_leapfrog"],
        "acceptance": n_acc / n_tr, "wall_seconds": round(wall, 1),
        "test_sq_error_averaged_outputs": float(np.mean(np.sum((avg - split.test.y) ** 2,
                                                               axis=1))),
        "test_sq_error_single_networks_mean": float(np.mean(single)),
        "train_sq_error_single_networks_mean": float(np.mean(train_err)),
        "posterior_mean_sd": {n: float(np.mean(1 / np.sqrt(h[:, j])))
                              for j, n in enumerate(names)},
    }, indent=1))


if __name__ == "__main__":
    main()
