"""The runner: configs, run directories, bit-exact resume, crash safety, CLI commands."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest

from tests.runs import TINY, assert_same, invoke, tree, variant
from thermonet import config as cfgmod
from thermonet.analysis import round_trips
from thermonet.errors import CheckpointError, CheckpointMismatchError, ConfigError, ThermonetError
from thermonet.io import checkpoint as ckpt
from thermonet.io import trace as iotrace
from thermonet.io.atomic import TEMP_SUFFIX
from thermonet.runner import Run, detach_log

GAUSS = TINY

#: GAUSS in the form used before [ladder] existed
GAUSS_LEGACY = GAUSS.split("[sampler]")[0] + """[sampler]
name = "rehmc"
n_temperatures = 4
t_min = 0.5
t_max = 8.0
n_trajectories = 2
[sampler.inner]
n_leapfrog = 5
step_size = 0.3
"""

M3_D50 = variant("m3", run="""
    seed = 2
    n_iterations = 6
    checkpoint_every = 2
    sample_every = 3
""", data='name = "D50"', ladder="n_temperatures = 3")


@pytest.fixture
def gauss_cfg(tmp_path):
    p = tmp_path / "gauss.toml"
    p.write_text(GAUSS)
    return p


# --- configs -----------------------------------------------------------------------------------

@pytest.mark.parametrize("edit,match", [
    ("[sampler]\nname = 'hmc'\nsetp_size = 1\n", "unknown key 'setp_size' in \\[sampler\\]"),
    ("[ladder]\nt_mni = 1\n", "did you mean 't_min'"),
    ("[run]\nn_iteratons = 5\n", "did you mean 'n_iterations'"),
    ("[ladder]\nn_temperatures = 4\nt_min = 2.0\nt_max = 1.0\n",
     "t_max = 1.0 is below t_min = 2.0"),
    ("[ladder]\nt_min = -1.0\n", "ladder.t_min = -1.0 is out of range"),
    ("[ladder]\ntemperatures = [1.0, 0.5]\n", "strictly ascending"),
    ("[ladder]\ntemperatures = [0.5, 1.0]\nt_min = 0.1\n", "ladder.t_min = 0.1 disagrees"),
    ("[ladder]\nswap_scheme = 'all'\n", "swap_scheme = 'all' is out of range"),
    ("[sampler]\nstep_size = 0.0\n", "step_size = 0.0"),
    ("[sampler]\naccept_window = [0.5, 1.2]\n", "0 < low < high < 1"),
    ("[sampler]\nname = 'hmc'\ntemperature = 2.0\n[ladder]\nt_min = 1.0\n",
     "unknown key 'temperature' in \\[sampler\\]"),
    ("[run]\nn_iterations = 'many'\n", "run.n_iterations = 'many' has the wrong type"),
    ("[ladder]\nn_temperatures = 2.5\n", "n_temperatures = 2.5"),
    ("[samplr]\nname = 'hmc'\n", "unknown section \\[samplr\\]; did you mean 'sampler'"),
    ("[sampler]\nname = 'nuts'\n", "no sampler named 'nuts'"),
    ("[run]\nadapt_factor = 1.5\n", "adapt_factor = 1.5 is out of range"),
])
def test_config_errors_name_key_value_and_allowed(tmp_path, edit, match):
    p = tmp_path / "c.toml"
    p.write_text(edit)
    with pytest.raises(ThermonetError, match=match):     # ConfigError, or PluginError
        cfgmod.load(p)


def test_resolved_config_round_trips_with_sources(gauss_cfg):
    cfg = cfgmod.load(gauss_cfg, cfgmod.parse_set(["ladder.t_max=16", "run.workers=2"]),
                      {"run.seed": 9})
    assert cfg["ladder"]["t_max"] == 16.0 and cfg["run"]["seed"] == 9
    assert cfg.sources["ladder.t_max"] == "set"
    assert cfg.sources["run.seed"] == "commandline"
    assert cfg.sources["ladder.t_min"] == "config"
    assert cfg.sources["sampler.wall"] == "default"
    text = cfg.to_toml()
    assert "t_max = 16.0  # set" in text and 'wall = "endpoint"  # default' in text
    import tomllib

    again = cfgmod.resolve(tomllib.loads(text))
    assert cfgmod.diff(cfg, again) == []


def test_set_parses_toml_scalars():
    got = cfgmod.parse_set(["a.b=3", "a.c=0.5", "a.d=true", "a.e=word", "a.f=[1, 2]"])
    assert got == {"a.b": 3, "a.c": 0.5, "a.d": True, "a.e": "word", "a.f": [1, 2]}
    with pytest.raises(ConfigError, match="expected section.key=value"):
        cfgmod.parse_set(["novalue"])


# --- bit-exact resume ---------------------------------------------------------------------------

def test_resume_is_bitwise_identical_to_a_straight_run(gauss_cfg, tmp_path):
    straight = tmp_path / "straight"
    Run.create(cfgmod.load(gauss_cfg), straight).run(quiet=True)
    half = tmp_path / "half"
    Run.create(cfgmod.load(gauss_cfg, {"run.n_iterations": 6}), half).run(quiet=True)
    detach_log()
    Run.open(half, n_iterations=12).run(quiet=True)
    detach_log()
    assert_same(tree(straight), tree(half))
    assert "n_iterations = 12  # commandline" in (half / "config.toml").read_text()
    Run.open(half).run(quiet=True)          # the rewritten config.toml resumes cleanly
    detach_log()


def test_resume_with_other_worker_count_is_identical(gauss_cfg, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    Run.create(cfgmod.load(gauss_cfg), a).run(quiet=True)
    Run.create(cfgmod.load(gauss_cfg, {"run.n_iterations": 5}), b).run(quiet=True)
    Run.open(b, n_iterations=12, workers=2).run(quiet=True)
    detach_log()
    assert_same(tree(a), tree(b))


def test_m3_on_d50_resume_bit_for_bit(tmp_path):
    p = tmp_path / "m3.toml"
    p.write_text(M3_D50)
    a, b = tmp_path / "a", tmp_path / "b"
    Run.create(cfgmod.load(p), a).run(quiet=True)
    Run.create(cfgmod.load(p, {"run.n_iterations": 3}), b).run(quiet=True)
    Run.open(b, n_iterations=6).run(quiet=True)
    detach_log()
    ta, tb = tree(a), tree(b)
    assert_same(ta, tb)
    assert ta["trace"]["samples_theta"].shape == (2, 3, 13970)


def _run_cli_subprocess(args, env_extra=None, **kw):
    env = {**os.environ, **(env_extra or {})}
    return subprocess.Popen([sys.executable, "-m", "thermonet.cli", *map(str, args)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


@pytest.mark.parametrize("crash", [
    "before-replace:it:3",          # killed while a trace segment is only a temporary file
    "before-replace:checkpoint:3",  # killed after the segment, before the checkpoint replace
])
def test_kill_during_write_then_resume_is_exact(gauss_cfg, tmp_path, crash):
    straight = tmp_path / "straight"
    Run.create(cfgmod.load(gauss_cfg), straight).run(quiet=True)
    detach_log()
    crashed = tmp_path / "crashed"
    proc = _run_cli_subprocess(["-q", "run", gauss_cfg, "--out", crashed],
                               {"THERMONET_TEST_CRASH": crash})
    proc.communicate(timeout=300)
    assert proc.returncode == 137                       # died as planned, mid-write
    assert (list(crashed.glob("*" + TEMP_SUFFIX))
            or list((crashed / "trace").glob("*" + TEMP_SUFFIX)))
    done = ckpt.read_checkpoint(crashed).iteration
    assert 0 <= done < 12
    res = invoke("-q", "resume", crashed)
    assert res.exit_code == 0, res.output
    assert_same(tree(straight), tree(crashed))
    assert not list(crashed.rglob("*" + TEMP_SUFFIX))


@pytest.mark.slow
def test_sigkill_at_random_moments_then_resume_is_exact(gauss_cfg, tmp_path):
    """A real kill -9 of `thermonet run` at arbitrary moments, then resume."""
    straight = tmp_path / "straight"
    cfg_long = tmp_path / "long.toml"
    cfg_long.write_text(GAUSS.replace("n_iterations = 12", "n_iterations = 300")
                        .replace("checkpoint_every = 3", "checkpoint_every = 1"))
    Run.create(cfgmod.load(cfg_long), straight).run(quiet=True)
    detach_log()
    victim = tmp_path / "victim"
    rng = np.random.default_rng(0)
    killed = 0
    for attempt in range(3):
        args = (["-q", "run", cfg_long, "--out", victim] if attempt == 0 else
                ["-q", "resume", victim])
        proc = _run_cli_subprocess(args)
        t0 = time.monotonic()
        while not (victim / ckpt.CHECKPOINT).exists() and time.monotonic() - t0 < 120:
            time.sleep(0.01)
        time.sleep(float(rng.uniform(0.05, 0.4)))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            killed += 1
        proc.communicate(timeout=120)
    assert killed >= 1
    res = invoke("-q", "resume", victim)
    assert res.exit_code == 0, res.output
    assert_same(tree(straight), tree(victim))


# --- refusing what does not fit ------------------------------------------------------------------

def test_run_refuses_existing_run_dir_and_overwrite_works(gauss_cfg, tmp_path):
    out = tmp_path / "r"
    assert invoke("-q", "run", gauss_cfg, "--out", out).exit_code == 0
    res = invoke("-q", "run", gauss_cfg, "--out", out)
    assert res.exit_code == 1 and "already holds a run (iteration 12 of 12)" in res.output
    assert "thermonet resume" in res.output
    (out / "notes.txt").write_text("mine")
    assert invoke("-q", "run", gauss_cfg, "--out", out, "--overwrite").exit_code == 0
    assert (out / "notes.txt").read_text() == "mine"        # only thermonet's files replaced


def test_resume_refuses_a_changed_config(gauss_cfg, tmp_path):
    out = tmp_path / "r"
    Run.create(cfgmod.load(gauss_cfg, {"run.n_iterations": 3}), out).run(quiet=True)
    detach_log()
    text = (out / "config.toml").read_text()
    (out / "config.toml").write_text(text.replace("t_max = 8.0", "t_max = 9.0"))
    res = invoke("resume", out)
    assert res.exit_code == 1
    assert "ladder.t_max: 8.0 -> 9.0" in res.output
    # extending the run is allowed
    (out / "config.toml").write_text(text.replace("n_iterations = 3", "n_iterations = 4"))
    res = invoke("-q", "resume", out)
    assert res.exit_code == 0, res.output
    assert ckpt.read_checkpoint(out).iteration == 4


def test_resume_refuses_changed_data(tmp_path):
    """The stored energies must be reproduced exactly by the data and architecture."""
    p = tmp_path / "m3.toml"
    p.write_text(M3_D50.replace("n_iterations = 6", "n_iterations = 2"))
    out = tmp_path / "r"
    Run.create(cfgmod.load(p), out).run(quiet=True)
    detach_log()
    # a consistent (checksummed) checkpoint whose energy the data no longer reproduce; an
    # edit in place is refused earlier, by the checksum (tests/io/test_integrity.py)
    ck = ckpt.read_checkpoint(out)
    ck.slots["energy"][0] += 1.0
    ckpt.write_checkpoint(out, ck)
    with pytest.raises(CheckpointMismatchError, match="E\\(theta\\) of slot 0"):
        Run.open(out)


@pytest.mark.parametrize("damage,match", [
    (lambda p: p.write_bytes(p.read_bytes()[:300]), "not a readable HDF5 file"),
    (lambda p: p.write_bytes(b"garbage" * 10), "not a readable HDF5 file"),
    (lambda p: h5py.File(p, "w").close(), "not a thermonet checkpoint"),
])
def test_corrupt_or_foreign_checkpoints_get_clear_errors(gauss_cfg, tmp_path, damage, match):
    out = tmp_path / "r"
    Run.create(cfgmod.load(gauss_cfg, {"run.n_iterations": 3}), out).run(quiet=True)
    detach_log()
    damage(out / "checkpoint.h5")
    res = invoke("resume", out)
    assert res.exit_code == 1 and match in res.output
    assert len(res.output.strip().splitlines()) == 1
    assert len(iotrace.list_segments(out)) == 1                  # nothing saved was removed


def test_newer_format_version_is_refused(gauss_cfg, tmp_path):
    out = tmp_path / "r"
    Run.create(cfgmod.load(gauss_cfg, {"run.n_iterations": 3}), out).run(quiet=True)
    detach_log()
    with h5py.File(out / "checkpoint.h5", "r+") as fh:
        fh.attrs["format_version"] = 99
    with pytest.raises(CheckpointError, match="format version 99; this thermonet"):
        ckpt.read_checkpoint(out)


# --- info -----------------------------------------------------------------------------------------

def test_info_json_matches_the_trace(gauss_cfg, tmp_path):
    out = tmp_path / "r"
    assert invoke("-q", "run", gauss_cfg, "--out", out).exit_code == 0
    res = invoke("info", out, "--json")
    assert res.exit_code == 0, res.output
    s = json.loads(res.stdout)
    for key in ("iterations", "temperatures", "acceptance", "dt", "mean_energy",
                "swap_acceptance", "round_trips"):
        assert key in s
    tr = iotrace.read_trace(out)
    assert s["iterations"] == 12 and len(s["temperatures"]) == 4
    start = int(0.2 * 12)
    np.testing.assert_allclose(s["mean_energy"], tr["energy_k"][start:].mean(0))
    np.testing.assert_allclose(s["acceptance"], tr["n_accepted_k"][start:].sum(0) / (10 * 2))
    np.testing.assert_allclose(s["swap_acceptance"], tr["swap_accepted_k"].sum(0)
                               / tr["swap_attempted_k"].sum(0))
    assert np.all(np.asarray(s["acceptance"]) <= 1.0)
    text = invoke("info", out)
    assert text.exit_code == 0 and "round trips" in text.output


def test_round_trip_counting():
    # three slots; replica 0 goes 0 -> 2 -> 0 (one trip), then -> 2 (not complete)
    path = [0, 1, 2, 1, 0, 1, 2]
    rows = []
    for p in path:
        others = [r for r in (1, 2)]
        row = [None] * 3
        row[p] = 0
        free = [s for s in range(3) if s != p]
        row[free[0]], row[free[1]] = others
        rows.append(row)
    assert round_trips(np.array(rows)) == 1
    assert round_trips(np.zeros((5, 1), dtype=int)) == 0


class _Stream:
    def __init__(self, tty):
        self.tty, self.text = tty, ""

    def isatty(self):
        return self.tty

    def write(self, s):
        self.text += s

    def flush(self):
        pass


def test_progress_bar_on_a_terminal_log_lines_otherwise_nothing_when_quiet(caplog):
    from thermonet.cli.options import RunProgress as ProgressLine
    from thermonet.runner import RunProgress

    tty = _Stream(True)
    p = ProgressLine(stream=tty)
    p(RunProgress(5, 10, 0, 0.61, 0.3, 12.5))
    p(RunProgress(10, 10, 0, 0.62, 0.3, 12.0))
    assert "\r[" in tty.text and "ETA" in tty.text and "acc 0.62" in tty.text
    assert "swap 0.30" in tty.text and tty.text.endswith("\n")
    pipe = _Stream(False)
    with caplog.at_level("INFO", logger="thermonet.run"):
        p = ProgressLine(stream=pipe, interval=0.0)
        p(RunProgress(3, 10, 0, 0.5, 0.2, 1.0))
    assert pipe.text == ""
    assert any("iteration 3/10" in r.message and "ETA" in r.message for r in caplog.records)
    quiet = _Stream(True)
    caplog.clear()
    ProgressLine(quiet=True, stream=quiet)(RunProgress(10, 10, 0, 0.5, 0.2, 1.0))
    assert quiet.text == "" and not caplog.records
    # no swap attempted (one rung, or chains): no swap rate, rather than a misleading 0.00
    none = _Stream(True)
    ProgressLine(stream=none)(RunProgress(10, 10, 0, 0.5, float("nan"), 1.0))
    assert "acc 0.50  E(T_min)" in none.text and "swap" not in none.text


def test_progress_rate_is_timed_from_the_first_report_not_from_the_start(caplog):
    """Minutes of compilation and warm-up before iteration 1 must not enter the rate: the
    quickstart once printed 0.01 it/s and an ETA of nine hours at its first iteration."""
    from thermonet.cli.options import RunProgress as ProgressLine
    from thermonet.runner import RunProgress

    clock = iter([300.0, 310.0, 320.0])          # the first report comes 300 s in
    pipe = _Stream(False)
    with caplog.at_level("INFO", logger="thermonet.run"):
        p = ProgressLine(stream=pipe, interval=0.0, now=lambda: next(clock))
        p(RunProgress(1, 101, 0, 0.6, 0.3, 1.0))
        p(RunProgress(21, 101, 0, 0.6, 0.3, 1.0))     # 20 iterations in 10 s
        p(RunProgress(61, 101, 0, 0.6, 0.3, 1.0))     # 60 in 20 s
    lines = [r.message for r in caplog.records]
    assert "-- it/s  ETA --" in lines[0]
    assert "2.00 it/s  ETA 00:00:40" in lines[1]
    assert "3.00 it/s  ETA 00:00:13" in lines[2]


def test_the_runner_stamps_the_blas_backend_into_the_checkpoint(gauss_cfg, tmp_path):
    from thermonet.kernels.matmul import blas

    Run.create(cfgmod.load(gauss_cfg, {"run.n_iterations": 1}), tmp_path / "r").run()
    detach_log()
    assert ckpt.read_checkpoint(tmp_path / "r").blas_backend == blas.BACKEND


def test_run_reports_progress_through_its_callback(gauss_cfg, tmp_path):
    reports = []
    Run.create(cfgmod.load(gauss_cfg, {"run.n_iterations": 4}), tmp_path / "r").run(
        reports.append)
    detach_log()
    assert [r.iteration for r in reports] == [1, 2, 3, 4]
    assert all(r.total == 4 and r.start == 0 for r in reports)
    assert all(0 <= r.acceptance <= 1 and 0 <= r.swap_acceptance <= 1 for r in reports)


# --- configurations written before [ladder] -------------------------------------------------------

def test_legacy_rehmc_config_is_translated_with_a_warning(tmp_path):
    old, new = tmp_path / "old.toml", tmp_path / "new.toml"
    old.write_text(GAUSS_LEGACY)
    new.write_text(GAUSS)
    with pytest.warns(DeprecationWarning, match=r"\[ladder\] n_temperatures = 4, t_min = 0.5"):
        translated = cfgmod.load(old)
    expected = cfgmod.load(new)
    assert cfgmod.diff(translated, expected) == []
    assert translated.ladder == expected.ladder
    assert translated.configs["sampler"] == expected.configs["sampler"]
    assert "rehmc" not in translated.to_toml() and "[ladder]" in translated.to_toml()
    # the old defaults of the rehmc ladder, not today's one-rung default
    p = tmp_path / "bare.toml"
    p.write_text("[sampler]\nname = 'rehmc'\n[sampler.inner]\nn_leapfrog = 3\n")
    with pytest.warns(DeprecationWarning, match='name = "hmc", n_leapfrog = 3'):
        cfg = cfgmod.load(p)
    assert (cfg["ladder"]["n_temperatures"], cfg["ladder"]["t_min"], cfg["ladder"]["t_max"],
            cfg["ladder"]["n_trajectories"]) == (16, 1e-2, 1.0, 10)
    with pytest.warns(DeprecationWarning, match="t_max = 16,"):
        cfg = cfgmod.load(old, {"sampler.t_max": 16})
    assert cfg["ladder"]["t_max"] == 16.0 and cfg.sources["ladder.t_max"] == "set"


def test_legacy_single_chain_config_is_a_one_rung_ladder(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text("[sampler]\nname = 'hmc'\ntemperature = 2.0\nn_trajectories = 3\n")
    with pytest.warns(DeprecationWarning, match=r"\[ladder\] temperatures = \[2.0\], "
                                                r"n_trajectories = 3"):
        cfg = cfgmod.load(p)
    assert cfg.ladder == cfgmod.resolve({"ladder": {"temperatures": [2.0]}}).ladder
    assert cfg["ladder"]["n_trajectories"] == 3 and "temperature" not in cfg["sampler"]


def test_legacy_config_runs_bit_for_bit_like_the_new_form(gauss_cfg, tmp_path):
    old = tmp_path / "old.toml"
    old.write_text(GAUSS_LEGACY)
    res = invoke("-q", "run", old, "--out", tmp_path / "a", "--set", "run.n_iterations=6")
    assert res.exit_code == 0, res.output
    assert "Warning: [sampler] name = \"rehmc\"" in res.output
    assert "[ladder]" in (tmp_path / "a" / "config.toml").read_text()
    Run.create(cfgmod.load(gauss_cfg, {"run.n_iterations": 6}), tmp_path / "b").run()
    detach_log()
    assert_same(tree(tmp_path / "a"), tree(tmp_path / "b"))


def test_a_checkpoint_with_a_legacy_config_resumes(gauss_cfg, tmp_path):
    """A run directory written before [ladder] (its stored config in the old form) resumes
    bit for bit, and its config.toml is rewritten in the new form."""
    straight, old = tmp_path / "straight", tmp_path / "old"
    Run.create(cfgmod.load(gauss_cfg), straight).run()
    Run.create(cfgmod.load(gauss_cfg, {"run.n_iterations": 6}), old).run()
    detach_log()
    legacy_text = GAUSS_LEGACY.replace("n_iterations = 12", "n_iterations = 6")
    with h5py.File(old / "checkpoint.h5", "r+") as fh:
        fh.attrs["config_toml"] = legacy_text
        sources = json.loads(fh.attrs["config_sources"])
        fh.attrs["config_sources"] = json.dumps({k.replace("ladder.", "sampler."): v
                                                 for k, v in sources.items()})
        # and, like every checkpoint of that time, format version 1 without checksums
        fh.attrs["format_version"] = 1
        del fh.attrs["header_sha256"]
        for name in ("state/theta", "state/energy", "state/grad", "state/step_size",
                     "ladder/temperature_k", "ladder/replica_k"):
            del fh[name].attrs["sha256"]
    (old / "config.toml").write_text(legacy_text)
    Run.open(old, n_iterations=12).run()
    detach_log()
    assert_same(tree(straight), tree(old))
    text = (old / "config.toml").read_text()
    assert "[ladder]" in text and "rehmc" not in text
    assert "n_leapfrog = 5  # config" in text
