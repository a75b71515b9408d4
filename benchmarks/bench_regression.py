#!/usr/bin/env python
"""Speed of one HMC trajectory of the robot-arm regression network, several ways.

Usage::

    python benchmarks/bench_regression.py             # 7 rounds, ~1-2 min
    python benchmarks/bench_regression.py --rounds 3 --leapfrog 100

The network and data are those of ``sample_runs/robot_arm.toml``: 2-16-2 tanh network, linear
outputs, the 200 stored training cases, L = 200 leapfrog steps, unit masses, a dt small enough
that every trajectory stays finite. Compared, in one process and interleaved round by round
(so load from other processes is spread over all three):

* ``compiled``: ``RegressionPotential.trajectory``, the whole trajectory in one compiled call
  (what ``hmc`` and ``hmc-gibbs`` run), with the network kernel ``kernel = "auto"`` picks
  (for this one-hidden-layer network the shallow kernel, :mod:`thermonet.kernels.mlp_shallow`);
* ``compiled blocked``: the same with ``kernel = "blocked"`` (the matrix-product kernel of
  :mod:`thermonet.kernels.mlp`);
* ``L calls``: the :class:`~thermonet.api.Potential` default trajectory: the same leapfrog
  driven from Python, one compiled energy-and-gradient call per step;
* ``numpy``: a hand-written NumPy leapfrog with a NumPy forward and backward pass (float64,
  one BLAS-backed matrix product per layer and direction);
* ``jax``: the same leapfrog as one ``jax.jit``-compiled function, the steps in a
  ``lax.fori_loop`` and the gradient from ``jax.value_and_grad`` (float64 through
  ``jax_enable_x64``; XLA's CPU thread pool off, one intra-op thread);
* ``torch``: the same leapfrog as a Python loop over PyTorch float64 tensors, the gradient
  from autograd at every step (``torch.set_num_threads(1)``);
* ``scale (compiled)``: the same network in Neal's scale-factor parameterisation
  (``parameterisation = "scale"``, docs/regression.md): ``ScaleFactorPotential.trajectory``,
  the whole trajectory in one compiled call (what ``hmc-gibbs`` runs);
* ``scale (L calls)``: the same, driven by the :class:`~thermonet.api.Potential` default: one
  NumPy map and chain rule around the compiled gradient per step.

``--shapes`` instead times one energy-and-gradient call of both kernels on a grid of network
and data sizes (random data, one hidden layer of tanh units) and prints, per shape, the
ratio and which kernel ``kernel = "auto"`` picks, flagging a shape where that pick is the
slower by more than 5 %: the measurement behind
:func:`thermonet.architectures.regression_potential.choose_kernel`.

JAX and PyTorch are optional: each is skipped, with the reason printed, when it does not
import (neither is a thermonet dependency; docs/performance.md says how to install them in a
separate environment). All but the last two start from the same state and must end at the
same energy (checked, to 1e-9 relative), so their ratios compare equal work; the last two move
3 more coordinates, from their own common state, and must end at the same energy as each
other. One thread: the process is pinned to one CPU (``--no-pin`` turns this off) and BLAS
capped at 1. Prints, per implementation, the best and the median trajectories per second over
the rounds, the ratios of the compiled kernel to the others, the largest process CPU time per
wall time of its loops (above 1 would mean a second thread did work), the ratio to the fastest
alternative (NumPy, JAX, PyTorch) and that of the scale-factor kernel to its Python loop, with
the CPU model, flags and versions.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np
from harness import cpu_model, limit_blas, machine_busy, vector_flags, versions


def numpy_trajectory(theta, p, x, y, tau, prec, dt, n_steps, h):
    """Leapfrog with a NumPy forward/backward pass of the 2-h-2 tanh network; returns E."""
    def energy_grad(t):
        w1, b1 = t[:2 * h].reshape(h, 2), t[2 * h:3 * h]
        w2, b2 = t[3 * h:5 * h].reshape(2, h), t[5 * h:5 * h + 2]
        a = np.tanh(x @ w1.T + b1)
        r = a @ w2.T + b2 - y
        e = 0.5 * tau * np.sum(r * r) + 0.5 * np.dot(prec * t, t)
        dr = tau * r
        g2, gb2 = dr.T @ a, dr.sum(axis=0)
        da = (dr @ w2) * (1.0 - a * a)
        g1, gb1 = da.T @ x, da.sum(axis=0)
        return e, np.concatenate([g1.ravel(), gb1, g2.ravel(), gb2]) + prec * t

    e, g = energy_grad(theta)
    p = p - 0.5 * dt * g
    for s in range(n_steps):
        theta = theta + dt * p
        e, g = energy_grad(theta)
        p = p - (0.5 if s == n_steps - 1 else 1.0) * dt * g
    return e


def _unpack(t, xp, h):
    """w1 (h, 2), b1 (h), w2 (2, h), b2 (2): thermonet's parameter order for the 2-h-2 net."""
    return (xp.reshape(t[:2 * h], (h, 2)), t[2 * h:3 * h],
            xp.reshape(t[3 * h:5 * h], (2, h)), t[5 * h:5 * h + 2])


