"""Where replicas stop along the ladder: each slot's time split by the end of the ladder its
replica visited last (:mod:`thermonet.analysis.replica_flow`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from thermonet.analysis.replica_flow import flow_line, replica_flow
from thermonet.errors import PlotError
from thermonet.plotting.figure import PathLike, new_axes
from thermonet.plotting.runs import figure_title, first_kept, read_run_trace

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def plot_flow(run_dir: PathLike, ax: Axes | None = None, *, discard: float | None = None,
              **_: Any) -> Figure:
    """Stacked fractions of each slot's iterations held by replicas last at the cold end,
    at neither end yet, and last at the hot end, against the slot (temperatures on the top
    axis), with the reach of each end marked; from the iterations after the burn-in."""
    info, tr = read_run_trace(run_dir)
    temps = info.temperatures
    if temps.size < 2:
        raise PlotError(f"{run_dir} has a single rung: no replica moves between rungs")
    frac = info.discard if discard is None else float(discard)
    start = first_kept(tr["iteration"].shape[0], frac)
    flow = replica_flow(tr["replica_k"][start:])
    slots = np.arange(temps.size)
    fig, ax = new_axes(ax, (7.0, 4.8))
    ax.stackplot(slots, flow.from_cold, flow.unlabelled, flow.from_hot,
                 colors=("tab:blue", "0.85", "tab:red"),
                 labels=("last at the cold end", "at neither end yet", "last at the hot end"))
    for reach, colour in ((flow.cold_reach, "navy"), (flow.hot_reach, "darkred")):
        if 0 <= reach < temps.size:
            ax.axvline(reach, color=colour, ls="--", lw=1)
    ax.set_xlim(0, temps.size - 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("slot (0 = coldest)")
    ax.set_ylabel("fraction of the slot's iterations")
    top = ax.secondary_xaxis("top")
    ticks = np.unique(np.linspace(0, temps.size - 1, min(temps.size, 7)).round().astype(int))
    top.set_ticks(ticks, labels=[f"{temps[k]:.3g}" for k in ticks])
    top.set_xlabel("T")
    ax.legend(fontsize="small", loc="upper center")
    what = flow_line(flow, temps).removeprefix("replica flow: ")
    ax.set_title(figure_title("Replica flow along the ladder", [info],
                              f"{what}; first {100 * frac:.0f}% of iterations discarded"),
                 fontsize="small")
    return fig


__all__ = ["plot_flow"]
