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
=================  ==========================================================================

``replicas`` and ``ladder`` read only the trace; ``energy``, ``size`` and ``heat`` use
:func:`thermonet.analysis.analyse` (after discarding the first ``run.discard`` fraction of the
iterations, or ``discard``).

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

import logging
import math
import sys
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from thermonet.errors import PlotError

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


# --- runs -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunInfo:
    """What a figure title says about a run.

    Attributes
    ----------
    path : Path
    name : str
        The run directory's name.
    architecture, data : str
        Architecture and training-set names from the run's configuration.
    iterations : int
        Completed iterations (the checkpoint's commit point).
    temperatures : ndarray of float64, shape (K,)
    n_trajectories : int
        Inner transitions per slot and iteration.
    discard : float
        The run's ``run.discard`` fraction.
    run_uuid : str
    """

    path: Path
    name: str
    architecture: str
    data: str
    iterations: int
    temperatures: np.ndarray
    n_trajectories: int
    discard: float
    run_uuid: str = ""

    def describe(self) -> str:
        """``"r50: M3 on D50, 20 iterations"``."""
        return f"{self.name}: {self.architecture} on {self.data}, {self.iterations} iterations"


def run_info(run_dir: PathLike) -> RunInfo:
    """Read a run directory's checkpoint and configuration (one-line error if it is none)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    from thermonet import checkpoint as ckpt

    path = Path(run_dir)
    ck = ckpt.read_checkpoint(path)
    cfg = tomllib.loads(ck.config_toml)
    sampler = cfg.get("sampler", {})
    return RunInfo(
        path=path, name=path.resolve().name,
        architecture=str(cfg.get("architecture", {}).get("name", "?")),
        data=str(cfg.get("data", {}).get("name", "?")),
        iterations=int(ck.iteration),
        temperatures=np.asarray(ck.temperatures, dtype=np.float64),
        n_trajectories=int(cfg.get("ladder", sampler).get("n_trajectories", 1)),
        discard=float(cfg.get("run", {}).get("discard", 0.2)),
        run_uuid=ck.run_uuid,
    )


def _trace(run_dir: PathLike) -> tuple[RunInfo, dict[str, np.ndarray]]:
    from thermonet import checkpoint as ckpt

    info = run_info(run_dir)
    tr = ckpt.read_trace(run_dir, run_uuid=info.run_uuid)
    if "iteration" in tr:
        # rows beyond the checkpoint (left by a crash; trimmed on resume) are not the run's
        keep = np.asarray(tr["iteration"]) <= info.iterations
        tr = {k: np.asarray(v)[keep] for k, v in tr.items()}
    if "iteration" not in tr or tr["iteration"].shape[0] == 0:
        raise PlotError(f"{run_dir} has no recorded iterations yet (iteration "
                        f"{info.iterations}); continue it with `thermonet resume {run_dir}`")
    return info, tr


def _first_kept(n: int, discard: float) -> int:
    """Index of the first iteration kept after discarding the fraction ``discard``."""
    if not 0.0 <= discard < 1.0:
        raise PlotError(f"discard = {discard!r}; expected a fraction in [0, 1)")
    return int(np.floor(discard * n))


def _as_list(run_dirs: PathLike | Sequence[PathLike]) -> list[PathLike]:
    if isinstance(run_dirs, (str, Path)):
        return [run_dirs]
    out = list(run_dirs)
    if not out:
        raise PlotError("no run directory given; pass at least one DIR made by `thermonet run`")
    return out


def _analyse(run_dir: PathLike, discard: float | None, *, test: bool, workers: int,
             baseline: PathLike | None = None, mnist_dir: PathLike | None = None,
             predictive: bool = False) -> Any:
    from thermonet.analysis import analyse

    return analyse(run_dir, discard=discard, test=test, baseline=baseline, predictive=predictive,
                   workers=workers, mnist_dir=None if mnist_dir is None else str(mnist_dir))


#: the file ``thermonet analyse DIR`` writes by default, relative to DIR
ANALYSIS_FILE = "analysis.h5"


def stored_analysis(run_dir: PathLike, path: PathLike | None = None, *, test: bool = False,
                    predictive: bool = False, discard: float | None = None) -> Any:
    """The analysis ``thermonet analyse`` saved for a run, checked to be current.

    Parameters
    ----------
    run_dir : path
    path : path, optional
        The analysis file [default: ``run_dir/analysis.h5``, where ``thermonet analyse DIR``
        writes it].
    test, predictive : bool
        Require the test-set (and Bayesian-predictive) columns.
    discard : float, optional
        Require this burn-in fraction (None: whatever the analysis used).

    Returns
    -------
    Analysis

    Raises
    ------
    PlotError
        If the file is missing, belongs to another run, is older than the run's checkpoint,
        or lacks what is required; the message says to rerun ``thermonet analyse``.
    """
    from thermonet.analysis import read_analysis
    from thermonet.errors import CheckpointError

    info = run_info(run_dir)
    p = Path(path) if path is not None else Path(run_dir) / ANALYSIS_FILE
    out = "" if path is None else f" --out {p.with_suffix('')}"
    redo = f"run `thermonet analyse {run_dir}{out}`"
    try:
        a = read_analysis(p)
    except CheckpointError as err:
        raise PlotError(f"cannot use the stored analysis of {info.name}: {err}; {redo} or "
                        "drop --from-analysis") from None
    meta = a.meta
    problems = []
    if meta.get("run_uuid") != info.run_uuid:
        problems.append(f"it is of another run (run_uuid {meta.get('run_uuid')})")
    elif int(meta.get("iterations", -1)) != info.iterations:
        problems.append(f"it covers {meta.get('iterations')} iterations; the run has "
                        f"{info.iterations}")
    if test and not meta.get("test"):
        problems.append("it has no test-set columns (made with --no-test)")
    if predictive and not meta.get("predictive"):
        problems.append("it has no Bayesian-predictive columns (made with --no-predictive)")
    if discard is not None and float(meta.get("discard", math.nan)) != float(discard):
        problems.append(f"it discarded {meta.get('discard')}, not {discard}")
    if problems:
        raise PlotError(f"the stored analysis {p} is not usable: {'; '.join(problems)}; "
                        f"{redo} again (with the options you need)")
    return a


def run_labels(infos: Sequence[RunInfo]) -> list[str]:
    """Short legend names: the data set, prefixed by the architecture if the runs differ in
    it, suffixed by the run directory's name where that still leaves two alike."""
    archs = {i.architecture for i in infos}
    labels = [(f"{i.architecture} " if len(archs) > 1 else "") + i.data for i in infos]
    for lab in set(labels):
        if labels.count(lab) > 1:
            labels = [f"{x} ({i.name})" if x == lab else x
                      for x, i in zip(labels, infos, strict=True)]
    return labels


