"""Write sample_runs/robot_arm_ard.csv: the robot arm with four extra inputs, for Rasmussen's
three-level ARD prior (docs/regression.md, "Irrelevant inputs").

    python scripts/make_robot_arm_ard.py [--out sample_runs/robot_arm_ard.csv]

The stored robot-arm cases (200 training, 200 test; ``load_data("robot-arm")``) with the two
real inputs x1, x2, then x3 = x1 + e3 and x4 = x2 + e4 (e Gaussian, sd 0.02: noisy copies),
and x5, x6 drawn independently from the distributions of x1 and x2 (pure noise, same
ranges), all from ``numpy.random.default_rng(1996)``; outputs y1, y2; column ``test`` is 0
for the training cases, 1 for the test cases. Rerunning writes the same bytes.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from thermonet.data import load_data

SEED = 1996
COPY_NOISE = 0.02
X1_ABS = (0.453, 1.932)
X2 = (0.534, 3.142)


def extra_inputs(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Columns x3..x6 for inputs ``x`` of shape (n, 2)."""
    n = x.shape[0]
    copies = x + COPY_NOISE * rng.standard_normal((n, 2))
    x5 = np.where(rng.random(n) < 0.5, -1.0, 1.0) * rng.uniform(*X1_ABS, size=n)
    x6 = rng.uniform(*X2, size=n)
    return np.column_stack([copies, x5, x6])


def main() -> None:
    """Write the file (module docstring)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "sample_runs"
                                         / "robot_arm_ard.csv"))
    args = ap.parse_args()
    split = load_data("robot-arm")
    rng = np.random.default_rng(SEED)
    rows = []
    for flag, ds in ((0, split.train), (1, split.test)):
        x = np.column_stack([ds.x, extra_inputs(ds.x, rng)])
        rows.append(np.column_stack([x, ds.y, np.full(len(ds.y), flag)]))
    table = np.vstack(rows)
    lines = ["x1,x2,x3,x4,x5,x6,y1,y2,test"]
    lines += [",".join(f"{v:.17g}" for v in row[:-1]) + f",{int(row[-1])}" for row in table]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}: {len(table)} cases")


if __name__ == "__main__":
    main()
