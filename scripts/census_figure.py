"""Basin TI at many minima against the model's global evidence: docs/figures/census_D50.png.

Reads the ``summary.json`` of a ``thermonet evidence`` directory whose models carry a
``global_log_evidence`` (e.g. ``sample_runs/evidence_M1_vs_M3_D50_census.toml``) and draws,
one panel per model, the log evidence TI measured from each minimum (with its error bar) and
the global estimate from the prior-anchored ladder (a band of ± its error). The census bound
(the basins' log-sum-exp plus ln|G|) is printed in each panel's title; it is usually far off
this scale. Prints the numbers it plots.

    python scripts/census_figure.py runs/census_D50 [--out docs/figures/census_D50.png]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def main() -> None:
    """Draw the figure and print its numbers."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("directory", type=Path, help="a thermonet evidence --out directory")
    ap.add_argument("--out", default="docs/figures/census_D50.png")
    args = ap.parse_args()
    summary = json.loads((args.directory / "summary.json").read_text())

    from matplotlib.figure import Figure

    models = summary["models"]
    fig = Figure(figsize=(4.2 * len(models), 3.6), layout="constrained")
    axes = fig.subplots(1, len(models), squeeze=False)[0]
    for ax, model in zip(axes, models, strict=True):
        name = model["model"]
        rows = [r for r in summary["rows"] if r["model"] == name]
        j = np.array([r["minimum"] for r in rows])
        le = np.array([r["log_evidence"] for r in rows])
        err = np.array([r["log_evidence_error"] for r in rows])
        checked = np.array([r["converged"] is not None for r in rows])
        ax.errorbar(j[~checked], le[~checked], yerr=err[~checked], fmt="o", ms=5, capsize=2,
                    color="C0", label="basin TI from minimum j")
        if checked.any():
            passed = all(r["converged"] for r in rows if r["converged"] is not None)
            ax.errorbar(j[checked], le[checked], yerr=err[checked], fmt="s", ms=6, capsize=2,
                        color="C3", label="the same, convergence report "
                        + ("passed" if passed else "FAILED"))
        census = model.get("census") or {}
        glob = census.get("global_log_evidence")
        line = f"{name}: TI mean {le.mean():.2f}, sd {le.std(ddof=1):.2f} over {len(le)} minima"
        if glob is not None:
            g, ge = glob, census.get("global_error", 0.0)
            ax.axhspan(g - ge, g + ge, color="0.6", alpha=0.5, lw=0)
            ax.axhline(g, color="k", lw=1, label="global (prior-anchored ladder)")
            line += f"; global {g:.3f} ± {ge:.3f}"
        if census:
            ax.set_title(f"{name}: census bound {census['bound']:+.1f} "
                         f"(ln|G| = {census['log_multiplicity']:.1f})", fontsize=9)
            line += (f"; census bound {census['bound']:.2f} ± {census['bound_error']:.2f} "
                     f"({census['n_basins']} distinct basins)")
        print(line)
        ax.set_xlabel("minimum j")
        ax.set_ylabel("log evidence")
        ax.legend(fontsize=7, loc="lower left")
    fig.suptitle(f"evidence on {summary['data']}, T = {summary['temperature']:g}:\n"
                 "TI from each minimum and the model's global estimate", fontsize=9)
    fig.savefig(args.out, dpi=150)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
