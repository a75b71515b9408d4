"""Quadrature rules for thermodynamic integration against exact integrals."""

from __future__ import annotations

import numpy as np
import pytest

from thermonet import registry
from thermonet.integrators.quadrature import Simpson, Trapezoid


@pytest.mark.parametrize("n", [3, 5, 11, 101])
def test_simpson_is_exact_for_cubics_on_odd_grids(n):
    x = np.linspace(0, 1, n)
    y = 1 - 2 * x + 3 * x**2 - 4 * x**3
    assert Simpson().integrate(x, y).value == pytest.approx(1 - 1 + 1 - 1, abs=1e-13)


@pytest.mark.parametrize("n", [4, 6, 102])
def test_simpson_avg_on_even_grids_matches_the_old_scipy_rule(n):
    """Even point count: the average of the two one-sided variants, against an independent
    implementation of SciPy's old ``simps(even='avg')``; exact for linear functions, with an
    O(h^3) error from the trapezoid end pieces otherwise."""
    x = np.linspace(0, 1, n)
    assert Simpson().integrate(x, 2 - 3 * x).value == pytest.approx(0.5, abs=1e-13)
    y = np.exp(-3 * x) + x**3
    h = x[1] - x[0]
    exact = (1 - np.exp(-3)) / 3 + 0.25
    assert abs(Simpson().integrate(x, y).value - exact) < 2 * h**3

    def simps_odd(yy, hh):
        return hh / 3 * (yy[0] + yy[-1] + 4 * yy[1:-1:2].sum() + 2 * yy[2:-1:2].sum())

    first = simps_odd(y[:-1], h) + 0.5 * h * (y[-2] + y[-1])
    last = 0.5 * h * (y[0] + y[1]) + simps_odd(y[1:], h)
    assert Simpson().integrate(x, y).value == pytest.approx(0.5 * (first + last), rel=1e-14)


def test_nonuniform_simpson_exact_for_quadratics():
    x = np.array([0.0, 0.1, 0.35, 0.4, 0.8, 0.85, 1.0])
    assert Simpson().integrate(x, 3 * x**2 - x).value == pytest.approx(1 - 0.5, abs=1e-13)


def test_trapezoid_and_error_propagation():
    x = np.linspace(0, 2, 5)
    r = Trapezoid().integrate(x, 3 * x + 1, sems=np.full(5, 0.1))
    assert r.value == pytest.approx(8.0)
    assert r.error == pytest.approx(0.1 * np.sqrt(np.sum(r.weights**2)))
    w = Simpson().weights(np.linspace(0, 1, 102))
    assert w.sum() == pytest.approx(1.0, abs=1e-14)


def test_integrators_registered():
    assert registry.load("integrator", "simpson") is Simpson
    assert registry.load("integrator", "trapezoid") is Trapezoid
