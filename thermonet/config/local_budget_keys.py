"""The ``[ladder]`` keys of the per-rung local budget (:mod:`thermonet.tempering.local_budget`)
and their cross-check with the slow band."""

from __future__ import annotations

from typing import Any

from thermonet.errors import ConfigError

#: ``[ladder] local_budget``: the same trajectories per rung, or chosen in warm-up per rung
LOCAL_BUDGETS = ("uniform", "adaptive")

KEYS: dict[str, tuple[Any, tuple[type, ...], Any, str]] = {
    "local_budget": ("uniform", (str,), (lambda v: v in LOCAL_BUDGETS,
                                         "one of " + ", ".join(LOCAL_BUDGETS)),
                     ("trajectories per rung between swap rounds: uniform, n_trajectories "
                      "(and the slow band) everywhere; adaptive, measured in warm-up (after "
                      "the step sizes) over local_budget_iterations iterations: each rung's "
                      "count set so that its energy autocorrelation across a round is the "
                      "same everywhere, at the uniform scheme's total, then frozen")),
    "local_budget_iterations": (200, (int,), (lambda v: v >= 1, "an integer >= 1"),
                                "warm-up iterations measuring each rung's energy "
                                "autocorrelation for local_budget = \"adaptive\""),
    "local_budget_bounds": ([1, 16], (list,), (
        lambda v: len(v) == 2 and all(isinstance(n, int) and not isinstance(n, bool)
                                      for n in v) and 1 <= v[0] <= v[1],
        "[lo, hi], integers with 1 <= lo <= hi"),
        "fewest and most trajectories per swap round one rung gets from the adaptive budget"),
}


def check(table: dict[str, Any]) -> None:
    """A one-line :class:`ConfigError` if the adaptive budget meets a slow band (both would
    set the trajectories of the same rungs)."""
    if table["local_budget"] == "adaptive" and table["slow_band"]:
        raise ConfigError(f"ladder.local_budget = \"adaptive\" with slow_band = "
                          f"{table['slow_band']}; expected one of them: the adaptive budget "
                          "chooses every rung's trajectories itself (remove slow_band)")


__all__ = ["KEYS", "LOCAL_BUDGETS", "check"]
