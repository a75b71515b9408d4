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

from tests.runs import variant
from thermonet import config as cfgmod
from thermonet import plotting
from thermonet.cli import main
from thermonet.errors import PlotError
from thermonet.io import checkpoint as ckpt
from thermonet.io import trace as iotrace

K = 4  # temperatures of the runs


def _config(seed: int, data: str) -> str:
    return variant("m3", run=f"""
        seed = {seed}
        n_iterations = 20
        checkpoint_every = 10
        sample_every = 4
        adapt_every = 0
        discard = 0.2
    """, data=f'name = "{data}"', ladder=f"n_temperatures = {K}")


@pytest.fixture(scope="session")
def runs(tmp_path_factory) -> dict[str, Path]:
    """Two tiny RE-HMC runs of M3 (4 temperatures on [0.3, 3], 20 iterations) on D50 and D500,
    through the real runner (a few seconds)."""
    from thermonet.runner import Run, detach_log

    root = tmp_path_factory.mktemp("plot_runs")
    out = {}
    for seed, data in ((3, "D50"), (4, "D500")):
        cfg_path = root / f"{data}.toml"
        cfg_path.write_text(_config(seed, data))
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


# --- replicas (Fig. 2) ---------------------------------------------------------------------------

def test_replica_slots_inverts_the_permutation():
    rng = np.random.default_rng(0)
    rep = np.stack([rng.permutation(5) for _ in range(7)])
    slot = plotting.replica_slots(rep)
    for t in range(7):
        for r in range(5):
            assert rep[t, slot[t, r]] == r


def test_replicas_per_slot(runs):
    run = runs["D50"]
    tr = iotrace.read_trace(run)
    temps = ckpt.read_checkpoint(run).temperatures
    fig = plotting.plot_replicas(run)
    ax = fig.axes[0]
    lines = ax.get_lines()
    assert len(lines) == K == tr["energy_k"].shape[1]
    norm, cmap = plotting.temperature_colours(temps)
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


