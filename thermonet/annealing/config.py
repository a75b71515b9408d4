"""The anneal configuration: the run's ``[run]``, ``[data]``, ``[architecture]``,
``[minimiser]`` and ``[sampler]`` sections, resolved by the shared schema engine, plus
``[anneal]``."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from thermonet import config as cfgmod
from thermonet.errors import ConfigError

VALIDATION_POOLS = ("auto", "mnist", "embedded", "train")


STARTS = ("draw", "minimum", "params")


_Schema = dict[str, tuple[Any, tuple[type, ...], Any, str]]


ANNEAL_RUN_KEYS: _Schema = {
    "seed": (0, (int,), (lambda v: v >= 0, "an integer >= 0"),
             "master seed: initial draw, chain and validation set"),
}


ANNEAL_KEYS: _Schema = {
    "t_start": (10.0, (float, int), (lambda v: math.isfinite(v) and v > 0, "a positive number"),
                "first (hottest) temperature of the geometric schedule"),
    "t_end": (1e-3, (float, int), (lambda v: math.isfinite(v) and v > 0, "a positive number"),
              "last (coldest) temperature of the geometric schedule"),
    "n_temperatures": (16, (int,), (lambda v: v >= 1, "an integer >= 1"),
                       "temperatures of the geometric schedule"),
    "temperatures": ([], (list,), (
        lambda v: all(isinstance(t, (int, float)) and not isinstance(t, bool)
                      and math.isfinite(t) and t > 0 for t in v)
        and all(a > b for a, b in itertools.pairwise(v)),
        "a list of positive, strictly decreasing temperatures"),
        "explicit schedule (replaces t_start, t_end, n_temperatures when not empty)"),
    "n_trajectories": (50, (int,), (lambda v: v >= 1, "an integer >= 1"),
                       "HMC trajectories at each temperature"),
    "burn_in": (0, (int,), (lambda v: v >= 0, "an integer >= 0"),
                "first trajectories at each temperature left out of the averages"),
    "patience": (3, (int,), (lambda v: v >= 1, "an integer >= 1"),
                 "stop after this many temperatures without improvement"),
    "window": (1, (int,), (lambda v: v >= 1, "an integer >= 1"),
               "temperatures in the running average of the validation error"),
    "min_delta": (0.0, (float, int), (lambda v: v >= 0, "a number >= 0"),
                  "an improvement must lower the running average by more than this"),
    "n_validation": (1000, (int,), (lambda v: v >= 1, "a positive integer"),
                     ("validation cases: MNIST images, n/10 per class (a multiple of 10), or "
                      "cases held out of a regression training set")),
    "validation_pool": ("auto", (str,), (lambda v: v in VALIDATION_POOLS,
                                         "one of auto, mnist, embedded, train"),
                        ("where validation cases come from: MNIST images outside the training "
                         "set (auto, mnist, embedded), or the regression training set (auto, "
                         "train)")),
    "start": ("draw", (str,), (lambda v: v in STARTS, "one of draw, minimum, params"),
              "initial parameters: standard draw, its minimum ([minimiser]), or a file"),
    "params": ("", (str,), None, "parameter file for start = \"params\""),
    "adapt_factor": (0.9, (float, int), (lambda v: 0 < v < 1, "a number in (0, 1)"),
                     "factor of the step-size search at each temperature after the first"),
    "adapt_every": (0, (int,), (lambda v: v >= 0, "an integer >= 0"),
                    ("also adapt dt after every this many trajectories within a temperature "
                     "(0: only at the start of each temperature)")),
}


ANNEAL_SECTIONS = ("run", "data", "architecture", "anneal", "sampler", "minimiser")


def resolve_config(raw: Mapping[str, Any], overrides: Mapping[str, Any] | None = None,
                   override_source: str = "set") -> cfgmod.ResolvedConfig:
    """Validate an anneal configuration (a parsed TOML document) and fill every default.

    Sections: ``[run]`` seed; ``[data]`` name, test; ``[architecture]`` name and settings;
    ``[anneal]`` (:data:`ANNEAL_KEYS`); ``[sampler]`` the sampler's name (default ``hmc``), its
    settings (its ``Config``) and ``mass``, as in a run; ``[minimiser]`` name and settings
    (used with ``start = "minimum"``). Unknown keys raise :class:`ConfigError` with a
    did-you-mean suggestion.
    """
    from thermonet import registry

    doc, given_sources = cfgmod.apply_overrides(raw, overrides, override_source)
    for section, table_given in doc.items():
        if section not in ANNEAL_SECTIONS:
            raise ConfigError(f"unknown section [{section}] in an anneal configuration"
                              f"{cfgmod.suggest(section, list(ANNEAL_SECTIONS))} Valid "
                              f"sections: {', '.join(ANNEAL_SECTIONS)}")
        if not isinstance(table_given, dict):
            raise ConfigError(f"[{section}] must be a table; got {table_given!r}")
    if "anneal" not in doc:
        raise ConfigError("the configuration has no [anneal] section; expected one with e.g. "
                          "t_start, t_end, n_temperatures, n_trajectories, patience")
    sources: dict[str, str] = {}
    out: dict[str, Any] = {}
    out["run"], _ = cfgmod.resolve_section("run", doc.get("run", {}), ANNEAL_RUN_KEYS, sources,
                                          given_sources)
    out["data"], _ = cfgmod.resolve_section("data", doc.get("data", {}), cfgmod.DATA_KEYS,
                                           sources, given_sources)
    if out["data"]["path"]:
        raise ConfigError(f"data.path = {out['data']['path']!r}: thermonet anneal works on the "
                          "named data sets (the MNIST subsets and robot-arm); run a user's "
                          "data file with thermonet run")
    for section, role in (("architecture", "architecture"), ("minimiser", "minimiser")):
        given = dict(doc.get(section, {}))
        name = given.pop("name", cfgmod.DEFAULT_NAMES[section])
        if not isinstance(name, str):
            raise ConfigError(f"{section}.name = {name!r}; expected a plugin name (string)")
        sources[f"{section}.name"] = given_sources.get(
            f"{section}.name", "config" if "name" in doc.get(section, {}) else "default")
        cls = registry.load(role, name)
        out[section] = {"name": name, **cfgmod.plugin_settings(section, cls, given, sources,
                                                                given_sources)}
    given = dict(doc.get("sampler", {}))
    sampler_name = given.pop("name", cfgmod.DEFAULT_NAMES["sampler"])
    if not isinstance(sampler_name, str):
        raise ConfigError(f"sampler.name = {sampler_name!r}; expected a plugin name (string)")
    sources["sampler.name"] = given_sources.get(
        "sampler.name", "config" if "name" in doc.get("sampler", {}) else "default")
    sampler_cls = registry.load("sampler", sampler_name)
    own, rest = cfgmod.resolve_section("sampler", given, cfgmod.SAMPLER_RUNNER_KEYS, sources,
                                      given_sources, extra_ok=True)
    out["sampler"] = {"name": sampler_name, **own,
                      **cfgmod.plugin_settings("sampler", sampler_cls, rest, sources,
                                               given_sources)}
    a, _ = cfgmod.resolve_section("anneal", doc["anneal"], ANNEAL_KEYS, sources, given_sources)
    if a["temperatures"]:
        a["temperatures"] = [float(t) for t in a["temperatures"]]
    elif a["n_temperatures"] > 1 and not a["t_start"] > a["t_end"]:
        raise ConfigError(f"anneal.t_start = {a['t_start']} is not above anneal.t_end = "
                          f"{a['t_end']}; annealing cools: expected t_start > t_end")
    if a["burn_in"] >= a["n_trajectories"]:
        raise ConfigError(f"anneal.burn_in = {a['burn_in']} leaves no trajectory to average "
                          f"out of anneal.n_trajectories = {a['n_trajectories']}; expected "
                          "burn_in < n_trajectories")
    if a["start"] == "params" and not a["params"]:
        raise ConfigError("anneal.start = \"params\" needs anneal.params = \"FILE\" (a .npy, "
                          "JSON or thermonet HDF5 parameter file)")
    if a["params"] and a["start"] != "params":
        raise ConfigError(f"anneal.params = {a['params']!r} is only used with start = "
                          f"\"params\" (start is {a['start']!r}); set start = \"params\" or "
                          "remove params")
    out["anneal"] = a
    cfg = cfgmod.ResolvedConfig(out, sources)
    sampler_config(sampler_cls, out["sampler"])      # the sampler's own value checks
    return cfg


def sampler_config(sampler_cls: type[Any], table: Mapping[str, Any]) -> Any:
    """The sampler's ``Config`` from a resolved ``[sampler]`` table (lists as tuples)."""
    settings = {k: (tuple(v) if isinstance(v, list) else v)
                for k, v in table.items() if k not in ("name", "mass")}
    try:
        return sampler_cls.Config(**settings)
    except TypeError as err:
        raise ConfigError(f"[sampler] {table['name']}: {err}") from None


def load_config(path: str | Path, overrides: Mapping[str, Any] | None = None,
                commandline: Mapping[str, Any] | None = None) -> cfgmod.ResolvedConfig:
    """Read and validate an anneal configuration file (file < --set < command line)."""
    return cfgmod.load_layers(path, overrides, commandline, resolve_config)
