#!/usr/bin/env python
"""Local exploration at one rung: how many gradients a chain needs to forget its energy.

Usage::

    PYTHONPATH=. python benchmarks/bench_band.py --arch M3 --data D50 --temperature 3.3 \
        --budget 1e6 --burn 60000 --moves 15:0 5:0 30:0 60:1

One HMC chain at a fixed temperature, without swaps, run as a rung of the tempering ladder
runs it (reflecting walls, dt jitter 0.2, diagonal masses from the chain's own variances, dt
adapted along the chain to acceptance 0.65): it is relaxed from a prior draw for ``--burn``
transitions of L = 15, then every local move ``L:j`` (L leapfrog steps, trajectory-length
jitter j) runs ``--budget`` gradients from that same state, each with its own stream, two at
a time. Printed for each move: the acceptance; the autocorrelation of the energy after 60
gradients (one swap round of four trajectories of L = 15, the ``rho1`` that ``thermonet
info`` prints) and after 300; and the integrated autocorrelation time of the energy in
gradients (Sokal's window, error ``tau sqrt(2(2M + 1)/N)``) with its ratio to the first
move's. The lower tau, the fewer gradients the move needs per independent energy. The
relaxed state's mean squared weight per layer, in units of the box half-width, is printed
too (1/3 for weights uniform in the box).
"""

from __future__ import annotations

import argparse
import math
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np
from harness import cpu_model, vector_flags, versions

import thermonet as tn
from thermonet.kernels import threads
from thermonet.registry import get_architecture
from thermonet.stats import autocorrelation, integrated_autocorrelation_time
from thermonet.tempering.warmup import mass_estimate

ROUND = 60          # gradients in one swap round of the quickstart (4 trajectories of L = 15)


def architecture(args: argparse.Namespace) -> Any:
    """``--arch``: a registered architecture, or 'small' for 256-12-10."""
    return (get_architecture("mlp", hidden=[12]) if args.arch == "small"
            else get_architecture(args.arch))


