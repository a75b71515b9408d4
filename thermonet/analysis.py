"""Summaries of a run: acceptance, step sizes, energies, swap rates, round trips."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from thermonet import checkpoint as ckpt


def round_trips(replica_kn: Any) -> int:
    """Complete round trips of replicas across the ladder.

    ``replica_kn`` has shape (n_iterations, K): the replica at each slot after each iteration.
    A round trip is a replica going from the lowest slot to the highest and back to the lowest.
    Counted over all replicas.
    """
    r = np.asarray(replica_kn)
    if r.ndim != 2 or r.shape[1] < 2 or r.shape[0] == 0:
        return 0
    n_slots = r.shape[1]
    # position of each replica at each iteration
    pos = np.argsort(r, axis=1)              # pos[t, rep] = slot of replica rep
    last = np.full(n_slots, -1)              # -1: no extreme yet, 0: bottom, 1: top
    trips = 0
    for t in range(r.shape[0]):
        p = pos[t]
        at_bottom = p == 0
        at_top = p == n_slots - 1
        trips += int(np.sum(at_bottom & (last == 1)))
        last = np.where(at_bottom, 0, np.where(at_top & (last == 0), 1, last))
    return trips


def summarise(run_dir: str | Path) -> dict[str, Any]:
    """The ``thermonet info`` summary of a run directory (JSON-serialisable)."""
    import tomllib

    run_dir = Path(run_dir)
    ck = ckpt.read_checkpoint(run_dir)
    tr = ckpt.read_trace(run_dir, run_uuid=ck.run_uuid)
    cfg = tomllib.loads(ck.config_toml)
    n = int(tr["iteration"].shape[0]) if "iteration" in tr else 0
    discard = float(cfg.get("run", {}).get("discard", 0.2))
    start = int(np.floor(discard * n))
    sl = slice(start, n)
    k = len(ck.temperatures)
    sampler = cfg.get("sampler", {})
    n_traj = int(sampler.get("n_trajectories", 1))
    out: dict[str, Any] = {
        "run_dir": str(run_dir),
        "run_uuid": ck.run_uuid,
        "iterations": ck.iteration,
        "n_iterations": int(cfg.get("run", {}).get("n_iterations", ck.iteration)),
        "discarded_iterations": start,
        "temperatures": [float(t) for t in ck.temperatures],
        "dt": [float(v) for v in np.atleast_1d(ck.slots["step_size"])],
        "elapsed_s": float(ck.counters.get("elapsed_s", 0.0)),
        "architecture": cfg.get("architecture", {}).get("name"),
        "data": cfg.get("data", {}).get("name"),
        "sampler": sampler.get("name"),
    }
    if n - start > 0:
        acc = tr["n_accepted_k"][sl].sum(axis=0) / ((n - start) * n_traj)
        out["acceptance"] = [float(a) for a in acc]
        out["mean_energy"] = [float(e) for e in tr["energy_k"][sl].mean(axis=0)]
        out["divergences"] = int(tr["n_divergent_k"].sum())
    else:
        out["acceptance"] = [float("nan")] * k
        out["mean_energy"] = [float("nan")] * k
        out["divergences"] = 0
    if k > 1 and n > 0:
        att = tr["swap_attempted_k"].sum(axis=0)
        accd = tr["swap_accepted_k"].sum(axis=0)
        out["swap_acceptance"] = [float(a / b) if b else float("nan") for a, b in zip(accd, att, strict=True)]
        out["round_trips"] = round_trips(tr["replica_k"])
    else:
        out["swap_acceptance"] = []
        out["round_trips"] = 0
    return out