def test_rows_beyond_the_checkpoint_are_ignored(runs, tmp_path):
    """A segment written after the last checkpoint (a crash before the checkpoint replaced)
    is not part of the run, as on resume and in the analysis."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(runs["D50"], run)
    tr = iotrace.read_trace(run)
    ck = ckpt.read_checkpoint(run)
    rows = {k: list(v[:5]) for k, v in tr.items()}
    rows["iteration"] = list(tr["iteration"][:5] + 20)          # iterations 21..25
    rows["energy_k"] = list(tr["energy_k"][:5] + 1e3)
    iotrace.write_segment(run, ck.run_uuid, rows, [])
    assert iotrace.read_trace(run)["iteration"].shape == (25,)
    for k, line in enumerate(plotting.plot_replicas(run).axes[0].get_lines()):
        np.testing.assert_array_equal(line.get_ydata(), tr["energy_k"][:, k])
    assert plotting.ladder_statistics(run)["slot_r"].shape == (20, K)


def test_replicas_per_replica(runs):
    from matplotlib.collections import LineCollection

    run = runs["D500"]
    tr = iotrace.read_trace(run)
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
    tr = iotrace.read_trace(runs["D500"])
    e = tr["energy_k"]
    want = "log" if e.min() > 0 and e.max() / e.min() > 30 else "linear"
    assert plotting.plot_replicas(runs["D500"]).axes[0].get_yscale() == want


# --- ladder ------------------------------------------------------------------------------------

def test_ladder(runs, analyses):
    from thermonet.analysis import summarise

    run = runs["D500"]
    tr = iotrace.read_trace(run)
    temps = ckpt.read_checkpoint(run).temperatures
    fig = plotting.plot_ladder(run)
    swap_ax, path_ax, dt_ax, acc_ax = fig.axes
    kept = _kept(tr["iteration"].shape[0])
    # swap acceptance over the kept iterations, at the geometric mean of each pair
    (line,) = swap_ax.get_lines()
    want = (tr["swap_accepted_k"][kept].sum(axis=0)
            / tr["swap_attempted_k"][kept].sum(axis=0))
    np.testing.assert_allclose(line.get_ydata(), want, rtol=0, atol=1e-15)
    np.testing.assert_allclose(line.get_xdata(), np.sqrt(temps[:-1] * temps[1:]), rtol=1e-15)
    np.testing.assert_allclose(line.get_ydata(), analyses["D500"].pairs["swap_acceptance"],
                               rtol=1e-15)
    # one path per replica: its slot over the iterations
    paths = path_ax.get_lines()
    assert len(paths) == K
    for r, p in enumerate(paths):
        for t in range(tr["iteration"].shape[0]):
            assert tr["replica_k"][t, int(p.get_ydata()[t])] == r
    # dt and acceptance over the kept 80%
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


def test_cli_missing_output_directory_fails_first(runs, tmp_path, monkeypatch):
    import thermonet.analysis

    def no_analysis(*args, **kwargs):
        raise AssertionError("analysed before checking --out")

    monkeypatch.setattr(thermonet.analysis, "analyse", no_analysis)
    res = _invoke("plot", runs["D50"], "--kind", "energy", "--out", tmp_path / "no" / "x.png")
    assert res.exit_code == 1
    (err,) = _error_lines(res.output)
    assert f"directory {tmp_path / 'no'} does not exist" in err


def test_cli_missing_run(tmp_path):
    res = _invoke("plot", tmp_path / "nothing", "--kind", "ladder", "--out", tmp_path / "x.png")
    assert res.exit_code == 1
    assert res.output.strip().splitlines() == [
        (f"Error: no checkpoint at {tmp_path / 'nothing'}; is this a "
         "thermonet run directory (made by `thermonet run`)?")]


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
    with pytest.raises(PlotError, match="temperature = 0.0; expected a positive number"):
        plotting.value_at_temperature(t, v, e, 0.0, method="nearest")


# --- energy, size, heat (through thermonet.analysis) ---------------------------------------------

BASELINE = {"test_energy_per_point_mean": 1.7, "test_energy_per_point_sem": 0.05,
            "test_error_mean": 0.3, "test_error_sem": 0.01, "n_kept": 3,
            "n_train": 50, "n_test": 10000, "test_kind": "official"}


@pytest.fixture(scope="session")
def analyses(runs):
    from thermonet.analysis import analyse

    return {d: analyse(r, test=True, predictive=False) for d, r in runs.items()}


def _line(ax, label):
    (line,) = [ln for ln in ax.get_lines() if ln.get_label() == label]
    return line


def test_energy_lines_are_the_analysis_table(runs, analyses, tmp_path):
    """Through the command line's code path (analyse inside, a baseline file for D50 only):
    every drawn value is the analysis table's."""
    base = tmp_path / "base_D50.json"
    base.write_text(json.dumps(BASELINE))
    fig = plotting.plot_energies([runs["D50"], runs["D500"]], baselines=[base, None])
    ax = fig.axes[0]
    for data in ("D50", "D500"):
        tab = analyses[data].table
        for part in ("train", "test"):
            line = _line(ax, f"{data} {part}")
            np.testing.assert_array_equal(line.get_xdata(), tab["temperature"])
            np.testing.assert_array_equal(line.get_ydata(), tab[f"{part}_energy_per_point"])
        # the training energy per point is <E>/n over the kept 80% of the trace
        tr = iotrace.read_trace(runs[data])
        n_train = 50 if data == "D50" else 500
        np.testing.assert_allclose(_line(ax, f"{data} train").get_ydata(),
                                   tr["energy_k"][_kept(20)].mean(axis=0) / n_train,
                                   rtol=1e-12)
    # one train and one test line per run, one error band each
    assert sum(ln.get_label().endswith(" train") for ln in ax.get_lines()) == 2
    assert sum(ln.get_label().endswith(" test") for ln in ax.get_lines()) == 2
    from matplotlib.collections import PolyCollection

    bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(bands) == 4
    # band of D50 train: y +- err exactly
    tab = analyses["D50"].table
    verts = bands[0].get_paths()[0].vertices
    upper = tab["train_energy_per_point"] + tab["train_energy_per_point_err"]
    for t, u in zip(tab["temperature"], upper, strict=True):
        assert np.any((verts[:, 0] == t) & np.isclose(verts[:, 1], u, rtol=1e-15, atol=0))
    # reference lines: ln 10 exactly, the baseline at its file's value, none for D500
    ln10 = _line(ax, "uninformed classifier (ln 10)")
    assert list(ln10.get_ydata()) == [math.log(10), math.log(10)]
    base_line = _line(ax, "D50 standard optimisation (test)")
    assert list(base_line.get_ydata()) == [1.7, 1.7]
    assert base_line.get_color() == _line(ax, "D50 train").get_color()
    assert "D500 standard optimisation (test)" not in [ln.get_label() for ln in ax.get_lines()]
    assert ax.get_xscale() == "log"
    assert ax.get_xlabel() == "temperature T"
    assert ax.get_ylabel() == (r"$\langle E(D|w)\rangle_T$ per data point "
                               "(nats per data point)")
    assert "first 20% of iterations discarded" in " ".join(ax.get_title().split())
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"D50 train", "D50 test", "D500 train", "D500 test"} <= set(legend)
    title = ax.get_title()
    assert "run_D50: M3 on D50, 20 iterations" in title
    assert "run_D500: M3 on D500, 20 iterations" in title


