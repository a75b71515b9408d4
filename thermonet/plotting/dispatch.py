"""``plot``: one entry point by kind (what ``thermonet plot`` calls)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from thermonet.errors import PlotError
from thermonet.plotting.barrier import plot_barrier
from thermonet.plotting.energies import plot_energies, plot_size
from thermonet.plotting.error_trace import plot_errors
from thermonet.plotting.exploration import plot_exploration
from thermonet.plotting.figure import PathLike, check_out, new_figure, save
from thermonet.plotting.flow import plot_flow
from thermonet.plotting.ladder import plot_heat, plot_ladder
from thermonet.plotting.predictive import plot_predictive
from thermonet.plotting.replicas import plot_replicas
from thermonet.plotting.runs import as_run_list

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

#: kind -> (function, takes several runs)
KINDS: dict[str, tuple[Callable[..., Figure], bool]] = {
    "replicas": (plot_replicas, False),
    "energy": (plot_energies, True),
    "size": (plot_size, True),
    "ladder": (plot_ladder, False),
    "heat": (plot_heat, True),
    "barrier": (plot_barrier, False),
    "flow": (plot_flow, False),
    "exploration": (plot_exploration, False),
    "predictive": (plot_predictive, False),
    "errors": (plot_errors, False),
}
#: kinds whose figure has several panels of one run: one DIR only
ONE_RUN = ("predictive",)


def plot(kind: str, run_dirs: PathLike | Sequence[PathLike], out: PathLike | None = None, *,
         dpi: float = 150, **options: Any) -> Figure:
    """Draw figure ``kind`` (see :data:`KINDS`) of ``run_dirs`` and save it to ``out``.

    ``replicas`` and ``ladder`` draw one run; given several, they are drawn one above the
    other. ``options`` go to the kind's function.
    """
    if kind not in KINDS:
        raise PlotError(f"unknown plot kind {kind!r}; expected one of {', '.join(KINDS)}")
    if out is not None:
        check_out(out)  # fail before any work
    dirs = as_run_list(run_dirs)
    func, many = KINDS[kind]
    if kind in ONE_RUN and len(dirs) != 1:
        raise PlotError(f"--kind {kind} draws one run; got {len(dirs)} directories (plot "
                        "each separately)")
    if many:
        fig = func(dirs, **options)
    elif len(dirs) == 1:
        fig = func(dirs[0], **options)
    else:
        w, h = (10.0, 7.5) if kind == "ladder" else (7.0, 4.8)
        fig = new_figure((w, h * len(dirs)))
        subs = fig.subfigures(len(dirs), 1, squeeze=False)[:, 0]
        for sub, d in zip(subs, dirs, strict=True):
            if kind == "ladder":
                func(d, sub, **options)
            else:
                func(d, sub.add_subplot(), **options)
    if out is not None:
        save(fig, out, dpi=dpi)
    return fig
