#!/usr/bin/env python
"""The two routes of an HMC momentum draw, timed side by side at each size.

``thermonet.kernels.momenta.momenta`` draws ``n`` momenta with NumPy's normals and a compiled
scaling pass when ``n <= NUMPY_DRAW_MAX``, and with the compiled draw (Numba's Generator)
above it; both give the same bits. This prints, per ``n``, the microseconds per call of each
route and their ratio, so that the switch can be checked on the machine at hand: the NumPy
route should win below it and the compiled one above. Usage::

    python benchmarks/bench_momenta.py [--sizes 3 64 512 3214]
"""

from __future__ import annotations

import argparse

import numpy as np
from harness import calibrate, cpu_model, timed_loop, vector_flags, versions


def main() -> int:
    """Time both routes at every size and print the table."""
    from thermonet.kernels import momenta as mom

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+",
                    default=[3, 16, 64, 256, 512, 1024, 3214, 13970])
    ap.add_argument("--seconds", type=float, default=0.3, help="per timed loop")
    args = ap.parse_args()
    v = versions()
    print(f"machine : {cpu_model()} [{vector_flags()}]; python {v['python']}, "
          f"numpy {v['numpy']}, numba {v['numba']}")
    print(f"switch  : NumPy route up to NUMPY_DRAW_MAX = {mom.NUMPY_DRAW_MAX} momenta")
    print(f"{'n':>6s} {'numpy us':>9s} {'compiled us':>12s} {'compiled/numpy':>15s}  same bits")
    for n in args.sizes:
        scale = np.random.default_rng(n).uniform(0.5, 2.0, n)
        inv_mass = 1.0 / scale**2
        ra, rb = np.random.default_rng(1), np.random.default_rng(1)
        pa, pb = np.empty(n), np.empty(n)

        def by_numpy(rng=ra, p=pa, scale=scale, inv_mass=inv_mass):
            rng.standard_normal(out=p)
            return mom.scale_momenta(p, scale, inv_mass)

        def compiled(rng=rb, p=pb, scale=scale, inv_mass=inv_mass):
            return mom.draw_momenta(rng, scale, inv_mass, p)

        same = by_numpy() == compiled() and np.array_equal(pa, pb)
        rates = []
        for f in (by_numpy, compiled):
            calls, _ = calibrate(f, args.seconds)
            rates.append(timed_loop(f, calls)["rate"])
        us = [1e6 / r for r in rates]
        print(f"{n:6d} {us[0]:9.2f} {us[1]:12.2f} {us[1] / us[0]:15.2f}  {same}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
