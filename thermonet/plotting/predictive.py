"""The predictive distribution of a regression run: the Bayesian predictive mean (the sampled
networks' outputs averaged, Neal 1993 eq. 10) and a band between two quantiles of those
outputs, against the test targets, and along 1-D slices through the input space (cf. Neal
1993, Fig. 3).

By default the band is over the sampled *networks* (the uncertainty of the regression
function). With ``noise`` it is the band of the predictive distribution of a new observation:
each network's output plus Gaussian noise of that sample's level (the noise precision tau
recorded at the same iteration by ``hmc-gibbs``, or the architecture's known ``noise_std``;
variance T/tau at temperature T, as the tempered likelihood has it), i.e. the quantiles of a
mixture of normals, solved exactly (:func:`mixture_quantiles`). Everything is in the data
file's units (standardised data are put back, :func:`thermonet.data.to_original_units`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from thermonet.analysis.prediction import mixture_quantiles
from thermonet.analysis.run_record import RunRecord, open_run
from thermonet.errors import PlotError
from thermonet.plotting.figure import PathLike, new_figure
from thermonet.plotting.runs import figure_title, first_kept, read_run_trace

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: points along each slice
SLICE_POINTS = 101
#: at most this many input slices are drawn
MAX_SLICES = 6


@dataclass
class PredictiveNumbers:
    """What :func:`plot_predictive` draws (every array in the data file's units).

    Attributes
    ----------
    y_test : (n_test, K) test targets
    mean, lo, hi : (n_test, K) predictive mean and the ``quantiles`` of the sampled outputs
    slice_x : list of (SLICE_POINTS,) grids, one per input j (the other inputs at their
        training means)
    slice_mean, slice_lo, slice_hi : lists of (SLICE_POINTS, K)
    n_samples, temperature, quantiles
    noise : whether the band includes the observation noise
    """

    y_test: np.ndarray
    mean: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    n_samples: int
    temperature: float
    quantiles: tuple[float, float]
    noise: bool = False
    slice_x: list[np.ndarray] = field(default_factory=list)
    slice_mean: list[np.ndarray] = field(default_factory=list)
    slice_lo: list[np.ndarray] = field(default_factory=list)
    slice_hi: list[np.ndarray] = field(default_factory=list)


def regression_model(run_dir: PathLike, mnist_dir: Any) -> tuple[Any, Any, Any]:
    """A regression run's checkpoint, architecture and data split (one-line errors for a run
    that is not one)."""
    rec = open_run(run_dir)
    arch, split = _regression_parts(rec, mnist_dir)
    return rec.checkpoint, arch, split


def _regression_parts(rec: RunRecord, mnist_dir: Any) -> tuple[Any, Any]:
    if rec.data_name == "none":
        raise PlotError(f"{rec.path} has no data; --kind predictive and errors are for "
                        "regression runs")
    arch, split = rec.architecture(), rec.data(mnist_dir)
    if split.train.task != "regression" or not hasattr(arch, "predict"):
        raise PlotError(f"{rec.path} is a {split.train.task} run; --kind predictive and errors "
                        "draw regression runs (real-valued targets)")
    return arch, split


def _input_units(dataset: Any, x: np.ndarray) -> np.ndarray:
    st = dataset.provenance.get("standardisation")
    if not st:
        return x
    return x * np.asarray(st["x_std"]) + np.asarray(st["x_mean"])


def _band(arch: Any, thetas: np.ndarray, x: np.ndarray, dataset: Any,
          quantiles: tuple[float, float], noise_sd: np.ndarray | None = None
          ) -> tuple[np.ndarray, ...]:
    from thermonet.data import to_original_units

    f = np.stack([to_original_units(dataset, arch.predict(np.ascontiguousarray(t), x))[0]
                  for t in thetas])
    if noise_sd is None:
        lo, hi = np.quantile(f, quantiles, axis=0)
    else:
        st = dataset.provenance.get("standardisation")
        y_std = np.asarray(st["y_std"], dtype=np.float64) if st else np.ones(f.shape[-1])
        lo, hi = mixture_quantiles(f, noise_sd[:, None, None] * y_std[None, None, :], quantiles)
    return f.mean(axis=0), lo, hi


def noise_levels(rec: RunRecord, arch: Any, split: Any, slot: int,
                 iterations: np.ndarray) -> np.ndarray:
    """The noise standard deviation (model units) of the stored networks at ``iterations`` of
    ``slot`` (:meth:`RunRecord.noise_sd <thermonet.analysis.run_record.RunRecord.noise_sd>`),
    or a one-line error when the run recorded none."""
    sd = rec.noise_sd(slot, iterations, split.train, arch)
    if sd is None:
        raise PlotError(f"{rec.path} recorded no noise level (run it with sampler hmc-gibbs "
                        "and an unknown noise, or give the architecture noise_std); draw the "
                        "band without --noise")
    return sd


def predictive_numbers(run_dir: PathLike, *, discard: float | None = None,
                       temperature: float = 1.0, quantiles: tuple[float, float] = (0.05, 0.95),
                       mnist_dir: Any = None, noise: bool = False) -> PredictiveNumbers:
    """The predictive mean and band of the stored networks at the rung nearest
    ``temperature`` after discarding the first ``discard`` of the iterations (default: the
    run's ``run.discard``), on the test set and along one slice per input; with ``noise``, the
    band of a new observation (:func:`noise_levels`)."""
    from thermonet.data import to_original_units

    if not 0.0 <= quantiles[0] < quantiles[1] <= 1.0:
        raise PlotError(f"quantiles {quantiles}; expected 0 <= lower < upper <= 1")
    if discard is not None:
        first_kept(0, discard)       # a bad fraction is a plotting error
    rec = open_run(run_dir, discard=discard)
    arch, split = _regression_parts(rec, mnist_dir)
    k = int(np.argmin(np.abs(np.log(rec.temperatures) - np.log(temperature))))
    thetas = rec.samples(slot=k)
    if thetas.shape[0] == 0:
        raise PlotError(f"{run_dir} has no stored networks after the discarded part; set "
                        "run.sample_every and run longer, or lower --discard")
    sd = noise_levels(rec, arch, split, k, rec.sample_iterations()) if noise else None
    mean, lo, hi = _band(arch, thetas, split.test.x, split.test, quantiles, sd)
    out = PredictiveNumbers(to_original_units(split.test, split.test.y)[1], mean, lo, hi,
                            int(thetas.shape[0]), float(rec.temperatures[k]), quantiles,
                            noise)
    x_tr = split.train.x
    for j in range(min(x_tr.shape[1], MAX_SLICES)):
        grid = np.repeat(x_tr.mean(axis=0)[None, :], SLICE_POINTS, axis=0)
        grid[:, j] = np.linspace(x_tr[:, j].min(), x_tr[:, j].max(), SLICE_POINTS)
        m, a, b = _band(arch, thetas, grid, split.train, quantiles, sd)
        out.slice_x.append(_input_units(split.train, grid)[:, j])
        out.slice_mean.append(m)
        out.slice_lo.append(a)
        out.slice_hi.append(b)
    return out


def plot_predictive(run_dir: PathLike, ax: Axes | None = None, *,
                    discard: float | None = None, temperature: float = 1.0,
                    quantiles: tuple[float, float] = (0.05, 0.95),
                    mnist_dir: Any = None, noise: bool = False) -> Figure:
    """Top row: per output, the predictive mean with its band against the test targets (the
    diagonal is a perfect prediction). Bottom row: per input, the mean and band along a
    slice through the training inputs' mean, one colour per output. ``ax`` is refused (the
    figure has several panels)."""
    if ax is not None:
        raise PlotError("plot_predictive draws its own figure of several panels; call it "
                        "without ax")
    nums = predictive_numbers(run_dir, discard=discard, temperature=temperature,
                              quantiles=quantiles, mnist_dir=mnist_dir, noise=noise)
    info, _ = read_run_trace(run_dir)
    n_out, n_sl = nums.mean.shape[1], len(nums.slice_x)
    cols = max(n_out, n_sl)
    fig = new_figure((3.4 * cols, 7.0))
    grid = fig.subplots(2, cols, squeeze=False)
    pct = f"{100 * quantiles[0]:g}-{100 * quantiles[1]:g}%"
    for kk in range(cols):
        ax_t = grid[0, kk]
        if kk >= n_out:
            ax_t.set_axis_off()
        else:
            y, m = nums.y_test[:, kk], nums.mean[:, kk]
            err = np.stack([m - nums.lo[:, kk], nums.hi[:, kk] - m])
            ax_t.errorbar(y, m, yerr=err, fmt="o", ms=2.5, lw=0.6, label=f"mean, {pct}")
            lims = [min(y.min(), nums.lo[:, kk].min()), max(y.max(), nums.hi[:, kk].max())]
            ax_t.plot(lims, lims, "k--", lw=0.8)
            ax_t.set_xlabel(f"test target, output {kk + 1}")
            ax_t.set_ylabel("predictive mean")
            ax_t.legend(fontsize="small")
        ax_s = grid[1, kk]
        if kk >= n_sl:
            ax_s.set_axis_off()
            continue
        for o in range(n_out):
            line, = ax_s.plot(nums.slice_x[kk], nums.slice_mean[kk][:, o],
                              label=f"output {o + 1}")
            ax_s.fill_between(nums.slice_x[kk], nums.slice_lo[kk][:, o],
                              nums.slice_hi[kk][:, o], color=line.get_color(), alpha=0.25,
                              lw=0)
        ax_s.set_xlabel(f"input {kk + 1} (others at the training mean)")
        ax_s.set_ylabel("output")
        ax_s.legend(fontsize="small")
    fig.suptitle(figure_title(
        f"Predictive mean and {pct} band of {nums.n_samples} sampled networks at "
        f"T = {nums.temperature:g} (band {'with' if nums.noise else 'without'} the noise)",
        [info]), fontsize="small")
    return fig
