#!/usr/bin/env python
"""HMC mixing on analytic Gaussians: step-size / trajectory-length jitter and dt adaptation.

Usage::

    python benchmarks/hmc_mixing.py tau        # autocorrelation times (~4 min on 2 cores)
    python benchmarks/hmc_mixing.py accept     # acceptance after each adaptation method

``tau``: the integrated autocorrelation time (``thermonet.stats``, Sokal's window) of E and of
w_1 on a 10-D Gaussian at T = 1, equal masses, stiffness all 1 ("flat") and geometric 1..100
("spread", w_1 the softest), for L = 3, 5, 7, 10, 20 and each jitter option. The base dt of
every row is the one the "chain" adaptation (target 0.65) finds *without* jitter for that L, so
rows of one L differ only by the jitter.

``accept``: the mean acceptance probability of 4000 production transitions after the
adaptation ("original": the bracket search, called as the engine's burn-in does (factor 0.1)
and then 8 times as the runner does (factor 0.9, 25 transitions apart); "chain": dual
averaging along the chain, 3 x 200 warm-up transitions), on Gaussians with stiffness 1..100 in
10-D and 50-D at T = 0.1, 1, 10, with L = 10 and L = 50, without and with dt jitter 0.2.
"""

from __future__ import annotations

import sys
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from thermonet.samplers.hmc import HMC
from thermonet.stats import integrated_autocorrelation_time as tau_int
from thermonet.testsystems import Gaussian

N_STEPS = 20000
OPTIONS = {
    "none": {},
    "dt jitter 0.2": {"step_size_jitter": 0.2},
    "dt jitter 0.5": {"step_size_jitter": 0.5},
    "L jitter 0.5": {"n_leapfrog_jitter": 0.5},
    "L jitter 1": {"n_leapfrog_jitter": 1.0},
    "dt 0.2 + L 0.5": {"step_size_jitter": 0.2, "n_leapfrog_jitter": 0.5},
}


def stiffness(kind: str, n: int) -> list[float]:
    """Stiffness all 1 ("flat") or geometric 1..100 ("spread")."""
    return [1.0] * n if kind == "flat" else list(np.geomspace(1.0, 100.0, n))


def tau_row(args: tuple[str, int]) -> list[tuple[str, int, str, float, float, float, float]]:
    """The rows of one (stiffness, L): tau of E and w_1 for every jitter option."""
    kind, n_leapfrog = args
    pot = Gaussian(10, stiffness=stiffness(kind, 10)).potential()
    base = HMC(pot, temperature=1.0, n_leapfrog=n_leapfrog, step_size=0.1, adapt_method="chain")
    state = base.warm_up(base.init(np.full(10, 0.5)), np.random.default_rng(7), 600)
    dt = state.step_size
    rows = []
    for name, opts in OPTIONS.items():
        s = HMC(pot, temperature=1.0, n_leapfrog=n_leapfrog, **opts)
        st = state._replace(step_size=dt)
        rng = np.random.default_rng(11)
        e, w1, acc = np.empty(N_STEPS), np.empty(N_STEPS), 0
        for t in range(N_STEPS):
            st, info = s.step(st, rng)
            e[t], w1[t] = st.energy, st.theta[0]
            acc += info.is_accepted
        rows.append((kind, n_leapfrog, name, dt, acc / N_STEPS, tau_int(e), tau_int(w1)))
    return rows


def accept_row(args: tuple[int, float, int, str, float]
               ) -> tuple[int, float, int, str, float, float, float]:
    """Acceptance at the frozen dt after one adaptation method."""
    n, temperature, n_leapfrog, method, jitter = args
    pot = Gaussian(n, stiffness=stiffness("spread", n)).potential()
    s = HMC(pot, temperature=temperature, n_leapfrog=n_leapfrog, step_size=0.1,
            adapt_method=method, step_size_jitter=jitter)
    rng = np.random.default_rng(3)
    k = np.asarray(stiffness("spread", n))
    state = s.init(rng.uniform(-1, 1, n) / np.sqrt(k))
    # the engine's burn-in: adapt, 20 transitions, adapt, 80 transitions, adapt
    for block in (20, 80, 0):
        state = s.adapt(state, rng, factor=0.1)
        for _ in range(block):
            state, _ = s.step(state, rng)
    if method == "original":
        # then the runner's fine adaptations (factor 0.9, every 25 iterations), frozen after 8
        for _ in range(8):
            state = s.adapt(state, rng, factor=0.9)
            for _ in range(25):
                state, _ = s.step(state, rng)
    probs = []
    for _ in range(4000):
        state, info = s.step(state, rng)
        probs.append(min(1.0, np.exp(min(info.log_accept_ratio, 0.0))))
    return n, temperature, n_leapfrog, method, jitter, state.step_size, float(np.mean(probs))


def main() -> None:
    """Print the requested table (``tau`` or ``accept``) as Markdown."""
    what = sys.argv[1] if len(sys.argv) > 1 else "tau"
    with ProcessPoolExecutor(2) as pool:
        if what == "tau":
            jobs = [(kind, n_l) for kind in ("flat", "spread") for n_l in (3, 5, 7, 10, 20)]
            print("| stiffness | L | option | dt | acceptance | tau(E) | tau(w_1) |")
            print("|---|---|---|---|---|---|---|")
            for rows in pool.map(tau_row, jobs):
                for kind, n_l, name, dt, acc, t_e, t_w in rows:
                    print(f"| {kind} | {n_l} | {name} | {dt:.3f} | {acc:.2f} | {t_e:.1f} | "
                          f"{t_w:.1f} |")
        else:
            jobs = [(n, t, n_l, m, j) for n in (10, 50) for t in (0.1, 1.0, 10.0)
                    for n_l in (10, 50) for j in (0.0, 0.2) for m in ("original", "chain")]
            print("| n | T | L | method | dt jitter | dt | acceptance |")
            print("|---|---|---|---|---|---|---|")
            for n, t, n_l, m, j, dt, acc in pool.map(accept_row, jobs):
                print(f"| {n} | {t:g} | {n_l} | {m} | {j:g} | {dt:.4f} | {acc:.3f} |")


if __name__ == "__main__":
    main()
