"""E(D|w) of every slot or replica over the iterations (the paper's Fig. 2)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from thermonet.errors import PlotError
from thermonet.plotting.figure import (
    PathLike,
    log_axis,
    new_axes,
    plain_log_ticks,
    temperature_colours,
)
from thermonet.plotting.runs import figure_title, first_kept, read_run_trace

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def replica_slots(replica_k: np.ndarray) -> np.ndarray:
    """Slot of every replica after every iteration.

    Parameters
    ----------
    replica_k : ndarray of int, shape (n, K)
        The replica at each slot after each iteration (the trace's ``replica_k``).

    Returns
    -------
    ndarray of int64, shape (n, K)
        ``slot_r[t, r]``: the slot replica ``r`` occupies after iteration ``t``.
    """
    r = np.asarray(replica_k)
    return np.argsort(r, axis=1, kind="stable").astype(np.int64)


def plot_replicas(run_dir: PathLike, ax: Axes | None = None, *, follow: str = "slot",
                  yscale: str = "auto", discard: float | None = None) -> Figure:
    """E(D|w) of every replica over the iterations, coloured by temperature (paper Fig. 2).

    Parameters
    ----------
    run_dir : path
    ax : Axes, optional
    follow : {"slot", "replica"}
        ``"slot"``: one line per temperature slot (the energy at a fixed T; a swap moves
        another replica into the slot), coloured by that slot's T. ``"replica"``: one line per
        replica (a :class:`~matplotlib.collections.LineCollection` whose segments take the
        colour of the temperature the replica sits at).
    yscale : {"auto", "log", "linear"}
        ``"auto"``: log when every energy is positive and they span more than a factor 30.
    discard : float, optional
        The burn-in fraction shaded grey [default: the run's ``run.discard``].

    Returns
    -------
    Figure
    """
    if follow not in ("slot", "replica"):
        raise PlotError(f"follow = {follow!r}; expected 'slot' or 'replica'")
    if yscale not in ("auto", "log", "linear"):
        raise PlotError(f"yscale = {yscale!r}; expected 'auto', 'log' or 'linear'")
    from matplotlib.cm import ScalarMappable
    from matplotlib.collections import LineCollection
    from matplotlib.ticker import MaxNLocator

    info, tr = read_run_trace(run_dir)
    fig, ax = new_axes(ax)
    it = tr["iteration"].astype(np.float64)
    e_tk = np.asarray(tr["energy_k"], dtype=np.float64)
    n_slots = e_tk.shape[1]
    # a one-rung run of several chains: every slot (chain) at the one temperature
    temps = np.repeat(info.temperatures, n_slots // info.temperatures.size)
    norm, cmap = temperature_colours(temps)
    if follow == "slot":
        for k in range(n_slots):
            ax.plot(it, e_tk[:, k], color=cmap(norm(temps[k])), lw=1.0,
                    label=f"slot {k}: T = {temps[k]:.3g}")
        what = f"E(D|w) at each of the {n_slots} temperature slots (one line per slot)"
    else:
        slot_tr = replica_slots(tr["replica_k"])
        for r in range(n_slots):
            s = slot_tr[:, r]
            e = e_tk[np.arange(len(it)), s]
            pts = np.column_stack([it, e])
            segs = np.stack([pts[:-1], pts[1:]], axis=1) if len(it) > 1 else np.zeros((0, 2, 2))
            lc = LineCollection(
                segs,  # type: ignore[arg-type]  # matplotlib stubs reject ndarray segments
                cmap=cmap, norm=norm, lw=1.0, label=f"replica {r}")
            lc.set_array(temps[s[1:]] if len(it) > 1 else np.zeros(0))
            ax.add_collection(lc)
        ax.autoscale_view()
        what = (f"E(D|w) of each of the {n_slots} replicas (one line per replica, colour: "
                "its current T)")
    d = info.discard if discard is None else discard
    start = first_kept(len(it), d)
    if start > 0:
        ax.axvspan(it[0] - 0.5, it[start - 1] + 0.5, color="0.85", zorder=0,
                   label=f"discarded (first {100 * d:g}%)")
    if yscale == "auto":
        pos = e_tk[e_tk > 0]
        yscale = ("log" if pos.size == e_tk.size and pos.size and pos.max() / pos.min() > 30
                  else "linear")
    if yscale == "log":
        log_axis(ax, "y")
    ax.set_xlabel("iteration")
    ax.set_ylabel("training energy E(D|w) (nats)")
    sm = ScalarMappable(norm=norm, cmap=cmap)
    cbar = fig.colorbar(sm, ax=ax)
    cbar.set_label("temperature T (log scale)")
    plain_log_ticks(cbar.ax.yaxis)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(figure_title(what, [info]), fontsize="medium")
    return fig
