"""Swap schemes: which adjacent pairs of a ladder attempt an exchange, and when.

A scheme is a small strategy object with

* ``before_propagation`` (bool): whether its attempts come before the slots' transitions of an
  iteration (True) or after them (False);
* ``pairs(n_pairs, rng)``: the pair indices j (pair (j, j+1)) to attempt, in order, drawn only
  from ``rng`` (the swap stream).

The engine (:class:`~thermonet.tempering.ReplicaExchange`) applies the Metropolis rule of
:func:`swap_log_acceptance` to each pair. A new scheme (e.g. the deterministic even-odd sweep of
Syed et al. 2022) is a new class here and an entry in :data:`SCHEMES`; the engine is unchanged.

References
----------
Baldock & Marzari, arXiv:1904.04154, Alg. 2 (random adjacent pairs after propagation);
Syed, Bouchard-Côté, Deligiannidis & Doucet, JRSS B 84 (2022) 321 (even/odd sweeps).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np

from thermonet.errors import ConfigError


class SwapScheme(Protocol):
    """What the engine needs of a swap scheme."""

    name: ClassVar[str]
    before_propagation: ClassVar[bool]

    def pairs(self, n_pairs: int, rng: np.random.Generator) -> Iterable[Any]: ...


@dataclass(frozen=True)
class RandomPairs:
    """After propagation, ``n_swaps`` attempts on uniformly chosen adjacent pairs (paper
    Alg. 2); ``n_swaps`` None: one attempt per slot (K)."""

    n_swaps: int | None = None
    name: ClassVar[str] = "random-pairs"
    before_propagation: ClassVar[bool] = False

    def __post_init__(self) -> None:
        if self.n_swaps is not None and self.n_swaps < 0:
            raise ConfigError(f"n_swaps = {self.n_swaps}; expected >= 0")

    def pairs(self, n_pairs: int, rng: np.random.Generator) -> Iterable[Any]:
        n = n_pairs + 1 if self.n_swaps is None else self.n_swaps
        return rng.integers(0, n_pairs, size=n)


@dataclass(frozen=True)
class EvenOdd:
    """Before propagation, one sweep of disjoint pairs starting at slot 0 or 1 with
    probability 1/2 (the original code's scheme)."""

    name: ClassVar[str] = "even-odd"
    before_propagation: ClassVar[bool] = True

    def pairs(self, n_pairs: int, rng: np.random.Generator) -> Iterable[Any]:
        start = int(rng.random() < 0.5)
        return range(start, n_pairs, 2)


#: scheme name (``ladder.swap_scheme``) -> class
SCHEMES: dict[str, type] = {"random-pairs": RandomPairs, "even-odd": EvenOdd}


def make_scheme(name: str, *, n_swaps: int | None = None) -> Any:
    """The scheme called ``name`` with its settings (one-line ConfigError if unknown)."""
    if name not in SCHEMES:
        raise ConfigError(f"swap_scheme = {name!r}; expected one of {tuple(SCHEMES)}")
    if name == "random-pairs":
        return RandomPairs(n_swaps)
    if n_swaps is not None:
        raise ConfigError(f"n_swaps = {n_swaps} is a setting of swap_scheme = "
                          f"\"random-pairs\", not of {name!r}; remove it")
    return SCHEMES[name]()


def swap_log_acceptance(beta_j: float, beta_k: float, energy_j: float, energy_k: float
                        ) -> float:
    """Log of the acceptance ``min(1, exp((beta_j - beta_k)(E_j - E_k)))`` before the min."""
    return float((beta_j - beta_k) * (energy_j - energy_k))
