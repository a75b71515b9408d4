"""Swap schemes: which adjacent pairs of a ladder attempt an exchange, and when.

A scheme is a small strategy object with

* ``before_propagation`` (bool): whether its attempts come before the slots' transitions of an
  iteration (True) or after them (False);
* ``pairs(n_pairs, rng, iteration)``: the pair indices j (pair (j, j+1)) to attempt, in
  order, drawn only from ``rng`` (the swap stream); ``iteration`` (1, 2, ...) is the run's
  iteration number, for schemes that alternate deterministically.

The engine (:class:`~thermonet.tempering.ReplicaExchange`) applies the Metropolis rule of
:func:`swap_log_acceptance` to each pair. A new scheme (e.g. the deterministic even-odd sweep of
Syed et al. 2022) is a new class here and an entry in :data:`SCHEMES`; the engine is unchanged.

References
----------
Baldock & Marzari, arXiv:1904.04154, Alg. 2 (random adjacent pairs after propagation);
Y. Okabe, M. Kawata, Y. Okamoto & M. Mikami, Chem. Phys. Lett. 335 (2001) 435 (alternating
even/odd swaps); S. Syed, A. Bouchard-Côté, G. Deligiannidis & A. Doucet, "Non-reversible
parallel tempering: a scalable highly parallel MCMC scheme", JRSS B 84 (2022) 321 (the
deterministic even-odd scheme is non-reversible: a replica keeps its direction through the
ladder, and the round-trip rate tends to 1/(2 + 2 Lambda) for a communication barrier Lambda,
independent of the number of rungs once it is large enough).
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

    def pairs(self, n_pairs: int, rng: np.random.Generator, iteration: int | None = None
              ) -> Iterable[Any]: ...


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

    def pairs(self, n_pairs: int, rng: np.random.Generator, iteration: int | None = None
              ) -> Iterable[Any]:
        n = n_pairs + 1 if self.n_swaps is None else self.n_swaps
        return rng.integers(0, n_pairs, size=n)


@dataclass(frozen=True)
class EvenOdd:
    """Before propagation, one sweep of disjoint pairs starting at slot 0 or 1 with
    probability 1/2 (the original code's scheme)."""

    name: ClassVar[str] = "even-odd"
    before_propagation: ClassVar[bool] = True

    def pairs(self, n_pairs: int, rng: np.random.Generator, iteration: int | None = None
              ) -> Iterable[Any]:
        start = int(rng.random() < 0.5)
        return range(start, n_pairs, 2)


@dataclass(frozen=True)
class DeterministicEvenOdd:
    """Non-reversible parallel tempering (Okabe et al. 2001; Syed et al. 2022): after
    propagation, the even pairs (0, 1), (2, 3), ... at even iterations and the odd pairs
    (1, 2), (3, 4), ... at odd ones. Draws nothing from the swap stream except the uniforms of
    the Metropolis tests, so the alternation is a function of the iteration number alone (a
    resumed run continues it exactly)."""

    name: ClassVar[str] = "deo"
    before_propagation: ClassVar[bool] = False

    def pairs(self, n_pairs: int, rng: np.random.Generator, iteration: int | None = None
              ) -> Iterable[Any]:
        if iteration is None:
            raise ConfigError("the deo swap scheme alternates even and odd pairs by iteration "
                              "number; call ReplicaExchange.step(state, streams, "
                              "iteration=i)")
        return range(int(iteration) % 2, n_pairs, 2)


@dataclass(frozen=True)
class NoSwaps:
    """No attempts, nothing drawn: for the legs of a two-leg ring, whose swaps the ring makes
    across both legs (:mod:`thermonet.tempering.ring`)."""

    name: ClassVar[str] = "none"
    before_propagation: ClassVar[bool] = False

    def pairs(self, n_pairs: int, rng: np.random.Generator, iteration: int | None = None
              ) -> Iterable[Any]:
        return ()


#: scheme name (``ladder.swap_scheme``) -> class
SCHEMES: dict[str, type] = {"random-pairs": RandomPairs, "even-odd": EvenOdd,
                            "deo": DeterministicEvenOdd}


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
