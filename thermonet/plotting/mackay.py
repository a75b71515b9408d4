"""MacKay's Fig. 2b: log evidence against test error, one point per trained network."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from thermonet.plotting.figure import new_figure, save

__all__ = ["plot_mackay_sweep"]

#: the right panel shows the solutions within this many nats of the best evidence
ZOOM_NATS = 60.0


def _scatter(ax: Any, rows: Sequence[Any], cmap: Any, norm: Any) -> None:
    for conv in (True, False):
        sel = [r for r in rows if r.converged == conv]
        if not sel:
            continue
        colours = [cmap(norm(r.hidden)) for r in sel]
        ax.scatter([r.log_evidence for r in sel], [r.test_error for r in sel],
                   c=colours if conv else "none", edgecolors=colours, s=28,
                   label="converged" if conv else "not converged")


def plot_mackay_sweep(rows: Sequence[Any], out: str | Path) -> Path:
    """Scatter of every solution's log evidence (x) against its test error (y), coloured by
    the number of hidden units; non-converged solutions hollow. When the evidence spans more
    than ``2 ZOOM_NATS``, a second panel shows the solutions within ``ZOOM_NATS`` of the best
    (MacKay's Fig. 2b shows that region). Saved to ``out``."""
    ok = [r for r in rows if math.isfinite(r.log_evidence)]
    best = max((r.log_evidence for r in ok), default=0.0)
    worst = min((r.log_evidence for r in ok), default=0.0)
    zoom = [r for r in ok if r.log_evidence >= best - ZOOM_NATS]
    two = best - worst > 2 * ZOOM_NATS and len(zoom) >= 2
    fig = new_figure((11.0, 4.6) if two else (6.4, 4.6))
    axes = fig.subplots(1, 2) if two else [fig.add_subplot()]
    hs = sorted({r.hidden for r in ok}) or [1]
    import matplotlib as mpl

    cmap = mpl.colormaps["viridis"]
    norm = mpl.colors.Normalize(min(hs), max(max(hs), min(hs) + 1))
    _scatter(axes[0], ok, cmap, norm)
    axes[0].set_yscale("log")
    axes[0].set_ylabel("test error (squared, summed over outputs)")
    if two:
        _scatter(axes[1], zoom, cmap, norm)
        axes[1].set_title(f"within {ZOOM_NATS:g} nats of the best", fontsize="medium")
    for ax in axes:
        ax.set_xlabel("log evidence ln P(D|H) (nats)")
    axes[0].legend(loc="best", fontsize="small")
    fig.colorbar(mpl.cm.ScalarMappable(norm=norm, cmap=cmap), ax=list(axes),
                 label="hidden units")
    return save(fig, out)
