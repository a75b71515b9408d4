"""Checks of a starting point before any sampling: the first energy a run evaluates.

A potential plugin that raises, returns something that is not a number, a gradient of the wrong
shape or a non-finite gradient, or changes the parameters it is given, would otherwise surface
as a raw traceback deep in a sampler, or worse, as a run in which every proposal is divergent
(or that samples parameters other than its own) and that still exits 0. A start outside the
prior box (a box far smaller than the initial draw) is stuck for ever: every proposal ends
outside the box and is rejected. :func:`check_start` turns each of these into one line naming
the plugin, what it returned and what to change.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from thermonet.errors import ConfigError, PluginError, ThermonetError
from thermonet.types import FloatArray


def plugin_name(potential: Any) -> str:
    """How an error names the potential: its architecture's registered name and its class."""
    arch = getattr(potential, "arch", None)
    cls = type(potential)
    where = f"{cls.__module__}.{cls.__qualname__}"
    name = getattr(arch, "name", None)
    return f"{name!r} ({where})" if name else where


def check_energy(potential: Any, theta: FloatArray, what: str = "the starting point") -> None:
    """Evaluate ``potential.energy_and_grad(theta)`` once and refuse anything unusable."""
    name = plugin_name(potential)
    n = int(potential.n_params)
    probe = np.array(theta, dtype=np.float64)
    try:
        result = potential.energy_and_grad(probe)
    except ThermonetError:
        raise
    except Exception as err:
        raise PluginError(f"potential {name} raised {type(err).__name__}: {err} at {what}; "
                          "expected energy_and_grad(theta) to return (energy, gradient): fix "
                          "the plugin or its data") from None
    if not (isinstance(result, tuple) and len(result) == 2):
        raise PluginError(f"potential {name}: energy_and_grad returned {_show(result)} at "
                          f"{what}; expected a pair (energy, gradient of {n} numbers)")
    energy, grad = result
    if isinstance(energy, (bool, np.bool_)) or not isinstance(energy, (int, float, np.number)) \
            or np.iscomplexobj(energy):
        raise PluginError(f"potential {name}: the energy at {what} is {_show(energy)}; "
                          "expected a real number (a float)")
    garr = np.asarray(grad)
    if garr.shape != (n,) or not (np.issubdtype(garr.dtype, np.floating)
                                  or np.issubdtype(garr.dtype, np.integer)):
        raise PluginError(f"potential {name}: the gradient at {what} has shape {garr.shape} and "
                          f"dtype {garr.dtype}; expected {n} real numbers (one per parameter)")
    if not np.isfinite(energy):
        raise PluginError(f"potential {name}: the energy at {what} is {float(energy)}; "
                          "expected a finite number (every proposal from it would be "
                          "divergent): check the data and the plugin")
    moved = np.flatnonzero(~((probe == theta) | (np.isnan(probe) & np.isnan(theta))))
    if moved.size:
        raise PluginError(f"potential {name}: energy_and_grad changed its input theta at {what} "
                          f"({moved.size} of {n} parameters, first: {int(moved[0])}); expected "
                          "it to only read theta, since the sampler's state is that array: "
                          "fix the plugin (compute on a copy)")
    bad = ~np.isfinite(garr)
    if bad.any():
        first = ", ".join(str(i) for i in np.flatnonzero(bad)[:5])
        raise PluginError(f"potential {name}: the gradient at {what} is not finite in "
                          f"{int(bad.sum())} of {n} components (first: {first}); expected "
                          "finite numbers (every trajectory would diverge): fix the plugin")


def check_in_box(theta: FloatArray, prior: Any, what: str = "the starting point") -> None:
    """Refuse a start outside the prior box ``|theta_i| < a_i`` (stuck: every proposal out)."""
    if prior is None:
        return
    half = np.asarray(prior.half_width, dtype=np.float64)
    theta = np.asarray(theta, dtype=np.float64)
    ratio = np.abs(theta) / half
    outside = ~(ratio < 1.0)
    if not outside.any():
        return
    worst = int(np.nanargmax(np.where(np.isnan(ratio), np.inf, ratio)))
    raise ConfigError(
        f"{what} has {int(outside.sum())} of {theta.size} parameters outside the prior box "
        f"(parameter {worst}: |w| = {abs(theta[worst]):.3g} > half-width "
        f"{half[worst]:.3g}; half-widths {half.min():.3g} to {half.max():.3g}); expected a "
        "start inside the box, or every proposal is rejected: raise architecture.prior_scale "
        "or start from another point")


def _show(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"
