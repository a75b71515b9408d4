"""<E>_T per data point versus T on training and test data (the paper's Figs. 3 and 4), and
the training energy at T = 1 versus the data-set size (the blog's Fig. 3)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from thermonet.errors import PlotError
from thermonet.plotting.figure import (
    ENERGY_LABEL,
    UNINFORMED_PER_POINT,
    PathLike,
    log,
    log_axis,
    new_axes,
)
from thermonet.plotting.runs import (
    analyse_run,
    as_run_list,
    discard_note,
    figure_title,
    run_info,
    run_labels,
    training_analyses,
)

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def error_band(ax: Axes, x: np.ndarray, y: np.ndarray, err: np.ndarray, colour: Any) -> None:
    """Shade ``y ± err`` around a curve where the error is finite."""
    err = np.asarray(err, dtype=np.float64)
    ok = np.isfinite(err)
    if ok.any():
        ax.fill_between(x, np.where(ok, y - err, np.nan), np.where(ok, y + err, np.nan),
                        color=colour, alpha=0.2, lw=0)


def plot_energies(run_dirs: PathLike | Sequence[PathLike], ax: Axes | None = None, *,
                  baselines: Sequence[PathLike | float | None] | None = None,
                  test: bool = True, predictive: bool = False, discard: float | None = None,
                  workers: int = 1, analyses: Sequence[Any] | None = None,
                  mnist_dir: PathLike | None = None) -> Figure:
    """⟨E(D|w)⟩_T per data point on the training and test data versus T (paper Figs. 3, 4).

    One colour per run: training data solid with circles, test data dashed with squares, each
    with a band of ± one standard error; the uninformed classifier's ln 10 as a black
    dash-dotted line; each run's standard-optimisation test energy as a dotted line in its
    colour.

    Parameters
    ----------
    run_dirs : path or sequence of paths
    ax : Axes, optional
    baselines : sequence, optional
        One entry per run: a ``thermonet baseline`` result (the JSON of ``--json`` or the .npy
        of ``--out``; read by :func:`thermonet.analysis.analyse`), a number (test energy per
        point), or None. Drawn as a dotted line with a ± one standard error band.
    test : bool
        Also the test energies (needs parameter samples in the trace).
    predictive : bool
        Also the test energy per point of the Bayesian predictive (the average of the
        samples' predicted probabilities; dotted line with triangles).
    discard : float, optional
        Burn-in fraction [default: each run's ``run.discard``].
    workers : int
        Threads for evaluating the samples on the test data.
    analyses : sequence of Analysis, optional
        Already computed :func:`thermonet.analysis.analyse` results (one per run).
    mnist_dir : path, optional
        MNIST location for runs whose test set is the complement (else
        ``$THERMONET_MNIST_DIR``).

    Returns
    -------
    Figure
    """
    dirs = as_run_list(run_dirs)
    bases: list[PathLike | float | None] = (list(baselines) if baselines is not None
                                            else [None] * len(dirs))
    if len(bases) != len(dirs):
        raise PlotError(f"{len(bases)} baseline(s) for {len(dirs)} run(s); give one per "
                        "run (None, or 'none' on the command line, for a run without)")
    infos = [run_info(d) for d in dirs]
    if analyses is None:
        res = [analyse_run(d, discard, test=test, workers=workers,
                        baseline=b if isinstance(b, (str, Path)) else None, mnist_dir=mnist_dir,
                        predictive=predictive and test)
               for d, b in zip(dirs, bases, strict=True)]
    else:
        res = list(analyses)
        if any(isinstance(b, (str, Path)) for b in bases):
            raise PlotError("with precomputed analyses, give baselines as numbers (or pass "
                            "the baseline file to analyse(..., baseline=PATH))")
    for info, a in zip(infos, res, strict=True):
        if not np.isfinite(np.asarray(a.table["train_energy_per_point"], np.float64)).any():
            raise PlotError(f"{info.name} has no energy per data point (data set "
                            f"{info.data!r}, {a.meta.get('iterations_used', 0)} iterations "
                            "used); the energy plot needs a run on a data set with recorded "
                            "iterations (try --kind replicas, ladder or heat)")
    labels = run_labels(infos)
    fig, ax = new_axes(ax, figsize=(9.0, 5.0))
    for i, (a, label, b) in enumerate(zip(res, labels, bases, strict=True)):
        _draw_run(ax, a, label, b, f"C{i % 10}", test=test, predictive=predictive,
                  name=infos[i].name)
    ax.axhline(UNINFORMED_PER_POINT, color="k", ls="-.", lw=1.0,
               label="uninformed classifier (ln 10)")
    log_axis(ax)
    ax.set_xlabel("temperature T")
    ax.set_ylabel(ENERGY_LABEL + " per data point (nats per data point)")
    # outside the axes: the curves span the whole plot at some T
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.set_title(figure_title(f"{ENERGY_LABEL} per data point on training and test data", infos,
                        f"{discard_note(infos, discard, res)}; bands: ± 1 standard error"),
                 fontsize="medium")
    return fig


def _draw_run(ax: Axes, a: Any, label: str, b: PathLike | float | None, colour: str, *,
              test: bool, predictive: bool, name: str) -> None:
    """One run's curves: training (and test, predictive) energies with their bands, and its
    standard-optimisation line (``b`` a number, or the analysis's reference)."""
    tab = a.table
    t = np.asarray(tab["temperature"], dtype=np.float64)
    y = np.asarray(tab["train_energy_per_point"], dtype=np.float64)
    ax.plot(t, y, "-o", color=colour, ms=3.5, lw=1.2, label=f"{label} train")
    error_band(ax, t, y, tab["train_energy_per_point_err"], colour)
    if test:
        yt = np.asarray(tab["test_energy_per_point"], dtype=np.float64)
        if np.isfinite(yt).any():
            ax.plot(t, yt, "--s", color=colour, ms=3.5, lw=1.2, label=f"{label} test")
            error_band(ax, t, yt, tab["test_energy_per_point_err"], colour)
        else:
            log.warning("%s: no test energies (no parameter samples in the trace?)",
                        name)
        yp = np.asarray(tab["predictive_test_energy_per_point"], dtype=np.float64)
        if predictive and np.isfinite(yp).any():
            ax.plot(t, yp, ":^", color=colour, ms=3.5, lw=1.2,
                    label=f"{label} test, Bayesian predictive")
    ref = getattr(a, "references", None) or {}
    if b is not None and not isinstance(b, (str, Path)):
        value, err = float(b), math.nan
    else:
        value = float(ref.get("baseline_test_energy_per_point", math.nan))
        err = float(ref.get("baseline_test_energy_per_point_err", math.nan))
    if math.isfinite(value):
        ax.axhline(value, color=colour, ls=":", lw=1.5,
                   label=f"{label} standard optimisation (test)")
        if math.isfinite(err) and err > 0:
            ax.axhspan(value - err, value + err, color=colour, alpha=0.1, lw=0)


def value_at_temperature(temperatures: Any, values: Any, errors: Any, temperature: float = 1.0,
                         *, method: str = "interpolate") -> tuple[float, float]:
    """A per-temperature quantity at ``temperature``.

    Parameters
    ----------
    temperatures, values, errors : array_like, shape (K,)
    temperature : float
    method : {"interpolate", "nearest"}
        ``"interpolate"``: linear in log T between the two ladder temperatures around
        ``temperature`` (errors interpolated the same way: exact for fully correlated
        neighbours, an upper bound otherwise); ``"nearest"``: the ladder temperature closest
        in log T.

    Returns
    -------
    (value, error) : tuple of float
    """
    if not (isinstance(temperature, (int, float)) and math.isfinite(temperature)
            and temperature > 0):
        raise PlotError(f"temperature = {temperature!r}; expected a positive number such as 1")
    t = np.asarray(temperatures, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    e = np.asarray(errors, dtype=np.float64)
    order = np.argsort(t)
    t, v, e = t[order], v[order], e[order]
    x = np.log(t)
    x0 = math.log(temperature)
    if method == "nearest":
        k = int(np.argmin(np.abs(x - x0)))
        return float(v[k]), float(e[k])
    if method != "interpolate":
        raise PlotError(f"method = {method!r}; expected 'interpolate' or 'nearest'")
    if not (t[0] <= temperature <= t[-1]):
        raise PlotError(f"T = {temperature:g} is outside the ladder [{t[0]:g}, {t[-1]:g}]; use "
                        "the nearest temperature (--nearest) or a run whose ladder spans it")
    return float(np.interp(x0, x, v)), float(np.interp(x0, x, e))


def plot_size(run_dirs: PathLike | Sequence[PathLike], ax: Axes | None = None, *,
              temperature: float = 1.0, method: str = "interpolate",
              discard: float | None = None, analyses: Sequence[Any] | None = None,
              mnist_dir: PathLike | None = None) -> Figure:
    """Training ⟨E(D|w)⟩_T per data point at ``temperature`` versus the training-set size n,
    one point per run (the blog's Fig. 3); one series per architecture.

    Parameters
    ----------
    run_dirs : path or sequence of paths
    ax : Axes, optional
    temperature : float
        The T to read the energy at [default: 1, the posterior].
    method : {"interpolate", "nearest"}
        See :func:`value_at_temperature`.
    discard : float, optional
    analyses : sequence of Analysis, optional
    mnist_dir : path, optional

    Returns
    -------
    Figure
    """
    infos, res = training_analyses(run_dirs, analyses, discard, mnist_dir)
    fig, ax = new_axes(ax)
    series: dict[str, list[tuple[int, float, float, str]]] = {}
    for info, a in zip(infos, res, strict=True):
        tab = a.table
        try:
            v, e = value_at_temperature(tab["temperature"], tab["train_energy_per_point"],
                                        tab["train_energy_per_point_err"], temperature,
                                        method=method)
        except PlotError as err:
            raise PlotError(f"{info.name}: {err}") from None
        n_train = int(a.meta.get("n_train", 0))
        if n_train <= 0 or not math.isfinite(v):
            raise PlotError(f"{info.name}: no training energy per data point at T = "
                            f"{temperature:g} (data set {info.data!r}, n_train = {n_train}); "
                            "the size plot needs runs on a data set")
        series.setdefault(info.architecture, []).append((n_train, v, e, info.data))
    for i, (arch, pts) in enumerate(sorted(series.items())):
        pts.sort()
        n = np.array([p[0] for p in pts], dtype=np.float64)
        v_n = np.array([p[1] for p in pts], dtype=np.float64)
        e_n = np.array([p[2] for p in pts], dtype=np.float64)
        ax.errorbar(n, v_n, yerr=np.where(np.isfinite(e_n), e_n, 0.0), fmt="-o",
                    color=f"C{i % 10}", capsize=3, label=f"{arch}, training data")
        for p in pts:
            ax.annotate(p[3], (p[0], p[1]), textcoords="offset points", xytext=(5, 5),
                        fontsize="small")
    ax.axhline(UNINFORMED_PER_POINT, color="k", ls="-.", lw=1.0,
               label="uninformed classifier (ln 10)")
    log_axis(ax)
    ax.set_xlabel("training-set size n (data points)")
    ax.margins(x=0.12)
    ax.set_ylabel(f"{ENERGY_LABEL} per data point at T = {temperature:g}\n"
                  "(nats per data point)")
    ax.legend(fontsize="small")
    how = ("linear interpolation in log T between ladder temperatures" if method ==
           "interpolate" else "nearest ladder temperature in log T")
    ax.set_title(figure_title(f"Training energy at T = {temperature:g} versus data-set size", infos,
                        how), fontsize="medium")
    return fig
