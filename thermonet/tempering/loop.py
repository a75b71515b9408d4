"""``sample``: the iteration loop of a Markov kernel as a generator, as emcee's ``sample()``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def sample(kernel: Any, state: Any, randomness: Any, n: int, *, start: int = 0
           ) -> Iterator[tuple[Any, Any]]:
    """Yield ``(state, info)`` after each of ``n`` steps of ``kernel``.

    Parameters
    ----------
    kernel : ReplicaExchange or Sampler
        Anything with ``step(state, randomness) -> (state, info)``: a
        :class:`~thermonet.tempering.ReplicaExchange` (``randomness`` is its
        :class:`~thermonet.tempering.Streams`) or a single sampler (``randomness`` is a
        ``numpy.random.Generator``).
    state : NamedTuple
        The state to start from (``kernel.init(...)`` or ``kernel.burn_in(...)``).
    randomness : Streams or numpy.random.Generator
        Consumed in order, so the chain is a deterministic function of the seed.
    n : int
        Number of steps.
    start : int
        Iterations already done: a replica-exchange kernel is told the iteration number
        ``start + 1, start + 2, ...`` (the ``deo`` swap scheme alternates by it).

    Examples
    --------
    >>> for state, info in sample(engine, state, streams, n=10):  # doctest: +SKIP
    ...     print(info.energy_k)
    """
    if int(n) < 0:
        raise ValueError(f"n = {n}; expected a number of steps >= 0")
    from thermonet.tempering.exchange import ReplicaExchange

    for i in range(int(start) + 1, int(start) + int(n) + 1):
        if isinstance(kernel, ReplicaExchange):
            state, info = kernel.step(state, randomness, iteration=i)
        else:
            state, info = kernel.step(state, randomness)
        yield state, info