def test_energy_predictive(runs):
    from thermonet.analysis import analyse

    a = analyse(runs["D500"], predictive=True)
    fig = plotting.plot_energies([runs["D500"]], analyses=[a], predictive=True)
    ax = fig.axes[0]
    line = _line(ax, "D500 test, Bayesian predictive")
    np.testing.assert_array_equal(line.get_ydata(),
                                  a.table["predictive_test_energy_per_point"])
    # the predictive's energy is at most the mean of the samples' (Jensen: -log of a mean of
    # probabilities <= mean of -log probabilities, per test point)
    assert np.all(a.table["predictive_test_energy_per_point"]
                  <= a.table["test_energy_per_point"] + 1e-12)
    assert "D500 test, Bayesian predictive" not in [
        ln.get_label() for ln in plotting.plot_energies([runs["D500"]], analyses=[a]).axes[0]
        .get_lines()]


def test_energy_labels_disambiguate():
    def info(name, arch, data):
        return plotting.RunInfo(Path(name), name, arch, data, 1, np.ones(1), 1, 0.2)

    assert plotting.run_labels([info("a", "M3", "D50"), info("b", "M3", "D500")]) == [
        "D50", "D500"]
    assert plotting.run_labels([info("a", "M3", "D500"), info("b", "M3*", "D500")]) == [
        "M3 D500", "M3* D500"]
    assert plotting.run_labels([info("a", "M3", "D50"), info("b", "M3", "D50")]) == [
        "D50 (a)", "D50 (b)"]


def test_size_at_t1(runs, analyses):
    fig = plotting.plot_size([runs["D500"], runs["D50"]],
                             analyses=[analyses["D500"], analyses["D50"]])
    ax = fig.axes[0]
    (cont,) = ax.containers            # one errorbar series per architecture
    assert cont.get_label() == "M3, training data"
    series = cont.lines[0]
    np.testing.assert_array_equal(series.get_xdata(), [50, 500])   # sorted by n
    want = []
    for data in ("D50", "D500"):
        tab = analyses[data].table
        x = np.log(tab["temperature"])
        assert x[0] < 0 < x[-1]           # T = 1 is inside the ladder, not on it
        assert not np.any(x == 0)
        want.append(np.interp(0.0, x, tab["train_energy_per_point"]))
    np.testing.assert_allclose(series.get_ydata(), want, rtol=1e-14)
    assert ax.get_xscale() == "log"
    assert ax.get_xlabel() == "training-set size n (data points)"
    assert "T = 1" in ax.get_ylabel() and "nats per data point" in ax.get_ylabel()
    assert "interpolation in log T" in ax.get_title()
    assert list(_line(ax, "uninformed classifier (ln 10)").get_ydata()) == [math.log(10)] * 2
    # nearest: T = 1.392 (|ln 1.392| = 0.33 < |ln 0.6463| = 0.44)
    fig = plotting.plot_size([runs["D50"]], analyses=[analyses["D50"]], method="nearest")
    series = fig.axes[0].containers[0].lines[0]
    tab = analyses["D50"].table
    assert tab["temperature"][2] == pytest.approx(1.3925, abs=1e-4)
    assert list(series.get_ydata()) == [tab["train_energy_per_point"][2]]
    assert "nearest ladder temperature" in fig.axes[0].get_title()


def test_size_outside_ladder(runs, analyses):
    with pytest.raises(PlotError, match=r"run_D50: T = 10 is outside the ladder \[0.3, 3\]"):
        plotting.plot_size([runs["D50"]], analyses=[analyses["D50"]], temperature=10.0)


