"""What a newcomer meets first (issue 37, item 5): the test-set note, `info --explain`,
unknown commands and US spellings, a regression file's widths, the calibration's load and
`plugins --check`'s per-plugin result."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
from click.testing import CliRunner

from tests.runner.test_runner import GAUSS
from thermonet import config as cfgmod
from thermonet.cli import ALIASES, COMMANDS, main, nearest_command
from thermonet.cli.run import TERMS
from thermonet.data import load_data, official_fallback_note
from thermonet.errors import ConfigError
from thermonet.kernels.matmul import calibration

# --- (a) the test-set note: one short line, only from the command that fixes a test set ------


@pytest.fixture
def no_mnist(tmp_path, monkeypatch):
    monkeypatch.setenv("THERMONET_MNIST_DIR", str(tmp_path / "absent"))


def test_loading_without_full_mnist_logs_nothing_at_info(no_mnist, caplog):
    with caplog.at_level(logging.INFO):
        split = load_data("D50")
    assert split.test_kind == "official" and len(split.test) == 10_000
    assert [r.message for r in caplog.records if r.levelno >= logging.INFO] == []


def test_the_note_is_one_short_line_only_when_auto_falls_back(no_mnist, tmp_path,
                                                              monkeypatch):
    note = official_fallback_note("D50")
    assert note.startswith("test set: the official 10,000 MNIST images")
    assert "\n" not in note and len(note) <= 120 and "thermonet data fetch" in note
    for name, test in (("D50", "official"), ("robot-arm", "auto"), ("none", "auto")):
        assert official_fallback_note(name, test) == ""
    found = tmp_path / "mnist"                 # the four files present (not verified here)
    found.mkdir()
    for stem in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                 "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        (found / stem).write_bytes(b"")
    monkeypatch.setenv("THERMONET_MNIST_DIR", str(found))
    assert official_fallback_note("D50") == ""


# --- (b) info --explain -------------------------------------------------------------------


def test_info_explain_defines_each_term_in_one_sentence(tmp_path):
    cfg = tmp_path / "g.toml"
    cfg.write_text(GAUSS)
    out = tmp_path / "r"
    assert CliRunner().invoke(main, ["-q", "run", str(cfg), "--out", str(out)]).exit_code == 0
    plain = CliRunner().invoke(main, ["info", str(out)])
    res = CliRunner().invoke(main, ["info", str(out), "--explain"])
    assert res.exit_code == 0, res.output
    assert res.output.startswith(plain.output)          # the summary, then the terms
    lines = res.output[len(plain.output):].splitlines()
    assert lines[:2] == ["", "terms:"]
    defined = {ln.split(":", 1)[0].strip(): ln.split(":", 1)[1] for ln in lines[2:]}
    assert list(defined) == list(TERMS)
    for term in ("restarts", "ELE", "local-exploration efficiency", "replica flow",
                 "barrier Lambda"):
        sentence = defined[term].strip()
        assert sentence.endswith(".") and sentence.count(". ") <= 1, sentence  # "et al. "
    js = json.loads(CliRunner().invoke(main, ["info", str(out), "--json", "--explain"]).stdout)
    assert js["terms"] == TERMS
    assert "terms" not in json.loads(CliRunner().invoke(main, ["info", str(out),
                                                            "--json"]).stdout)


# --- (c) unknown commands and US spellings -------------------------------------------------


@pytest.mark.parametrize(("typed", "meant"), [("summary", "info"), ("sample", "run"),
                                              ("anlyse", "analyse"), ("minimse", "minimise"),
                                              ("infos", "info"), ("calibration", "calibrate")])
def test_an_unknown_command_suggests_the_nearest(typed, meant):
    res = CliRunner().invoke(main, [typed])
    assert res.exit_code == 2
    assert f"No such command {typed!r}. Did you mean `thermonet {meant}`?" in res.output
    assert nearest_command(typed, sorted(COMMANDS)) == meant


def test_nothing_close_gets_no_suggestion():
    assert nearest_command("xyzzy", sorted(COMMANDS)) is None
    res = CliRunner().invoke(main, ["xyzzy"])
    assert res.exit_code == 2 and "Did you mean" not in res.output


@pytest.mark.parametrize(("us", "uk"), sorted(ALIASES.items()))
def test_us_spellings_run_the_command_and_are_not_listed(us, uk):
    assert uk in COMMANDS
    res = CliRunner().invoke(main, [us, "--help"])
    assert res.exit_code == 0, res.output
    ref = CliRunner().invoke(main, [uk, "--help"])
    assert res.output.split("\n", 1)[1] == ref.output.split("\n", 1)[1]   # after "Usage:"
    listing = CliRunner().invoke(main, ["--help"]).output
    assert f"  {uk} " in listing and f"  {us} " not in listing


# --- (d) a regression file's widths come from its columns ---------------------------------

_REGRESSION = """
[run]
n_iterations = 2
[data]
path = "{path}"
outputs = ["y"]
[architecture]
name = "mlp-regression"
hidden = [3]
{extra}
[init]
minimise = false
burn_in = [1]
[sampler]
name = "hmc"
n_leapfrog = 2
[ladder]
n_temperatures = 1
t_min = 1.0
t_max = 1.0
"""


def _one_output_file(tmp_path, extra=""):
    x = np.random.default_rng(4).uniform(-1, 1, (24, 3))
    y = np.sin(x[:, 0]) + x[:, 1] * x[:, 2]
    path = tmp_path / "one.csv"
    rows = "\n".join(",".join(f"{v:.6f}" for v in (*xi, yi)) for xi, yi in zip(x, y,
                                                                              strict=True))
    path.write_text("a,b,c,y\n" + rows + "\n")
    cfg = tmp_path / "one.toml"
    cfg.write_text(_REGRESSION.format(path=path, extra=extra))
    return cfg


def test_one_output_column_sets_the_widths(tmp_path):
    cfg = cfgmod.load(_one_output_file(tmp_path))
    arch = cfg["architecture"]
    assert (arch["n_inputs"], arch["n_outputs"]) == (3, 1)
    assert cfg.sources["architecture.n_inputs"] == "data file"
    assert cfg["data"]["inputs"] == ["a", "b", "c"]
    res = CliRunner().invoke(main, ["-q", "run", str(_one_output_file(tmp_path)), "--out",
                                    str(tmp_path / "r")])
    assert res.exit_code == 0, res.output


def test_the_widths_of_an_npz_file_are_its_arrays_widths(tmp_path):
    # an NPZ or HDF5 file names arrays, not columns: one 2-D "x" of 3 inputs
    x = np.random.default_rng(5).uniform(-1, 1, (20, 3))
    np.savez(tmp_path / "d.npz", x=x, y=(x[:, :1] ** 2))
    cfg = cfgmod.resolve({"data": {"path": str(tmp_path / "d.npz"), "inputs": ["x"],
                                   "outputs": ["y"]},
                          "architecture": {"name": "mlp-regression"}})
    assert (cfg["architecture"]["n_inputs"], cfg["architecture"]["n_outputs"]) == (3, 1)


def test_widths_that_agree_are_kept_and_a_conflict_is_one_line(tmp_path):
    cfg = cfgmod.load(_one_output_file(tmp_path, "n_inputs = 3\nn_outputs = 1"))
    assert cfg.sources["architecture.n_outputs"] == "config"
    with pytest.raises(ConfigError) as err:
        cfgmod.load(_one_output_file(tmp_path, "n_outputs = 2"))
    msg = str(err.value)
    assert "\n" not in msg
    assert "n_outputs = 2" in msg and "gives 1 output (data.outputs = ['y'])" in msg
    assert "remove n_outputs" in msg


# --- (e) the calibration records its load; one from a busy machine is measured again -------


@pytest.fixture
def measured(tmp_path, monkeypatch):
    """An empty cache, a measurement that counts its calls and a load set by the test."""
    monkeypatch.setenv("THERMONET_CACHE_DIR", str(tmp_path / "cache"))
    calls: list[int] = []
    load = {"loadavg_1min": 0.0, "n_cpus": 2}

    def fake_measure(dgemms, budget_s=calibration.BUDGET_S):
        calls.append(1)
        return {"numpy": {"us_per_block": 100.0, "gflops": 80.0, "rounds": 5}}

    monkeypatch.setattr(calibration, "measure", fake_measure)
    monkeypatch.setattr(calibration, "machine_load", lambda: dict(load))
    return calls, load


def _cal():
    return calibration.calibrate(("numpy",), lambda: {"numpy": None})


def test_a_busy_measurement_is_repeated_when_the_machine_is_quiet(measured):
    calls, load = measured
    load["loadavg_1min"] = 3.0                     # 1.5 per CPU: busy
    first = _cal()
    assert first["how"] == "measured" and first["load"] == {"loadavg_1min": 3.0, "n_cpus": 2}
    assert calibration.busy(first["load"])
    load["loadavg_1min"] = 3.5                     # still busy: measuring again cannot help
    assert _cal()["how"] == "cached" and len(calls) == 1
    load["loadavg_1min"] = 1.5                     # quieter, but busy: not measured over again
    assert _cal()["how"] == "cached" and len(calls) == 1
    load["loadavg_1min"] = 0.4                     # quiet: measured again, and kept
    again = _cal()
    assert again["how"] == "measured" and len(calls) == 2
    assert not calibration.busy(again["load"])
    load["loadavg_1min"] = 4.0                     # a quiet measurement is trusted
    assert _cal()["how"] == "cached" and len(calls) == 2


def test_a_record_without_its_load_counts_as_busy(measured):
    calls, load = measured
    _cal()
    path = f"{calibration.cache_dir()}/{calibration.CACHE_FILE}"
    entries = calibration.read_cache(path)
    for rec in entries.values():
        del rec["load"]
    calibration.write_cache(path, entries)
    assert calibration.busy(None) and calibration.describe_load(None) == "load unknown"
    assert _cal()["how"] == "measured" and len(calls) == 2


def test_busy_is_more_than_half_a_process_per_cpu():
    assert not calibration.busy({"loadavg_1min": 1.0, "n_cpus": 2})
    assert calibration.busy({"loadavg_1min": 1.01, "n_cpus": 2})
    assert calibration.describe_load({"loadavg_1min": 1.5, "n_cpus": 4}) == "load 1.50 on 4 CPUs"


def test_calibrate_says_when_and_under_what_load(measured, monkeypatch):
    calls, load = measured
    monkeypatch.delenv("THERMONET_BLAS", raising=False)
    monkeypatch.setattr("thermonet.kernels.matmul.backend.load_mkl", lambda: (None, "not here"))
    monkeypatch.setattr(calibration, "measure_own",
                        lambda budget_s=calibration.BUDGET_S: {"us_per_block": 50.0,
                                                               "gflops": 160.0, "rounds": 5})
    load["loadavg_1min"] = 2.5
    text = CliRunner().invoke(main, ["calibrate"]).output
    assert "measured now (" in text and ", load 2.50 on 2 CPUs), cached in" in text
    assert "the machine was busy" in text
    load["loadavg_1min"] = 3.0
    text = CliRunner().invoke(main, ["calibrate"]).output
    assert "measured earlier (" in text and "load 2.50 on 2 CPUs" in text
    rec = json.loads(CliRunner().invoke(main, ["calibrate", "--json"]).stdout)
    assert rec["load"] == {"loadavg_1min": 2.5, "n_cpus": 2}


# --- (f) plugins --check: a result per plugin ----------------------------------------------


def test_plugins_check_gives_each_plugin_its_result():
    res = CliRunner().invoke(main, ["plugins", "--role", "integrator", "--check"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    names = [ln.split()[0] for ln in lines if ln.startswith("  ") and not ln.startswith("    ")]
    assert {"simpson", "trapezoid"} <= set(names)
    results = [ln.strip() for ln in lines if ln.startswith("      ")]
    assert results == ["loaded; conformance checks passed"] * len(names)
    assert lines[-1] == f"{len(names)} plugins checked: {len(names)} passed, 0 broken"
    plain = CliRunner().invoke(main, ["plugins", "--role", "integrator"]).output
    assert "conformance" not in plain and "checked" not in plain
    js = json.loads(CliRunner().invoke(main, ["plugins", "--role", "integrator", "--check",
                                              "--json"]).stdout)
    assert {row["result"] for row in js["integrator"]} == {"loaded; conformance checks passed"}