def jax_trajectory(x, y, tau, prec, dt, n_steps, h):
    """A jitted leapfrog (same steps as :func:`numpy_trajectory`), or the reason JAX is not
    there. Returns ``f(theta, p) -> E`` (a Python float)."""
    # one XLA CPU thread, set before jax is imported (later it has no effect)
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               " --xla_cpu_multi_thread_eigen=false"
                               " intra_op_parallelism_threads=1").strip()
    try:
        import jax
    except ImportError as err:
        return f"jax does not import ({err}); pip install jax jaxlib in a separate venv"
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jax import lax

    xj, yj, pj = jnp.asarray(x), jnp.asarray(y), jnp.asarray(prec)

    def energy(t):
        w1, b1, w2, b2 = _unpack(t, jnp, h)
        r = jnp.tanh(xj @ w1.T + b1) @ w2.T + b2 - yj
        return 0.5 * tau * jnp.sum(r * r) + 0.5 * jnp.dot(pj * t, t)

    vg = jax.value_and_grad(energy)

    def step(_, c):
        th, p, g, e = c
        th = th + dt * p
        e, g = vg(th)
        return th, p - dt * g, g, e

    @jax.jit
    def traj(theta, p):
        e, g = vg(theta)
        _, p, g, e = lax.fori_loop(0, n_steps, step, (theta, p - 0.5 * dt * g, g, e))
        return e, p + 0.5 * dt * g          # the last kick is a half kick

    def run(theta, p):
        e, _ = traj(jnp.asarray(theta), jnp.asarray(p))
        return float(e)                      # blocks until the result is there

    return run


def torch_trajectory(x, y, tau, prec, dt, n_steps, h):
    """A PyTorch leapfrog with autograd gradients (same steps as :func:`numpy_trajectory`), or
    the reason PyTorch is not there. Returns ``f(theta, p) -> E``."""
    try:
        import torch
    except ImportError as err:
        return f"torch does not import ({err}); pip install torch in a separate venv"
    torch.set_num_threads(1)
    xt, yt, pt = (torch.as_tensor(a, dtype=torch.float64) for a in (x, y, prec))

    def energy_grad(t):
        t = t.detach().requires_grad_(True)
        w1, b1, w2, b2 = _unpack(t, torch, h)
        r = torch.tanh(xt @ w1.T + b1) @ w2.T + b2 - yt
        e = 0.5 * tau * torch.sum(r * r) + 0.5 * torch.dot(pt * t, t)
        (g,) = torch.autograd.grad(e, t)
        return e.detach(), g

    def run(theta, p):
        th = torch.as_tensor(theta, dtype=torch.float64)
        p = torch.as_tensor(p, dtype=torch.float64)
        e, g = energy_grad(th)
        p = p - 0.5 * dt * g
        for s in range(n_steps):
            th = th + dt * p
            e, g = energy_grad(th)
            p = p - (0.5 if s == n_steps - 1 else 1.0) * dt * g
        return float(e)

    return run


def best_rate(f, min_time: float, rounds: int) -> float:
    """Calls per second of ``f``: the best of ``rounds`` loops of about ``min_time`` s."""
    f()
    t0 = time.perf_counter()
    f()
    count = max(1, int(min_time / max(time.perf_counter() - t0, 1e-7)))
    best = 0.0
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(count):
            f()
        best = max(best, count / (time.perf_counter() - t0))
    return best


