"""The paper's stopping rule: the temperature below which the test energy stops improving
(Baldock & Marzari 2019, Sec. 4), and the choice of the best temperature."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from thermonet.errors import ConfigError
from thermonet.types import FloatArray

#: the stopping rule stops cooling when the test error exceeds the lowest so far by more than
#: this many combined standard errors
STOP_SIGMA = 2.0


#: consecutive temperatures above the running minimum that stop the cooling
STOP_PATIENCE = 3


def stopping_rule(temperatures: Any, values: Any, errors: Any = None, *,
                  n_sigma: float = STOP_SIGMA, patience: int = STOP_PATIENCE
                  ) -> dict[str, float]:
    """The paper's stopping rule along a ladder, from the hottest temperature to the coldest.

    "Cool until the average validation error starts to increase, then revert to the parameters
    with the lowest validation error" (Baldock & Marzari 2019, Sec. 3.4). Walking from
    ``T_max`` down, keep the running minimum ``m`` of ``values`` (NaN values are skipped).
    A temperature is a *rise* when its value exceeds ``m`` by more than
    ``n_sigma * sqrt(err^2 + err_m^2)`` (a NaN error counts as 0, so with ``n_sigma = 0`` or
    without errors any increase is a rise). Cooling stops at the ``patience``-th consecutive
    rise (one noisy point among many temperatures is not an increase of the *average*
    error; ``patience = 1`` stops at the first rise). The result is the temperature of the
    running minimum at that point; if cooling never stops, the minimum over the whole ladder.

    Parameters
    ----------
    temperatures : array_like, shape (K,), ascending
    values : array_like, shape (K,)
        The validation quantity at each temperature (e.g. the mean test error).
    errors : array_like, shape (K,), optional
        Their standard errors.
    n_sigma : float
    patience : int
        Consecutive rises that stop the cooling (>= 1).

    Returns
    -------
    dict of float
        ``temperature`` and ``value`` of the selected point, ``index`` (its slot; NaN if every
        value is NaN), ``stopped_at`` (the temperature where the increase was detected, NaN if
        cooling reached the coldest temperature without stopping): the first of the
        ``patience`` consecutive rises.
    """
    if isinstance(patience, bool) or not isinstance(patience, (int, np.integer)) or patience < 1:
        raise ConfigError(f"patience = {patience!r}; expected an integer >= 1")
    t = np.asarray(temperatures, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    e = np.zeros_like(v) if errors is None else np.asarray(errors, dtype=np.float64)
    if not (t.shape == v.shape == e.shape) or t.ndim != 1:
        raise ConfigError(f"stopping_rule needs temperatures, values and errors of one shape; "
                          f"got {t.shape}, {v.shape}, {e.shape}")
    e = np.where(np.isfinite(e), e, 0.0)
    best = -1
    stopped = math.nan
    rises: list[int] = []
    for k in range(t.size - 1, -1, -1):
        if not np.isfinite(v[k]):
            continue
        if best < 0 or v[k] < v[best]:
            best = k
            rises.clear()
            continue
        if v[k] - v[best] > n_sigma * math.hypot(e[k], e[best]) and v[k] > v[best]:
            rises.append(k)
            if len(rises) >= patience:
                stopped = float(t[rises[0]])
                break
        else:
            rises.clear()
    if best < 0:
        return {"temperature": math.nan, "value": math.nan, "index": math.nan,
                "stopped_at": math.nan}
    return {"temperature": float(t[best]), "value": float(v[best]), "index": float(best),
            "stopped_at": stopped}


def best_temperature(temps: FloatArray, table: dict[str, np.ndarray], stop_sigma: float,
          stop_patience: int = STOP_PATIENCE) -> dict[str, float]:
    """The temperature of lowest test error and of lowest test energy, and the stopping rule's
    temperature (cooling from the top until the test error rises ``stop_sigma`` standard errors
    above its running minimum at ``stop_patience`` temperatures in a row)."""
    def argmin(col: str) -> tuple[float, float]:
        v = table[col]
        if not np.any(np.isfinite(v)):
            return math.nan, math.nan
        k = int(np.nanargmin(v))
        return float(temps[k]), float(v[k])

    out: dict[str, float] = {}
    out["min_test_error_temperature"], out["min_test_error"] = argmin("test_error")
    out["min_test_energy_temperature"], out["min_test_energy_per_point"] = \
        argmin("test_energy_per_point")
    out["min_predictive_test_error_temperature"], out["min_predictive_test_error"] = \
        argmin("predictive_test_error")
    out["min_predictive_test_energy_temperature"], out["min_predictive_test_energy_per_point"] \
        = argmin("predictive_test_energy_per_point")
    rule = stopping_rule(temps, table["test_error"], table["test_error_err"], n_sigma=stop_sigma,
                         patience=stop_patience)
    out["stopping_temperature"] = rule["temperature"]
    out["stopping_test_error"] = rule["value"]
    out["stopping_index"] = rule["index"]
    out["stopping_stopped_at"] = rule["stopped_at"]
    return out
