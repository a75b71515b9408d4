"""The predictive error of finished robot-arm runs on the 10,000-case test set
(:func:`thermonet.data.robot_arm_large_test`, seed 19930), against its noisy targets and
against the noise-free arm (docs/regression.md, "The robot arm").

    python scripts/robot_arm.py sample_runs/robot_arm.toml --seeds 1 2 3 4 --out runs/ra
    python scripts/robot_arm_large_test.py runs/ra/seed1 runs/ra/seed2 runs/ra/seed3 runs/ra/seed4

For each run: the networks stored after the run's own discard at T = 1 are averaged (Neal
1993 eq. 10) on the 10,000 inputs, and the squared error (summed over the two outputs,
averaged over the cases, with the standard error over the cases) is printed against the
noisy targets y (what Neal reports; its floor is the noise, 2 x 0.05^2 = 0.005) and against
the noise-free targets f (the function error alone, without the test set's noise). Then the
mean and sd over the runs, and a Markdown table.

This reads the run through thermonet's internals (checkpoint, trace, sample store and the
architecture's ``predict``); it is to become ``thermonet predict RUN robot_arm_test10k.csv``
once that command exists.
"""

from __future__ import annotations

import argparse
import json
import statistics

import numpy as np


def predictive_mean(run_dir: str, x: np.ndarray) -> tuple[np.ndarray, int, float]:
    """The averaged outputs of ``run_dir``'s kept networks at the coldest rung on inputs ``x``
    (in the data's units), the number of networks and the rung's temperature."""
    from thermonet.analysis.samples import SampleStore
    from thermonet.data import to_original_units
    from thermonet.plotting.predictive import regression_model
    from thermonet.plotting.runs import first_kept, read_run_trace

    info, tr = read_run_trace(run_dir)
    _, arch, split = regression_model(run_dir, None)
    start = first_kept(tr["iteration"].shape[0], info.discard)
    first = int(tr["iteration"][start])
    thetas = SampleStore(info.path, info.run_uuid, info.iterations).slot(0, first)
    if split.train.provenance.get("standardisation"):
        raise SystemExit(f"{run_dir}: standardised data; this script takes the robot arm's "
                         "own units")
    total = np.zeros((x.shape[0], split.train.y.shape[1]))
    for theta in thetas:
        total += to_original_units(split.test, arch.predict(np.ascontiguousarray(theta), x))[0]
    return total / thetas.shape[0], int(thetas.shape[0]), float(info.temperatures[0])


def squared_error(pred: np.ndarray, target: np.ndarray) -> tuple[float, float]:
    """Mean over cases of the squared error summed over outputs, and its standard error."""
    per_case = np.sum((pred - target) ** 2, axis=1)
    return float(per_case.mean()), float(per_case.std(ddof=1) / np.sqrt(per_case.size))


def main() -> None:
    """Predict, score and print (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", help="finished robot-arm run directories")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    from thermonet.data import robot_arm_large_test

    cases = robot_arm_large_test()
    rows = []
    for run_dir in args.runs:
        mean, n_nets, t = predictive_mean(run_dir, cases["x"])
        e_y, se_y = squared_error(mean, cases["y"])
        e_f, se_f = squared_error(mean, cases["f"])
        row = {"run": run_dir, "networks": n_nets, "temperature": t,
               "squared_error_noisy": e_y, "squared_error_noisy_se": se_y,
               "squared_error_noise_free": e_f, "squared_error_noise_free_se": se_f}
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(f"\nnoise floor of the noisy targets: their own error "
          f"{squared_error(cases['f'], cases['y'])[0]:.5f} (2 x 0.05^2 = 0.005 expected)")
    print("\n| run | networks | squared error, noisy targets (± se) | against the noise-free "
          "arm (± se) |\n|---|---|---|---|")
    for r in rows:
        print(f"| {r['run']} | {r['networks']} | {r['squared_error_noisy']:.5f} ± "
              f"{r['squared_error_noisy_se']:.5f} | {r['squared_error_noise_free']:.5f} ± "
              f"{r['squared_error_noise_free_se']:.5f} |")
    if len(rows) > 1:
        for key in ("squared_error_noisy", "squared_error_noise_free"):
            vals = [r[key] for r in rows]
            print(f"{key}: mean {statistics.mean(vals):.5f}, sd {statistics.stdev(vals):.5f} "
                  f"over {len(vals)} runs")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
