"""What a run reports to its progress callback after every iteration."""

from __future__ import annotations

from typing import NamedTuple


class RunProgress(NamedTuple):
    """What :meth:`Run.run` reports to its progress callback after every iteration."""

    iteration: int            #: iterations done
    total: int                #: ``run.n_iterations``
    start: int                #: the iteration this call of :meth:`Run.run` started from
    acceptance: float         #: fraction of accepted transitions since ``start``
    swap_acceptance: float    #: fraction of accepted swaps since ``start`` (NaN: none tried)
    energy: float             #: E at the coldest slot
    #: sampled slots that accepted no transition in the last :data:`FROZEN_WINDOW` iterations
    frozen: tuple[int, ...] = ()
    #: what a slot is: ``"slot"`` of a ladder, or ``"chain"`` of a run of independent chains
    unit: str = "slot"


#: iterations over which a slot that accepts nothing is reported as frozen in the progress
FROZEN_WINDOW = 20


def rate(accepted: int, attempted: int) -> float:
    """``accepted / attempted``; NaN when nothing was attempted (a run without swaps)."""
    return accepted / attempted if attempted else float("nan")


def unit(chains: int | None) -> str:
    """What a slot of a run with ``run.chains = chains`` is: a chain, or a ladder's slot."""
    return "chain" if int(chains or 1) > 1 else "slot"


__all__ = ["FROZEN_WINDOW", "RunProgress", "rate", "unit"]
