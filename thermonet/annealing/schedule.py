"""The temperature schedule and the early-stopping rule on the validation curve."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from thermonet import config as cfgmod
from thermonet.types import FloatArray


def geometric_schedule(t_start: float, t_end: float, n: int) -> FloatArray:
    """``T_k = t_start (t_end/t_start)^(k/(n-1))``, k = 0..n-1, with both ends exact.

    Parameters
    ----------
    t_start, t_end : float
        First and last temperature (``t_start > t_end`` for cooling).
    n : int
        Number of temperatures; ``n = 1`` gives ``[t_start]``.

    Returns
    -------
    ndarray of float64, shape (n,)
    """
    if n == 1:
        return np.array([float(t_start)])
    t_k = float(t_start) * (float(t_end) / float(t_start)) ** (np.arange(n) / (n - 1))
    t_k[0], t_k[-1] = float(t_start), float(t_end)
    return t_k


def running_average(values: Sequence[float], window: int) -> FloatArray:
    """``m_k = mean(values[max(0, k - window + 1) : k + 1])`` (the first ones over fewer).

    Returns
    -------
    ndarray of float64, shape (len(values),)
    """
    v = np.asarray(values, dtype=np.float64)
    out = np.empty_like(v)
    for k in range(v.shape[0]):
        out[k] = np.mean(v[max(0, k - window + 1): k + 1])
    return out


def best_index(values: Sequence[float] | FloatArray, min_delta: float = 0.0) -> int:
    """Index of the best (lowest) value, where a later value counts as better only if it is
    more than ``min_delta`` below the best so far (so ties keep the earlier one)."""
    v = np.asarray(values, dtype=np.float64)
    best = 0
    for k in range(1, v.shape[0]):
        if v[k] < v[best] - min_delta:
            best = k
    return best


def stop_index(curve: Sequence[float], patience: int, window: int = 1,
               min_delta: float = 0.0) -> int | None:
    """The temperature after which annealing stops, or None if it does not stop on ``curve``.

    The rule ("the average validation error starts to increase", made robust to noise): let
    ``m_k`` be the running average of ``curve`` over ``window`` temperatures
    (:func:`running_average`) and ``b_k`` the index of the best ``m_j``, j <= k
    (:func:`best_index` with ``min_delta``). Annealing stops after temperature k as soon as
    ``k - b_k >= patience``: ``patience`` temperatures in a row have not improved on the best.

    Parameters
    ----------
    curve : sequence of float
        Average validation error at each temperature, in schedule order.
    patience : int
    window : int
    min_delta : float

    Returns
    -------
    int or None
    """
    m = running_average(curve, window)
    best = 0
    for k in range(m.shape[0]):
        if k > 0 and m[k] < m[best] - min_delta:
            best = k
        if k - best >= patience:
            return k
    return None


def schedule_of(cfg: cfgmod.ResolvedConfig) -> FloatArray:
    """The temperatures of a resolved configuration, hottest first."""
    a = cfg["anneal"]
    if a["temperatures"]:
        return np.asarray(a["temperatures"], dtype=np.float64)
    return geometric_schedule(a["t_start"], a["t_end"], a["n_temperatures"])
