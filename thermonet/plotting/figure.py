"""Figure plumbing shared by every plot: new figures and axes, output formats and saving,
log axes, number formatting and the temperature colour map."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from thermonet.errors import PlotError
from thermonet.io.atomic import write_atomic

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

log = logging.getLogger(__name__)


PathLike = str | Path


#: file formats :func:`save` writes (from the file's suffix)
FORMATS: tuple[str, ...] = ("png", "pdf", "svg")


#: test energy per data point of the uninformed classifier that gives every class 0.1
UNINFORMED_PER_POINT: float = math.log(10.0)


#: the thermal average of the training or test energy, as axis labels write it (mathtext)
ENERGY_LABEL = r"$\langle E(D|w)\rangle_T$"


#: colour map of temperature (cold blue, hot red)
TEMPERATURE_CMAP = "coolwarm"


def new_figure(figsize: tuple[float, float] = (7.0, 4.8)) -> Figure:
    """An empty figure on the non-interactive Agg canvas (no pyplot, no screen)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def new_axes(ax: Axes | None, figsize: tuple[float, float] = (7.0, 4.8)
              ) -> tuple[Figure, Axes]:
    """``ax``'s figure and ``ax``, or a new figure with one axes of ``figsize``."""
    if ax is not None:
        return ax.figure, ax  # type: ignore[return-value]
    fig = new_figure(figsize)
    return fig, fig.add_subplot()


def output_format(path: PathLike) -> str:
    """The file format from ``path``'s suffix; :class:`PlotError` unless it is in FORMATS."""
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        got = f"suffix '.{suffix}'" if suffix else "no suffix"
        raise PlotError(f"cannot tell the figure format of {path} ({got}); use a file name "
                        f"ending in one of {', '.join('.' + f for f in FORMATS)}")
    return suffix


def check_out(path: PathLike) -> str:
    """The format of ``path``, after checking that its directory exists."""
    fmt = output_format(path)
    parent = Path(path).parent
    if parent != Path("") and not parent.is_dir():
        raise PlotError(f"cannot write {path}: directory {parent} does not exist; create "
                        "it first")
    return fmt


def save(fig: Figure, path: PathLike, *, dpi: float = 150) -> Path:
    """Save ``fig`` in the format named by ``path``'s suffix (png, pdf or svg)."""
    fmt = check_out(path)
    path = Path(path)
    meta = {"Software": None} if fmt == "png" else None  # no version string: stable bytes
    # through a temporary file (the format is explicit, not read from its name): a failed or
    # killed save never leaves half a figure under the user's name
    return write_atomic(path, lambda tmp: fig.savefig(tmp, format=fmt, dpi=dpi, metadata=meta))


def format_number(v: float) -> str:
    """A number as a plot label shows it (``%g``)."""
    return f"{v:g}"


def log_axis(ax: Axes, which: str = "x") -> None:
    """Log scale with plain-number tick labels (see :func:`plain_log_ticks`)."""
    getattr(ax, f"set_{which}scale")("log")
    plain_log_ticks(ax.xaxis if which == "x" else ax.yaxis)


def plain_log_ticks(axis: Any) -> None:
    """Plain-number labels on a log axis (0.3, 1, 10 rather than 3×10⁻¹); minor ticks at
    2, 3, 5 × 10^m are labelled when the axis spans at most 1.3 decades, at 3 × 10^m up to
    2.5 decades, never beyond."""
    from matplotlib.ticker import FuncFormatter

    def major(v: float, _pos: Any) -> str:
        return format_number(float(f"{v:.6g}"))

    def minor(v: float, _pos: Any) -> str:
        lo, hi = sorted(axis.get_view_interval())
        span = math.log10(hi / lo) if lo > 0 and hi > lo else math.inf
        if v <= 0:
            return ""
        mant = round(v / 10.0 ** math.floor(math.log10(v) + 1e-9), 6)
        show = (2.0, 3.0, 5.0) if span <= 1.3 else (3.0,) if span <= 2.5 else ()
        return format_number(float(f"{v:.6g}")) if mant in show else ""

    axis.set_major_formatter(FuncFormatter(major))
    axis.set_minor_formatter(FuncFormatter(minor))


def temperature_colours(temperatures: np.ndarray) -> tuple[Any, Any]:
    """A log-T norm and colour map for a ladder (a prior rung, T = inf, gets the hottest
    colour: the norm clips)."""
    from matplotlib import colormaps
    from matplotlib.colors import LogNorm

    finite = np.asarray(temperatures, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    lo, hi = float(np.min(finite)), float(np.max(finite))
    if lo == hi:
        lo, hi = lo / 1.5, hi * 1.5
    return LogNorm(vmin=lo, vmax=hi, clip=True), colormaps[TEMPERATURE_CMAP]
