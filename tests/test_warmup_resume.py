"""A warm-up (ladder rounds, step-size re-tunes along the chain, per-rung masses) is
checkpointed: a run stopped or killed anywhere in it resumes bit for bit, with any number of
workers."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from thermonet import config as cfgmod
from thermonet import interrupt
from thermonet.cli import main
from thermonet.io import checkpoint as ckpt
from thermonet.io.trace import read_trace
from thermonet.runner import Run, detach_log
from thermonet.tempering import ReplicaExchange

# two ladder rounds (4 + 8 iterations) and 6 iterations of mass estimation, each followed by a
# step-size warm-up of 12 transitions per rung along the chain; checkpoints every 3 iterations
RUN = """
[run]
seed = 11
n_iterations = 9
checkpoint_every = 3
[data]
name = "none"
[architecture]
name = "gaussian"
n = 3
prior_scale = 12.0
[init]
minimise = false
burn_in = [3]
[sampler]
name = "hmc"
n_leapfrog = 4
adapt_method = "chain"
warmup_transitions = 12
[ladder]
temperatures = [0.1, 0.3, 1.0, 2.0, 4.0]
prior_rung = true
swap_scheme = "deo"
adapt_rounds = 2
adapt_round_length = 4
adapt_masses = 6
anchors = [1.0]
"""


@pytest.fixture
def cfg_path(tmp_path):
    path = tmp_path / "warm.toml"
    path.write_text(RUN)
    return path


def _state(run_dir):
    """Everything a finished run holds that the chain determines."""
    ck = ckpt.read_checkpoint(run_dir)
    return {"iteration": ck.iteration, "rng": ck.rng_states, "replica": ck.replica_k,
            "slots": ck.slots, "temperatures": ck.temperatures, "masses": ck.masses_k,
            "rounds": ck.counters.get("ladder_rounds"), "warmup": ck.counters.get("warmup"),
            "trace": read_trace(run_dir, samples=True)}


def _assert_same(a, b):
    assert a["iteration"] == b["iteration"] and a["rng"] == b["rng"]
    assert a["rounds"] == b["rounds"] and a["warmup"] is None and b["warmup"] is None
    for key in ("replica", "temperatures", "masses"):
        assert np.array_equal(a[key], b[key]), key
    for name in a["slots"]:
        assert np.array_equal(a["slots"][name], b["slots"][name]), name
    assert a["trace"].keys() == b["trace"].keys()
    for name in a["trace"]:
        assert np.array_equal(a["trace"][name], b["trace"][name]), name


def _straight(cfg_path, out, **overrides):
    Run.create(cfgmod.load(cfg_path, overrides), out).run()
    detach_log()
    return _state(out)


@pytest.fixture
def straight(cfg_path, tmp_path):
    return _straight(cfg_path, tmp_path / "straight")


def test_the_warm_up_adapts_and_freezes_as_configured(straight):
    """The run did what it was asked (so the resume tests compare a real warm-up)."""
    assert [r["iterations"] for r in straight["rounds"]] == [4, 8]
    assert straight["masses"].shape == (6, 3) and not np.allclose(straight["masses"], 1.0)
    t = straight["temperatures"]
    assert t[0] == 0.1 and np.isinf(t[-1]) and 1.0 in t
    assert not np.array_equal(t[1:4], [0.3, 2.0, 4.0][:3])          # the free rungs moved


def test_workers_do_not_change_a_warmed_up_run(cfg_path, tmp_path, straight):
    _assert_same(straight, _straight(cfg_path, tmp_path / "two", **{"run.workers": 2}))


def test_a_hard_kill_after_any_warm_up_checkpoint_resumes_bit_for_bit(cfg_path, tmp_path,
                                                                       straight, monkeypatch):
    """Every checkpoint the warm-up writes is copied as it is written: each copy is what a
    kill -9 right after that write leaves. Each resumes to the uninterrupted run."""
    snapshots = []
    write = Run.write_checkpoint

    def write_and_copy(self):
        write(self)
        if self.warmup is not None:
            where = tmp_path / f"snap{len(snapshots)}"
            shutil.copytree(self.dir, where)
            snapshots.append((where, self.warmup.position()))

    monkeypatch.setattr(Run, "write_checkpoint", write_and_copy)
    Run.create(cfgmod.load(cfg_path), tmp_path / "copied").run()
    detach_log()
    monkeypatch.setattr(Run, "write_checkpoint", write)
    seen = {(p["stage"], p["phase"], p["phase"] == "sample" and p["done"] > 0)
            for _, p in snapshots}
    # inside both ladder rounds' sampling and the mass estimation, and before every re-tune
    assert {("ladder", "sample", True), ("ladder", "tune", False), ("masses", "sample", True),
            ("masses", "tune", False), ("ladder", "sample", False)} <= seen
    # the start; round 1 at 3, its re-tune; round 2 at 0, 3, 6, its re-tune; masses at 0, 3, re-tune
    assert len(snapshots) == 10
    for n, (where, _) in enumerate(snapshots):
        assert ckpt.read_checkpoint(where).iteration == 0
        Run.open(where, workers=1 + n % 2).run()
        detach_log()
        _assert_same(straight, _state(where))


def _sigterm_on(monkeypatch, method, n):
    """Send this process SIGTERM in the n-th call of ``ReplicaExchange.<method>``."""
    original = getattr(ReplicaExchange, method)
    calls = [0]

    def wrapped(self, *args, **kwargs):
        calls[0] += 1
        if calls[0] == n:
            os.kill(os.getpid(), signal.SIGTERM)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ReplicaExchange, method, wrapped)
    return original


@pytest.mark.parametrize("method,n,stage,phase", [
    ("step", 2, "ladder", "sample"),     # in the first ladder round
    ("step", 9, "ladder", "sample"),     # in the second
    ("adapt", 1, "ladder", "sample"),    # in the first round's step-size warm-up
    ("adapt", 3, "done", "sample"),      # in the step-size warm-up after the masses
    ("step", 16, "masses", "sample"),    # in the mass estimation
])
def test_sigterm_during_the_warm_up_stops_and_resumes_bit_for_bit(
        cfg_path, tmp_path, straight, monkeypatch, method, n, stage, phase):
    out = tmp_path / "stopped"
    original = _sigterm_on(monkeypatch, method, n)
    with interrupt.handling(), pytest.raises(interrupt.RunInterrupted) as err:
        Run.create(cfgmod.load(cfg_path), out).run()
    detach_log()
    monkeypatch.setattr(ReplicaExchange, method, original)
    ck = ckpt.read_checkpoint(out)
    assert err.value.exit_code == 143 and "thermonet resume" in str(err.value)
    if stage == "done":      # the warm-up had just finished: production stopped at iteration 0
        assert "warmup" not in ck.counters and "iteration 0 of 9" in str(err.value)
    else:
        assert "during the warm-up" in str(err.value)
        assert (ck.counters["warmup"]["stage"], ck.counters["warmup"]["phase"]) == (stage, phase)
        shown = CliRunner().invoke(main, ["info", str(out)]).output
        assert "in the warm-up" in shown and "not frozen yet" in shown
    res = CliRunner().invoke(main, ["-q", "resume", str(out)])
    assert res.exit_code == 0, res.output
    detach_log()
    _assert_same(straight, _state(out))


def test_a_real_kill_during_the_warm_up_resumes_from_the_command_line(cfg_path, tmp_path,
                                                                      straight):
    """``thermonet run`` killed (exit 137, as kill -9) while writing its 6th checkpoint, which
    is inside the second ladder round: the 5th (3 iterations into it) is on disk; `thermonet
    resume` finishes."""
    out = tmp_path / "killed"
    env = {**os.environ, "THERMONET_TEST_CRASH": "before-replace:checkpoint:6"}
    proc = subprocess.run([sys.executable, "-m", "thermonet.cli", "-q", "run", str(cfg_path),
                           "--out", str(out)], env=env, capture_output=True, timeout=300)
    assert proc.returncode == 137, proc.stderr
    ck = ckpt.read_checkpoint(out)
    assert ck.iteration == 0 and ck.counters["warmup"]["stage"] == "ladder"
    assert ck.counters["warmup"]["round"] == 1 and ck.counters["warmup"]["done"] == 3
    assert ck.warmup is not None and set(ck.warmup) == {"attempted", "accepted"}
    res = CliRunner().invoke(main, ["-q", "resume", str(out)])
    assert res.exit_code == 0, res.output
    detach_log()
    _assert_same(straight, _state(out))
