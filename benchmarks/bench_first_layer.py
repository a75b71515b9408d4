#!/usr/bin/env python
"""A narrow first layer from the inputs transposed, against the plain orientation.

For networks 256-h-10 on the paper's D50 (and 500 random rows, four blocks), times the
energy and gradient kernel with the inputs transposed (``z.T = W @ x.T``,
``thermonet.kernels.mlp_layers``) and without (``z = x @ W.T``), in alternating rounds, and
prints microseconds per call, their ratio, whether the two gave the same bits, and whether
``transposes_data`` picks the transposed one on this machine (own products, AVX-512 tile,
first layer under forty units). Usage::

    python benchmarks/bench_first_layer.py [--hidden 8 12 16 24 32 40] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np
from harness import calibrate, cpu_model, gradient_loop, timed_loop, vector_flags, versions


def main() -> int:
    """Time both orientations for every width and print the table."""
    import thermonet as tn
    from thermonet.kernels import mlp as k
    from thermonet.kernels import mlp_layers as layers
    from thermonet.kernels import threads
    from thermonet.kernels.matmul import blas

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hidden", type=int, nargs="+", default=[8, 12, 16, 24, 32, 40])
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds per width")
    ap.add_argument("--seconds", type=float, default=0.3, help="per timed loop")
    args = ap.parse_args()
    v = versions()
    print(f"machine : {cpu_model()} [{vector_flags()}]; python {v['python']}, "
          f"numpy {v['numpy']}, numba {v['numba']}; products: {blas.BACKEND}")

    grads = gradient_loop()

    d50 = tn.load_data("D50").train
    rng = np.random.default_rng(0)
    sets = {"D50": (np.ascontiguousarray(d50.x, dtype=np.float64), np.asarray(d50.y)),
            "500 rows": (rng.uniform(0.0, 1.0, (500, 256)), rng.integers(0, 10, 500))}
    print(f"{'data':>8s} {'h':>3s} {'plain us':>9s} {'transposed us':>14s} "
          f"{'plain/transposed':>17s}  same bits  picked")
    with threads.limit(1):
        for name, (x, y) in sets.items():
            for h in args.hidden:
                widths = np.array([256, h, 10], dtype=np.int64)
                theta = 0.1 * rng.normal(size=k.n_params(widths))
                work = np.empty(k.work_size(widths, 128))
                partial, g = np.empty_like(theta), np.empty_like(theta)
                nets = [(widths, k.activation_code(0), x, y, 128, xt)
                        for xt in (np.empty(0), layers.transposed_blocks(x, 128))]
                ends = []
                for net in nets:
                    e = grads(theta, net, work, partial, g, 1)
                    ends.append((e, g.copy()))
                same = ends[0][0] == ends[1][0] and np.array_equal(ends[0][1], ends[1][1])
                calls = []
                for net in nets:
                    def f(net=net, theta=theta, work=work, partial=partial, g=g):
                        return grads(theta, net, work, partial, g, 10)
                    calls.append((f, calibrate(f, args.seconds)[0]))
                us: list[list[float]] = [[], []]
                for _ in range(args.rounds):
                    for i, (f, n_calls) in enumerate(calls):
                        us[i].append(10**6 / (10 * timed_loop(f, n_calls)["rate"]))
                plain, trans = statistics.median(us[0]), statistics.median(us[1])
                picked = layers.transposes_data(widths, np.float64)
                print(f"{name:>8s} {h:3d} {plain:9.2f} {trans:14.2f} {plain / trans:17.2f}  "
                      f"{same!s:9s}  {picked}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
