"""Training and test error along a regression run (cf. Neal 1993, Fig. 2).

For every stored network at the rung nearest a temperature, of every chain of a one-rung run
of several (``run.chains``): its training and test squared errors (summed over the outputs,
averaged over the cases, in the data file's units), and the test squared error of the
Bayesian predictive mean so far, the outputs averaged over the networks stored from the end
of the discarded part up to that iteration (Neal 1993, eq. 10): pooled over every chain, as
``predict`` pools them, and within each chain alone. The pooled curve is what the run's final
test error comes from; the single-network points show how far each network alone is from
it, and the per-chain curves whether the chains agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from thermonet.analysis.run_record import open_run
from thermonet.errors import PlotError
from thermonet.plotting.figure import PathLike, new_axes
from thermonet.plotting.predictive import regression_model
from thermonet.plotting.runs import figure_title, first_kept, read_run_trace

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


@dataclass
class ErrorTrace:
    """What :func:`plot_errors` draws: one row per stored network, chain by chain (the order
    of :meth:`~thermonet.analysis.run_record.RunRecord.samples`).

    Attributes
    ----------
    iteration : (S,) iteration of each stored network
    chain : (S,) its chain (0 for a run of one chain)
    train, test : (S,) its training and test squared errors
    averaged : (S,) test squared error of the outputs averaged over the kept networks of
        every chain stored up to that row's iteration (NaN before the first kept one); the
        last is the test error of ``predict``'s predictive mean
    chain_averaged : (S,) the same over the kept networks of the row's own chain only
    first_kept : the first iteration after the discarded part
    temperature : the rung's temperature
    n_chains : the chains drawn
    """

    iteration: np.ndarray
    chain: np.ndarray
    train: np.ndarray
    test: np.ndarray
    averaged: np.ndarray
    chain_averaged: np.ndarray
    first_kept: int
    temperature: float
    n_chains: int = 1


def error_trace(run_dir: PathLike, *, discard: float | None = None, temperature: float = 1.0,
                mnist_dir: Any = None) -> ErrorTrace:
    """The errors of the stored networks of ``run_dir`` at the rung nearest ``temperature``
    (every chain's), and of their running averages from the end of the first ``discard`` of
    the iterations (default: the run's ``run.discard``), pooled and per chain."""
    from thermonet.analysis.samples import SampleStore, squared_error
    from thermonet.data import to_original_units

    info, tr = read_run_trace(run_dir)
    _, arch, split = regression_model(run_dir, mnist_dir)
    rec = open_run(run_dir)
    n = tr["iteration"].shape[0]
    start = int(tr["iteration"][first_kept(n, info.discard if discard is None else discard)])
    k = int(np.argmin(np.abs(np.log(info.temperatures) - np.log(temperature))))
    store = SampleStore(info.path, info.run_uuid, info.iterations)
    slots = rec.chain_slots(k)
    thetas = [store.slot(c, 0) for c in slots]
    its = np.asarray(store.iterations[store.iterations <= info.iterations])
    if thetas[0].shape[0] == 0:
        raise PlotError(f"{run_dir} stored no networks; set run.sample_every and run again")
    y_test = to_original_units(split.test, split.test.y)[1]
    y_train = to_original_units(split.train, split.train.y)[1]
    s_n, n_c = its.size, len(slots)
    train, test, own = (np.full((n_c, s_n), np.nan) for _ in range(3))
    f_test = np.zeros((n_c, s_n, *y_test.shape))
    for c in range(n_c):
        for s in range(s_n):
            theta = np.ascontiguousarray(thetas[c][s])
            f_test[c, s] = to_original_units(split.test, arch.predict(theta, split.test.x))[0]
            f_train = to_original_units(split.train, arch.predict(theta, split.train.x))[0]
            train[c, s] = squared_error(f_train, y_train)
            test[c, s] = squared_error(f_test[c, s], y_test)
    kept = its >= start
    pooled = np.full(s_n, np.nan)
    if kept.any():
        # running sums over the kept iterations: per chain, then over the chains
        sums = np.cumsum(f_test[:, kept], axis=1)
        counts = np.arange(1, int(kept.sum()) + 1)
        for c in range(n_c):
            own[c, kept] = [squared_error(m, y_test)
                            for m in sums[c] / counts[:, None, None]]
        both = sums.sum(axis=0) / (n_c * counts)[:, None, None]
        pooled[kept] = [squared_error(m, y_test) for m in both]
    return ErrorTrace(np.tile(its, n_c), np.repeat(np.arange(n_c), s_n), train.ravel(),
                      test.ravel(), np.tile(pooled, n_c), own.ravel(), start,
                      float(info.temperatures[k]), n_c)


def plot_errors(run_dir: PathLike, ax: Axes | None = None, *, discard: float | None = None,
                temperature: float = 1.0, mnist_dir: Any = None) -> Figure:
    """Training and test squared error of each stored network of every chain against the
    iteration, and the test error of their running average (log scale): pooled over the
    chains (``predict``'s) and, for several chains, each chain's own; with the end of the
    discarded part."""
    nums = error_trace(run_dir, discard=discard, temperature=temperature, mnist_dir=mnist_dir)
    info, _ = read_run_trace(run_dir)
    fig, ax = new_axes(ax, (7.0, 4.8))
    c = nums.n_chains
    each = f"each network of {c} chains" if c > 1 else "each network"
    ax.plot(nums.iteration, nums.train, ".", ms=3, label=f"training, {each}")
    ax.plot(nums.iteration, nums.test, ".", ms=3, label=f"test, {each}")
    first = nums.chain == 0
    ax.plot(nums.iteration[first], nums.averaged[first], "-", lw=1.5,
            label=("test, outputs of all chains averaged since the discarded part" if c > 1
                   else "test, outputs averaged since the discarded part"))
    for j in range(c if c > 1 else 0):
        mine = nums.chain == j
        ax.plot(nums.iteration[mine], nums.chain_averaged[mine], "-", lw=0.8, alpha=0.6,
                color="0.35", label="test, one chain's outputs averaged" if j == 0 else None)
    ax.axvline(nums.first_kept, color="0.5", ls=":", lw=1, label="end of the discarded part")
    ax.set_yscale("log")
    ax.set_xlabel("iteration")
    ax.set_ylabel("squared error per case")
    ax.legend(fontsize="small")
    chains = f" ({c} chains, pooled as predict pools them)" if c > 1 else ""
    fig.suptitle(figure_title(f"Squared errors of the networks stored at T = "
                              f"{nums.temperature:g}{chains}", [info]), fontsize="small")
    return fig


__all__ = ["ErrorTrace", "error_trace", "plot_errors"]
