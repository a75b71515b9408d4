"""Run configurations: TOML in, validated and fully resolved settings out.

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

import copy
import dataclasses
import difflib
import inspect
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from thermonet.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

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


def _suggest(key: str, valid: list[str]) -> str:
    close = difflib.get_close_matches(key, valid, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _type_name(types: tuple[type, ...]) -> str:
    return " or ".join({int: "integer", float: "number", str: "string", bool: "true/false",
                        list: "list", dict: "table"}[t] for t in types)


def _check_value(where: str, key: str, value: Any, types: tuple[type, ...], check: Any) -> Any:
    if isinstance(value, bool) and bool not in types:
        ok = False
    else:
        ok = isinstance(value, types)
    if not ok:
        raise ConfigError(f"{where}.{key} = {value!r} has the wrong type; expected "
                          f"{_type_name(types)}")
    if float in types and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if check is not None and not check[0](value):
        raise ConfigError(f"{where}.{key} = {value!r} is out of range; expected {check[1]}")
    return value


def _resolve_table(where: str, given: Mapping[str, Any], schema: Mapping[str, Any],
                   sources: dict[str, str], given_sources: Mapping[str, str],
                   extra_ok: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """Fill ``schema`` defaults; return (resolved, leftover keys not in the schema)."""
    out: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for key, value in given.items():
        if key not in schema:
            if extra_ok:
                rest[key] = value
                continue
            raise ConfigError(f"unknown key {key!r} in [{where}]{_suggest(key, list(schema))} "
                              f"Valid keys: {', '.join(schema)}")
    for key, (default, types, check, _help) in schema.items():
        if key in given and given[key] is not None:
            out[key] = _check_value(where, key, given[key], types, check)
            sources[f"{where}.{key}"] = given_sources.get(f"{where}.{key}", "config")
        else:
            out[key] = copy.deepcopy(default)
            sources[f"{where}.{key}"] = "default"
    return out, rest


def _coerce_for_field(where: str, key: str, value: Any, annotation: str) -> Any:
    """Loose type check of a plugin setting against its dataclass annotation."""
    ann = annotation.replace(" ", "")
    allow_none = "None" in ann
    base = ann.replace("|None", "").replace("None|", "").replace("Optional[", "").rstrip("]") \
        if allow_none else ann
    if value is None and allow_none:
        return None
    if base in ("float",):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}.{key} = {value!r} has the wrong type; expected a number")
        return float(value)
    if base in ("int",):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}.{key} = {value!r} has the wrong type; expected an "
                              "integer")
        return value
    if base in ("bool",) and not isinstance(value, bool):
        raise ConfigError(f"{where}.{key} = {value!r} has the wrong type; expected true/false")
    if base in ("str",) and not isinstance(value, str):
        raise ConfigError(f"{where}.{key} = {value!r} has the wrong type; expected a string")
    if base.startswith("tuple") and isinstance(value, list):
        return tuple(value)
    return value


class _Required:
    def __repr__(self) -> str:
        return "<required>"


#: marks a constructor argument without a default: the config must give it
REQUIRED = _Required()


def plugin_defaults(cls: type) -> dict[str, Any]:
    """Defaults of a plugin's settings: its ``Config`` dataclass, or its constructor."""
    config_cls = getattr(cls, "Config", None)
    if config_cls is not None and dataclasses.is_dataclass(config_cls):
        out = {}
        for f in dataclasses.fields(config_cls):
            if f.default is not dataclasses.MISSING:
                out[f.name] = f.default
            elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
                out[f.name] = f.default_factory()  # type: ignore[misc]
        return out
    sig = inspect.signature(cls.__init__)
    return {n: (REQUIRED if p.default is inspect.Parameter.empty else p.default)
            for n, p in sig.parameters.items()
            if n != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def _plugin_settings(where: str, cls: type, given: Mapping[str, Any],
                     sources: dict[str, str], given_sources: Mapping[str, str]
                     ) -> dict[str, Any]:
    """Validate the settings of plugin class ``cls`` and fill its defaults."""
    defaults = plugin_defaults(cls)
    config_cls = getattr(cls, "Config", None)
    annotations: dict[str, str] = {}
    if config_cls is not None and dataclasses.is_dataclass(config_cls):
        annotations = {f.name: str(f.type) for f in dataclasses.fields(config_cls)}
    else:
        sig = inspect.signature(cls.__init__)
        if any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values()):
            raise ConfigError(f"[{where}] plugin {cls.__name__} takes **kwargs; its settings "
                              "cannot be validated")
        annotations = {n: str(p.annotation) for n, p in sig.parameters.items()
                       if p.annotation is not inspect.Parameter.empty}
    out: dict[str, Any] = {}
    for key, value in given.items():
        if key not in defaults:
            raise ConfigError(f"unknown key {key!r} in [{where}] ({cls.__name__})"
                              f"{_suggest(key, list(defaults))} Valid keys: "
                              f"{', '.join(sorted(defaults)) or 'none'}")
        out[key] = _coerce_for_field(where, key, value, annotations.get(key, "Any"))
        sources[f"{where}.{key}"] = given_sources.get(f"{where}.{key}", "config")
    for key, value in defaults.items():
        if key not in out:
            if value is REQUIRED:
                raise ConfigError(f"[{where}] {cls.__name__} needs the setting {key!r}; add "
                                  f"{key} = ... to [{where}]")
            out[key] = value
            sources[f"{where}.{key}"] = "default"
    return out


