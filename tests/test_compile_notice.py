"""The notice a run prints while Numba compiles its kernels, and only then."""

from __future__ import annotations

import logging
import time

import numpy as np

from thermonet.runner.compile_notice import compile_notice, warm_kernels
from thermonet.samplers.hmc import HMC
from thermonet.testsystems import Gaussian


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


def test_warming_the_kernels_draws_nothing_from_the_runs_streams():
    """The warm-up transition uses its own generator: a chain run after it is the chain run
    without it."""
    arch = Gaussian(3, stiffness=[1.0, 2.0, 5.0])
    hmc = HMC(arch.potential(), n_leapfrog=5, step_size=0.3)

    def chain():
        rng = np.random.default_rng(5)
        state = hmc.init(np.full(3, 0.1))
        out = []
        for _ in range(20):
            state, _ = hmc.step(state, rng)
            out.append(state.theta.copy())
        return np.array(out)

    first = chain()
    warm_kernels(hmc, np.zeros(3), "a Gaussian")
    assert np.array_equal(first, chain())
