"""Ranges of numbers, one definition for a configuration key and a command-line option alike.

A :class:`Range` is a schema check (``check[0](value)`` is the test, ``check[1]`` the text an
error message shows, as the tuples of :mod:`thermonet.config.schema`), so the same object
bounds ``mackay.tol`` in an evidence configuration and ``--tol`` of ``thermonet mackay``, and
the two refuse the same values with the same words. A float must also be finite: NaN compares
false with every bound and would otherwise pass a check written as ``not v < lo``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from thermonet.errors import ConfigError


@dataclass(frozen=True)
class Range:
    """The numbers from ``lo`` to ``hi`` (either may be None: unbounded), each end closed unless
    ``lo_open``/``hi_open``; integers only if ``integer``."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    integer: bool = False

    def test(self, value: Any) -> bool:
        """Whether ``value`` lies in the range."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if self.integer and not isinstance(value, int):
            return False
        if not math.isfinite(value):
            return False
        if self.lo is not None and (value <= self.lo if self.lo_open else value < self.lo):
            return False
        return not (self.hi is not None
                    and (value >= self.hi if self.hi_open else value > self.hi))

    @property
    def text(self) -> str:
        """What the range holds, as an error message says it (``an integer >= 1``)."""
        kind = "an integer" if self.integer else "a finite number"
        if self.lo is not None and self.hi is not None:
            return (f"{kind} in {'(' if self.lo_open else '['}{_num(self.lo)}, "
                    f"{_num(self.hi)}{')' if self.hi_open else ']'}")
        if self.lo is not None:
            return f"{kind} {'>' if self.lo_open else '>='} {_num(self.lo)}"
        if self.hi is not None:
            return f"{kind} {'<' if self.hi_open else '<='} {_num(self.hi)}"
        return kind

    def __getitem__(self, k: int) -> Any:
        """``(test, text)``, the shape of a schema check."""
        return (self.test, self.text)[k]

    def check(self, what: str, value: Any, fix: str = "") -> Any:
        """``value``, or a one-line :class:`ConfigError` naming ``what``, the value, the range
        and (if given) ``fix``."""
        if not self.test(value):
            raise ConfigError(f"{what} = {value!r} is out of range; expected {self.text}"
                              + (f"; {fix}" if fix else ""))
        return value


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


#: the ranges several keys and options share
COUNT = Range(lo=1, integer=True)            # restarts, cycles, draws
NON_NEGATIVE_INT = Range(lo=0, integer=True)  # steps that may be skipped, seeds, indices
POSITIVE = Range(lo=0, lo_open=True)          # tolerances, scales, temperatures
FRACTION = Range(lo=0, hi=1, hi_open=True)    # a burn-in fraction
ANY_NUMBER = Range()                          # finite: no NaN or inf

__all__ = ["ANY_NUMBER", "COUNT", "FRACTION", "NON_NEGATIVE_INT", "POSITIVE", "Range"]