@dataclasses.dataclass
class ResolvedConfig:
    """A validated configuration with every default explicit.

    Attributes
    ----------
    data : dict
        section -> key -> value (TOML-serialisable).
    sources : dict
        "section.key" -> "default" | "config" | "set" | "commandline".
    """

    data: dict[str, Any]
    sources: dict[str, str]

    def __getitem__(self, section: str) -> dict[str, Any]:
        return self.data[section]

    def to_toml(self) -> str:
        """The resolved configuration as TOML, each value's origin in a comment."""
        lines = ["# Resolved thermonet configuration: every value explicit.",
                 "# Origin of each value: default | config | set (--set) | commandline.", ""]
        for section, table in self.data.items():
            plain = {k: v for k, v in table.items() if not isinstance(v, dict)}
            nested = {k: v for k, v in table.items() if isinstance(v, dict)}
            lines.append(f"[{section}]")
            for key, value in plain.items():
                if value is None:
                    lines.append(f"# {key} = (unset)  # {self.sources.get(f'{section}.{key}')}")
                    continue
                lines.append(f"{key} = {_toml_value(value)}  # "
                             f"{self.sources.get(f'{section}.{key}', 'default')}")
            for key, sub in nested.items():
                lines.append("")
                lines.append(f"[{section}.{key}]")
                for k2, v2 in sub.items():
                    if v2 is None:
                        continue
                    lines.append(f"{k2} = {_toml_value(v2)}  # "
                                 f"{self.sources.get(f'{section}.{key}.{k2}', 'default')}")
            lines.append("")
        return "\n".join(lines)


def _toml_value(value: Any) -> str:
    """One TOML value on one line (lists inline)."""
    import tomli_w

    value = _tomlable(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return tomli_w.dumps({"v": value}).strip()[len("v = "):]


def _tomlable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_tomlable(v) for v in value]
    if isinstance(value, list):
        return [_tomlable(v) for v in value]
    if isinstance(value, dict):
        return {k: _tomlable(v) for k, v in value.items() if v is not None}
    return value


def parse_set(items: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """Parse ``--set section.key=value`` items; values are TOML scalars (bare words: strings)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or "." not in key or not key.split(".")[0]:
            raise ConfigError(f"--set {item!r}: expected section.key=value, e.g. "
                              "sampler.t_max=10")
        try:
            value = tomllib.loads(f"v = {raw.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw.strip()
        out[key] = value
    return out


def read_toml(path: str | Path) -> dict[str, Any]:
    """Read a TOML file with a one-line error for unreadable or invalid files."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"cannot read config {path}: {err.strerror or err}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path} is not valid TOML: {err}") from None


