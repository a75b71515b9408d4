"""``thermonet plot --kind predictive``: the drawn numbers (predictive mean, 5-95 % band, input
slices) equal an independent NumPy computation from the stored samples, in the data file's
units for standardised data."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from tests.data.test_user_data import CFG, X, Y, write_csv
from thermonet import config as cfgmod
from thermonet.errors import PlotError
from thermonet.io import trace as iotrace


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    from thermonet.runner import Run, detach_log

    tmp = tmp_path_factory.mktemp("pred")
    (tmp / "sub").mkdir()
    write_csv(tmp / "sub" / "d.csv", ["a", "b", "c", "u", "v"], np.hstack([X, Y]).tolist())
    p = tmp / "run.toml"
    p.write_text(CFG)
    out = tmp / "r"
    Run.create(cfgmod.load(p), out).run()
    detach_log()
    return out


def forward(theta, xz, st):
    """Independent NumPy 3-4-2 tanh network, outputs in the file's units."""
    w1, b1 = theta[:12].reshape(4, 3), theta[12:16]
    w2, b2 = theta[16:24].reshape(2, 4), theta[24:26]
    return (np.tanh(xz @ w1.T + b1) @ w2.T + b2) * st["y_std"] + st["y_mean"]


def test_plotted_numbers_equal_numpy(run_dir):
    from thermonet.data import load_file_split
    from thermonet.plotting import plot_predictive, predictive_numbers

    nums = predictive_numbers(run_dir)
    tr = iotrace.read_trace(run_dir, samples=True)
    kept = tr["samples_theta"][tr["samples_iteration"] >= 3]   # discard 0.34 of 6
    thetas = np.concatenate(list(kept.transpose(1, 0, 2)))      # every chain's, in turn
    assert nums.n_samples == len(thetas) == 4 * 4                # 4 chains of 4 samples
    split = load_file_split(run_dir.parent / "sub" / "d.csv", outputs=["u", "v"],
                            standardise=True, seed=2)
    st = split.train.provenance["standardisation"]
    xz = (X[split.test.indices] - st["x_mean"]) / np.array(st["x_std"])
    f = np.array([forward(th, xz, st) for th in thetas])
    assert np.allclose(nums.y_test, Y[split.test.indices], atol=1e-12)
    assert np.allclose(nums.mean, f.mean(0), rtol=1e-10, atol=1e-12)
    assert np.allclose(nums.lo, np.quantile(f, 0.05, axis=0), rtol=1e-10, atol=1e-12)
    assert np.allclose(nums.hi, np.quantile(f, 0.95, axis=0), rtol=1e-10, atol=1e-12)
    # the slice through input 2 (c), the others at the training inputs' mean, file units
    x_tr = X[split.train.indices]
    grid = np.repeat(x_tr.mean(0)[None], 101, axis=0)
    grid[:, 2] = np.linspace(x_tr[:, 2].min(), x_tr[:, 2].max(), 101)
    fs = np.array([forward(th, (grid - st["x_mean"]) / np.array(st["x_std"]), st)
                   for th in thetas])
    assert np.allclose(nums.slice_x[2], grid[:, 2], rtol=1e-12)
    assert np.allclose(nums.slice_mean[2], fs.mean(0), rtol=1e-10, atol=1e-12)
    assert np.allclose(nums.slice_hi[2], np.quantile(fs, 0.95, axis=0), rtol=1e-10,
                       atol=1e-12)
    # and the figure draws exactly these numbers
    fig = plot_predictive(run_dir)
    top, bottom = fig.axes[0], fig.axes[3]
    x_drawn, y_drawn = top.lines[0].get_data()
    assert np.allclose(x_drawn, Y[split.test.indices, 0]) and np.allclose(y_drawn, f.mean(0)[:, 0])
    xs, ys = bottom.lines[1].get_data()                   # input 1's slice, output 2
    assert np.allclose(ys, nums.slice_mean[0][:, 1])


