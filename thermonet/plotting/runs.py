"""Reading runs for figures: the run's description, its trace, its analysis (computed or
stored) and labels."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from thermonet.analysis.run_record import RunRecord, open_run
from thermonet.analysis.run_record import first_kept as record_first_kept
from thermonet.errors import PlotError
from thermonet.plotting.figure import PathLike


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
    n_trajectories : ndarray of int64, shape (K,)
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
    n_trajectories: np.ndarray
    discard: float
    run_uuid: str = ""

    def describe(self) -> str:
        """``"r50: M3 on D50, 20 iterations"``."""
        return f"{self.name}: {self.architecture} on {self.data}, {self.iterations} iterations"


def run_info(run_dir: PathLike) -> RunInfo:
    """Read a run directory's checkpoint and configuration (one-line error if it is none)."""
    return info_of(open_run(run_dir))


def info_of(rec: RunRecord) -> RunInfo:
    """What a figure title says about an opened run."""
    return RunInfo(
        path=rec.path, name=rec.path.resolve().name,
        architecture=rec.architecture_name,
        data=str(rec.config.get("data", {}).get("name", "?")),
        iterations=rec.iterations,
        temperatures=np.array(rec.temperatures),
        n_trajectories=rec.n_trajectories,
        discard=rec.discard,
        run_uuid=rec.run_uuid,
    )


def read_run_trace(run_dir: PathLike) -> tuple[RunInfo, dict[str, np.ndarray]]:
    """The run's identity and its whole trace (through :func:`thermonet.open_run`)."""
    rec = open_run(run_dir)
    if rec.n_recorded == 0:
        raise PlotError(f"{run_dir} has no recorded iterations yet (iteration "
                        f"{rec.iterations}); continue it with `thermonet resume {run_dir}`")
    return info_of(rec), {k: np.array(v) for k, v in rec.trace.items()}


def first_kept(n: int, discard: float) -> int:
    """Index of the first iteration kept after discarding the fraction ``discard``."""
    if not 0.0 <= discard < 1.0:
        raise PlotError(f"discard = {discard!r}; expected a fraction in [0, 1)")
    return record_first_kept(n, discard)


def as_run_list(run_dirs: PathLike | Sequence[PathLike]) -> list[PathLike]:
    """One run directory or several, as a list."""
    if isinstance(run_dirs, (str, Path)):
        return [run_dirs]
    out = list(run_dirs)
    if not out:
        raise PlotError("no run directory given; pass at least one DIR made by `thermonet run`")
    return out


def analyse_run(run_dir: PathLike, discard: float | None, *, test: bool, workers: int,
             baseline: PathLike | None = None, mnist_dir: PathLike | None = None,
             predictive: bool = False) -> Any:
    """The analysis of ``run_dir`` (its stored analysis.h5 when it matches, else computed)."""
    from thermonet.analysis import analyse

    return analyse(run_dir, discard=discard, test=test, baseline=baseline, predictive=predictive,
                   workers=workers, mnist_dir=None if mnist_dir is None else str(mnist_dir))


def training_analyses(run_dirs: PathLike | Sequence[PathLike], analyses: Sequence[Any] | None,
                      discard: float | None, mnist_dir: PathLike | None
                      ) -> tuple[list[RunInfo], list[Any]]:
    """The runs' :class:`RunInfo` and their analyses: ``analyses`` when given, else computed
    without the test set (the plots of training energies need no more)."""
    dirs = as_run_list(run_dirs)
    infos = [run_info(d) for d in dirs]
    res = list(analyses) if analyses is not None else [
        analyse_run(d, discard, test=False, workers=1, mnist_dir=mnist_dir) for d in dirs]
    return infos, res


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


def figure_title(what: str, infos: Sequence[RunInfo], extra: str = "") -> str:
    """What the figure shows (first line, wrapped), then one line per run (up to four; more
    runs are wrapped together)."""
    head = textwrap.wrap(what + (f" ({extra})" if extra else ""), 80)
    runs = [i.describe() for i in infos]
    if len(runs) > 4:
        runs = textwrap.wrap("; ".join(runs), 100, break_long_words=False)
    return "\n".join(head + runs)


def discard_note(infos: Sequence[RunInfo], discard: float | None,
               analyses: Sequence[Any] = ()) -> str:
    """The burn-in in words: what the analyses used, else ``discard``, else run.discard."""
    used: list[Any] = [getattr(a, "meta", {}).get("discard") for a in analyses]
    if analyses and all(u is not None for u in used):
        fracs = {float(u) for u in used}
    else:
        fracs = {i.discard for i in infos} if discard is None else {discard}
    if len(fracs) == 1:
        return f"first {100 * fracs.pop():g}% of iterations discarded"
    return "first run.discard of each run's iterations discarded"
