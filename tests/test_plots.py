"""Figures (thermonet.plotting, ``thermonet plot``): drawn from small real runs, checked by
reading the drawn data back from the figure and comparing with the trace and the analysis."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from thermonet import checkpoint as ckpt
from thermonet import config as cfgmod
from thermonet import plotting
from thermonet.cli import main
from thermonet.errors import PlotError

RUN = """
[run]
seed = {seed}
n_iterations = 20
checkpoint_every = 10
sample_every = 4
adapt_every = 0
discard = 0.2
[data]
name = "{data}"
test = "official"
[architecture]
name = "M3"
[init]
burn_in = [2]
[minimiser]
name = "rmin"
max_steps = 50
[sampler]
name = "rehmc"
n_temperatures = 4
t_min = 0.3
t_max = 3.0
n_trajectories = 1
[sampler.inner]
n_leapfrog = 5
step_size = 0.005
"""

K = 4  # temperatures of the runs


@pytest.fixture(scope="session")
def runs(tmp_path_factory) -> dict[str, Path]:
    """Two tiny RE-HMC runs of M3 (4 temperatures on [0.3, 3], 20 iterations) on D50 and D500,
    through the real runner (a few seconds)."""
    from thermonet.runner import Run, detach_log

    root = tmp_path_factory.mktemp("plot_runs")
    out = {}
    for seed, data in ((3, "D50"), (4, "D500")):
        cfg_path = root / f"{data}.toml"
        cfg_path.write_text(RUN.format(seed=seed, data=data))
        run_dir = root / f"run_{data}"
        try:
            Run.create(cfgmod.load(cfg_path), run_dir).run(quiet=True)
        finally:
            detach_log()
        out[data] = run_dir
    return out


def _invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _kept(n: int, discard: float = 0.2) -> slice:
    return slice(int(np.floor(discard * n)), n)


# --- import, kinds, formats ---------------------------------------------------------------------

def test_import_does_not_load_matplotlib():
    code = ("import sys, thermonet, thermonet.plotting, thermonet.cli.plot; "
            "print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_cli_kinds_are_the_plotting_kinds():
    from thermonet.cli.plot import KIND_CHOICES

    assert KIND_CHOICES == tuple(plotting.KINDS)


@pytest.mark.parametrize("name,fmt", [("a.png", "png"), ("b.SVG", "svg"), ("c.pdf", "pdf")])
def test_output_format(name, fmt):
    assert plotting.output_format(name) == fmt


@pytest.mark.parametrize("name", ["a.jpg", "noext", "a.png.txt"])
def test_output_format_rejects(name):
    with pytest.raises(PlotError, match=r"\.png, \.pdf, \.svg"):
        plotting.output_format(name)


# --- replicas (Fig. 2) -----------------------------------------------------------------------------

def test_replica_slots_inverts_the_permutation():
    rng = np.random.default_rng(0)
    rep = np.stack([rng.permutation(5) for _ in range(7)])
    slot = plotting.replica_slots(rep)
    for t in range(7):
        for r in range(5):
            assert rep[t, slot[t, r]] == r


def test_replicas_per_slot(runs):
    run = runs["D50"]
    tr = ckpt.read_trace(run)
    temps = ckpt.read_checkpoint(run).temperatures
    fig = plotting.plot_replicas(run)
    ax = fig.axes[0]
    lines = ax.get_lines()
    assert len(lines) == K == tr["energy_k"].shape[1]
    norm, cmap = plotting._temperature_colours(temps)
    for k, line in enumerate(lines):
        np.testing.assert_array_equal(line.get_xdata(), tr["iteration"])
        np.testing.assert_array_equal(line.get_ydata(), tr["energy_k"][:, k])
        assert line.get_color() == cmap(norm(temps[k]))
        assert f"T = {temps[k]:.3g}" in line.get_label()
    assert ax.get_xlabel() == "iteration"
    assert ax.get_ylabel() == "training energy E(D|w) (nats)"
    title = ax.get_title()
    assert "one line per slot" in title and "run_D50: M3 on D50, 20 iterations" in title
    # the colour bar: log T over exactly the ladder
    cbar = fig.axes[1]
    assert cbar.get_ylabel() == "temperature T (log scale)"
    cnorm = ax.figure.axes[1]._colorbar.norm
    assert type(cnorm).__name__ == "LogNorm"
    assert (cnorm.vmin, cnorm.vmax) == (temps.min(), temps.max())
    # the discarded first 20% is shaded: iterations 1..4 of 20
    (span,) = ax.patches
    assert (span.get_x(), span.get_x() + span.get_width()) == (0.5, 4.5)


def test_replicas_per_replica(runs):
    from matplotlib.collections import LineCollection

    run = runs["D500"]
    tr = ckpt.read_trace(run)
    temps = ckpt.read_checkpoint(run).temperatures
    fig = plotting.plot_replicas(run, follow="replica")
    ax = fig.axes[0]
    cols = [c for c in ax.collections if isinstance(c, LineCollection)]
    assert len(cols) == K and not ax.get_lines()
    n = tr["iteration"].shape[0]
    for r, lc in enumerate(cols):
        # independent reference: look the replica up slot by slot
        e = np.empty(n)
        t_r = np.empty(n)
        for t in range(n):
            (k,) = np.flatnonzero(tr["replica_k"][t] == r)
            e[t], t_r[t] = tr["energy_k"][t, k], temps[k]
        segs = lc.get_segments()
        assert len(segs) == n - 1
        np.testing.assert_array_equal([s[0][1] for s in segs], e[:-1])
        np.testing.assert_array_equal([s[1][1] for s in segs], e[1:])
        np.testing.assert_array_equal(lc.get_array(), t_r[1:])
    assert "one line per replica" in ax.get_title()


def test_replicas_log_scale_auto(runs):
    fig = plotting.plot_replicas(runs["D50"], yscale="log")
    assert fig.axes[0].get_yscale() == "log"
    tr = ckpt.read_trace(runs["D500"])
    e = tr["energy_k"]
    want = "log" if e.min() > 0 and e.max() / e.min() > 30 else "linear"
    assert plotting.plot_replicas(runs["D500"]).axes[0].get_yscale() == want


# --- ladder ------------------------------------------------------------------------------------

def test_ladder(runs):
    from thermonet.analysis import summarise

    run = runs["D500"]
    tr = ckpt.read_trace(run)
    temps = ckpt.read_checkpoint(run).temperatures
    fig = plotting.plot_ladder(run)
    swap_ax, path_ax, dt_ax, acc_ax = fig.axes
    # swap acceptance over all iterations, at the geometric mean of each pair
    (line,) = swap_ax.get_lines()
    want = tr["swap_accepted_k"].sum(axis=0) / tr["swap_attempted_k"].sum(axis=0)
    np.testing.assert_allclose(line.get_ydata(), want, rtol=0, atol=1e-15)
    np.testing.assert_allclose(line.get_xdata(), np.sqrt(temps[:-1] * temps[1:]), rtol=1e-15)
    np.testing.assert_allclose(line.get_ydata(), summarise(run)["swap_acceptance"], rtol=1e-15)
    # one path per replica: its slot over the iterations
    paths = path_ax.get_lines()
    assert len(paths) == K
    for r, p in enumerate(paths):
        for t in range(tr["iteration"].shape[0]):
            assert tr["replica_k"][t, int(p.get_ydata()[t])] == r
    # dt and acceptance over the kept 80%
    kept = _kept(tr["iteration"].shape[0])
    np.testing.assert_allclose(dt_ax.get_lines()[0].get_ydata(),
                               tr["step_size_k"][kept].mean(axis=0), rtol=1e-15)
    np.testing.assert_allclose(acc_ax.get_lines()[0].get_ydata(),
                               summarise(run)["acceptance"], rtol=1e-15)
    for ax in (swap_ax, dt_ax, acc_ax):
        assert ax.get_xscale() == "log" and ax.get_xlabel().startswith("temperature T")
    assert dt_ax.get_yscale() == "log"
    assert path_ax.get_ylabel() == "temperature slot k (0 = coldest)"
    assert "run_D500: M3 on D500, 20 iterations" in fig.get_suptitle()


# --- the command line -----------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["replicas", "ladder"])
@pytest.mark.parametrize("suffix", ["png", "svg"])
def test_cli_writes_trace_kinds(runs, tmp_path, kind, suffix):
    out = tmp_path / f"fig.{suffix}"
    res = _invoke("plot", runs["D50"], runs["D500"], "--kind", kind, "--out", out)
    assert res.exit_code == 0, res.output
    data = out.read_bytes()
    if suffix == "png":
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
    else:
        text = data.decode()
        assert text.lstrip().startswith("<?xml") and "<svg" in text


def test_cli_replicas_follow_replica_svg(runs, tmp_path):
    out = tmp_path / "r.svg"
    res = _invoke("plot", runs["D50"], "--kind", "replicas", "--follow", "replica",
                  "--out", out)
    assert res.exit_code == 0, res.output
    assert "one line per replica" in out.read_text()


def _error_lines(output: str) -> list[str]:
    return [ln for ln in output.splitlines() if ln.startswith("Error:")]


def test_cli_unknown_kind(runs, tmp_path):
    res = _invoke("plot", runs["D50"], "--kind", "energies", "--out", tmp_path / "x.png")
    assert res.exit_code != 0
    (err,) = _error_lines(res.output)
    for kind in plotting.KINDS:
        assert repr(kind) in err
    assert not (tmp_path / "x.png").exists()


def test_cli_unknown_suffix(runs, tmp_path):
    res = _invoke("plot", runs["D50"], "--kind", "replicas", "--out", tmp_path / "x.jpg")
    assert res.exit_code == 1
    (err,) = _error_lines(res.output)
    assert "x.jpg" in err and ".png, .pdf, .svg" in err
    assert len(res.output.strip().splitlines()) == 1
    assert not (tmp_path / "x.jpg").exists()


def test_cli_missing_run(tmp_path):
    res = _invoke("plot", tmp_path / "nothing", "--kind", "ladder", "--out", tmp_path / "x.png")
    assert res.exit_code == 1
    assert res.output.strip().splitlines() == [
        f"Error: no checkpoint at {tmp_path / 'nothing'}; is this a "
        "thermonet run directory (made by `thermonet run`)?"]


def test_cli_baseline_count_mismatch(runs, tmp_path):
    res = _invoke("plot", runs["D50"], runs["D500"], "--kind", "energy", "--baseline",
                  tmp_path / "b.json", "--out", tmp_path / "x.png")
    assert res.exit_code == 1
    (err,) = _error_lines(res.output)
    assert "1 --baseline for 2 DIR(s)" in err


# --- value at T = 1 ------------------------------------------------------------------------------

def test_value_at_temperature_linear_in_log_t():
    t = np.array([0.1, 0.5, 2.0, 8.0])
    v = 3.0 + 2.0 * np.log(t)          # linear in log T: interpolation is exact
    e = np.array([0.1, 0.2, 0.4, 0.8])
    val, err = plotting.value_at_temperature(t, v, e, 1.0)
    assert val == pytest.approx(3.0, abs=1e-14)
    w = math.log(1.0 / 0.5) / math.log(2.0 / 0.5)   # = 0.5
    assert err == pytest.approx((1 - w) * 0.2 + w * 0.4, rel=1e-14)
    # nearest in log T, unsorted input: |ln(0.9/0.5)| = 0.59 < |ln(2/0.9)| = 0.80
    perm = [2, 0, 3, 1]
    assert plotting.value_at_temperature(t[perm], v[perm], e[perm], 0.9,
                                         method="nearest") == (v[1], e[1])
    assert plotting.value_at_temperature(t, v, e, 1.5, method="nearest") == (v[2], e[2])
    with pytest.raises(PlotError, match=r"T = 20 is outside the ladder \[0.1, 8\]"):
        plotting.value_at_temperature(t, v, e, 20.0)