def apply_overrides(raw: Mapping[str, Any], overrides: Mapping[str, Any] | None,
                    source: str = "set") -> tuple[dict[str, Any], dict[str, str]]:
    """A deep copy of ``raw`` with the dotted ``overrides`` applied, and the overridden keys'
    origin (``{"run.seed": source, ...}``). Shared by every command's config resolver."""
    doc: dict[str, Any] = copy.deepcopy(dict(raw))
    given_sources: dict[str, str] = {}
    for dotted, value in (overrides or {}).items():
        parts = dotted.split(".")
        table = doc
        for part in parts[:-1]:
            nxt = table.setdefault(part, {})
            if not isinstance(nxt, dict):
                raise ConfigError(f"cannot set {dotted}: {part} is not a table")
            table = nxt
        table[parts[-1]] = value
        given_sources[dotted] = source
    return doc, given_sources


def resolve(raw: Mapping[str, Any], overrides: Mapping[str, Any] | None = None,
            override_source: str = "set") -> ResolvedConfig:
    """Validate ``raw`` (a parsed TOML document) plus dotted ``overrides`` and fill defaults.

    Loads the named plugins' classes (to validate their settings), which imports them.
    """
    from thermonet import registry

    doc, given_sources = apply_overrides(raw, overrides, override_source)
    for section in doc:
        if section not in SECTIONS:
            raise ConfigError(f"unknown section [{section}]{_suggest(section, list(SECTIONS))} "
                              f"Valid sections: {', '.join(SECTIONS)}")
        if not isinstance(doc[section], dict):
            raise ConfigError(f"[{section}] must be a table; got {doc[section]!r}")
    sources: dict[str, str] = {}
    out: dict[str, Any] = {}
    out["run"], _ = _resolve_table("run", doc.get("run", {}), RUN_KEYS, sources, given_sources)
    out["data"], _ = _resolve_table("data", doc.get("data", {}), DATA_KEYS, sources,
                                    given_sources)
    out["prior"], _ = _resolve_table("prior", doc.get("prior", {}), PRIOR_KEYS, sources,
                                     given_sources)
    out["init"], _ = _resolve_table("init", doc.get("init", {}), INIT_KEYS, sources,
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
            own, rest = _resolve_table("sampler", given, runner_keys, sources, given_sources,
                                       extra_ok=True)
            table.update(own)
            if is_re:
                if "workers" in rest:
                    raise ConfigError("sampler.workers is not a setting of a run; set "
                                      "run.workers (threads running replicas) instead")
                inner_given = dict(rest.pop("inner", {}) or {})
                settings = _plugin_settings("sampler", cls, rest, sources, given_sources)
                inner_name = settings.get("sampler", "hmc")
                inner_cls = registry.load("sampler", inner_name)
                settings["inner"] = _plugin_settings("sampler.inner", inner_cls, inner_given,
                                                     sources, given_sources)
                settings["temperatures"] = (list(settings["temperatures"])
                                            if settings.get("temperatures") else None)
                settings.pop("workers", None)
                sources.pop("sampler.workers", None)
                table.update(settings)
            else:
                table.update(_plugin_settings("sampler", cls, rest, sources, given_sources))
        else:
            table.update(_plugin_settings(section, cls, given, sources, given_sources))
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


def diff(old: ResolvedConfig, new: ResolvedConfig, ignore: tuple[str, ...] = ()
         ) -> list[tuple[str, Any, Any]]:
    """Keys whose values differ: (dotted key, old value, new value)."""
    out = []

    def walk(prefix: str, a: Any, b: Any) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for k in sorted(set(a) | set(b)):
                walk(f"{prefix}.{k}" if prefix else k, a.get(k), b.get(k))
        elif _tomlable(a) != _tomlable(b) and prefix not in ignore:
            out.append((prefix, a, b))

    walk("", old.data, new.data)
    return out
