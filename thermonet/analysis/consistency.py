"""Whether independent runs agree on a number within the error bars each run claims.

Each run of a configuration gives an estimate ``x_i`` with its own standard error ``s_i``
(e.g. the log evidence by stepping stone). Two questions are answered here:

* the spread between runs, as a Student-t interval: ``mean ± t_{n-1, 1-a/2} sd / sqrt(n)``
  (``sd`` the sample standard deviation of the ``x_i``), which needs no trust in the ``s_i``;
* whether the ``s_i`` are honest: ``chi2 = sum (x_i - xbar_w)^2 / s_i^2`` about the
  inverse-variance weighted mean has ``n - 1`` degrees of freedom if they are; a small
  p-value says the within-run error bars are too small for the between-run spread (a run
  that has not mixed carries an error bar that does not cover the basins it missed), and the
  runs are not reported as agreeing. ``sqrt(chi2 / (n - 1))`` is the factor the error bars
  would need.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from thermonet.errors import ConfigError

#: the chi-square test's p-value below which the runs do not agree
AGREE_P_MIN = 0.05

#: the t-interval's level
LEVEL = 0.95


@dataclass(frozen=True)
class Consistency:
    """Between-run spread of one estimate and the chi-square test of the within-run errors.

    Attributes
    ----------
    n : int
    mean, sd : float
        Plain mean and sample standard deviation of the runs' values.
    low, high : float
        The Student-t interval of the mean at :data:`LEVEL`.
    weighted_mean : float
    chi2, p_value : float
        The statistic on ``n - 1`` degrees of freedom and its upper-tail probability.
    error_scale : float
        ``sqrt(chi2 / (n - 1))``: about 1 when the error bars are honest.
    agree : bool
        ``p_value >= AGREE_P_MIN``.
    """

    n: int
    mean: float
    sd: float
    low: float
    high: float
    weighted_mean: float
    chi2: float
    p_value: float
    error_scale: float
    agree: bool

    def to_dict(self) -> dict[str, Any]:
        """Plain numbers, with ``text``."""
        return {"n": self.n, "mean": self.mean, "sd": self.sd, "low": self.low,
                "high": self.high, "weighted_mean": self.weighted_mean, "chi2": self.chi2,
                "p_value": self.p_value, "error_scale": self.error_scale,
                "agree": self.agree, "text": self.describe()}

    def describe(self, what: str = "log Z") -> str:
        """One line: the interval and the verdict on the error bars."""
        half = (self.high - self.low) / 2
        head = (f"{what} over {self.n} runs: {self.mean:.4f}, {100 * LEVEL:g}% t-interval "
                f"± {half:.2g} (between-run sd {self.sd:.2g}); chi2 = {self.chi2:.1f} on "
                f"{self.n - 1} dof, p = {self.p_value:.2g}")
        if self.agree:
            return head + ": the runs agree within their error bars"
        return (head + f": the runs do NOT agree; their error bars are {self.error_scale:.1f}x "
                "too small for the spread between them (use the t-interval)")


def t_quantile(p: float, dof: int) -> float:
    """The ``p`` quantile of Student's t with ``dof`` degrees of freedom."""
    from scipy.stats import t

    return float(t.ppf(p, dof))


def chi2_upper(x: float, dof: int) -> float:
    """``P(chi2_dof > x)``."""
    from scipy.stats import chi2

    return float(chi2.sf(x, dof))


def consistency(values: Sequence[float], errors: Sequence[float], *,
                level: float = LEVEL, p_min: float = AGREE_P_MIN) -> Consistency:
    """:class:`Consistency` of runs' ``values`` with standard errors ``errors``.

    Raises
    ------
    ConfigError
        Fewer than two values, shapes that differ, or errors not positive and finite.
    """
    x = np.asarray(values, dtype=np.float64)
    s = np.asarray(errors, dtype=np.float64)
    if x.ndim != 1 or x.shape != s.shape or x.size < 2:
        raise ConfigError(f"consistency needs two or more values with one error each; got "
                          f"{x.size} values and {s.size} errors")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(s)) and np.all(s > 0)):
        raise ConfigError(f"errors {s.tolist()}; expected positive finite standard errors "
                          "(a run without an error bar cannot be tested)")
    n = int(x.size)
    mean = float(x.mean())
    sd = float(x.std(ddof=1))
    half = t_quantile(0.5 + level / 2, n - 1) * sd / math.sqrt(n)
    w = 1.0 / s ** 2
    wmean = float(np.sum(w * x) / np.sum(w))
    chi2 = float(np.sum(w * (x - wmean) ** 2))
    p = chi2_upper(chi2, n - 1)
    return Consistency(n, mean, sd, mean - half, mean + half, wmean, chi2, p,
                       math.sqrt(chi2 / (n - 1)), bool(p >= p_min))


__all__ = ["AGREE_P_MIN", "LEVEL", "Consistency", "chi2_upper", "consistency", "t_quantile"]