def build(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    """The architecture, its box prior and its potential on the training set."""
    arch = architecture(args)
    prior = tn.BoxPrior.for_architecture(arch)
    return arch, prior, arch.potential(tn.load_data(args.data).train)


def sampler(args: argparse.Namespace, pot: Any, prior: Any, n_leapfrog: int,
            jitter: float) -> Any:
    """HMC as a rung of the quickstart's ladder runs it, with L and its jitter."""
    return tn.HMC(pot, prior=prior, temperature=args.temperature, config=tn.HMC.Config(
        n_leapfrog=n_leapfrog, step_size=0.01, step_size_jitter=0.2,
        n_leapfrog_jitter=jitter, wall="reflect", adapt_method="chain", target_accept=0.65,
        warmup_transitions=200))


def relax(args: argparse.Namespace) -> tuple[np.ndarray, float, np.ndarray, list[float]]:
    """A state relaxed at the temperature, its dt and masses, and the energy's means over
    the eighths of the last ``burn`` transitions."""
    _, prior, pot = build(args)
    s = sampler(args, pot, prior, 15, 0.0)
    rng = np.random.default_rng(args.seed)
    with threads.limit(1):
        st = s.warm_up(s.init(prior.sample(rng)), rng, 200)
        total, total_sq = np.zeros(pot.n_params), np.zeros(pot.n_params)
        for i in range(1600):
            st, _ = s.step(st, rng)
            if i >= 1200:
                total += st.theta
                total_sq += st.theta ** 2
        s.set_masses(mass_estimate(total, total_sq, 400))
        st = s.warm_up(st, rng, 200)
        energies = []
        for _ in range(args.burn):
            st, _ = s.step(st, rng)
            energies.append(st.energy)
    eighths = [float(np.mean(e)) for e in np.array_split(np.array(energies), 8)]
    return st.theta, st.step_size, s.masses, eighths


def tau_with_error(x: np.ndarray, c: float = 5.0) -> tuple[float, float]:
    """Sokal's windowed integrated autocorrelation time (:mod:`thermonet.stats`) and its
    error ``tau sqrt(2(2M + 1)/N)``, the window M being the first lag at or past ``c tau``."""
    tau = integrated_autocorrelation_time(x, c)
    return tau, tau * math.sqrt(2.0 * (2 * math.ceil(c * tau) + 1) / len(x))


def measure(job: tuple[argparse.Namespace, np.ndarray, float, np.ndarray, int, float, int]
            ) -> dict[str, float]:
    """One move's ``budget`` gradients from the relaxed state: its statistics."""
    args, theta, dt, masses, n_leapfrog, jitter, seed = job
    _, prior, pot = build(args)
    s = sampler(args, pot, prior, n_leapfrog, jitter)
    s.set_masses(masses)
    st = s.init(theta, step_size=dt)
    rng = np.random.default_rng(seed)
    energy, grads, n_accepted, n_grad = [], [], 0, 0
    t0 = time.perf_counter()
    with threads.limit(1):
        while n_grad < args.budget:
            st, info = s.step(st, rng)
            n_grad += info.n_steps
            n_accepted += info.is_accepted
            energy.append(st.energy)
            grads.append(n_grad)
    e, g = np.array(energy), np.array(grads)
    per_round = e[np.searchsorted(g, np.arange(ROUND, g[-1], ROUND))]
    rho = autocorrelation(per_round)
    tau, err = tau_with_error(e)
    per_transition = g[-1] / len(e)
    return {"accept": n_accepted / len(e), "rho1": float(rho[1]), "rho5": float(rho[5]),
            "tau": tau * per_transition, "err": err * per_transition,
            "mean": float(e.mean()), "sd": float(e.std()), "seconds": time.perf_counter() - t0,
            "energy": e, "gradients": g}


def plot(png: str, files: list[str], max_lag: float = 3e4) -> None:
    """The energy's autocorrelation against the lag in gradients, one line per saved move."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for f in files:
        z = np.load(f)
        for key in sorted(k for k in z.files if k.startswith("energy_")):
            move = key[len("energy_"):]
            e, g = z[key], z[f"gradients_{move}"]
            step = g[-1] / len(e)                     # mean gradients per transition
            n = min(len(e) - 1, int(max_lag / step))
            lags = np.arange(n) * step
            ax.plot(lags, autocorrelation(e)[:n],
                    label=f"T = {float(z['temperature']):g}, L:jitter {move.replace('_', ':')}")
    ax.axhline(0.0, color="grey", lw=0.5)
    ax.set_xlabel("lag, gradients")
    ax.set_ylabel("autocorrelation of the energy")
    ax.set_title(f"{z['arch']} on {z['data']}, one rung alone (no swaps)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    print(f"wrote {png}")


def main() -> None:
    """Relax, run every move, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", default="M3", help="M3, M1 or 'small' (256-12-10)")
    ap.add_argument("--data", default="D50")
    ap.add_argument("--temperature", type=float, default=3.3)
    ap.add_argument("--budget", type=float, default=1e6, help="gradients per move")
    ap.add_argument("--burn", type=int, default=60000, help="relaxing transitions (L = 15)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--moves", nargs="+", default=["15:0", "5:0", "30:0", "60:1"],
                    help="L:jitter (n_leapfrog, n_leapfrog_jitter); the first is the baseline")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", help="save each move's energies and gradient counts (.npz)")
    ap.add_argument("--plot", nargs="+", metavar=("PNG", "NPZ"),
                    help="draw the energy autocorrelation of the moves saved in NPZ files "
                         "against the lag in gradients, and run nothing")
    args = ap.parse_args()
    if args.plot:
        plot(args.plot[0], args.plot[1:])
        return
    v = versions()
    print(f"machine : {cpu_model()} ({vector_flags()}); python {v['python']}, numpy "
          f"{v['numpy']}, numba {v['numba']}")
    print(f"{args.arch} on {args.data} at T = {args.temperature}; relaxing "
          f"{args.burn} transitions of L = 15 from a prior draw (seed {args.seed})", flush=True)
    theta, dt, masses, eighths = relax(args)
    print(f"relaxed: dt {dt:.4g}; E over the eighths of the relaxation "
          f"{', '.join(f'{v:.1f}' for v in eighths)}")
    moves = [(int(m.split(":")[0]), float(m.split(":")[1])) for m in args.moves]
    jobs = [(args, theta, dt, masses, n, j, 1000 * args.seed + i)
            for i, (n, j) in enumerate(moves)]
    with ProcessPoolExecutor(args.workers) as ex:
        results = list(ex.map(measure, jobs))
    base = results[0]["tau"]
    print(f"\n{'L:jitter':>9} {'accept':>7} {'rho(60)':>8} {'rho(300)':>9} "
          f"{'tau_E, gradients':>18} {'/ first':>8} {'<E> +- sd':>14} {'s':>5}")
    for (n, j), r in zip(moves, results, strict=True):
        print(f"{n:>5}:{j:<3g} {r['accept']:7.3f} {r['rho1']:8.3f} {r['rho5']:9.3f} "
              f"{r['tau']:10.0f} ± {r['err']:<5.0f} {r['tau'] / base:8.2f} "
              f"{r['mean']:7.1f} ± {r['sd']:<5.1f} {r['seconds']:5.0f}")
    if args.out:
        series = {}
        for (n, j), r in zip(moves, results, strict=True):
            series[f"energy_{n}_{j:g}"] = r["energy"]
            series[f"gradients_{n}_{j:g}"] = r["gradients"]
        np.savez(args.out, temperature=args.temperature, arch=args.arch, data=args.data,
                 seed=args.seed, **series)
    hw = tn.BoxPrior.for_architecture(architecture(args)).half_width
    print("\nmean (w / half-width)^2 of the relaxed state, "
          f"{np.mean((theta / hw) ** 2):.3f} overall (1/3 when uniform in the box)")


if __name__ == "__main__":
    main()
