"""The notice a run prints while Numba compiles its kernels, and only then."""

from __future__ import annotations

import logging
import time

import numpy as np

from tests.runs import variant
from thermonet.runner.compile_notice import compile_notice


def test_a_slow_block_gets_the_notice_and_a_fast_one_does_not(caplog):
    with caplog.at_level(logging.INFO, logger="thermonet.run"):
        with compile_notice("M(3)", after=0.05):
            time.sleep(0.3)
        slow = [r.getMessage() for r in caplog.records]
        caplog.clear()
        with compile_notice("M(3)", after=0.5):
            pass
        time.sleep(0.7)           # the cancelled timer would have fired by now
        fast = [r.getMessage() for r in caplog.records]
    assert len(slow) == 1 and slow[0].startswith("compiling the kernels of M(3)")
    assert fast == []


def test_warming_the_kernels_changes_no_result(tmp_path, monkeypatch):
    """A run whose kernels were warmed first (one energy and one transition at a throwaway
    state) ends bit for bit where the same run without that step ends."""
    import importlib

    from thermonet import config as cfgmod
    from thermonet.io import checkpoint as ckpt
    from thermonet.runner import Run, detach_log

    runner = importlib.import_module("thermonet.runner.run")  # the module, not run()

    cfg = tmp_path / "g.toml"
    cfg.write_text(RUN)
    calls = []
    real = runner.warm_kernels

    def counted(*args):
        calls.append(args)
        real(*args)

    monkeypatch.setattr(runner, "warm_kernels", counted)
    Run.create(cfgmod.load(cfg), tmp_path / "warm").run()
    detach_log()
    monkeypatch.setattr(runner, "warm_kernels", lambda *args: None)
    Run.create(cfgmod.load(cfg), tmp_path / "cold").run()
    detach_log()
    assert len(calls) == 1
    a, b = ckpt.read_checkpoint(tmp_path / "warm"), ckpt.read_checkpoint(tmp_path / "cold")
    assert a.rng_states == b.rng_states
    for name in a.slots:
        assert np.array_equal(a.slots[name], b.slots[name]), name


RUN = variant("gaussian_3d", run="seed = 3\nn_iterations = 5", sampler="n_leapfrog = 4",
              ladder="temperatures = [0.5, 1.0, 2.0]")
