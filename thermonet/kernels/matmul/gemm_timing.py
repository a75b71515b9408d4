"""Time one M(3) block's products with thermonet's own products
(:mod:`~thermonet.kernels.matmul.gemm`).

Run as ``python -m thermonet.kernels.matmul.gemm_timing [budget_s]`` with
``THERMONET_BLAS=own``, by
:func:`thermonet.kernels.matmul.calibration.measure_own`; prints one JSON line
``{"us_per_block": ..., "rounds": ...}``: the fastest of its rounds over about
``budget_s`` seconds after a warm-up, the products those of
:func:`thermonet.kernels.matmul.calibration.products` (``"own"`` layouts) on fixed random operands,
called from one compiled loop through :func:`thermonet.kernels.matmul.blas.gemm`, as the kernels
call them: the compiled products are then the cached ones the run that measures loads, not a
second compile of about 4 CPU s inside the loop.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

from thermonet.kernels.jit import kernel
from thermonet.kernels.matmul import blas, calibration


@kernel
def _block(reps, tas, a_s, b_s, c_s):
    for _ in range(reps):
        for p in range(len(tas)):
            blas.gemm(tas[p], False, a_s[p], b_s[p], c_s[p])


def seconds_per_block(budget_s: float) -> tuple[float, int]:
    """Fastest seconds per block over about ``budget_s`` seconds, and the number of rounds."""
    if blas.BACKEND != "own":
        raise RuntimeError(f"the kernels' products are {blas.BACKEND!r}; expected 'own': run "
                           "with THERMONET_BLAS=own")
    rng = np.random.default_rng(0)
    tas, a_s, b_s, c_s = [], [], [], []
    for ta, tb, m, n, k in calibration.products("own"):
        if tb:
            raise ValueError("thermonet's own products take B untransposed")
        tas.append(ta)
        a_s.append(rng.standard_normal((k, m) if ta else (m, k)))
        b_s.append(rng.standard_normal((k, n)))
        c_s.append(np.empty((m, n)))
    args = (np.array(tas), tuple(a_s), tuple(b_s), tuple(c_s))
    _block(3, *args)                              # compile, page in
    t0 = time.perf_counter()
    _block(1, *args)
    reps = max(1, int(2e-3 / max(time.perf_counter() - t0, 1e-7)))
    best, rounds = float("inf"), 0
    t_end = time.perf_counter() + budget_s
    while rounds < 5 or time.perf_counter() < t_end:
        t0 = time.perf_counter()
        _block(reps, *args)
        best = min(best, (time.perf_counter() - t0) / reps)
        rounds += 1
    return best, rounds


def main(argv: list[str]) -> None:
    """Print the JSON line (``argv``: the budget in seconds, optional)."""
    budget = float(argv[0]) if argv else calibration.BUDGET_S
    best, rounds = seconds_per_block(budget)
    print(json.dumps({"us_per_block": best * 1e6, "rounds": rounds}))


if __name__ == "__main__":
    main(sys.argv[1:])
