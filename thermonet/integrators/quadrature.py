"""Simpson's rule as the paper's code used it, and the trapezoid rule.

``simpson``: composite Simpson on an odd number of points; on an even number of points the
average of the two one-sided variants (Simpson on the first N-1 points plus a trapezoid on the
last interval, and a trapezoid on the first interval plus Simpson on the rest): SciPy's old
``simps(even='avg')``, which the paper's 102-point integration used (Baldock & Marzari's released
code). Implemented here because SciPy changed the default and then removed the option. Non-uniform
grids are supported (Simpson per interval pair with the exact parabola weights).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from thermonet.api.integrator import Integrator
from thermonet.types import FloatArray


def trapezoid_weights(x: FloatArray) -> FloatArray:
    """Composite trapezoid weights on the sorted grid ``x``."""
    h = np.diff(x)
    w = np.zeros_like(x)
    w[:-1] += 0.5 * h
    w[1:] += 0.5 * h
    return w


def _simpson_odd(x: FloatArray) -> FloatArray:
    """Composite Simpson weights for an odd number of points (exact for cubics)."""
    w = np.zeros_like(x)
    for i in range(0, len(x) - 2, 2):
        h0, h1 = x[i + 1] - x[i], x[i + 2] - x[i + 1]
        hs = h0 + h1
        w[i] += hs / 6 * (2 - h1 / h0)
        w[i + 1] += hs**3 / (6 * h0 * h1)
        w[i + 2] += hs / 6 * (2 - h0 / h1)
    return w


def simpson_weights(x: FloatArray) -> FloatArray:
    """Composite Simpson weights on the sorted grid ``x`` (even point counts: the average of
    the two one-sided variants)."""
    n = len(x)
    if n == 2:
        return trapezoid_weights(x)
    if n % 2 == 1:
        return _simpson_odd(x)
    first = np.zeros_like(x)
    first[:-1] = _simpson_odd(x[:-1])
    first[-2:] += trapezoid_weights(x[-2:])
    last = np.zeros_like(x)
    last[1:] = _simpson_odd(x[1:])
    last[:2] += trapezoid_weights(x[:2])
    return 0.5 * (first + last)


class Simpson(Integrator):
    """Simpson's rule; 'avg' treatment of an even number of points (the paper's code)."""

    name: ClassVar[str] = "simpson"

    def weights(self, lambdas: FloatArray) -> FloatArray:
        return simpson_weights(np.asarray(lambdas, dtype=np.float64))


class Trapezoid(Integrator):
    """The trapezoid rule."""

    name: ClassVar[str] = "trapezoid"

    def weights(self, lambdas: FloatArray) -> FloatArray:
        return trapezoid_weights(np.asarray(lambdas, dtype=np.float64))