def test_heat(runs, analyses):
    fig = plotting.plot_heat([runs["D50"], runs["D500"]],
                             analyses=[analyses["D50"], analyses["D500"]])
    ax = fig.axes[0]
    lines = ax.get_lines()
    assert len(lines) == 2
    for line, data in zip(lines, ("D50", "D500"), strict=True):
        assert line.get_label() == data
        # Var(E)/T^2 over the kept iterations, by NumPy directly
        tr = iotrace.read_trace(runs[data])
        e = tr["energy_k"][_kept(20)]
        t = analyses[data].table["temperature"]
        np.testing.assert_allclose(line.get_ydata(), e.var(axis=0, ddof=1) / t**2, rtol=1e-12,
                                   atol=1e-9)
    assert ax.get_xscale() == "log"
    assert ax.get_xlabel() == "temperature T"
    assert ax.get_ylabel().startswith("heat capacity C = Var(E)/T²")
    fig = plotting.plot_heat([runs["D50"], runs["D500"]], per_point=True,
                             analyses=[analyses["D50"], analyses["D500"]])
    for line, data, n in zip(fig.axes[0].get_lines(), ("D50", "D500"), (50, 500), strict=True):
        np.testing.assert_array_equal(line.get_ydata(),
                                      analyses[data].table["heat_capacity"] / n)
    assert fig.axes[0].get_ylabel().startswith("heat capacity per data point")


@pytest.mark.parametrize("kind,suffix,extra", [
    ("energy", "png", ["--baseline", "BASE", "--baseline", "none"]),
    ("energy", "svg", ["--no-test"]),
    ("size", "png", []), ("size", "svg", ["--nearest"]),
    ("heat", "png", []), ("heat", "svg", ["--per-point"]),
])
def test_cli_writes_analysis_kinds(runs, tmp_path, kind, suffix, extra):
    base = tmp_path / "base.json"
    base.write_text(json.dumps(BASELINE))
    extra = [str(base) if a == "BASE" else a for a in extra]
    out = tmp_path / f"fig.{suffix}"
    res = _invoke("plot", runs["D50"], runs["D500"], "--kind", kind, "--out", out, *extra)
    assert res.exit_code == 0, res.output
    data = out.read_bytes()
    if suffix == "png":
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
    else:
        text = data.decode()
        assert "<svg" in text
        if kind == "energy":   # --no-test: no test lines in the legend
            assert "D50 train" in text and "D50 test" not in text


def test_plot_dispatch_stacks_single_run_kinds(runs, tmp_path):
    from matplotlib.collections import LineCollection

    fig = plotting.plot("replicas", [runs["D50"], runs["D500"]], tmp_path / "r.png",
                        follow="replica")
    main_axes = [ax for ax in fig.axes if ax.get_xlabel() == "iteration"]
    assert len(main_axes) == 2
    for ax, data in zip(main_axes, ("D50", "D500"), strict=True):
        assert sum(isinstance(c, LineCollection) for c in ax.collections) == K
        assert f"run_{data}: M3 on {data}" in ax.get_title()
    fig = plotting.plot("ladder", [runs["D50"], runs["D500"]])
    assert len(fig.axes) == 8
    assert plotting.save(fig, tmp_path / "l.pdf").read_bytes()[:5] == b"%PDF-"
    with pytest.raises(PlotError, match="directory .*nowhere does not exist"):
        plotting.save(fig, tmp_path / "nowhere" / "l.png")
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(PlotError, match="unknown plot kind 'fig3'; expected one of replicas, "
                                        "energy, size, ladder, heat"):
        plotting.plot("fig3", [runs["D50"]])


def test_cli_baseline_only_for_energy(runs, tmp_path):
    res = _invoke("plot", runs["D50"], "--kind", "size", "--baseline", tmp_path / "b.json",
                  "--out", tmp_path / "x.png")
    assert res.exit_code == 1
    (err,) = _error_lines(res.output)
    assert "--baseline applies to --kind energy only" in err


#: the tiny run on one rung at T = 1, one chain, 30 iterations
SINGLE = variant("tiny", replace={
    "n_iterations = 12\ncheckpoint_every = 3": "n_iterations = 30\ncheckpoint_every = 10",
    "adapt_every = 5\n": "",                  # adapting in warm-up only, the default
    "n_temperatures = 4\nt_min = 0.5\nt_max = 8.0": "temperatures = [1.0]",
}, run="chains = 1")


@pytest.fixture(scope="session")
def single_chain(tmp_path_factory) -> Path:
    """A data-free single-chain HMC run (K = 1) on a Gaussian mixture."""
    from thermonet.runner import Run, detach_log

    root = tmp_path_factory.mktemp("plot_single")
    (root / "single.toml").write_text(SINGLE)
    try:
        Run.create(cfgmod.load(root / "single.toml"), root / "single").run(quiet=True)
    finally:
        detach_log()
    return root / "single"


