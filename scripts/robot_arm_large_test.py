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

Each run is predicted by ``thermonet predict RUN CASES.csv --out PRED.npz --json`` on the
inputs (written once to a temporary CSV), the command's own discard and temperature (T = 1).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np


def predictive_mean(run_dir: str, cases_csv: str, tmp: str) -> tuple[np.ndarray, int, float]:
    """The averaged outputs (``f_mean``, in the data's units) of ``run_dir``'s kept networks
    at T = 1 on the inputs in ``cases_csv``, the number of networks and the temperature, from
    ``thermonet predict``."""
    out = os.path.join(tmp, "pred.npz")
    p = subprocess.run([sys.executable, "-m", "thermonet", "predict", run_dir, cases_csv,
                        "--out", out, "--json"], capture_output=True, text=True, check=False)
    if p.returncode != 0:
        raise SystemExit(f"{run_dir}: thermonet predict failed: {p.stderr.strip()}")
    summary = json.loads(p.stdout)
    with np.load(out) as pred:
        return pred["f_mean"], int(summary["n_samples"]), float(summary["temperature"])


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
    with tempfile.TemporaryDirectory() as tmp:
        cases_csv = os.path.join(tmp, "cases.csv")
        np.savetxt(cases_csv, cases["x"], delimiter=",", header="x1,x2", comments="",
                   fmt="%.17g")
        means = [predictive_mean(run_dir, cases_csv, tmp) for run_dir in args.runs]
    for run_dir, (mean, n_nets, t) in zip(args.runs, means, strict=True):
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
