"""MacKay's Fig. 2b: log evidence against test error, one point per trained network."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from thermonet.plotting.figure import new_figure, save

__all__ = ["plot_mackay_sweep"]


def plot_mackay_sweep(rows: Sequence[Any], out: str | Path) -> Path:
    """Scatter of every solution's log evidence (x) against its test error (y), coloured by
    the number of hidden units; non-converged solutions hollow. Saved to ``out``."""
    fig = new_figure((6.4, 4.6))
    ax = fig.add_subplot()
    ok = [r for r in rows if math.isfinite(r.log_evidence)]
    hs = sorted({r.hidden for r in ok}) or [1]
    import matplotlib as mpl

    cmap = mpl.colormaps["viridis"]
    norm = mpl.colors.Normalize(min(hs), max(max(hs), min(hs) + 1))
    for conv in (True, False):
        sel = [r for r in ok if r.converged == conv]
        if not sel:
            continue
        colours = [cmap(norm(r.hidden)) for r in sel]
        ax.scatter([r.log_evidence for r in sel], [r.test_error for r in sel],
                   c=colours if conv else "none", edgecolors=colours, s=28,
                   label="converged" if conv else "not converged")
    ax.set_yscale("log")
    ax.set_xlabel("log evidence ln P(D|H) (nats)")
    ax.set_ylabel("test error (squared, summed over outputs)")
    fig.colorbar(mpl.cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, label="hidden units")
    ax.legend(loc="best", fontsize="small")
    return save(fig, out)
