"""The interval for a ratio of Poisson rates (round trips of two schemes at an equal budget)."""

import math

import numpy as np
import pytest
from scipy.stats import binom

from thermonet.stats import rate_ratio_interval


def test_the_ends_are_the_binomial_tails_they_are_defined_by():
    a, b = 25, 4
    low, high = rate_ratio_interval(a, b)
    n = a + b
    # Clopper-Pearson: at the lower end P(X >= a) = 2.5 %, at the upper end P(X <= a) = 2.5 %
    assert binom.sf(a - 1, n, low / (1 + low)) == pytest.approx(0.025, rel=1e-8)
    assert binom.cdf(a, n, high / (1 + high)) == pytest.approx(0.025, rel=1e-8)


def test_no_events_of_one_kind_give_closed_forms():
    low, high = rate_ratio_interval(25, 0)
    p = 0.025 ** (1 / 25)
    assert high == math.inf and low == pytest.approx(p / (1 - p), rel=1e-10)
    assert rate_ratio_interval(0, 7)[0] == 0.0
    assert rate_ratio_interval(0, 0) == (0.0, math.inf)


def test_swapping_the_counts_inverts_the_interval():
    low, high = rate_ratio_interval(9, 31, level=0.9)
    low_r, high_r = rate_ratio_interval(31, 9, level=0.9)
    assert low == pytest.approx(1 / high_r, rel=1e-10) and high == pytest.approx(1 / low_r,
                                                                                  rel=1e-10)


def test_coverage_is_at_least_the_level():
    rng = np.random.default_rng(5)
    rho, mean_b, n = 3.0, 5.0, 3000
    a = rng.poisson(rho * mean_b, n)
    b = rng.poisson(mean_b, n)
    covered = np.mean([lo <= rho <= hi for lo, hi in
                       (rate_ratio_interval(int(x), int(y)) for x, y in zip(a, b, strict=True))])
    # exact intervals are conservative; the estimate's own error is sqrt(0.95 * 0.05 / n) = 0.004
    assert covered >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / n)
    assert covered < 0.995      # not vacuous: a too-wide interval would cover nearly always


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="counts -1"):
        rate_ratio_interval(-1, 3)
