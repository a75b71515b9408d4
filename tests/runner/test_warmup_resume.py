"""A warm-up (ladder rounds, step-size re-tunes along the chain, per-rung masses, the
measured step-size correction) is
checkpointed: a run stopped or killed anywhere in it resumes bit for bit, with any number of
workers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from tests.runs import run_copying_warmup_checkpoints, variant
from thermonet import config as cfgmod
from thermonet import interrupt
from thermonet.cli import main
from thermonet.io import checkpoint as ckpt
from thermonet.io.trace import read_trace
from thermonet.runner import Run, detach_log
from thermonet.tempering import ReplicaExchange

# two ladder rounds (4 + 8 iterations) and 6 iterations of mass estimation, each followed by a
# step-size warm-up of 12 transitions per rung along the chain, then 6 iterations measuring the
# acceptance for the step-size correction; checkpoints every 3 iterations
RUN = variant("gaussian_3d", run="""
    seed = 11
    n_iterations = 9
    checkpoint_every = 3
""", sampler="""
    n_leapfrog = 4
    adapt_method = "chain"
    warmup_transitions = 12
""", ladder="""
    temperatures = [0.1, 0.3, 1.0, 2.0, 4.0]
    prior_rung = true
    swap_scheme = "deo"
    adapt_rounds = 2
    adapt_round_length = 4
    adapt_masses = 6
    retune_iterations = 6
    anchors = [1.0]
""")


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
            "retune": ck.counters.get("step_size_retune"),
            "trace": read_trace(run_dir, samples=True)}


def _assert_same(a, b):
    assert a["iteration"] == b["iteration"] and a["rng"] == b["rng"]
    assert a["rounds"] == b["rounds"] and a["warmup"] is None and b["warmup"] is None
    assert a["retune"] == b["retune"]
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
    retune = straight["retune"]
    assert [(r["stage"], r["round"], r["iterations"]) for r in retune] == [
        ("retune", 1, 6), ("retune", 2, 6)]
    # production runs at the corrected step sizes; the prior rung has none
    assert retune[-1]["step_size"][-1] is None and retune[-1]["acceptance"][-1] is None
    assert np.array_equal(straight["slots"]["step_size"][:-1], retune[-1]["step_size"][:-1])


def test_workers_do_not_change_a_warmed_up_run(cfg_path, tmp_path, straight):
    _assert_same(straight, _straight(cfg_path, tmp_path / "two", **{"run.workers": 2}))


@pytest.mark.slow
def test_a_hard_kill_after_any_warm_up_checkpoint_resumes_bit_for_bit(cfg_path, tmp_path,
                                                                       straight, monkeypatch):
    """Every checkpoint the warm-up writes is copied as it is written: each copy is what a
    kill -9 right after that write leaves. Each resumes to the uninterrupted run."""
    snapshots = run_copying_warmup_checkpoints(cfgmod.load(cfg_path), tmp_path / "copied", tmp_path,
                                               monkeypatch)
    seen = {(p["stage"], p["phase"], p["done"] > 0) for _, p in snapshots}
    # inside the ladder rounds, the mass estimation, the step-size re-tunes and the measured
    # correction, and between
    assert seen == {(stage, phase, inside) for stage in ("ladder", "masses")
                    for phase in ("sample", "tune") for inside in (False, True)} | {
                        ("retune", "sample", False), ("retune", "sample", True)}
    # every phase at 0 and every 3 inside: round 1 (4 iterations) at 0, 3; its re-tune (12
    # transitions per rung) at 0, 3, 6, 9; round 2 (8) at 0, 3, 6; re-tune at 0, 3, 6, 9;
    # masses (6) at 0, 3; re-tune at 0, 3, 6, 9; two correction rounds (6 each) at 0, 3
    assert len(snapshots) == 23
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
    ("step", 2, "ladder", "sample"),          # in the first ladder round
    ("step", 9, "ladder", "sample"),          # in the second
    ("adapt_part", 2, "ladder", "tune"),      # in the first round's step-size re-tune
    ("step", 16, "masses", "sample"),         # in the mass estimation
    ("adapt_part", 10, "masses", "tune"),     # in the re-tune after the masses
    ("adapt_part", 12, "retune", "sample"),   # in its last part: the correction is next
    ("step", 20, "retune", "sample"),         # measuring the acceptance for the correction
    ("step", 27, "retune", "sample"),         # in the second correction round
    ("step", 30, "done", "sample"),           # in its last iteration: the warm-up is over
])
@pytest.mark.slow
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
    """``thermonet run`` killed (exit 137, as kill -9) while writing its 5th checkpoint: the
    4th, 3 transitions per rung into the first step-size re-tune, is on disk with each rung's
    dual-averaging state; `thermonet resume` finishes."""
    out = tmp_path / "killed"
    env = {**os.environ, "THERMONET_TEST_CRASH": "before-replace:checkpoint:5"}
    proc = subprocess.run([sys.executable, "-m", "thermonet.cli", "-q", "run", str(cfg_path),
                           "--out", str(out)], env=env, capture_output=True, timeout=300)
    assert proc.returncode == 137, proc.stderr
    ck = ckpt.read_checkpoint(out)
    assert ck.iteration == 0 and ck.counters["warmup"]["stage"] == "ladder"
    assert ck.counters["warmup"] == {"stage": "ladder", "phase": "tune", "round": 0,
                                     "done": 3, "iteration": 4}
    carry = ck.warmup["carry"]                         # six numbers per rung; none at T = inf
    assert carry.shape == (6, 6) and np.isnan(carry[5]).all() and np.isfinite(carry[:5]).all()
    assert np.array_equal(carry[:5, 4], [3, 3, 3, 3, 3])   # dual-averaging updates so far
    res = CliRunner().invoke(main, ["-q", "resume", str(out)])
    assert res.exit_code == 0, res.output
    detach_log()
    _assert_same(straight, _state(out))


def test_the_chain_warm_up_in_parts_is_the_warm_up_in_one_piece():
    """HMC's along-chain warm-up over Stan's windows (60 transitions: windows 9, 45, 6) split
    at arbitrary points, inside and on window boundaries, with the carry passed through a
    float64 array as a checkpoint stores it: the same state, step size and stream."""
    from thermonet.api import adaptation
    from thermonet.priors import BoxPrior
    from thermonet.samplers.hmc import HMC
    from thermonet.testsystems import Gaussian

    arch = Gaussian(3, stiffness=[1.0, 4.0, 9.0], prior_scale=12.0)
    sampler = HMC(arch.potential(), prior=BoxPrior.for_architecture(arch), temperature=0.5,
                  config=HMC.Config(n_leapfrog=4, adapt_method="chain", warmup_transitions=60))
    assert adaptation.warmup_windows(60) == [9, 45, 6] and sampler.adapt_transitions() == 60
    start = sampler.init(np.array([1.0, -0.5, 0.2]))
    whole_rng = np.random.default_rng(4)
    whole = sampler.adapt(start, whole_rng)
    rng = np.random.default_rng(4)
    state, carry = start, None
    for a, b in [(0, 5), (5, 9), (9, 30), (30, 59), (59, 60)]:
        state, carry = sampler.adapt_part(state, rng, a, b, carry)
        carry = np.array(carry, dtype=np.float64)         # what the checkpoint keeps
    assert np.array_equal(state.theta, whole.theta) and state.step_size == whole.step_size
    assert rng.bit_generator.state == whole_rng.bit_generator.state
    assert whole.step_size != start.step_size                       # it did adapt
    with pytest.raises(ValueError, match="inside a window"):
        sampler.adapt_part(start, rng, 10, 12, None)
