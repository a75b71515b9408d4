"""Where local exploration is lost: each rung's lag-1 autocorrelation of a replica's
standardised energy across its local moves (:mod:`thermonet.analysis.local_exploration`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from thermonet.analysis.local_exploration import (
    exploration_line,
    gradients_per_iteration,
    local_exploration,
)
from thermonet.analysis.mixing import replica_passages
from thermonet.config.schema import parse_toml
from thermonet.errors import PlotError
from thermonet.io.checkpoint import read_checkpoint
from thermonet.plotting.figure import PathLike, new_axes
from thermonet.plotting.runs import figure_title, first_kept, read_run_trace
from thermonet.tempering import SCHEMES

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def plot_exploration(run_dir: PathLike, ax: Axes | None = None, *,
                     discard: float | None = None, **_: Any) -> Figure:
    """Per rung, the autocorrelation of a replica's standardised energy across one round of
    local moves (0 under ideal local exploration, 1 when the moves do not renew it), with
    error bars, against the slot (temperatures on the top axis); from the iterations after
    the burn-in. The title gives restarts and round trips per 10^6 gradients."""
    info, tr = read_run_trace(run_dir)
    temps = info.temperatures
    if temps.size < 2:
        raise PlotError(f"{run_dir} has a single rung: there are no swap rounds to measure "
                        "local exploration between")
    frac = info.discard if discard is None else float(discard)
    start = first_kept(tr["iteration"].shape[0], frac)
    cfg = parse_toml(read_checkpoint(run_dir).config_toml)
    scheme = SCHEMES.get(str(cfg.get("ladder", {}).get("swap_scheme", "random-pairs")))
    rep = np.asarray(tr["replica_k"])[start:]
    p = replica_passages(rep)
    grads = rep.shape[0] * gradients_per_iteration(cfg.get("sampler", {}),
                                                   info.n_trajectories, temps)
    le = local_exploration(np.asarray(tr["energy_k"], dtype=np.float64)[start:], rep,
                           restarts=int(p.restarts.sum()),
                           round_trips=int(p.round_trips.sum()), gradients=grads,
                           swaps_first=bool(getattr(scheme, "before_propagation", False)))
    slots = np.arange(temps.size)
    fig, ax = new_axes(ax, (7.0, 4.8))
    ax.errorbar(slots, le.rho1, yerr=le.rho1_err, fmt="o-", ms=3, color="tab:blue",
                label="lag-1 autocorrelation of the standardised energy")
    ax.plot(slots, 1.0 - le.efficiency, ":", color="0.4",
            label="1 - efficiency, (1 - rho) / (1 + rho)")
    ax.axhline(0.0, color="k", lw=0.8)
    ax.set_xlim(-0.5, temps.size - 0.5)
    ax.set_ylim(min(-0.1, float(np.nanmin(le.rho1, initial=0.0)) - 0.05), 1.0)
    ax.set_xlabel("slot (0 = coldest)")
    ax.set_ylabel("autocorrelation across local moves")
    top = ax.secondary_xaxis("top")
    ticks = np.unique(np.linspace(0, temps.size - 1, min(temps.size, 7)).round().astype(int))
    top.set_ticks(ticks, labels=[f"{temps[k]:.3g}" for k in ticks])
    top.set_xlabel("T")
    ax.legend(fontsize="small", loc="upper right")
    what = exploration_line(le, temps).split(";")[0]
    ax.set_title(figure_title("Local exploration per rung", [info],
                              f"{what}; first {100 * frac:.0f}% of iterations discarded"),
                 fontsize="small")
    return fig


__all__ = ["plot_exploration"]
