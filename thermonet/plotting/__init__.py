"""Figures of a run (or several): the paper's Figs. 2-4 and the blog's size plot.

Every function takes run directories (made by ``thermonet run``), draws on a Matplotlib
``Axes`` (a new figure when ``ax`` is None) and returns the :class:`~matplotlib.figure.Figure`.

=================  ==========================================================================
kind               function
=================  ==========================================================================
``replicas``       :func:`plot_replicas`: E(D|w) of every slot (or replica) over the
                   iterations, coloured by temperature (paper Fig. 2)
``energy``         :func:`plot_energies`: ⟨E⟩_T per data point on the training and test data
                   versus T for several runs, with ln 10 and the baseline (Figs. 3 and 4)
``size``           :func:`plot_size`: training ⟨E⟩ per data point at T = 1 versus the number
                   of training points, one point per run (blog Fig. 3)
``ladder``         :func:`plot_ladder`: swap acceptance, replica paths, dt and acceptance
                   (a 2x2 figure)
``heat``           :func:`plot_heat`: the heat capacity Var(E)/T² versus T
``predictive``     :func:`plot_predictive`: a regression run's predictive mean and band
                   against the test targets and along 1-D input slices
``errors``         :func:`plot_errors`: a regression run's training and test errors of
                   each stored network of every chain and of their running average,
                   pooled over the chains (Neal 1993 Fig. 2)
=================  ==========================================================================

``replicas`` and ``ladder`` read only the trace; ``energy``, ``size`` and ``heat`` use
:func:`thermonet.analysis.analyse` (after discarding the first ``run.discard`` fraction of the
iterations, or ``discard``).

The package: :mod:`.figure` (plumbing), :mod:`.runs` (reading runs), :mod:`.replicas`,
:mod:`.energies`, :mod:`.ladder` (the figures) and :mod:`.dispatch` (:func:`plot`).

Matplotlib is imported only inside these functions (``import thermonet`` stays fast) and no
``pyplot`` state is used: figures are plain :class:`~matplotlib.figure.Figure` objects on the
non-interactive Agg canvas, so nothing needs a screen.

Example::

    from thermonet.plotting import plot_energies
    fig = plot_energies(["runs/fig3_D50", "runs/fig3_D500"],
                        baselines=["baseline_D50.json", "baseline_D500.json"])
    fig.savefig("fig3.png", dpi=150)
"""

from __future__ import annotations

from thermonet.plotting.dispatch import (
    KINDS,
    plot,
)
from thermonet.plotting.energies import (
    plot_energies,
    plot_size,
    value_at_temperature,
)
from thermonet.plotting.error_trace import ErrorTrace, error_trace, plot_errors
from thermonet.plotting.figure import (
    ENERGY_LABEL,
    FORMATS,
    TEMPERATURE_CMAP,
    UNINFORMED_PER_POINT,
    PathLike,
    check_out,
    format_number,
    log,
    log_axis,
    new_axes,
    new_figure,
    output_format,
    plain_log_ticks,
    save,
    temperature_colours,
)
from thermonet.plotting.ladder import (
    ladder_statistics,
    plot_heat,
    plot_ladder,
)
from thermonet.plotting.predictive import (
    PredictiveNumbers,
    mixture_quantiles,
    plot_predictive,
    predictive_numbers,
)
from thermonet.plotting.replicas import (
    plot_replicas,
    replica_slots,
)
from thermonet.plotting.runs import (
    ANALYSIS_FILE,
    RunInfo,
    analyse_run,
    as_run_list,
    discard_note,
    figure_title,
    first_kept,
    read_run_trace,
    run_info,
    run_labels,
    stored_analysis,
)

__all__ = [
    "ANALYSIS_FILE",
    "ENERGY_LABEL",
    "FORMATS",
    "KINDS",
    "TEMPERATURE_CMAP",
    "UNINFORMED_PER_POINT",
    "ErrorTrace",
    "PathLike",
    "PredictiveNumbers",
    "RunInfo",
    "analyse_run",
    "as_run_list",
    "check_out",
    "discard_note",
    "error_trace",
    "figure_title",
    "first_kept",
    "format_number",
    "ladder_statistics",
    "log",
    "log_axis",
    "mixture_quantiles",
    "new_axes",
    "new_figure",
    "output_format",
    "plain_log_ticks",
    "plot",
    "plot_energies",
    "plot_errors",
    "plot_heat",
    "plot_ladder",
    "plot_predictive",
    "plot_replicas",
    "plot_size",
    "predictive_numbers",
    "read_run_trace",
    "replica_slots",
    "run_info",
    "run_labels",
    "save",
    "stored_analysis",
    "temperature_colours",
    "value_at_temperature",
]