def _title(what: str, infos: Sequence[RunInfo], extra: str = "") -> str:
    """What the figure shows (first line, wrapped), then one line per run (up to four; more
    runs are wrapped together)."""
    head = textwrap.wrap(what + (f" ({extra})" if extra else ""), 80)
    runs = [i.describe() for i in infos]
    if len(runs) > 4:
        runs = textwrap.wrap("; ".join(runs), 100, break_long_words=False)
    return "\n".join(head + runs)


def _discarded(infos: Sequence[RunInfo], discard: float | None,
               analyses: Sequence[Any] = ()) -> str:
    """The burn-in in words: what the analyses used, else ``discard``, else run.discard."""
    used = [getattr(a, "meta", {}).get("discard") for a in analyses]
    if analyses and all(u is not None for u in used):
        fracs = {float(u) for u in used}
    else:
        fracs = {i.discard for i in infos} if discard is None else {discard}
    if len(fracs) == 1:
        return f"first {100 * fracs.pop():g}% of iterations discarded"
    return "first run.discard of each run's iterations discarded"


# --- figures and saving -------------------------------------------------------------------------

def new_figure(figsize: tuple[float, float] = (7.0, 4.8)) -> Figure:
    """An empty figure on the non-interactive Agg canvas (no pyplot, no screen)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _new_axes(ax: Axes | None, figsize: tuple[float, float] = (7.0, 4.8)
              ) -> tuple[Figure, Axes]:
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


def _check_out(path: PathLike) -> str:
    """The format of ``path``, after checking that its directory exists."""
    fmt = output_format(path)
    parent = Path(path).parent
    if parent != Path("") and not parent.is_dir():
        raise PlotError(f"cannot write {path}: directory {parent} does not exist; create "
                        "it first")
    return fmt


def save(fig: Figure, path: PathLike, *, dpi: float = 150) -> Path:
    """Save ``fig`` in the format named by ``path``'s suffix (png, pdf or svg)."""
    fmt = _check_out(path)
    path = Path(path)
    meta = {"Software": None} if fmt == "png" else None  # no version string: stable bytes
    fig.savefig(path, format=fmt, dpi=dpi, metadata=meta)
    return path


