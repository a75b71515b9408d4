"""The tempering engine: a temperature ladder, replica exchange over it, and its swap schemes.

Replica exchange is not a sampler plugin: it drives K instances of one (any registered
sampler, passed in as a class) at the temperatures of a :class:`Ladder`. Every run goes through
it; a single chain is a one-rung ladder.
"""

from __future__ import annotations

from thermonet.tempering.exchange import REInfo, ReplicaExchange, REState, Streams, make_streams
from thermonet.tempering.ladder import Ladder, geometric_temperatures
from thermonet.tempering.loop import sample
from thermonet.tempering.swaps import (
    SCHEMES,
    DeterministicEvenOdd,
    EvenOdd,
    RandomPairs,
    SwapScheme,
    make_scheme,
)

__all__ = ["SCHEMES", "DeterministicEvenOdd", "EvenOdd", "Ladder", "REInfo", "REState",
           "RandomPairs", "ReplicaExchange", "Streams", "SwapScheme", "geometric_temperatures",
           "make_scheme", "make_streams", "sample"]
