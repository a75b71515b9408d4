"""The temperature ladder of a replica-exchange run: one immutable object everywhere.

Slot k of a ladder holds temperature ``T_k`` (strictly ascending, ``T_0`` the coldest) and its
inverse ``beta_k = 1/T_k``. A single chain is a one-rung ladder (:meth:`Ladder.single`). The
hottest rung may be ``T = inf`` (``beta = 0``): the prior itself, sampled exactly
(:meth:`Ladder.with_prior_rung`, :mod:`thermonet.tempering.prior_rung`). The
configuration builds the ladder once; the engine, the swap rule, the checkpoint and resume all
read this one object.

References
----------
Baldock & Marzari, arXiv:1904.04154, Alg. 2 and Table 1 (geometric ladders of 112 temperatures
on [1e-2, 1e2] and 84 on [10^-1.5, 10^1.5]).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from thermonet.errors import ConfigError
from thermonet.types import FloatArray


def geometric_temperatures(t_min: float, t_max: float, n: int) -> FloatArray:
    """``T_i = t_min (t_max/t_min)^(i/(n-1))``, i = 0..n-1 (``[t_min]`` for n = 1)."""
    if n == 1:
        return np.array([float(t_min)])
    return t_min * (t_max / t_min) ** (np.arange(n) / (n - 1))


def trajectories_per_rung(temperature_k: Any, n_trajectories: int,
                          band: Sequence[float] = (), band_trajectories: int = 0
                          ) -> np.ndarray:
    """Transitions per iteration at every rung: ``n_trajectories``, and ``band_trajectories``
    at the rungs with ``band[0] <= T <= band[1]`` (a band of temperatures where the local
    sampler is slow). Each rung's transitions leave its own distribution invariant, so any
    fixed count per rung keeps the chain exact."""
    t = np.asarray(temperature_k, dtype=np.float64)
    out = np.full(t.size, int(n_trajectories), dtype=np.int64)
    if len(band) == 2 and band_trajectories:
        out[(t >= float(band[0])) & (t <= float(band[1]))] = int(band_trajectories)
    return out


def trajectories_from_settings(ladder_table: Any, temperature_k: Any
                               ) -> np.ndarray:
    """:func:`trajectories_per_rung` from a run's ``[ladder]`` table as stored in its
    resolved configuration (older runs without the band keys: ``n_trajectories`` everywhere)."""
    return trajectories_per_rung(temperature_k, int(ladder_table.get("n_trajectories", 1)),
                                 ladder_table.get("slow_band", []) or (),
                                 int(ladder_table.get("slow_band_trajectories", 0) or 0))


@dataclass(frozen=True, eq=False)
class Ladder:
    """An ascending ladder of K >= 1 temperatures.

    Build it with :meth:`geometric`, :meth:`from_temperatures` or :meth:`single`; each checks
    its input and raises a one-line :class:`~thermonet.errors.ConfigError`.

    Attributes
    ----------
    temperature_k : ndarray of float64, shape (K,)
        T_k, strictly ascending and positive (read-only); only the last may be ``inf``.
    beta_k : ndarray of float64, shape (K,)
        1/T_k (read-only; 0 for a prior rung).
    """

    temperature_k: FloatArray
    beta_k: FloatArray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        t = np.array(self.temperature_k, dtype=np.float64)
        if (t.ndim != 1 or t.size < 1 or not np.all(np.isfinite(t[:-1]))
                or np.isnan(t[-1]) or np.any(t <= 0) or np.any(np.diff(t) <= 0)
                or (t.size == 1 and np.isinf(t[0]))):
            raise ConfigError(f"temperatures = {np.asarray(self.temperature_k).tolist()}; "
                              "expected a strictly ascending list of positive numbers (only "
                              "the last may be inf, the prior rung, above a finite one)")
        t.flags.writeable = False
        beta = 1.0 / t
        beta.flags.writeable = False
        object.__setattr__(self, "temperature_k", t)
        object.__setattr__(self, "beta_k", beta)

    @classmethod
    def geometric(cls, t_min: float, t_max: float, n: int) -> Ladder:
        """``n`` temperatures spaced geometrically from ``t_min`` to ``t_max``."""
        if not (isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 1):
            raise ConfigError(f"n_temperatures = {n!r}; expected an integer >= 1")
        if not (np.isfinite(t_min) and t_min > 0):
            raise ConfigError(f"t_min = {t_min!r}; expected a positive temperature")
        if not (np.isfinite(t_max) and t_max >= t_min):
            raise ConfigError(f"t_max = {t_max!r} is below t_min = {t_min!r}; expected "
                              "t_min <= t_max")
        if n > 1 and t_max == t_min:
            raise ConfigError(f"t_min = t_max = {t_min} with {n} temperatures; expected "
                              "t_min < t_max")
        return cls(geometric_temperatures(t_min, t_max, int(n)))

    @classmethod
    def from_temperatures(cls, temperatures: Sequence[float] | FloatArray) -> Ladder:
        """An explicit ladder (strictly ascending positive temperatures)."""
        return cls(np.asarray(temperatures, dtype=np.float64))

    @classmethod
    def single(cls, temperature: float = 1.0) -> Ladder:
        """A single chain at ``temperature``: a one-rung ladder."""
        if not (np.isfinite(temperature) and temperature > 0):
            raise ConfigError(f"temperature T = {temperature}; expected a positive finite "
                              "number")
        return cls(np.array([float(temperature)]))

    def with_prior_rung(self) -> Ladder:
        """The same rungs plus one at ``T = inf`` (``beta = 0``) above the hottest."""
        if self.has_prior_rung:
            return self
        return Ladder(np.append(self.temperature_k, np.inf))

    @property
    def has_prior_rung(self) -> bool:
        """True if the hottest rung is the prior (``T = inf``)."""
        return bool(np.isinf(self.temperature_k[-1]))

    @property
    def n_temperatures(self) -> int:
        """K, the number of rungs."""
        return int(self.temperature_k.size)

    def __len__(self) -> int:
        return self.n_temperatures

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Ladder)
                and np.array_equal(self.temperature_k, other.temperature_k))

    def __hash__(self) -> int:
        return hash(self.temperature_k.tobytes())
