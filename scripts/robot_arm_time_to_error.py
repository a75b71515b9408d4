"""Wall time of a finished robot-arm run to a test error within reach of Neal's (1993).

    thermonet run sample_runs/robot_arm.toml --out runs/robot_arm
    python scripts/robot_arm_time_to_error.py runs/robot_arm [--target 0.00559 --tol 0.00035]

For every stored sample iteration i, the test squared error of the outputs averaged over the
samples a run stopped at i would average (its ``run.discard`` fraction of the first i
transitions dropped, as ``thermonet analyse`` does), and the first i from which that error
stays <= target + tol. The default tolerance, 0.00035 = 0.005 sqrt(2/400), is the spread
between two independent 200-case test sets of noise variance 0.0025 per output, i.e. the error
bar of comparing thermonet's test set with Neal's. Times come from the run itself: the
modification times of the trace segments (written every ``checkpoint_every`` transitions)
and the first line of its log, interpolated linearly in between (every transition has the same
L, so the same cost). Printed: the wall time from the start of the log, and from the end of
the first transition (after any one-off kernel compilation).
"""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

import numpy as np

from thermonet import registry
from thermonet.analysis.samples import SampleStore, squared_error
from thermonet.config import load
from thermonet.data import load_configured, to_original_units


def log_time(line: str) -> float:
    """Seconds since the epoch of a log line ``YYYY-mm-dd HH:MM:SS,mmm ...``."""
    stamp = dt.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
    return stamp.replace(tzinfo=dt.timezone.utc).timestamp()


def main() -> None:
    """Read the run, compute and print (module docstring)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--target", type=float, default=0.00559)
    ap.add_argument("--tol", type=float, default=0.00035)
    args = ap.parse_args()
    cfg = load(args.run_dir / "config.toml")
    import h5py

    with h5py.File(args.run_dir / "checkpoint.h5", "r") as fh:
        uuid, last = fh.attrs["run_uuid"], int(fh.attrs.get("iteration", 0))
    store = SampleStore(args.run_dir, uuid, last or 10**12)
    its = store.select(0)
    theta = store.slot(0, 0)
    arch_cfg = {k: (list(v) if isinstance(v, tuple) else v)
                for k, v in cfg["architecture"].items() if k != "name"}
    arch = registry.get_architecture(cfg["architecture"]["name"], **arch_cfg)
    test = load_configured(cfg["data"], cfg["run"]["seed"]).test
    f = np.stack([to_original_units(test, arch.predict(np.ascontiguousarray(t), test.x))[0]
                  for t in theta])
    y = to_original_units(test, f[0])[1]
    discard = cfg["run"]["discard"]
    err = np.array([squared_error(f[(its > discard * i) & (its <= i)].mean(axis=0), y)
                    for i in its])
    ok = err <= args.target + args.tol
    bad = np.flatnonzero(~ok)
    first = int(bad[-1]) + 1 if bad.size else 0
    lines = (args.run_dir / "thermonet.log").read_text().splitlines()
    t_log = log_time(lines[0])
    # the progress line of transition 1 (absent under -q): after the one-off compilation
    t_it1 = next((log_time(x) for x in lines if "iteration 1/" in x), None)
    seg = sorted((int(p.stem.split("-")[1]), p.stat().st_mtime)     # (last iteration, time)
                 for p in (args.run_dir / "trace").glob("it*.h5"))
    t_at = np.interp(its, [0 if t_it1 is None else 1] + [s[0] for s in seg],
                     [t_log if t_it1 is None else t_it1] + [s[1] for s in seg])
    after = "" if t_it1 is None else ", {:.1f} s after the first transition"
    print(f"run {args.run_dir}: {len(its)} samples, discard {discard}; final averaged-output "
          f"test error {err[-1]:.5f} (target {args.target} + {args.tol})")
    if first >= len(its):
        print("the error never stays within the target")
        return
    i = int(its[first])
    t1 = t_log if t_it1 is None else t_it1
    print(f"stays <= {args.target + args.tol:.5f} from transition {i} (error {err[first]:.5f}):"
          f" {t_at[first] - t_log:.1f} s wall from the log's start" +
          after.format(t_at[first] - t1))
    below = np.flatnonzero(err <= args.target)
    if below.size:
        print(f"first <= {args.target}: transition {int(its[below[0]])}, "
              f"{t_at[below[0]] - t_log:.1f} s from the log's start" +
              after.format(t_at[below[0]] - t1))


if __name__ == "__main__":
    main()
