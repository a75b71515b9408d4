"""The predictive distribution of a regression run: the Bayesian predictive mean (the sampled
networks' outputs averaged, Neal 1993 eq. 10) and a band between two quantiles of those
outputs, against the test targets, and along 1-D slices through the input space (cf. Neal
1993, Fig. 3).

The band is over the sampled *networks* (the uncertainty of the regression function); it
does not include the noise, whose level the stored samples do not carry. Everything is in the
data file's units (standardised data are put back, :func:`thermonet.data.to_original_units`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

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
    """

    y_test: np.ndarray
    mean: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    n_samples: int
    temperature: float
    quantiles: tuple[float, float]
    slice_x: list[np.ndarray] = field(default_factory=list)
    slice_mean: list[np.ndarray] = field(default_factory=list)
    slice_lo: list[np.ndarray] = field(default_factory=list)
    slice_hi: list[np.ndarray] = field(default_factory=list)


def regression_model(run_dir: PathLike, mnist_dir: Any) -> tuple[Any, Any, Any]:
    """A regression run's checkpoint, architecture and data split (one-line errors for a run
    that is not one)."""
    from thermonet import config as cfgmod
    from thermonet import registry
    from thermonet.config import parse_toml
    from thermonet.data import load_configured
    from thermonet.io.checkpoint import read_checkpoint

    ck = read_checkpoint(run_dir)
    cfg = cfgmod.resolve(parse_toml(ck.config_toml), warn_legacy=False)
    if cfg["data"]["name"] == "none":
        raise PlotError(f"{run_dir} has no data; --kind predictive and errors are for regression "
                        "runs")
    arch = registry.get_architecture(cfg["architecture"]["name"],
                                     **{k: v for k, v in cfg["architecture"].items()
                                        if k != "name"})
    split = load_configured(cfg["data"], cfg["run"]["seed"], mnist_dir=mnist_dir)
    if split.train.task != "regression" or not hasattr(arch, "predict"):
        raise PlotError(f"{run_dir} is a {split.train.task} run; --kind predictive and errors "
                        "draw regression runs (real-valued targets)")
    return ck, arch, split


def _input_units(dataset: Any, x: np.ndarray) -> np.ndarray:
    st = dataset.provenance.get("standardisation")
    if not st:
        return x
    return x * np.asarray(st["x_std"]) + np.asarray(st["x_mean"])


def _band(arch: Any, thetas: np.ndarray, x: np.ndarray, dataset: Any,
          quantiles: tuple[float, float]) -> tuple[np.ndarray, ...]:
    from thermonet.data import to_original_units

    f = np.stack([to_original_units(dataset, arch.predict(np.ascontiguousarray(t), x))[0]
                  for t in thetas])
    lo, hi = np.quantile(f, quantiles, axis=0)
    return f.mean(axis=0), lo, hi


def predictive_numbers(run_dir: PathLike, *, discard: float | None = None,
                       temperature: float = 1.0, quantiles: tuple[float, float] = (0.05, 0.95),
                       mnist_dir: Any = None) -> PredictiveNumbers:
    """The predictive mean and band of the stored networks at the rung nearest
    ``temperature`` after discarding the first ``discard`` of the iterations (default: the
    run's ``run.discard``), on the test set and along one slice per input."""
    from thermonet.analysis.samples import SampleStore
    from thermonet.data import to_original_units

    if not 0.0 <= quantiles[0] < quantiles[1] <= 1.0:
        raise PlotError(f"quantiles {quantiles}; expected 0 <= lower < upper <= 1")
    info, tr = read_run_trace(run_dir)
    _, arch, split = regression_model(run_dir, mnist_dir)
    n = tr["iteration"].shape[0]
    start = first_kept(n, info.discard if discard is None else discard)
    k = int(np.argmin(np.abs(np.log(info.temperatures) - np.log(temperature))))
    thetas = SampleStore(info.path, info.run_uuid, info.iterations).slot(
        k, int(tr["iteration"][start]))
    if thetas.shape[0] == 0:
        raise PlotError(f"{run_dir} has no stored networks after the discarded part; set "
                        "run.sample_every and run longer, or lower --discard")
    mean, lo, hi = _band(arch, thetas, split.test.x, split.test, quantiles)
    out = PredictiveNumbers(to_original_units(split.test, split.test.y)[1], mean, lo, hi,
                            int(thetas.shape[0]), float(info.temperatures[k]), quantiles)
    x_tr = split.train.x
    for j in range(min(x_tr.shape[1], MAX_SLICES)):
        grid = np.repeat(x_tr.mean(axis=0)[None, :], SLICE_POINTS, axis=0)
        grid[:, j] = np.linspace(x_tr[:, j].min(), x_tr[:, j].max(), SLICE_POINTS)
        m, a, b = _band(arch, thetas, grid, split.train, quantiles)
        out.slice_x.append(_input_units(split.train, grid)[:, j])
        out.slice_mean.append(m)
        out.slice_lo.append(a)
        out.slice_hi.append(b)
    return out


def plot_predictive(run_dir: PathLike, ax: Axes | None = None, *,
                    discard: float | None = None, temperature: float = 1.0,
                    quantiles: tuple[float, float] = (0.05, 0.95),
                    mnist_dir: Any = None) -> Figure:
    """Top row: per output, the predictive mean with its band against the test targets (the
    diagonal is a perfect prediction). Bottom row: per input, the mean and band along a
    slice through the training inputs' mean, one colour per output. ``ax`` is refused (the
    figure has several panels)."""
    if ax is not None:
        raise PlotError("plot_predictive draws its own figure of several panels; call it "
                        "without ax")
    nums = predictive_numbers(run_dir, discard=discard, temperature=temperature,
                              quantiles=quantiles, mnist_dir=mnist_dir)
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
        f"T = {nums.temperature:g} (band without the noise)", [info]), fontsize="small")
    return fig
