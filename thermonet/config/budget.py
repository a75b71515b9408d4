"""What a run configuration will cost, known before any work: memory and gradients.

:func:`memory_estimate` counts the arrays a run holds (per replica: the parameter-sized arrays
of the sampler state, the trajectory and the minimiser; per potential: the layer scratch; the
data once) and :func:`check_memory` refuses a configuration whose estimate exceeds the memory
the machine has available, before anything is allocated, instead of a MemoryError after
gigabytes. :func:`plan` is the one-line summary of what a run is about to do (data,
architecture, rungs x iterations x trajectories x L = gradients) that ``thermonet run`` logs.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from thermonet.errors import ConfigError
from thermonet.tempering.ladder import trajectories_from_settings
from thermonet.tempering.warmup import planned_iterations

#: parameter-sized float64 arrays per replica: theta, gradient, momentum, the trajectory's
#: copies of theta and gradient, masses / inverse masses / box half-widths, and the
#: minimiser's work arrays
ARRAYS_PER_REPLICA = 12
#: rows of a data block the MLP kernels work on at once (an upper bound of their scratch)
SCRATCH_ROWS = 1024
#: rough sustained speed of one worker (multiply-adds per second, 3 x parameters x rows per
#: gradient) for the time estimate: measured 1.2e10 (AMD EPYC Zen 3, M(3) on N = 5,000),
#: 1.1e10-1.2e10 (Zen 4 with and without AVX-512, the quickstart's 256-12-10 on N = 50) and
#: 1.7e10-2.5e10 (Zen 4, M(3) on N = 50 and 5,000); the low end, so that a run rarely takes
#: longer than announced
FLOPS_PER_WORKER = 1e10
#: inputs of a data set (16 x 16 MNIST) when the architecture does not say
DEFAULT_INPUTS = 256


@dataclass(frozen=True)
class Budget:
    """A run's estimated memory (bytes) and the parts it is made of."""

    total: int
    replicas: int
    scratch: int
    data: int
    n_slots: int
    n_params: int
    n_rows: int


def data_rows(name: str) -> int:
    """Training rows of data set ``name`` (``D500`` -> 500; 0 when unknown or ``none``)."""
    match = re.fullmatch(r"[Dd](\d+)", str(name))
    return int(match.group(1)) if match else 0


def memory_estimate(arch: Any, data_name: str, n_slots: int, workers: int = 1) -> Budget:
    """The memory a run of ``arch`` on ``data_name`` with ``n_slots`` rungs needs (bytes)."""
    n_params = int(arch.n_params)
    widths = [int(w) for w in getattr(arch, "widths", ())] or [DEFAULT_INPUTS, 1]
    rows = data_rows(data_name)
    replicas = n_slots * n_params * ARRAYS_PER_REPLICA * 8
    # each slot's potential owns its scratch (activations and their gradients of one block)
    scratch = (n_slots + workers) * min(max(rows, 1), SCRATCH_ROWS) * sum(widths) * 2 * 8
    # training rows, the test set (at most MNIST's 70000 rows in all) and labels
    data = (rows + min(rows, 70_000)) * (widths[0] + 1) * 8 if rows else 0
    return Budget(replicas + scratch + data, replicas, scratch, data, n_slots, n_params, rows)


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation (``MemAvailable``), or None if unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def human(n_bytes: float) -> str:
    """``n_bytes`` as ``12.3 GB`` (decimal units)."""
    for unit in ("B", "kB", "MB", "GB", "TB", "PB"):
        if abs(n_bytes) < 1000 or unit == "PB":
            return f"{n_bytes:.3g} {unit}"
        n_bytes /= 1000
    return f"{n_bytes:.3g} PB"  # pragma: no cover


def check_memory(budget: Budget, available: int | None = None) -> None:
    """Refuse (one-line :class:`ConfigError`) a run whose estimate exceeds ``available``
    (default: :func:`available_memory`)."""
    available = available_memory() if available is None else available
    if available is None or budget.total <= available:
        return
    raise ConfigError(
        f"this run needs about {human(budget.total)} of memory ({budget.n_slots} rung(s) x "
        f"{budget.n_params} parameters x {ARRAYS_PER_REPLICA} arrays = "
        f"{human(budget.replicas)}, scratch {human(budget.scratch)}, data "
        f"{human(budget.data)}); this machine has {human(available)} available. Expected a "
        "run that fits: lower ladder.n_temperatures, the architecture's widths or the data set")


def warm_up_iterations(lad: Any) -> int:
    """Iterations of the warm-up that the ``[ladder]`` keys ask for, before the run's
    ``n_iterations`` (the keys the runner gives :class:`thermonet.tempering.warmup.WarmUp`)."""
    return planned_iterations(
        rounds=int(lad.get("adapt_rounds") or 0),
        first_length=int(lad.get("adapt_round_length") or 0),
        mass_iterations=int(lad.get("adapt_masses") or 0),
        retune_iterations=int(lad.get("retune_iterations") or 0),
        retune_rounds=int(lad.get("retune_rounds") or 0),
        budget_iterations=(int(lad.get("local_budget_iterations") or 0)
                           if lad.get("local_budget") == "adaptive" else 0))


def plan(cfg: Any, arch: Any) -> str:
    """One line: what a run of the resolved configuration ``cfg`` will compute, its warm-up
    included."""
    lad = cfg["ladder"]
    n_slots = int(cfg.ladder.n_temperatures) if hasattr(cfg, "ladder") else 1
    n_run = int(cfg["run"]["n_iterations"])
    n_warm = warm_up_iterations(lad) if hasattr(cfg, "ladder") else 0
    n_iter = n_run + n_warm
    n_traj = int(lad["n_trajectories"])
    temps = cfg.ladder.temperature_k if hasattr(cfg, "ladder") else [1.0]
    per_rung = trajectories_from_settings(lad, temps)
    n_leapfrog = cfg["sampler"].get("n_leapfrog")
    n_params = int(arch.n_params)
    rows = data_rows(cfg["data"]["name"])
    chains = int(cfg["run"].get("chains") or 1)
    steps = n_iter * int(per_rung.sum()) * chains
    slots = f"{n_slots} rung(s)" if chains == 1 else f"{chains} chains"
    iters = f"{n_run} iterations" + (f" (+ {n_warm} warm-up)" if n_warm else "")
    each = (f"{n_traj}" if per_rung.min() == per_rung.max()
            else f"{n_traj} ({int(per_rung.max())} in the slow band)")
    if isinstance(n_leapfrog, int):
        grads = steps * n_leapfrog
        work = (f"{slots} x {iters} x {each} trajectories x "
                f"L = {n_leapfrog} = {grads:,} gradients")
    else:
        grads = steps
        work = f"{slots} x {iters} x {each} transitions = {grads:,}"
    line = (f"about to run {cfg['architecture']['name']} ({n_params:,} parameters) on "
            f"{cfg['data']['name']} with {cfg['sampler']['name']}: {work} (plus burn-in and "
            "compilation)")
    if rows and isinstance(n_leapfrog, int):
        seconds = grads * 3.0 * n_params * rows / (FLOPS_PER_WORKER
                                                   * max(1, int(cfg["run"]["workers"])))
        line += f"; roughly {_duration(seconds)}"
    return line


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"