def test_cli_writes_the_figure_and_refuses_several_runs(run_dir, tmp_path):
    from thermonet.cli import main

    out = tmp_path / "p.png"
    res = CliRunner().invoke(main, ["plot", str(run_dir), "--kind", "predictive", "--out",
                                    str(out), "--band", "10", "90"])
    assert res.exit_code == 0, res.output
    assert out.stat().st_size > 1000
    res = CliRunner().invoke(main, ["plot", str(run_dir), str(run_dir), "--kind",
                                    "predictive", "--out", str(out)])
    assert res.exit_code == 1 and "draws one run" in res.output
    from thermonet.plotting import predictive_numbers

    with pytest.raises(PlotError, match="quantiles"):
        predictive_numbers(run_dir, quantiles=(0.9, 0.1))


def test_the_error_trace_equals_numpy_along_the_run(run_dir, tmp_path):
    """Neal 1993 Fig. 2's numbers for every chain of the run (4): each stored network's
    training and test squared error, the test error of the outputs averaged from the end of
    the discarded part over every chain (as predict pools them) and within each chain,
    computed independently in NumPy."""
    from thermonet.cli import main
    from thermonet.data import load_file_split
    from thermonet.plotting import error_trace, plot_errors

    nums = error_trace(run_dir)
    tr = iotrace.read_trace(run_dir, samples=True)
    its, theta_sc = tr["samples_iteration"], tr["samples_theta"]
    n_c = theta_sc.shape[1]
    assert n_c == nums.n_chains == 4
    split = load_file_split(run_dir.parent / "sub" / "d.csv", outputs=["u", "v"],
                            standardise=True, seed=2)
    st = split.train.provenance["standardisation"]
    y = Y[split.test.indices]

    def err(th, idx):
        xz = (X[idx] - st["x_mean"]) / np.array(st["x_std"])
        return np.mean(np.sum((forward(th, xz, st) - Y[idx]) ** 2, axis=1))

    def sq(f):
        return np.mean(np.sum((f - y) ** 2, axis=1))

    # rows chain by chain, as RunRecord.samples gives the networks
    assert np.array_equal(nums.iteration, np.tile(its, n_c)) and nums.first_kept == 3
    assert np.array_equal(nums.chain, np.repeat(np.arange(n_c), its.size))
    thetas = np.concatenate([theta_sc[:, c] for c in range(n_c)])
    assert np.allclose(nums.train, [err(th, split.train.indices) for th in thetas], rtol=1e-10)
    assert np.allclose(nums.test, [err(th, split.test.indices) for th in thetas], rtol=1e-10)
    xz = (X[split.test.indices] - st["x_mean"]) / np.array(st["x_std"])
    f = np.array([[forward(th, xz, st) for th in theta_sc[:, c]] for c in range(n_c)])
    kept = its >= 3                                            # discard 0.34 of 6
    m = int(kept.sum())
    pooled = [sq(f[:, kept][:, : j + 1].reshape(-1, *y.shape).mean(0)) for j in range(m)]
    own = [[sq(f[c, kept][: j + 1].mean(0)) for j in range(m)] for c in range(n_c)]
    for c in range(n_c):
        rows = nums.chain == c
        assert np.all(np.isnan(nums.averaged[rows][~kept]))
        assert np.allclose(nums.averaged[rows][kept], pooled, rtol=1e-10)
        assert np.allclose(nums.chain_averaged[rows][kept], own[c], rtol=1e-10)
    # the chains' networks differ, so pooling is not chain 0's curve
    assert not np.allclose(pooled, own[0], rtol=1e-6)
    # the last pooled value is the predictive test error of every chain's kept networks
    from thermonet.analysis.samples import evaluate_regression
    from thermonet.plotting.predictive import regression_model

    _, arch, data = regression_model(run_dir, None)
    every = np.concatenate([theta_sc[kept, c] for c in range(n_c)])
    ev = evaluate_regression(arch, every, test=data.test)
    assert ev.predictive_test_error == pytest.approx(nums.averaged[-1], rel=1e-12)
    fig = plot_errors(run_dir)
    ax = fig.axes[0]
    assert len(ax.lines[0].get_data()[0]) == n_c * its.size        # every chain's points
    assert np.allclose(ax.lines[2].get_data()[1][kept], pooled)
    for c in range(n_c):
        assert np.allclose(ax.lines[3 + c].get_data()[1][kept], own[c])
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[:4] == ["training, each network of 4 chains", "test, each network of 4 chains",
                          "test, outputs of all chains averaged since the discarded part",
                          "test, one chain's outputs averaged"]
    assert "(4 chains, pooled as predict pools them)" in " ".join(fig.get_suptitle().split())
    out = tmp_path / "e.png"
    res = CliRunner().invoke(main, ["plot", str(run_dir), "--kind", "errors", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert out.stat().st_size > 1000


def test_mixture_quantiles_solve_the_mixture_cdf():
    from scipy.optimize import brentq
    from scipy.stats import norm

    from thermonet.plotting.predictive import mixture_quantiles

    rng = np.random.default_rng(4)
    f = rng.normal(size=(7, 3)) * [1.0, 5.0, 0.1]
    sd = rng.uniform(0.05, 2.0, size=(7, 1))
    lo, hi = mixture_quantiles(f, sd, (0.05, 0.95))
    for j in range(3):
        for q, got in ((0.05, lo[j]), (0.95, hi[j])):
            want = brentq(lambda x, j=j, q=q: norm.cdf((x - f[:, j]) / sd[:, 0]).mean() - q,
                          -100, 100, xtol=1e-14)
            assert got == pytest.approx(want, abs=1e-10)


def test_the_noise_band_is_the_mixture_of_each_samples_noise(run_dir, tmp_path):
    """With --noise the band of a new observation: per test case and output, the quantiles of
    the mixture over stored networks of N(f_s, T/tau_s) (tau_s the noise precision hmc-gibbs
    recorded at the sample's iteration), in the file's units; computed here independently."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    from thermonet.cli import main
    from thermonet.data import load_file_split
    from thermonet.plotting import predictive_numbers

    plain = predictive_numbers(run_dir)
    nums = predictive_numbers(run_dir, noise=True)
    tr = iotrace.read_trace(run_dir, samples=True)
    kept = tr["samples_iteration"] >= 3
    rows = np.searchsorted(tr["iteration"], tr["samples_iteration"][kept])
    chains = range(tr["samples_theta"].shape[1])       # every chain's networks, in turn
    thetas = np.concatenate([tr["samples_theta"][kept][:, c] for c in chains])
    # noise precision: the last hyperparameter, of each network's chain at its iteration
    tau = np.concatenate([tr["hyper_k"][rows, c, -1] for c in chains])
    split = load_file_split(run_dir.parent / "sub" / "d.csv", outputs=["u", "v"],
                            standardise=True, seed=2)
    st = split.train.provenance["standardisation"]
    xz = (X[split.test.indices] - st["x_mean"]) / np.array(st["x_std"])
    f = np.array([forward(th, xz, st) for th in thetas])
    assert nums.noise and np.allclose(nums.mean, plain.mean, rtol=1e-12)
    for i, o in ((0, 0), (3, 1)):
        sd = np.sqrt(1.0 / tau) * st["y_std"][o]
        want = brentq(lambda x: norm.cdf((x - f[:, i, o]) / sd).mean() - 0.95, -1e3, 1e3,
                      xtol=1e-12)
        assert nums.hi[i, o] == pytest.approx(want, rel=1e-8, abs=1e-10)
    assert np.all(nums.hi - nums.lo > plain.hi - plain.lo)
    out = tmp_path / "n.png"
    res = CliRunner().invoke(main, ["plot", str(run_dir), "--kind", "predictive", "--noise",
                                    "--out", str(out)])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(main, ["plot", str(run_dir), "--kind", "errors", "--noise",
                                    "--out", str(out)])
    assert res.exit_code == 1 and "--noise applies to --kind predictive" in res.output
