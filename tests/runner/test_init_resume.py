"""An interrupted initialisation continues where it stopped: the replicas finished before the
interruption are kept in ``initialisation.h5`` (not drawn, minimised or burnt in again), and
the continued run is the uninterrupted run bit for bit."""

from __future__ import annotations

import copy
import signal

import numpy as np
import pytest
from click.testing import CliRunner

from tests.runs import TINY as GAUSS
from tests.runs import assert_same, tree
from thermonet import config as cfgmod
from thermonet import interrupt
from thermonet.cli import main
from thermonet.io import checkpoint as ckpt
from thermonet.io import initialisation as initfile
from thermonet.runner import Run, build, detach_log
from thermonet.runner import initialisation as runinit
from thermonet.testsystems import GaussianMixture

#: 10 rungs, so the initialisation runs in several groups
TEN = GAUSS.replace("n_temperatures = 4", "n_temperatures = 10").replace(
    "burn_in = [3]", "burn_in = [4, 6]")


def _invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


class Crash(BaseException):
    """Stands for a SIGKILL: nothing of thermonet's handles it."""


@pytest.fixture
def ten(tmp_path):
    p = tmp_path / "ten.toml"
    p.write_text(TEN)
    return p


@pytest.fixture
def straight(ten, tmp_path):
    out = tmp_path / "straight"
    Run.create(cfgmod.load(ten), out).run()
    detach_log()
    return tree(out)


@pytest.fixture
def save_always(monkeypatch):
    """Save after every group of two replicas."""
    monkeypatch.setattr(runinit, "SAVE_EVERY_S", 0.0)
    monkeypatch.setattr(runinit, "GROUP_PER_WORKER", 2)


def _stop_after_saves(monkeypatch, n: int, error: BaseException) -> list[int]:
    """Make the ``n``-th save of the initialisation raise ``error`` after writing the file."""
    real = runinit.save_partial
    done: list[int] = []

    def save(run_dir, part):
        real(run_dir, part)
        done.append(len(part.done))
        if len(done) == n:
            raise error

    monkeypatch.setattr(runinit, "save_partial", save)
    return done


def _count_draws(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = GaussianMixture.initial_draw

    def draw(self, rng):
        calls.append(1)
        return real(self, rng)

    monkeypatch.setattr(GaussianMixture, "initial_draw", draw)
    return calls


def test_burn_in_in_groups_from_a_snapshot_equals_one_pass():
    cfg = cfgmod.resolve(cfgmod.parse_toml(TEN))
    whole = build(cfg).engine
    streams = whole.make_streams(7)
    draw = build(cfg).arch.initial_draw
    reference = whole.burn_in(draw, streams, blocks=(4, 6))
    reference_rng = [g.bit_generator.state for g in streams.all()]

    engine = build(cfg).engine
    streams = engine.make_streams(7)
    snapshots = []
    engine.burn_in(draw, streams, blocks=(4, 6), group=3,
                   save=lambda fin: snapshots.append(
                       (dict(fin), {k: copy.deepcopy(streams.slots[k].bit_generator.state)
                                    for k in fin})))
    assert [len(s[0]) for s in snapshots] == [3, 6, 9]        # not after the last group
    finished, rng = snapshots[1]
    again = engine.make_streams(7)
    for k, state in rng.items():
        again.slots[k].bit_generator.state = state
    resumed = engine.burn_in(draw, again, blocks=(4, 6), done=finished, group=3)
    for a, b in zip(reference.slots, resumed.slots, strict=True):
        assert np.array_equal(a.theta, b.theta) and a.energy == b.energy
        assert a.step_size == b.step_size
    assert [g.bit_generator.state for g in again.all()] == reference_rng


def test_a_crash_after_a_save_resumes_without_redoing_the_saved_replicas(
        ten, straight, tmp_path, save_always, monkeypatch):
    out = tmp_path / "r"
    saves = _stop_after_saves(monkeypatch, 2, Crash())
    with pytest.raises(Crash):
        Run.create(cfgmod.load(ten), out)
    detach_log()
    assert saves == [2, 4] and not (out / ckpt.CHECKPOINT).exists()
    part = initfile.read_partial(out)
    assert part is not None and part.done.tolist() == [0, 1, 2, 3] and part.n_slots == 10
    monkeypatch.setattr(runinit, "save_partial", initfile.write_partial)
    draws = _count_draws(monkeypatch)
    res = _invoke("-q", "resume", out)
    assert res.exit_code == 0, res.output
    assert len(draws) == 6 + 1     # the other six replicas, and one to compile the kernels
    assert not (out / initfile.INITIALISATION).exists()
    assert_same(straight, tree(out))
    assert "4 of 10 replica(s) were initialised before the interruption" in (
        out / ckpt.LOG).read_text()


def test_a_stop_request_during_initialisation_says_how_to_continue(
        ten, straight, tmp_path, save_always, monkeypatch):
    out = tmp_path / "r"
    _stop_after_saves(monkeypatch, 3, interrupt.RunInterrupted(signal.SIGTERM, "stop"))
    res = _invoke("-q", "run", ten, "--out", out)
    assert res.exit_code == 128 + signal.SIGTERM, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "SIGTERM during the initialisation" in lines[0]
    assert f"continue with `thermonet resume {out}`" in lines[0]
    # every command that meets the directory says what it holds and how to go on
    res = _invoke("-q", "run", ten, "--out", out)
    assert res.exit_code != 0 and "initialisation.h5" in res.output
    assert f"continue it with `thermonet resume {out}`" in res.output
    res = _invoke("info", out)
    assert res.exit_code != 0 and "was interrupted during initialisation" in res.output
    assert f"continue it with `thermonet resume {out}`" in res.output
    monkeypatch.setattr(runinit, "save_partial", initfile.write_partial)
    res = _invoke("-q", "resume", out)
    assert res.exit_code == 0, res.output
    assert_same(straight, tree(out))
    counters = ckpt.read_checkpoint(out).counters
    assert counters["init_s"] <= counters["elapsed_s"]


def test_a_changed_config_or_a_damaged_file_is_refused_in_one_line(
        ten, tmp_path, save_always, monkeypatch):
    import h5py

    out = tmp_path / "r"
    _stop_after_saves(monkeypatch, 1, Crash())
    with pytest.raises(Crash):
        Run.create(cfgmod.load(ten), out)
    detach_log()
    monkeypatch.setattr(runinit, "save_partial", initfile.write_partial)
    config = out / ckpt.CONFIG
    text = config.read_text()
    config.write_text(text.replace("n_leapfrog = 5", "n_leapfrog = 6"))
    res = _invoke("-q", "resume", out)
    assert res.exit_code != 0
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "sampler.n_leapfrog: 5 -> 6" in lines[0]
    assert "differs from the configuration its initialisation started with" in lines[0]
    config.write_text(text)
    with h5py.File(out / initfile.INITIALISATION, "r+") as fh:
        fh["state/theta"][0, 0] += 1.0
    before = (out / initfile.INITIALISATION).read_bytes()
    res = _invoke("-q", "resume", out)
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert res.exit_code != 0 and len(lines) == 1, res.output
    assert "is damaged: checksum mismatch in dataset state/theta" in lines[0]
    assert "initialise every replica again" in lines[0]
    assert (out / initfile.INITIALISATION).read_bytes() == before       # nothing was replaced
    assert not (out / ckpt.CHECKPOINT).exists()
