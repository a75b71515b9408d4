"""Training and test error along a regression run (cf. Neal 1993, Fig. 2).

For every stored network at the rung nearest a temperature: its training and test squared
errors (summed over the outputs, averaged over the cases, in the data file's units), and the
test squared error of the Bayesian predictive mean so far, the outputs averaged over the
networks stored from the end of the discarded part up to that iteration (Neal 1993, eq. 10).
The averaged curve is what the run's final test error comes from; the single-network curves
show how far each network alone is from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from thermonet.errors import PlotError
from thermonet.plotting.figure import PathLike, new_axes
from thermonet.plotting.predictive import regression_model
from thermonet.plotting.runs import figure_title, first_kept, read_run_trace

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


@dataclass
class ErrorTrace:
    """What :func:`plot_errors` draws.

    Attributes
    ----------
    iteration : (S,) iteration of each stored network
    train, test : (S,) its training and test squared errors
    averaged : (S,) test squared error of the outputs averaged over the kept networks up to
        each iteration (NaN before the first kept one)
    first_kept : the first iteration after the discarded part
    temperature : the rung's temperature
    """

    iteration: np.ndarray
    train: np.ndarray
    test: np.ndarray
    averaged: np.ndarray
    first_kept: int
    temperature: float


def error_trace(run_dir: PathLike, *, discard: float | None = None, temperature: float = 1.0,
                mnist_dir: Any = None) -> ErrorTrace:
    """The errors of the stored networks of ``run_dir`` at the rung nearest ``temperature``,
    and of their running average from the end of the first ``discard`` of the iterations
    (default: the run's ``run.discard``)."""
    from thermonet.analysis.samples import SampleStore, squared_error
    from thermonet.data import to_original_units

    info, tr = read_run_trace(run_dir)
    _, arch, split = regression_model(run_dir, mnist_dir)
    n = tr["iteration"].shape[0]
    start = int(tr["iteration"][first_kept(n, info.discard if discard is None else discard)])
    k = int(np.argmin(np.abs(np.log(info.temperatures) - np.log(temperature))))
    store = SampleStore(info.path, info.run_uuid, info.iterations)
    thetas = store.slot(k, 0)
    its = store.iterations[store.iterations <= info.iterations]
    if thetas.shape[0] == 0:
        raise PlotError(f"{run_dir} stored no networks; set run.sample_every and run again")
    y_test = to_original_units(split.test, split.test.y)[1]
    y_train = to_original_units(split.train, split.train.y)[1]
    s_n = thetas.shape[0]
    train, test, averaged = (np.full(s_n, np.nan) for _ in range(3))
    total, count = np.zeros_like(y_test), 0
    for s in range(s_n):
        theta = np.ascontiguousarray(thetas[s])
        f_test = to_original_units(split.test, arch.predict(theta, split.test.x))[0]
        f_train = to_original_units(split.train, arch.predict(theta, split.train.x))[0]
        train[s] = squared_error(f_train, y_train)
        test[s] = squared_error(f_test, y_test)
        if its[s] >= start:
            total += f_test
            count += 1
            averaged[s] = squared_error(total / count, y_test)
    return ErrorTrace(np.asarray(its), train, test, averaged, start,
                      float(info.temperatures[k]))


def plot_errors(run_dir: PathLike, ax: Axes | None = None, *, discard: float | None = None,
                temperature: float = 1.0, mnist_dir: Any = None) -> Figure:
    """Training and test squared error of each stored network against the iteration, and the
    test error of their running average (log scale), with the end of the discarded part."""
    nums = error_trace(run_dir, discard=discard, temperature=temperature, mnist_dir=mnist_dir)
    info, _ = read_run_trace(run_dir)
    fig, ax = new_axes(ax, (7.0, 4.8))
    ax.plot(nums.iteration, nums.train, ".", ms=3, label="training, each network")
    ax.plot(nums.iteration, nums.test, ".", ms=3, label="test, each network")
    ax.plot(nums.iteration, nums.averaged, "-", lw=1.5,
            label="test, outputs averaged since the discarded part")
    ax.axvline(nums.first_kept, color="0.5", ls=":", lw=1, label="end of the discarded part")
    ax.set_yscale("log")
    ax.set_xlabel("iteration")
    ax.set_ylabel("squared error per case")
    ax.legend(fontsize="small")
    fig.suptitle(figure_title(f"Squared errors of the networks stored at T = "
                              f"{nums.temperature:g}", [info]), fontsize="small")
    return fig


__all__ = ["ErrorTrace", "error_trace", "plot_errors"]