def _g(v: float) -> str:
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
        return _g(float(f"{v:.6g}"))

    def minor(v: float, _pos: Any) -> str:
        lo, hi = sorted(axis.get_view_interval())
        span = math.log10(hi / lo) if lo > 0 and hi > lo else math.inf
        if v <= 0:
            return ""
        mant = round(v / 10.0 ** math.floor(math.log10(v) + 1e-9), 6)
        show = (2.0, 3.0, 5.0) if span <= 1.3 else (3.0,) if span <= 2.5 else ()
        return _g(float(f"{v:.6g}")) if mant in show else ""

    axis.set_major_formatter(FuncFormatter(major))
    axis.set_minor_formatter(FuncFormatter(minor))


def _temperature_colours(temperatures: np.ndarray) -> tuple[Any, Any]:
    """A log-T norm and colour map for a ladder."""
    from matplotlib import colormaps
    from matplotlib.colors import LogNorm

    lo, hi = float(np.min(temperatures)), float(np.max(temperatures))
    if lo == hi:
        lo, hi = lo / 1.5, hi * 1.5
    return LogNorm(vmin=lo, vmax=hi), colormaps[TEMPERATURE_CMAP]


# --- replicas (Fig. 2) ---------------------------------------------------------------------------

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

    info, tr = _trace(run_dir)
    fig, ax = _new_axes(ax)
    it = tr["iteration"].astype(np.float64)
    e_tk = np.asarray(tr["energy_k"], dtype=np.float64)
    temps = info.temperatures
    norm, cmap = _temperature_colours(temps)
    n_slots = e_tk.shape[1]
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
            lc = LineCollection(segs, cmap=cmap, norm=norm, lw=1.0, label=f"replica {r}")
            lc.set_array(temps[s[1:]] if len(it) > 1 else np.zeros(0))
            ax.add_collection(lc)
        ax.autoscale_view()
        what = (f"E(D|w) of each of the {n_slots} replicas (one line per replica, colour: "
                "its current T)")
    d = info.discard if discard is None else discard
    start = _first_kept(len(it), d)
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
    ax.set_title(_title(what, [info]), fontsize="medium")
    return fig


# --- energy (Figs. 3, 4) --------------------------------------------------------------------------