def shapes(min_time: float, rounds: int) -> None:
    """The ``--shapes`` table (module docstring)."""
    from thermonet.architectures.regression import RegressionMLP
    from thermonet.architectures.regression_potential import choose_kernel

    grid = [(n_in, h, 2, n) for n in (200, 2000, 20000) for n_in in (2, 8, 32, 128)
            for h in (8, 16, 64, 256)]
    grid += [(2, 16, 1, 200), (2, 16, 10, 200), (8, 64, 10, 2000)]
    v = versions()
    print(f"CPU: {cpu_model()}; flags {vector_flags()}; numpy {v['numpy']}, numba "
          f"{v['numba']}; BLAS {v.get('blas', '?')}; 1 thread; one energy-and-gradient call, "
          f"best of {rounds} loops of {min_time} s")
    print(f"{'n_in':>5} {'hidden':>6} {'n_out':>5} {'N':>6} {'blocked us':>11} "
          f"{'shallow us':>11} {'shallow x faster':>17} {'auto':>8}")
    wrong = 0
    rng = np.random.default_rng(0)
    for n_in, h, n_out, n in grid:
        x = rng.uniform(-2, 2, (n, n_in))
        y = rng.normal(size=(n, n_out))
        us = {}
        for kern in ("blocked", "shallow"):
            pot = RegressionMLP(n_in, [h], n_out, kernel=kern).potential(x=x, y=y)
            theta = rng.normal(0, 0.5, pot.n_params)
            grad = np.empty(pot.n_params)
            us[kern] = 1e6 / best_rate(lambda p=pot, t=theta, g=grad: p.energy_and_grad(t, g),
                                       min_time, rounds)
        ratio = us["blocked"] / us["shallow"]
        auto = choose_kernel(np.array([n_in, h, n_out]), "auto")
        slower = us[auto] > 1.05 * min(us.values())
        wrong += slower
        print(f"{n_in:>5} {h:>6} {n_out:>5} {n:>6} {us['blocked']:>11.2f} "
              f"{us['shallow']:>11.2f} {ratio:>17.2f} {auto:>8}"
              + ("  <- auto picks the slower" if slower else ""))
    print(f"auto picked the slower kernel (by > 5 %) at {wrong} of {len(grid)} shapes")


