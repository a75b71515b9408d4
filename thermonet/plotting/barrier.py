"""The communication barrier of a ladder: where along beta the swaps are hard.

For each adjacent pair the measured swap rejection rate ``r_j`` over the rungs' gap in
``beta`` estimates the local barrier ``lambda(beta)`` at the pair's midpoint (Syed et al.
2022: ``r_j ~ lambda(beta) (beta_j - beta_{j+1})`` for close rungs), and the cumulative barrier
``Lambda(beta) = sum`` of the ``r_j`` from the hot end. An adapted ladder makes every ``r_j``
equal, so its rungs crowd where ``lambda`` is large. A prior rung (``beta = 0``) is drawn at
``beta = 0`` (the beta axis is symmetric-logarithmic).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from thermonet.analysis.mixing import swap_barrier
from thermonet.errors import PlotError
from thermonet.plotting.figure import PathLike, new_axes
from thermonet.plotting.runs import figure_title, first_kept, read_run_trace

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def plot_barrier(run_dir: PathLike, ax: Axes | None = None, *, discard: float | None = None,
                 **_: Any) -> Figure:
    """Local barrier ``lambda(beta)`` (bars: one per pair) and cumulative ``Lambda(beta)``
    (line, right axis) of one run, from its swaps after the burn-in."""
    info, tr = read_run_trace(run_dir)
    if info.temperatures.size < 2:
        raise PlotError(f"{run_dir} has a single rung: there are no swaps to draw")
    frac = info.discard if discard is None else float(discard)
    start = first_kept(tr["iteration"].shape[0], frac)
    sb = swap_barrier(tr["swap_attempted_k"][start:], tr["swap_accepted_k"][start:])
    with np.errstate(divide="ignore"):
        beta = 1.0 / info.temperatures
    gap = beta[:-1] - beta[1:]
    mid = 0.5 * (beta[:-1] + beta[1:])
    local = sb.rejection / gap
    cumulative = np.concatenate([np.nancumsum(sb.rejection[::-1])[::-1], [0.0]])
    fig, ax = new_axes(ax, (7.0, 4.8))
    ax.plot(mid, local, "s-", color="tab:blue", ms=4,
            label="local barrier r_j / (beta_j - beta_j+1) at the pair's midpoint")
    positive = beta[beta > 0]
    # symmetric log: the wide ladders of the paper span four decades, and beta = 0 (a prior
    # rung) must stay on the axis
    ax.set_xscale("symlog", linthresh=float(positive.min()) if positive.size else 1.0)
    if np.any(local > 0):
        ax.set_yscale("log")
    ax.set_xlabel("inverse temperature beta = 1/T (symmetric log scale)")
    ax.set_ylabel("local barrier lambda(beta)")
    twin = ax.twinx()
    twin.plot(beta, cumulative, "o-", color="tab:red", ms=3,
              label=f"cumulative Lambda (total {sb.barrier:.3g} ± {sb.barrier_err:.2g})")
    twin.set_ylabel("cumulative barrier Lambda(beta)")
    lines = ax.get_legend_handles_labels()
    more = twin.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], fontsize="small", loc="upper left")
    ax.set_title(figure_title("Communication barrier of the ladder", [info],
                              f"{int(sb.attempts.sum())} swap attempts; first "
                              f"{100 * frac:.0f}% of iterations discarded"), fontsize="medium")
    return fig


__all__ = ["plot_barrier"]
