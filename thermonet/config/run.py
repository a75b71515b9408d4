"""The run configuration: TOML in, validated and fully resolved settings out.

One file describes a run (see docs/config.md for every key)::

    [run]          seed, n_iterations (total), checkpoint_every, sample_every, adapt_every, ...
    [data]         name (D50, D500, D5000, D<n>), test (auto | complement | official)
    [architecture] name (M1, M3, M3*, mlp, ...) and the architecture's own settings, among
                   them prior_scale (c of the box prior sigma_i = c/sqrt(k_i))
    [prior]        gaussian_std, gaussian_tempered (an optional Gaussian prior)
    [init]         minimise, burn_in, params (a file to start from instead of a draw)
    [minimiser]    name (rmin, fire) and its settings
    [sampler]      name (rehmc, hmc, or a plugin) and its settings; [sampler.inner] for rehmc

Validation happens before any work: unknown keys (with a did-you-mean suggestion), wrong types
and out-of-range values are rejected with a message naming the key, the value received and what
is allowed. Every default is made explicit in the resolved configuration, together with where
each value came from (``default``, ``config``, ``set`` for ``--set``, ``commandline``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from thermonet.config.schema import (
    REQUIRED,
    ResolvedConfig,
    apply_overrides,
    plugin_defaults,
    plugin_settings,
    read_toml,
    resolve_section,
    suggest,
)
from thermonet.errors import ConfigError

#: keys of the runner's own sections: name -> (default, allowed types, check, help)
_POS_INT = (lambda v: v >= 1, "an integer >= 1")
_NONNEG_INT = (lambda v: v >= 0, "an integer >= 0")
RUN_KEYS: dict[str, tuple[Any, tuple[type, ...], Any, str]] = {
    "seed": (0, (int,), _NONNEG_INT, "master seed of every random stream"),
    "n_iterations": (100, (int,), _POS_INT, "total iterations (resume continues up to it)"),
    "checkpoint_every": (10, (int,), _POS_INT, "iterations between checkpoints"),
    "sample_every": (10, (int,), _NONNEG_INT,
                     "iterations between stored parameter vectors (0: never)"),
    "adapt_every": (25, (int,), _NONNEG_INT,
                    "iterations between step-size adaptations (0: only at initialisation)"),
    "adapt_factor": (0.9, (float, int), (lambda v: 0 < v < 1, "a number in (0, 1)"),
                     "multiplicative factor of the periodic adaptation"),
    "discard": (0.2, (float, int), (lambda v: 0 <= v < 1, "a fraction in [0, 1)"),
                "fraction of iterations discarded as burn-in in summaries"),
    "workers": (1, (int,), _POS_INT, "threads running replicas in parallel"),
}
DATA_KEYS: dict[str, tuple[Any, tuple[type, ...], Any, str]] = {
    "name": ("D50", (str,), (lambda v: bool(v), "a data set name such as D500"),
             "training set"),
    "test": ("auto", (str,), (lambda v: v in ("auto", "complement", "official"),
                              "one of auto, complement, official"), "test set"),
}
PRIOR_KEYS: dict[str, tuple[Any, tuple[type, ...], Any, str]] = {
    "gaussian_std": (None, (float, int, dict), (
        lambda v: (all(isinstance(x, (int, float)) and x > 0 for x in v.values())
                   if isinstance(v, dict) else v > 0),
        "a positive width, or a table of positive widths by parameter group"),
        "add a Gaussian prior: one width, or widths per group (layer1.weight, bias, default...)"),
    "gaussian_tempered": (True, (bool,), None,
                          "true: target [p(D|w) p(w)]^(1/T); false: p(D|w)^(1/T) p(w)"),
}
INIT_KEYS: dict[str, tuple[Any, tuple[type, ...], Any, str]] = {
    "minimise": (True, (bool,), None, "minimise each initial draw with the minimiser"),
    "burn_in": ([20, 80], (list,), (lambda v: all(isinstance(n, int) and n >= 0 for n in v),
                                    "a list of non-negative integers"),
                "burn-in blocks: coarse dt adaptation then that many trajectories each"),
    "params": ("", (str,), None, "start every replica from this parameter file instead"),
}
#: keys of [sampler] handled by the runner (not passed to the sampler's Config)
SAMPLER_RUNNER_KEYS: dict[str, tuple[Any, tuple[type, ...], Any, str]] = {
    "mass": ("unit", (str,), (lambda v: v in ("unit", "fan_in"), "unit or fan_in"),
             "per-parameter masses: 1, or the fan-in k_i"),
}
SINGLE_CHAIN_KEYS: dict[str, tuple[Any, tuple[type, ...], Any, str]] = {
    "temperature": (1.0, (float, int), (lambda v: v > 0, "a positive temperature"),
                    "T of a single-chain run"),
    "n_trajectories": (1, (int,), _POS_INT, "transitions per iteration"),
}
SECTIONS = ("run", "data", "architecture", "prior", "init", "minimiser", "sampler")
PLUGIN_SECTIONS = {"architecture": "architecture", "minimiser": "minimiser",
                   "sampler": "sampler"}
DEFAULT_NAMES = {"architecture": "M3", "minimiser": "rmin", "sampler": "rehmc"}


def resolve(raw: Mapping[str, Any], overrides: Mapping[str, Any] | None = None,
            override_source: str = "set") -> ResolvedConfig:
    """Validate ``raw`` (a parsed TOML document) plus dotted ``overrides`` and fill defaults.

    Loads the named plugins' classes (to validate their settings), which imports them.
    """
    from thermonet import registry

    doc, given_sources = apply_overrides(raw, overrides, override_source)
    for section in doc:
        if section not in SECTIONS:
            raise ConfigError(f"unknown section [{section}]{suggest(section, list(SECTIONS))} "
                              f"Valid sections: {', '.join(SECTIONS)}")
        if not isinstance(doc[section], dict):
            raise ConfigError(f"[{section}] must be a table; got {doc[section]!r}")
    sources: dict[str, str] = {}
    out: dict[str, Any] = {}
    out["run"], _ = resolve_section("run", doc.get("run", {}), RUN_KEYS, sources, given_sources)
    out["data"], _ = resolve_section("data", doc.get("data", {}), DATA_KEYS, sources,
                                    given_sources)
    out["prior"], _ = resolve_section("prior", doc.get("prior", {}), PRIOR_KEYS, sources,
                                     given_sources)
    out["init"], _ = resolve_section("init", doc.get("init", {}), INIT_KEYS, sources,
                                    given_sources)
    for section, role in PLUGIN_SECTIONS.items():
        given = dict(doc.get(section, {}))
        name = given.pop("name", DEFAULT_NAMES[section])
        sources[f"{section}.name"] = given_sources.get(
            f"{section}.name", "config" if "name" in doc.get(section, {}) else "default")
        if not isinstance(name, str):
            raise ConfigError(f"{section}.name = {name!r}; expected a plugin name (string)")
        cls = registry.load(role, name)
        table: dict[str, Any] = {"name": name}
        if section == "sampler":
            runner_keys = dict(SAMPLER_RUNNER_KEYS)
            is_re = name == "rehmc"
            if not is_re:
                runner_keys.update(SINGLE_CHAIN_KEYS)
            own, rest = resolve_section("sampler", given, runner_keys, sources, given_sources,
                                       extra_ok=True)
            table.update(own)
            if is_re:
                if "workers" in rest:
                    raise ConfigError("sampler.workers is not a setting of a run; set "
                                      "run.workers (threads running replicas) instead")
                inner_given = dict(rest.pop("inner", {}) or {})
                settings = plugin_settings("sampler", cls, rest, sources, given_sources)
                inner_name = settings.get("sampler", "hmc")
                inner_cls = registry.load("sampler", inner_name)
                settings["inner"] = plugin_settings("sampler.inner", inner_cls, inner_given,
                                                     sources, given_sources)
                settings["temperatures"] = (list(settings["temperatures"])
                                            if settings.get("temperatures") else None)
                settings.pop("workers", None)
                sources.pop("sampler.workers", None)
                table.update(settings)
            else:
                table.update(plugin_settings("sampler", cls, rest, sources, given_sources))
        else:
            table.update(plugin_settings(section, cls, given, sources, given_sources))
        out[section] = table
    if (out["prior"]["gaussian_std"] is not None and not out["prior"]["gaussian_tempered"]
            and out["sampler"]["name"] == "rehmc"):
        raise ConfigError("prior.gaussian_tempered = false (an untempered Gaussian prior) cannot "
                          "be used with replica exchange, whose swaps need one target family "
                          "exp(-U/T); set it to true or use a single-chain sampler")
    resolved = ResolvedConfig(out, sources)
    build_plugin_configs(resolved)         # value checks of the plugins' own Config classes
    return resolved


def build_plugin_configs(cfg: ResolvedConfig) -> dict[str, Any]:
    """Instantiate each plugin's Config (runs its value checks); returns role -> Config."""
    from thermonet import registry

    built: dict[str, Any] = {}
    for section, role in PLUGIN_SECTIONS.items():
        table = dict(cfg[section])
        name = table.pop("name")
        cls = registry.load(role, name)
        config_cls = getattr(cls, "Config", None)
        if section == "sampler":
            runner_keys = dict(SAMPLER_RUNNER_KEYS)
            if name != "rehmc":
                runner_keys.update(SINGLE_CHAIN_KEYS)
            for key in runner_keys:
                table.pop(key, None)
        if config_cls is not None and dataclasses.is_dataclass(config_cls):
            if "temperatures" in table and table["temperatures"] is None:
                table.pop("temperatures")
            try:
                built[section] = config_cls(**table)
            except TypeError as err:
                raise ConfigError(f"[{section}] {name}: {err}") from None
            if section == "sampler" and name == "rehmc":
                inner_cls = registry.load("sampler", table.get("sampler", "hmc"))
                inner_cfg = getattr(inner_cls, "Config", None)
                if inner_cfg is not None and dataclasses.is_dataclass(inner_cfg):
                    inner_cfg(**{k: v for k, v in table.get("inner", {}).items()
                                 if v is not None or k in plugin_defaults(inner_cls)})
        else:
            built[section] = table
    return built


def load(path: str | Path, overrides: Mapping[str, Any] | None = None,
         commandline: Mapping[str, Any] | None = None) -> ResolvedConfig:
    """Read, merge (file < --set < command-line options) and validate a run configuration."""
    merged = dict(overrides or {})
    merged.update(commandline or {})
    cfg = resolve(read_toml(path), merged)
    for key in commandline or {}:
        cfg.sources[key] = "commandline"
    return cfg