def main() -> None:
    """Measure and print (module docstring)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--leapfrog", type=int, default=200)
    ap.add_argument("--min-time", type=float, default=1.0, help="seconds per timed loop")
    ap.add_argument("--no-pin", action="store_true",
                    help="do not pin the process to one CPU (XLA may then use a second core)")
    ap.add_argument("--shapes", action="store_true",
                    help="time both network kernels on a grid of shapes instead")
    args = ap.parse_args()
    if not args.no_pin and hasattr(os, "sched_setaffinity"):
        # before JAX or PyTorch start their thread pools, which inherit it: XLA ignores
        # its thread-count flag for some work, so without this JAX could use two cores
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    limit_blas(1)
    if args.shapes:
        shapes(min(args.min_time, 0.2), args.rounds)
        return
    from thermonet.api import Potential
    from thermonet.architectures.regression import RegressionMLP
    from thermonet.data import load_data
    from thermonet.kernels import configure
    from thermonet.kernels import leapfrog as lf

    configure()
    split = load_data("robot-arm")
    arch = RegressionMLP(2, [16], 2)
    pot = arch.potential(split.train)
    n = arch.n_params
    rng = np.random.default_rng(0)
    theta0 = rng.normal(0, 0.5, n)
    p0 = rng.normal(size=n)
    inv_mass = np.ones(n)
    half_width = np.full(n, 1e8)
    dt, L = 0.0005, args.leapfrog
    _, g0 = pot.energy_and_grad(theta0)
    g0 = g0.copy()

    def compiled():
        th, p, g = theta0.copy(), p0.copy(), g0.copy()
        return pot.trajectory(th, p, g, inv_mass, dt, L, lf.WALL_NONE, half_width, 1e30)[0]

    pot_b = RegressionMLP(2, [16], 2, kernel="blocked").potential(split.train)

    def blocked():
        th, p, g = theta0.copy(), p0.copy(), g0.copy()
        return pot_b.trajectory(th, p, g, inv_mass, dt, L, lf.WALL_NONE, half_width, 1e30)[0]

    def l_calls():
        th, p, g = theta0.copy(), p0.copy(), g0.copy()
        return Potential.trajectory(pot, th, p, g, inv_mass, dt, L, lf.WALL_NONE, half_width,
                                    1e30)[0]

    prec = pot.prec.copy()

    def numpy_ref():
        return numpy_trajectory(theta0.copy(), p0.copy(), pot.x, pot.y, pot.tau, prec, dt, L,
                                16) + pot.const

    arch_s = RegressionMLP(2, [16], 2, parameterisation="scale")
    pot_s = arch_s.potential(split.train)
    q0 = np.concatenate([theta0, np.zeros(3)])
    pq0 = np.concatenate([p0, rng.normal(size=3)])
    _, gq0 = pot_s.energy_and_grad(q0)
    gq0 = gq0.copy()
    ones_s, hw_s = np.ones(q0.size), np.full(q0.size, 1e8)

    def scaled():
        q, p, g = q0.copy(), pq0.copy(), gq0.copy()
        return pot_s.trajectory(q, p, g, ones_s, dt, L, lf.WALL_NONE, hw_s, 1e30)[0]

    def scaled_l_calls():
        q, p, g = q0.copy(), pq0.copy(), gq0.copy()
        return Potential.trajectory(pot_s, q, p, g, ones_s, dt, L, lf.WALL_NONE, hw_s,
                                    1e30)[0]

    impls = {"compiled": compiled, "compiled blocked": blocked, "L calls": l_calls,
             "numpy": numpy_ref}
    for name, make in (("jax", jax_trajectory), ("torch", torch_trajectory)):
        run = make(pot.x, pot.y, pot.tau, prec, dt, L, 16)
        if isinstance(run, str):
            print(f"{name}: skipped: {run}")
        else:
            impls[name] = (lambda r: lambda: r(theta0, p0) + pot.const)(run)
    impls["scale (compiled)"] = scaled
    impls["scale (L calls)"] = scaled_l_calls
    ends = {k: f() for k, f in impls.items()}         # also the warm-up (compiles)
    e_sc, e_sl = ends.pop("scale (compiled)"), ends.pop("scale (L calls)")
    if not abs(e_sc - e_sl) <= 1e-9 * abs(e_sl):
        sys.exit(f"scale (compiled) ends at E = {e_sc!r}, its Python loop at {e_sl!r}")
    ref = ends["numpy"]
    for k, e in ends.items():
        if not abs(e - ref) <= 1e-9 * abs(ref):
            sys.exit(f"{k} ends at E = {e!r}, numpy at {ref!r}: not the same trajectory")
    counts = {}
    for k, f in impls.items():
        t0 = time.perf_counter()
        f()
        counts[k] = max(1, int(args.min_time / max(time.perf_counter() - t0, 1e-6)))
    rates: dict[str, list[float]] = {k: [] for k in impls}
    cpu_per_wall: dict[str, list[float]] = {k: [] for k in impls}   # > 1: more than 1 thread
    others = []
    for _ in range(args.rounds):
        for k, f in impls.items():
            m0, c0, t0 = machine_busy(), time.process_time(), time.perf_counter()
            for _ in range(counts[k]):
                f()
            wall = time.perf_counter() - t0
            c1, m1 = time.process_time(), machine_busy()
            rates[k].append(counts[k] / wall)
            cpu_per_wall[k].append((c1 - c0) / wall)
            if m0 is not None and m1 is not None:
                others.append(max(0.0, (m1 - m0) - (c1 - c0)) / wall)
    v = versions()
    print(f"CPU: {cpu_model()}; flags {vector_flags()}; numpy {v['numpy']}, numba "
          f"{v['numba']}; jax {v['jax']}, jaxlib {v['jaxlib']}, torch {v['torch']}; "
          f"BLAS {v.get('blas', '?')}; 1 thread"
          + ("" if args.no_pin else f", pinned to CPU {sorted(os.sched_getaffinity(0))}"))
    print(f"robot arm 2-16-2 tanh, N = {len(pot.y)}, L = {L}, {args.rounds} rounds; "
          f"other processes used {statistics.median(others):.2f} cores (median)"
          if others else "")
    print(f"{'implementation':<17} {'traj/s best':>12} {'median':>10} {'us/step':>9} "
          f"{'compiled is x faster (best, median)':>36} {'cpu/wall':>9}")
    best_c, med_c = max(rates["compiled"]), statistics.median(rates["compiled"])
    for k, r in rates.items():
        best, med = max(r), statistics.median(r)
        ratio = "" if k == "compiled" else f"{best_c / best:.1f}x, {med_c / med:.1f}x"
        print(f"{k:<17} {best:>12.1f} {med:>10.1f} {1e6 / (best * L):>9.2f} {ratio:>36} "
              f"{max(cpu_per_wall[k]):>9.2f}")
    sc, sl = rates["scale (compiled)"], rates["scale (L calls)"]
    print(f"scale factors: compiled / Python loop: {max(sc) / max(sl):.2f}x best, "
          f"{statistics.median(sc) / statistics.median(sl):.2f}x median; direct compiled / "
          f"scale compiled: {best_c / max(sc):.2f}x best, "
          f"{med_c / statistics.median(sc):.2f}x median")
    print(f"shallow kernel / blocked kernel (both compiled): "
          f"{best_c / max(rates['compiled blocked']):.2f}x best, "
          f"{med_c / statistics.median(rates['compiled blocked']):.2f}x median")
    alts = [k for k in ("numpy", "jax", "torch") if k in rates]
    fast_b = max(alts, key=lambda k: max(rates[k]))
    fast_m = max(alts, key=lambda k: statistics.median(rates[k]))
    print(f"compiled / fastest alternative: {best_c / max(rates[fast_b]):.2f}x best "
          f"({fast_b}), {med_c / statistics.median(rates[fast_m]):.2f}x median ({fast_m}); "
          f"target >= 3x")


if __name__ == "__main__":
    main()
