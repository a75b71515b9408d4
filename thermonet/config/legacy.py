"""Configurations written before the ``[ladder]`` section existed, moved to the current form:
``[sampler] name = "rehmc"`` with ``[sampler.inner]``, or a single chain's ``[sampler]
temperature``/``n_trajectories``."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from thermonet.config.schema import toml_value
from thermonet.errors import ConfigError

#: the former [sampler] name = "rehmc" keys that now live in [ladder], with the defaults
#: they had there
_LEGACY_LADDER_DEFAULTS = {"n_temperatures": 16, "t_min": 1e-2, "t_max": 1.0,
                           "n_trajectories": 10}
_LEGACY_LADDER_KEYS = ("n_temperatures", "t_min", "t_max", "temperatures", "n_trajectories",
                       "swap_scheme", "n_swaps")
_LEGACY_RE_MARKERS = ("inner", "sampler", "n_temperatures", "t_min", "t_max", "temperatures",
                      "swap_scheme", "n_swaps")


def translate_legacy(raw: Mapping[str, Any], *, warn: bool = True
                     ) -> tuple[dict[str, Any], dict[str, str]]:
    """Move a configuration written before ``[ladder]`` existed to the current form.

    Returns the translated document and the renamed keys (old dotted key -> new one). A
    document already in the current form is returned unchanged (with an empty map). With
    ``warn``, a translation issues a DeprecationWarning that shows the new form.
    """
    sampler = raw.get("sampler")
    if not isinstance(sampler, dict):
        return dict(raw), {}
    name = sampler.get("name")
    if name == "rehmc" or (name is None and "ladder" not in raw
                           and any(k in sampler for k in _LEGACY_RE_MARKERS)):
        kind = "rehmc"
    elif ("temperature" in sampler or "n_trajectories" in sampler) and "ladder" not in raw:
        kind = "single"
    else:
        return dict(raw), {}
    doc = {k: (dict(v) if isinstance(v, dict) else v) for k, v in raw.items()}
    old = dict(sampler)
    old.pop("name", None)
    moved: dict[str, Any] = {}
    renamed: dict[str, str] = {}
    if kind == "rehmc":
        inner = old.pop("inner", None) or {}
        if not isinstance(inner, dict):
            raise ConfigError(f"sampler.inner = {inner!r} has the wrong type; expected a table of "
                              "the per-temperature sampler's settings, e.g. [sampler.inner] "
                              "n_leapfrog = 100 (better: put them in [sampler] and the "
                              "temperatures in [ladder], docs/config.md)")
        new_sampler: dict[str, Any] = {"name": old.pop("sampler", "hmc")}
        renamed["sampler.sampler"] = "sampler.name"
        for key in _LEGACY_LADDER_KEYS:
            if key in old:
                moved[key] = old.pop(key)
        if not moved.get("temperatures"):
            moved.pop("temperatures", None)
            for key, value in _LEGACY_LADDER_DEFAULTS.items():
                moved.setdefault(key, value)
        else:
            moved.setdefault("n_trajectories", _LEGACY_LADDER_DEFAULTS["n_trajectories"])
        new_sampler.update(old)
        new_sampler.update(inner)
        renamed.update({f"sampler.inner.{k}": f"sampler.{k}" for k in inner})
        renamed.update({f"sampler.{k}": f"ladder.{k}" for k in _LEGACY_LADDER_KEYS})
        what = '[sampler] name = "rehmc" with [sampler.inner]'
    else:
        if "temperature" in old:
            moved["temperatures"] = [old.pop("temperature")]
        if "n_trajectories" in old:
            moved["n_trajectories"] = old.pop("n_trajectories")
        new_sampler = {**({"name": name} if name is not None else {}), **old}
        renamed.update({"sampler.temperature": "ladder.temperatures",
                        "sampler.n_trajectories": "ladder.n_trajectories"})
        what = "[sampler] temperature / n_trajectories of a single chain"
    ladder = dict(doc.get("ladder", {}) or {})
    for key, value in moved.items():
        ladder.setdefault(key, value)
    doc["sampler"] = new_sampler
    doc["ladder"] = ladder
    if warn:
        def show(table: Mapping[str, Any]) -> str:
            return ", ".join(f"{k} = {toml_value(v)}" for k, v in table.items()
                             if v is not None and not isinstance(v, dict))

        warnings.warn(f"{what} is deprecated; write [sampler] {show(new_sampler)} and "
                      f"[ladder] {show(ladder)} (docs/config.md)", DeprecationWarning,
                      stacklevel=3)
    return doc, renamed


def rename_sources(sources: Mapping[str, str], renamed: Mapping[str, str]) -> dict[str, str]:
    """``sources`` (dotted key -> where it was set) under the keys' new names."""
    return {renamed.get(k, k): v for k, v in sources.items()}
