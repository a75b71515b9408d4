r"""Several short runs against one long reference run on the same ladder: docs/results.md's
"A fifth run that mixed agrees with the four".

`thermonet compare` needs runs of one configuration; a reference run usually differs (its
ladder was adapted, the others' fixed from it). This script checks only that the ladders agree
(to ``--rtol``), then prints, per observable:

* the largest split-R-hat of the training energy over all runs as chains (each cut to its
  run's discard; the reference thinned evenly to the shortest run's length);
* for every column of the runs' ``analysis.csv`` (`thermonet analyse`) named with ``--column``:
  per rung ``z = (mean of the runs - reference) / sqrt(se_runs^2 + se_reference^2)``, with
  ``se_runs`` the runs' spread / sqrt(n) and ``se_reference`` the reference's own error
  column; the rms of z, the rungs with |z| > 2 and the values there.

    python scripts/runs_against_reference.py runs/eq11 runs/eq12 runs/eq13 runs/eq14 \
        --reference runs/rt_nrpt
"""

from __future__ import annotations

import argparse
import csv
import math
from pathlib import Path

import numpy as np


def training_energy(run_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    """The run's temperatures and its training energy per slot after its own discard."""
    from thermonet.config import parse_toml
    from thermonet.io.checkpoint import read_checkpoint
    from thermonet.io.trace import read_trace

    ck = read_checkpoint(run_dir)
    tr = read_trace(run_dir, run_uuid=ck.run_uuid, through=ck.iteration)
    energy = np.asarray(tr["energy_k"], dtype=np.float64)
    discard = float(parse_toml(ck.config_toml).get("run", {}).get("discard", 0.2))
    return np.asarray(ck.temperatures, dtype=np.float64), energy[math.floor(discard * len(energy)):]


def columns(run_dir: Path) -> dict[str, np.ndarray]:
    """The run's ``analysis.csv`` as arrays by column."""
    path = run_dir / "analysis.csv"
    if not path.is_file():
        raise SystemExit(f"{path} not found; run `thermonet analyse {run_dir}` first")
    with path.open() as fh:
        rows = list(csv.DictReader(fh))
    return {key: np.array([float(r[key]) for r in rows]) for key in rows[0]}


def main() -> None:
    """Print the comparison."""
    from thermonet.analysis.convergence import chain_diagnostics

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--reference", type=Path, required=True)
    ap.add_argument("--column", action="append", default=None,
                    help="analysis.csv column (repeatable) [default: train_energy_per_point, "
                         "test_energy_per_point, test_error]")
    ap.add_argument("--rtol", type=float, default=1e-5, help="ladders must agree to this")
    args = ap.parse_args()
    names = args.column or ["train_energy_per_point", "test_energy_per_point", "test_error"]

    temps, ref_energy = training_energy(args.reference)
    energies = []
    for run in args.runs:
        t, e = training_energy(run)
        finite = np.isfinite(temps)
        if t.shape != temps.shape or not np.allclose(t[finite], temps[finite], rtol=args.rtol):
            raise SystemExit(f"{run}: its ladder differs from {args.reference}'s beyond rtol "
                             f"{args.rtol}; the comparison needs the same rungs")
        energies.append(e)
    n = min(len(e) for e in energies)
    thinned = ref_energy[np.linspace(0, len(ref_energy) - 1, n).astype(int)]
    rhat = chain_diagnostics(np.stack([e[:n] for e in energies] + [thinned]))["rhat"]
    j = int(np.nanargmax(rhat))
    print(f"training energy: largest split-R-hat over {len(energies) + 1} chains of {n} "
          f"draws {rhat[j]:.3f} at T = {temps[j]:.3g}")

    ref = columns(args.reference)
    runs = [columns(r) for r in args.runs]
    for name in names:
        values = np.array([r[name] for r in runs])
        mean = values.mean(axis=0)
        se = values.std(axis=0, ddof=1) / math.sqrt(len(runs))
        z = (mean - ref[name]) / np.sqrt(se ** 2 + ref[name + "_err"] ** 2)
        off = [f"T={temps[k]:.3g}: {mean[k]:.4g} vs {ref[name][k]:.4g} (z {z[k]:+.1f})"
               for k in np.flatnonzero(np.abs(z) > 2)]
        print(f"{name}: rms z {math.sqrt(np.nanmean(z ** 2)):.2f} over {np.isfinite(z).sum()} "
              f"rungs; |z| > 2 at {len(off)}" + ("".join(f"\n    {o}" for o in off)))


if __name__ == "__main__":
    main()