def _band(ax: Axes, x: np.ndarray, y: np.ndarray, err: np.ndarray, colour: Any) -> None:
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
    dirs = _as_list(run_dirs)
    bases: list[PathLike | float | None] = (list(baselines) if baselines is not None
                                            else [None] * len(dirs))
    if len(bases) != len(dirs):
        raise PlotError(f"{len(bases)} baseline(s) for {len(dirs)} run(s); give one per "
                        "run (None, or 'none' on the command line, for a run without)")
    infos = [run_info(d) for d in dirs]
    if analyses is None:
        res = [_analyse(d, discard, test=test, workers=workers,
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
    fig, ax = _new_axes(ax, figsize=(9.0, 5.0))
    for i, (a, label, b) in enumerate(zip(res, labels, bases, strict=True)):
        colour = f"C{i % 10}"
        tab = a.table
        t = np.asarray(tab["temperature"], dtype=np.float64)
        y = np.asarray(tab["train_energy_per_point"], dtype=np.float64)
        ax.plot(t, y, "-o", color=colour, ms=3.5, lw=1.2, label=f"{label} train")
        _band(ax, t, y, tab["train_energy_per_point_err"], colour)
        if test:
            yt = np.asarray(tab["test_energy_per_point"], dtype=np.float64)
            if np.isfinite(yt).any():
                ax.plot(t, yt, "--s", color=colour, ms=3.5, lw=1.2, label=f"{label} test")
                _band(ax, t, yt, tab["test_energy_per_point_err"], colour)
            else:
                log.warning("%s: no test energies (no parameter samples in the trace?)",
                            infos[i].name)
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
    ax.axhline(UNINFORMED_PER_POINT, color="k", ls="-.", lw=1.0,
               label="uninformed classifier (ln 10)")
    log_axis(ax)
    ax.set_xlabel("temperature T")
    ax.set_ylabel(ENERGY_LABEL + " per data point (nats per data point)")
    # outside the axes: the curves span the whole plot at some T
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.set_title(_title(f"{ENERGY_LABEL} per data point on training and test data", infos,
                        f"{_discarded(infos, discard, res)}; bands: ± 1 standard error"),
                 fontsize="medium")
    return fig


# --- size (blog Fig. 3) ------------------------------------------------------------------------

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
    dirs = _as_list(run_dirs)
    infos = [run_info(d) for d in dirs]
    res = list(analyses) if analyses is not None else [
        _analyse(d, discard, test=False, workers=1, mnist_dir=mnist_dir) for d in dirs]
    fig, ax = _new_axes(ax)
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
        v = np.array([p[1] for p in pts], dtype=np.float64)
        e = np.array([p[2] for p in pts], dtype=np.float64)
        ax.errorbar(n, v, yerr=np.where(np.isfinite(e), e, 0.0), fmt="-o",
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
    ax.set_title(_title(f"Training energy at T = {temperature:g} versus data-set size", infos,
                        how), fontsize="medium")
    return fig


# --- ladder ------------------------------------------------------------------------------------

def ladder_statistics(run_dir: PathLike, discard: float | None = None) -> dict[str, Any]:
    """The numbers :func:`plot_ladder` draws, from the trace.

    Returns
    -------
    dict
        ``temperatures`` (K,); ``slot_r`` (n, K), the replica paths, and ``iteration`` (n,) over
        all iterations; over the kept iterations (as :func:`thermonet.analysis.analyse`):
        ``swap_acceptance`` (K-1,) and ``swap_attempts`` (K-1,), ``dt`` (K,) (mean step size)
        and ``acceptance`` (K,) (accepted inner transitions per transition); ``first_kept``
        (index of the first kept iteration) and ``info`` (:class:`RunInfo`).
    """
    info, tr = _trace(run_dir)
    n = tr["iteration"].shape[0]
    start = _first_kept(n, info.discard if discard is None else discard)
    kept = slice(start, n)
    att = tr["swap_attempted_k"][kept].sum(axis=0).astype(np.float64)
    acc = tr["swap_accepted_k"][kept].sum(axis=0).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        swap = np.where(att > 0, acc / att, np.nan)
    n_kept = n - start
    return {
        "info": info,
        "temperatures": info.temperatures,
        "swap_acceptance": swap,
        "swap_attempts": att.astype(np.int64),
        "iteration": tr["iteration"],
        "slot_r": replica_slots(tr["replica_k"]),
        "dt": tr["step_size_k"][kept].mean(axis=0),
        "acceptance": tr["n_accepted_k"][kept].sum(axis=0) / (n_kept * info.n_trajectories),
        "first_kept": start,
    }


def plot_ladder(run_dir: PathLike, fig: Figure | None = None, *,
                discard: float | None = None) -> Figure:
    """A 2x2 figure of the temperature ladder: swap acceptance per adjacent pair, the slot of
    every replica over the iterations, dt and HMC acceptance per temperature.

    Parameters
    ----------
    run_dir : path
    fig : Figure, optional
        An empty figure to draw on.
    discard : float, optional
        Burn-in fraction excluded from the swap, dt and acceptance panels [default: the run's
        ``run.discard``]; the replica paths show every iteration.

    Returns
    -------
    Figure
    """
    from matplotlib.ticker import MaxNLocator

    s = ladder_statistics(run_dir, discard)
    info: RunInfo = s["info"]
    if fig is None:
        fig = new_figure((10.0, 7.5))
    axs = fig.subplots(2, 2)
    t = s["temperatures"]
    k = len(t)
    norm, cmap = _temperature_colours(t)

    ax = axs[0, 0]
    if k > 1:
        mid = np.sqrt(t[:-1] * t[1:])
        ax.plot(mid, s["swap_acceptance"], "-o", color="C0", ms=4)
        log_axis(ax)
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("temperature T (geometric mean of the pair)")
    ax.set_ylabel("swap acceptance")
    d = info.discard if discard is None else discard
    ax.set_title(f"swap acceptance per adjacent pair\n({int(s['swap_attempts'].sum())} "
                 f"attempts; first {100 * d:g}% of iterations discarded)", fontsize="medium")

    ax = axs[0, 1]
    it = s["iteration"]
    for r in range(k):
        start_slot = s["slot_r"][0, r]
        ax.step(it, s["slot_r"][:, r], where="post", lw=1.0,
                color=cmap(norm(t[start_slot])), label=f"replica {r}")
    ax.set_xlabel("iteration")
    ax.set_ylabel("temperature slot k (0 = coldest)")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title("replica paths (colour: T of the slot at iteration 1)", fontsize="medium")

    ax = axs[1, 0]
    ax.plot(t, s["dt"], "-o", color="C2", ms=4)
    log_axis(ax)
    log_axis(ax, "y")
    ax.set_xlabel("temperature T")
    ax.set_ylabel("HMC step size dt (mean)")
    ax.set_title(f"step size (mean; first {100 * d:g}% of iterations discarded)",
                 fontsize="medium")

    ax = axs[1, 1]
    ax.plot(t, s["acceptance"], "-o", color="C3", ms=4)
    log_axis(ax)
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("temperature T")
    ax.set_ylabel("HMC acceptance rate")
    per = "trajectory" if info.n_trajectories == 1 else "trajectories"
    ax.set_title(f"HMC acceptance ({info.n_trajectories} {per} per slot and iteration)",
                 fontsize="medium")
    fig.suptitle(_title("Temperature ladder", [info], f"{k} temperatures"), fontsize="medium")
    return fig


# --- heat capacity ------------------------------------------------------------------------------

def plot_heat(run_dirs: PathLike | Sequence[PathLike], ax: Axes | None = None, *,
              per_point: bool = False, discard: float | None = None,
              analyses: Sequence[Any] | None = None,
              mnist_dir: PathLike | None = None) -> Figure:
    """The heat capacity C(T) = Var(E)/T² (k_B = 1) versus T, one line per run.

    Parameters
    ----------
    run_dirs : path or sequence of paths
    ax : Axes, optional
    per_point : bool
        Divide by the number of training points (C is extensive: compares data sets).
    discard : float, optional
    analyses : sequence of Analysis, optional
    mnist_dir : path, optional

    Returns
    -------
    Figure
    """
    dirs = _as_list(run_dirs)
    infos = [run_info(d) for d in dirs]
    res = list(analyses) if analyses is not None else [
        _analyse(d, discard, test=False, workers=1, mnist_dir=mnist_dir) for d in dirs]
    fig, ax = _new_axes(ax)
    for i, (a, label) in enumerate(zip(res, run_labels(infos), strict=True)):
        colour = f"C{i % 10}"
        t = np.asarray(a.table["temperature"], dtype=np.float64)
        c = np.asarray(a.table["heat_capacity"], dtype=np.float64)
        c_err = np.asarray(a.table["heat_capacity_err"], dtype=np.float64)
        if per_point:
            n_train = int(a.meta.get("n_train", 0))
            if n_train <= 0:
                raise PlotError(f"{infos[i].name} has no training set (data set "
                                f"{infos[i].data!r}); drop --per-point")
            c, c_err = c / n_train, c_err / n_train
        ax.plot(t, c, "-o", color=colour, ms=3.5, label=label)
        _band(ax, t, c, c_err, colour)
    log_axis(ax)
    ax.set_xlabel("temperature T")
    ax.set_ylabel("heat capacity per data point C/n = Var(E)/(n T²) (k_B = 1)" if per_point
                  else "heat capacity C = Var(E)/T² (k_B = 1, dimensionless)")
    ax.legend(fontsize="small")
    ax.set_title(_title("Heat capacity", infos, "bands: ± 1 standard error"), fontsize="medium")
    return fig


# --- one entry point -----------------------------------------------------------------------------

#: kind -> (function, takes several runs)
KINDS: dict[str, tuple[Callable[..., Figure], bool]] = {
    "replicas": (plot_replicas, False),
    "energy": (plot_energies, True),
    "size": (plot_size, True),
    "ladder": (plot_ladder, False),
    "heat": (plot_heat, True),
}


def plot(kind: str, run_dirs: PathLike | Sequence[PathLike], out: PathLike | None = None, *,
         dpi: float = 150, **options: Any) -> Figure:
    """Draw figure ``kind`` (see :data:`KINDS`) of ``run_dirs`` and save it to ``out``.

    ``replicas`` and ``ladder`` draw one run; given several, they are drawn one above the
    other. ``options`` go to the kind's function.
    """
    if kind not in KINDS:
        raise PlotError(f"unknown plot kind {kind!r}; expected one of {', '.join(KINDS)}")
    if out is not None:
        _check_out(out)  # fail before any work
    dirs = _as_list(run_dirs)
    func, many = KINDS[kind]
    if many:
        fig = func(dirs, **options)
    elif len(dirs) == 1:
        fig = func(dirs[0], **options)
    else:
        w, h = (10.0, 7.5) if kind == "ladder" else (7.0, 4.8)
        fig = new_figure((w, h * len(dirs)))
        subs = fig.subfigures(len(dirs), 1)
        for sub, d in zip(subs, dirs, strict=True):
            if kind == "ladder":
                func(d, sub, **options)
            else:
                func(d, sub.add_subplot(), **options)
    if out is not None:
        save(fig, out, dpi=dpi)
    return fig


__all__ = ["ANALYSIS_FILE", "ENERGY_LABEL", "FORMATS", "KINDS", "UNINFORMED_PER_POINT", "RunInfo",
           "ladder_statistics", "log_axis", "new_figure", "output_format", "plain_log_ticks",
           "plot", "plot_energies", "plot_heat", "plot_ladder", "plot_replicas", "plot_size",
           "replica_slots", "run_info", "run_labels", "save", "stored_analysis",
           "value_at_temperature"]
