"""Tell the user when the first use of a network's kernels is slow because Numba compiles them.

With a cold cache (first run on a machine, a new thermonet or Numba, another BLAS backend) the
first call of the M(3) kernels takes 20-50 s (docs/performance.md) and a run would otherwise
sit silent. :func:`compile_notice` logs one line if a block takes longer than ``after``
seconds; with a warm cache the block returns in milliseconds and nothing is printed.
:func:`warm_kernels` is that block for a run: one energy and gradient and one sampler
transition at a throwaway state, drawing from a generator of its own, so the run's streams
and results are untouched.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

log = logging.getLogger("thermonet.run")

#: seconds before the notice is printed
AFTER_S = 3.0


@contextlib.contextmanager
def compile_notice(what: str, after: float = AFTER_S) -> Iterator[None]:
    """Log "compiling the kernels of ``what``" if the block has not finished after ``after``
    seconds (from a timer thread; the block itself is not slowed)."""
    timer = threading.Timer(after, log.info,
                            args=("compiling the kernels of %s (first use on this machine or "
                                  "after an upgrade; cached afterwards, so this happens once)",
                                  what))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def warm_kernels(sampler: Any, theta: Any, what: str) -> None:
    """Compile what a run's first transition needs: ``sampler``'s potential at ``theta`` and
    one transition of ``sampler`` from there, under :func:`compile_notice`."""
    from thermonet.tempering.start import check_energy

    theta = np.array(theta, dtype=np.float64)
    # a plugin that raises, returns the wrong shape or changes its input is refused here, in
    # one line, before its first call inside a sampler
    check_energy(sampler.potential, theta, "an initial draw")
    with compile_notice(what):
        sampler.potential.energy_and_grad(theta)
        sampler.step(sampler.init(theta), np.random.default_rng(0))


__all__ = ["AFTER_S", "compile_notice", "warm_kernels"]
