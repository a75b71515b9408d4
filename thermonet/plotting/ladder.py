"""Ladder health (swap acceptance, replica paths, step sizes, acceptance) and the heat
capacity Var(E)/T^2 versus T."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from thermonet.errors import PlotError
from thermonet.plotting.energies import error_band
from thermonet.plotting.figure import PathLike, log_axis, new_axes, new_figure, temperature_colours
from thermonet.plotting.replicas import replica_slots
from thermonet.plotting.runs import (
    RunInfo,
    figure_title,
    first_kept,
    read_run_trace,
    run_labels,
    training_analyses,
)

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def ladder_statistics(run_dir: PathLike, discard: float | None = None) -> dict[str, Any]:
    """The numbers :func:`plot_ladder` draws, from the trace.

    Returns
    -------
    dict
        ``temperatures`` (K,); ``slot_r`` (n, K), the replica paths, and ``iteration`` (n,) over
        all iterations; over the kept iterations (as :func:`thermonet.analysis.analyse`):
        ``swap_acceptance`` (K-1,) and ``swap_attempts`` (K-1,), ``dt`` (K,) (mean step size)
        and ``acceptance`` (K,) (accepted inner transitions per transition); ``first_kept``
        (index of the first kept iteration) and ``info`` (:class:`RunInfo`).
    """
    info, tr = read_run_trace(run_dir)
    n = tr["iteration"].shape[0]
    start = first_kept(n, info.discard if discard is None else discard)
    kept = slice(start, n)
    att = tr["swap_attempted_k"][kept].sum(axis=0).astype(np.float64)
    acc = tr["swap_accepted_k"][kept].sum(axis=0).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        swap = np.where(att > 0, acc / att, np.nan)
    n_kept = n - start
    k = info.temperatures.size      # a one-rung run's chains: their mean at the one rung
    acc_k = tr["n_accepted_k"][kept].sum(axis=0) / (n_kept * info.n_trajectories)
    return {
        "info": info,
        "temperatures": info.temperatures,
        "swap_acceptance": swap,
        "swap_attempts": att.astype(np.int64),
        "iteration": tr["iteration"],
        "slot_r": replica_slots(tr["replica_k"]),
        "dt": tr["step_size_k"][kept].mean(axis=0).reshape(k, -1).mean(axis=1),
        "acceptance": acc_k.reshape(k, -1).mean(axis=1),
        "first_kept": start,
    }


def plot_ladder(run_dir: PathLike, fig: Figure | None = None, *,
                discard: float | None = None) -> Figure:
    """A 2x2 figure of the temperature ladder: swap acceptance per adjacent pair, the slot of
    every replica over the iterations, dt and HMC acceptance per temperature.

    Parameters
    ----------
    run_dir : path
    fig : Figure, optional
        An empty figure to draw on.
    discard : float, optional
        Burn-in fraction excluded from the swap, dt and acceptance panels [default: the run's
        ``run.discard``]; the replica paths show every iteration.

    Returns
    -------
    Figure
    """
    from matplotlib.ticker import MaxNLocator

    s = ladder_statistics(run_dir, discard)
    info: RunInfo = s["info"]
    if fig is None:
        fig = new_figure((10.0, 7.5))
    axs = fig.subplots(2, 2)
    t = s["temperatures"]
    k = len(t)
    norm, cmap = temperature_colours(t)

    ax = axs[0, 0]
    if k > 1:
        mid = np.sqrt(t[:-1] * t[1:])
        ax.plot(mid, s["swap_acceptance"], "-o", color="C0", ms=4)
        log_axis(ax)
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("temperature T (geometric mean of the pair)")
    ax.set_ylabel("swap acceptance")
    d = info.discard if discard is None else discard
    ax.set_title(f"swap acceptance per adjacent pair\n({int(s['swap_attempts'].sum())} "
                 f"attempts; first {100 * d:g}% of iterations discarded)", fontsize="medium")

    ax = axs[0, 1]
    it = s["iteration"]
    for r in range(k):
        start_slot = s["slot_r"][0, r]
        ax.step(it, s["slot_r"][:, r], where="post", lw=1.0,
                color=cmap(norm(t[start_slot])), label=f"replica {r}")
    ax.set_xlabel("iteration")
    ax.set_ylabel("temperature slot k (0 = coldest)")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title("replica paths (colour: T of the slot at iteration 1)", fontsize="medium")

    ax = axs[1, 0]
    ax.plot(t, s["dt"], "-o", color="C2", ms=4)
    log_axis(ax)
    log_axis(ax, "y")
    ax.set_xlabel("temperature T")
    ax.set_ylabel("HMC step size dt (mean)")
    ax.set_title(f"step size (mean; first {100 * d:g}% of iterations discarded)",
                 fontsize="medium")

    ax = axs[1, 1]
    ax.plot(t, s["acceptance"], "-o", color="C3", ms=4)
    log_axis(ax)
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("temperature T")
    ax.set_ylabel("HMC acceptance rate")
    lo, hi = int(info.n_trajectories.min()), int(info.n_trajectories.max())
    per = "trajectory" if hi == 1 else "trajectories"
    count = f"{lo}" if lo == hi else f"{lo}-{hi}"
    ax.set_title(f"HMC acceptance ({count} {per} per slot and iteration)", fontsize="medium")
    fig.suptitle(figure_title("Temperature ladder", [info], f"{k} temperatures"), fontsize="medium")
    return fig


def plot_heat(run_dirs: PathLike | Sequence[PathLike], ax: Axes | None = None, *,
              per_point: bool = False, discard: float | None = None,
              analyses: Sequence[Any] | None = None,
              mnist_dir: PathLike | None = None) -> Figure:
    """The heat capacity C(T) = Var(E)/T² (k_B = 1) versus T, one line per run.

    Parameters
    ----------
    run_dirs : path or sequence of paths
    ax : Axes, optional
    per_point : bool
        Divide by the number of training points (C is extensive: compares data sets).
    discard : float, optional
    analyses : sequence of Analysis, optional
    mnist_dir : path, optional

    Returns
    -------
    Figure
    """
    infos, res = training_analyses(run_dirs, analyses, discard, mnist_dir)
    fig, ax = new_axes(ax)
    for i, (a, label) in enumerate(zip(res, run_labels(infos), strict=True)):
        colour = f"C{i % 10}"
        t = np.asarray(a.table["temperature"], dtype=np.float64)
        c = np.asarray(a.table["heat_capacity"], dtype=np.float64)
        c_err = np.asarray(a.table["heat_capacity_err"], dtype=np.float64)
        if per_point:
            n_train = int(a.meta.get("n_train", 0))
            if n_train <= 0:
                raise PlotError(f"{infos[i].name} has no training set (data set "
                                f"{infos[i].data!r}); drop --per-point")
            c, c_err = c / n_train, c_err / n_train
        ax.plot(t, c, "-o", color=colour, ms=3.5, label=label)
        error_band(ax, t, c, c_err, colour)
    log_axis(ax)
    ax.set_xlabel("temperature T")
    ax.set_ylabel("heat capacity per data point C/n = Var(E)/(n T²) (k_B = 1)" if per_point
                  else "heat capacity C = Var(E)/T² (k_B = 1, dimensionless)")
    ax.legend(fontsize="small")
    ax.set_title(figure_title("Heat capacity", infos, "bands: ± 1 standard error"),
                 fontsize="medium")
    return fig