def test_single_chain_without_data(single_chain, tmp_path):
    tr = iotrace.read_trace(single_chain)
    (line,) = plotting.plot_replicas(single_chain).axes[0].get_lines()
    np.testing.assert_array_equal(line.get_ydata(), tr["energy_k"][:, 0])
    fig = plotting.plot_ladder(single_chain)
    assert not fig.axes[0].get_lines()                  # no pairs, no swaps
    np.testing.assert_array_equal(fig.axes[1].get_lines()[0].get_ydata(), np.zeros(30))
    (heat,) = plotting.plot_heat(single_chain).axes[0].get_lines()
    e = tr["energy_k"][_kept(30), 0]
    np.testing.assert_allclose(heat.get_ydata(), [e.var(ddof=1)], rtol=1e-12)   # T = 1
    for kind in ("replicas", "ladder", "heat"):
        res = _invoke("plot", single_chain, "--kind", kind, "--out", tmp_path / f"{kind}.png")
        assert res.exit_code == 0, res.output
    res = _invoke("plot", single_chain, "--kind", "energy", "--out", tmp_path / "e.png")
    assert res.exit_code == 1
    (err,) = _error_lines(res.output)
    assert "single has no energy per data point (data set 'none'" in err
    assert not (tmp_path / "e.png").exists()


# --- stored analyses (thermonet analyse DIR writes DIR/analysis.h5) --------------------------

@pytest.fixture
def analysed_copy(runs, analyses, tmp_path):
    """A copy of the D500 run with its analysis (discard 0.25) saved where `thermonet analyse`
    puts it."""
    import shutil

    from thermonet.analysis import analyse

    run = tmp_path / "run_D500"
    shutil.copytree(runs["D500"], run)
    a = analyse(run, discard=0.25, test=True, predictive=False)
    a.to_hdf5(run / plotting.ANALYSIS_FILE)
    return run, a


def test_cli_from_analysis_does_not_analyse_again(analysed_copy, tmp_path, monkeypatch):
    import thermonet.analysis

    run, a = analysed_copy

    def no_analysis(*args, **kwargs):
        raise AssertionError("analysed again")

    monkeypatch.setattr(thermonet.analysis, "analyse", no_analysis)
    fig = plotting.plot_energies(
        [run], analyses=[plotting.stored_analysis(run, test=True)])
    ax = fig.axes[0]
    for part in ("train", "test"):
        np.testing.assert_array_equal(_line(ax, f"D500 {part}").get_ydata(),
                                      a.table[f"{part}_energy_per_point"])
    assert "first 25% of iterations discarded" in " ".join(ax.get_title().split())
    for kind in ("energy", "size", "heat"):
        extra = ["--nearest"] if kind == "size" else ["--discard", "0.25"]
        res = _invoke("plot", run, "--kind", kind, "--from-analysis", *extra,
                      "--out", tmp_path / f"{kind}.svg")
        assert res.exit_code == 0, res.output
    # what the stored analysis lacks, or a different burn-in, is refused in one line
    for extra, msg in ((["--predictive"], "no Bayesian-predictive columns"),
                       (["--discard", "0.5"], "it discarded 0.25, not 0.5")):
        res = _invoke("plot", run, "--kind", "energy", "--from-analysis", *extra,
                      "--out", tmp_path / "x.png")
        assert res.exit_code == 1
        (err,) = _error_lines(res.output)
        assert msg in err and f"run `thermonet analyse {run}`" in err


def test_stored_analysis_must_be_current(analysed_copy, runs, tmp_path):
    import shutil

    import h5py

    run, _ = analysed_copy
    with h5py.File(run / plotting.ANALYSIS_FILE, "r+") as fh:
        meta = json.loads(fh.attrs["meta"])
        meta["iterations"] = 10
        fh.attrs["meta"] = json.dumps(meta)
    with pytest.raises(PlotError, match="it covers 10 iterations; the run has 20"):
        plotting.stored_analysis(run)
    other = tmp_path / "other"
    shutil.copytree(runs["D50"], other)
    shutil.copy(run / plotting.ANALYSIS_FILE, other / plotting.ANALYSIS_FILE)
    with pytest.raises(PlotError, match="it is of another run"):
        plotting.stored_analysis(other)
    with pytest.raises(PlotError, match=r"no analysis file at .*; make one with"):
        plotting.stored_analysis(runs["D50"], tmp_path / "nothing.h5")
    res = _invoke("plot", run, "--kind", "ladder", "--from-analysis", "--out", tmp_path / "l.png")
    assert res.exit_code == 1 and "--from-analysis applies to --kind energy" in res.output
