"""Run the ``thermonet`` command line with a failure injected on MPI rank 1 (tests/parallel/test_mpi.py).

``python mpi_fault.py WHERE N ARGS...``: WHERE is ``slot`` (the N-th HMC transition on rank 1
raises inside the executor's work), ``rank`` (rank 1 raises outside any collective step, at
its N-th commit of the records) or ``ti`` (the N-th thermodynamic integration of
``thermonet evidence`` on rank 1 raises); ARGS are the command line's.
"""

from __future__ import annotations

import sys

from thermonet import parallel
from thermonet.cli import main
from thermonet.runner import Run
from thermonet.samplers.hmc import HMC


def on_rank_1(original, n_call: int, error: Exception):  # type: ignore[no-untyped-def]
    """``original`` that raises ``error`` at its ``n_call``-th call on rank 1."""
    calls = [0]

    def failing(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls[0] += 1
        if parallel.active_world().rank == 1 and calls[0] == n_call:
            raise error
        return original(*args, **kwargs)

    return failing


if __name__ == "__main__":
    where, n = sys.argv[1], int(sys.argv[2])
    if where == "slot":
        HMC.step = on_rank_1(HMC.step, n, FloatingPointError("injected in a slot on rank 1"))
    elif where == "ti":
        from thermonet.evidence.ti import integration as ti

        ti.thermodynamic_integration = on_rank_1(ti.thermodynamic_integration, n,
                                                 FloatingPointError("injected in TI on rank 1"))
    else:
        Run._add_elapsed = on_rank_1(Run._add_elapsed, n,  # type: ignore[method-assign]
                                     RuntimeError("injected on rank 1 alone"))
    main(sys.argv[3:])
