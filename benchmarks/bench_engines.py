"""Replica-gradients per second of M(3): the Numba engine against the JAX engine.

A replica-gradient is one energy-and-gradient evaluation of one replica. The Numba engine
evaluates the replicas on ``--threads`` threads (its ``energy_and_grad_batch``, bitwise the
same as one at a time); the JAX engine evaluates all of them in one batched call, and inside
its batched trajectory kernel (``L`` leapfrog steps per call, what a run spends its time in).
Data: the embedded D500/D5000 where N matches, else random images and labels of the same shape
(the arithmetic does not depend on the values). Prints one table with the ratios to the Numba
figure of the same N measured in this run (or read from ``--numba-json``, measured on another
machine) and writes every figure to ``--json``.

    python benchmarks/bench_engines.py --n 500 5000 --replicas 64 --engines numba jax
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import numpy as np
from harness import cpu_flags, cpu_model


def data(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, str]:
    """``n`` inputs and labels: the embedded subset D<n> where there is one, else random."""
    if n in (50, 500, 5000):
        from thermonet.data import load_configured

        split = load_configured({"name": f"D{n}", "test": "auto"}, 0)
        return split.train.x, split.train.y, f"D{n}"
    return rng.random((n, 256)), rng.integers(0, 10, n), "random"


def timed(fn: Any, min_time: float) -> float:
    """Median seconds of one call of ``fn`` over at least ``min_time`` seconds (after one
    warm-up call)."""
    fn()
    times: list[float] = []
    start = time.perf_counter()
    while time.perf_counter() - start < min_time or len(times) < 3:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def bench_numba(pot: Any, theta: np.ndarray, threads: int, min_time: float) -> float:
    """Replica-gradients per second of the compiled kernels on ``threads`` threads."""
    from thermonet.architectures.mlp import MLPPotential

    p = MLPPotential(pot.arch, pot.x, pot.y, threads=threads)
    grad = np.empty_like(theta)
    sec = timed(lambda: p.energy_and_grad_batch(theta, grad), min_time)
    return theta.shape[0] / sec


def bench_jax(pot: Any, theta: np.ndarray, dtype: str, n_leapfrog: int, min_time: float
              ) -> dict[str, float]:
    """Replica-gradients per second of the JAX engine: one batched evaluation, and inside a
    batched trajectory of ``n_leapfrog`` steps."""
    import jax

    from thermonet.accel.jax_network import BatchedNetwork

    net = BatchedNetwork(pot.network_spec(), dtype)
    k, n = theta.shape
    tau, prec, const = np.ones(k), np.zeros((k, n)), np.zeros(k)
    th = jax.numpy.asarray(theta)
    args = (th, jax.numpy.asarray(tau), jax.numpy.asarray(prec), jax.numpy.asarray(const))

    def grads() -> None:
        _, g = net._energy_and_grad(args[0], net.x, net.y, *args[1:])
        g.block_until_ready()

    sec_grad = timed(grads, min_time)
    rng = np.random.default_rng(1)
    p = rng.standard_normal((k, n))
    _, g0 = net.energy_and_grad(theta, tau, prec, const)
    hw = np.full((k, n), 1e3)
    step = np.full(k, 1e-4)
    steps = np.full(k, n_leapfrog, dtype=np.int64)

    def trajectories() -> None:
        net.trajectories(theta, p, g0, np.ones((k, n)), step, steps, True, hw,
                         np.full(k, 10.0), tau, prec, const)

    sec_traj = timed(trajectories, min_time)
    return {"grad": k / sec_grad, "trajectory": k * n_leapfrog / sec_traj}


def main() -> None:
    """Measure and print the table (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[500, 5000])
    ap.add_argument("--replicas", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2, help="Numba engine threads")
    ap.add_argument("--engines", nargs="+", default=["numba", "jax"])
    ap.add_argument("--dtypes", nargs="+", default=["float64", "float32"])
    ap.add_argument("--n-leapfrog", type=int, default=15)
    ap.add_argument("--min-time", type=float, default=2.0)
    ap.add_argument("--numba-json", help="Numba figures measured elsewhere (this --json)")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()

    from thermonet.architectures.mlp import M3

    rng = np.random.default_rng(0)
    arch = M3()
    vector = sorted(f for f in cpu_flags() if f in ("avx2", "fma", "avx512f", "avx512bw",
                                                      "avx512vl"))
    info: dict[str, Any] = {"cpu": cpu_model(), "flags": vector, "cores": os.cpu_count(),
                            "replicas": args.replicas, "n_leapfrog": args.n_leapfrog,
                            "results": {}}
    if "jax" in args.engines:
        from thermonet import accel

        info["jax_device"] = accel.device_description()
    numba_ref: dict[str, float] = {}
    if args.numba_json:
        with open(args.numba_json) as f:
            ref = json.load(f)
        numba_ref = {n: r["numba"] for n, r in ref["results"].items() if "numba" in r}
        info["numba_from"] = ref.get("cpu", "?")
    theta = rng.uniform(-0.3, 0.3, (args.replicas, arch.n_params))
    print(f"# M(3), {args.replicas} replicas; CPU {info['cpu']} ({info['cores']} cores; "
          f"{' '.join(vector) or 'no AVX2'})"
          + (f"; JAX on {info['jax_device']}" if "jax_device" in info else ""))
    print(f"{'N':>6} {'data':>7} {'engine':>22} {'replica-grad/s':>15} {'x numba':>8}")
    for n in args.n:
        x, y, source = data(n, rng)
        pot = arch.potential(x=x, y=y)
        res: dict[str, Any] = {"data": source}
        if "numba" in args.engines:
            res["numba"] = bench_numba(pot, theta, args.threads, args.min_time)
        base = res.get("numba", numba_ref.get(str(n)))
        rows = [(f"numba, {args.threads} threads", res.get("numba"))]
        if "jax" in args.engines:
            for dtype in args.dtypes:
                r = bench_jax(pot, theta, dtype, args.n_leapfrog, args.min_time)
                res[f"jax_{dtype}"] = r
                rows += [(f"jax {dtype} gradient", r["grad"]),
                         (f"jax {dtype} trajectory", r["trajectory"])]
        info["results"][str(n)] = res
        for name, rate in rows:
            if rate is None:
                continue
            ratio = f"{rate / base:8.1f}" if base else "       -"
            print(f"{n:>6} {source:>7} {name:>22} {rate:15.1f} {ratio}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(info, f, indent=1)


if __name__ == "__main__":
    main()
