"""Rasmussen's recipe on the robot arm for several chain seeds, through `thermonet run` and
`thermonet analyse` (docs/regression.md).

    python scripts/robot_arm.py sample_runs/robot_arm.toml --seeds 1 2 3 4 --out runs/robot_arm

Runs the configuration once per seed into OUT/seed<N> (replacing an earlier run there),
analyses it and prints, per seed, the test squared error of the averaged outputs (Neal 1993's
measure: summed over the two outputs, averaged over the 200 test cases), the mean over single
networks, the training error, the acceptance, the wall time and the hyperparameters' posterior
mean widths, then a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

from thermonet.analysis import analyse
from thermonet.runner import detach_log, run


def main() -> None:
    """Run, analyse and print (module docstring)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1])
    ap.add_argument("--out", default="runs/robot_arm")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="extra dotted settings, as `thermonet run --set`")
    args = ap.parse_args()
    from thermonet.config import parse_set

    extra = parse_set(args.set)
    rows = []
    for seed in args.seeds:
        out = Path(args.out) / f"seed{seed}"
        t0 = time.perf_counter()
        run(args.config, out, overrides={**extra, "run.seed": seed}, overwrite=True)
        detach_log()
        wall = time.perf_counter() - t0
        a = analyse(out)
        t = a.table
        row = {"seed": seed, "networks_averaged": int(t["n_samples"][0]),
               "test_sq_error_averaged_outputs": float(t["predictive_test_error"][0]),
               "test_sq_error_single_networks_mean": float(t["test_error"][0]),
               "test_sq_error_single_networks_err": float(t["test_error_err"][0]),
               "train_sq_error_single_networks_mean": float(t["train_error"][0]),
               "acceptance": float(t["acceptance"][0]), "wall_seconds": round(wall, 1)}
        hyper = a.meta.get("hyperparameters") or {}
        if hyper:
            row["posterior_mean_width"] = {n: round(w, 5) for n, w in
                                           zip(hyper["names"], hyper["width"][0], strict=True)}
        rows.append(row)
        print(json.dumps(row))
    print("\n| chain seed | test error, averaged outputs | single networks (mean) | training "
          "(single) | acceptance | wall time |\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['seed']} | {r['test_sq_error_averaged_outputs']:.5f} | "
              f"{r['test_sq_error_single_networks_mean']:.5f} | "
              f"{r['train_sq_error_single_networks_mean']:.5f} | {r['acceptance']:.2f} | "
              f"{r['wall_seconds']:.0f} s |")
    if len(rows) > 1:
        v = [r["test_sq_error_averaged_outputs"] for r in rows]
        m = sum(v) / len(v)
        sd = math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1))
        print(f"\naveraged outputs over {len(v)} chains: {m:.5f} +- {sd:.5f} (sd)")


if __name__ == "__main__":
    main()
