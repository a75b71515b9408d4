"""The configuration engine shared by every workflow's TOML: schemas, validation, origins.

A *schema* maps each key of a section to ``(default, allowed types, check, help)``, where
``check`` is ``None`` or ``(predicate, "what is allowed")``. :func:`resolve_section` fills the
defaults of one section and rejects unknown keys with a did-you-mean suggestion;
:func:`plugin_settings` does the same for a plugin class from its ``Config`` dataclass (or its
constructor). Every value's origin (``default``, ``config``, ``set`` for ``--set``,
``commandline``) is recorded, and :class:`ResolvedConfig` writes the result back as TOML with
the origins as comments.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import inspect
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from thermonet.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: a schema entry: (default, allowed types, check or None, help)
SchemaEntry = tuple[Any, tuple[type, ...], Any, str]

def suggest(key: str, valid: list[str]) -> str:
    """A did-you-mean hint for an unknown ``key`` (empty when nothing is close)."""
    close = difflib.get_close_matches(key, valid, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def type_name(types: tuple[type, ...]) -> str:
    """The types of a schema entry as the user reads them (``integer or number``)."""
    return " or ".join({int: "integer", float: "number", str: "string", bool: "true/false",
                        list: "list", dict: "table"}[t] for t in types)


def check_value(where: str, key: str, value: Any, types: tuple[type, ...], check: Any) -> Any:
    """Check ``value`` of ``where.key`` against its types and check; return it (ints as floats
    where a number is expected) or raise the one-line :class:`ConfigError`."""
    # an integer is a number: tol = 1 is as good as tol = 1.0 (and -1 is out of range, not of
    # the wrong type)
    number = float in types and isinstance(value, int)
    ok = not (isinstance(value, bool) and bool not in types) and (
        isinstance(value, types) or number)
    if not ok:
        hint = ""
        if list in types and not isinstance(value, (list, dict)):
            hint = f"; for a list of one write {key} = [{toml_value(value)}]"
        elif isinstance(value, (list, dict)) and list not in types and dict not in types:
            hint = f"; write a single value, e.g. {key} = {toml_value(default_of(types))}"
        raise ConfigError(f"{where}.{key} = {value!r} has the wrong type; expected "
                          f"{type_name(types)}{hint}")
    if float in types and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if check is not None and not check[0](value):
        raise ConfigError(f"{where}.{key} = {value!r} is out of range; expected {check[1]}")
    return value


def default_of(types: tuple[type, ...]) -> Any:
    """An example value of the first of ``types`` (for a hint in an error message)."""
    return {int: 1, float: 1.0, str: "name", bool: True, list: [], dict: {}}[types[0]]


def resolve_section(where: str, given: Mapping[str, Any], schema: Mapping[str, Any],
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
            raise ConfigError(f"unknown key {key!r} in [{where}]{suggest(key, list(schema))} "
                              f"Valid keys: {', '.join(schema)}")
    for key, (default, types, check, _help) in schema.items():
        if key in given and given[key] is not None:
            out[key] = check_value(where, key, given[key], types, check)
            sources[f"{where}.{key}"] = given_sources.get(f"{where}.{key}", "config")
        else:
            out[key] = copy.deepcopy(default)
            sources[f"{where}.{key}"] = "default"
    return out, rest


def coerce_for_field(where: str, key: str, value: Any, annotation: str,
                     default: Any = None) -> Any:
    """Loose type check of a plugin setting against its dataclass annotation (``default``,
    if given, is the example an error message shows)."""
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
    if base.startswith("tuple"):
        return coerce_tuple(where, key, value, base, default)
    return value


def coerce_tuple(where: str, key: str, value: Any, base: str, default: Any = None) -> Any:
    """Check a TOML list against a ``tuple[...]`` annotation (length and element types)."""
    inner = base[len("tuple["):-1] if base.startswith("tuple[") else ""
    elems = [e for e in inner.split(",") if e]
    fixed = bool(elems) and "..." not in elems
    example = ", ".join(toml_value(default_of((_ANNOTATION_TYPES.get(e, float),)))
                        for e in elems) if fixed else "..."
    if isinstance(default, tuple) and default and (not fixed or len(default) == len(elems)):
        example = ", ".join(toml_value(v) for v in default)
    if not isinstance(value, (list, tuple)):
        raise ConfigError(f"{where}.{key} = {value!r} has the wrong type; expected a list"
                          f"{f' of {len(elems)} values' if fixed else ''}, e.g. "
                          f"{key} = [{example}]")
    if fixed and len(value) != len(elems):
        raise ConfigError(f"{where}.{key} = {list(value)!r} has {len(value)} value(s); "
                          f"expected {len(elems)}, e.g. {key} = [{example}]")
    types = elems if fixed else elems[:1] * len(value)
    return tuple(coerce_for_field(where, f"{key}[{i}]", v, t) if t in _ANNOTATION_TYPES else v
                 for i, (v, t) in enumerate(zip(value, types, strict=True)))


#: annotation names :func:`coerce_for_field` checks, and their Python types
_ANNOTATION_TYPES = {"float": float, "int": int, "bool": bool, "str": str}


class _Required:
    def __repr__(self) -> str:
        return "<required>"


#: marks a constructor argument without a default: the config must give it
REQUIRED = _Required()


def plugin_defaults(cls: type[Any]) -> dict[str, Any]:
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


def plugin_settings(where: str, cls: type[Any], given: Mapping[str, Any],
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
                              f"{suggest(key, list(defaults))} Valid keys: "
                              f"{', '.join(sorted(defaults)) or 'none'}")
        out[key] = coerce_for_field(where, key, value, annotations.get(key, "Any"),
                                    defaults.get(key))
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
        "section.key" -> "default" | "config" | "set" | "commandline" | "data file".
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
                lines.append(f"{key} = {toml_value(value)}  # "
                             f"{self.sources.get(f'{section}.{key}', 'default')}")
            for key, sub in nested.items():
                lines.append("")
                lines.append(f"[{section}.{key}]")
                for k2, v2 in sub.items():
                    if v2 is None:
                        continue
                    lines.append(f"{k2} = {toml_value(v2)}  # "
                                 f"{self.sources.get(f'{section}.{key}.{k2}', 'default')}")
            lines.append("")
        return "\n".join(lines)


def toml_value(value: Any) -> str:
    """One TOML value on one line (lists inline)."""
    import tomli_w

    value = tomlable(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return tomli_w.dumps({"v": value}).strip()[len("v = "):]


def tomlable(value: Any) -> Any:
    """``value`` with tuples as lists and None left out, as TOML can write it."""
    if isinstance(value, tuple):
        return [tomlable(v) for v in value]
    if isinstance(value, list):
        return [tomlable(v) for v in value]
    if isinstance(value, dict):
        return {k: tomlable(v) for k, v in value.items() if v is not None}
    return value


def parse_set(items: list[str] | tuple[str, ...], example: str = "run.seed=2"
              ) -> dict[str, Any]:
    """Parse ``--set section.key=value`` items; values are TOML scalars (bare words: strings).
    ``example`` is the item an error message shows: one the command's configuration accepts."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or "." not in key or not key.split(".")[0]:
            raise ConfigError(f"--set {item!r}: expected section.key=value, e.g. --set "
                              f"{example}")
        try:
            value = tomllib.loads(f"v = {raw.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw.strip()
        out[key] = value
    return out


def parse_toml(text: str) -> dict[str, Any]:
    """Parse TOML text (``tomllib``, or ``tomli`` before Python 3.11); raises
    :class:`TOMLDecodeError` for invalid text."""
    return tomllib.loads(text)


#: the exception :func:`parse_toml` raises for invalid TOML
TOMLDecodeError = tomllib.TOMLDecodeError


def read_toml(path: str | Path) -> dict[str, Any]:
    """Read a TOML file with a one-line error for unreadable or invalid files."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise ConfigError(f"cannot read config {path}: {err.strerror or err}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise ConfigError(
            f"{path} is not UTF-8 text (byte 0x{data[err.start]:02x} on line {line}); expected "
            "a TOML file in UTF-8: re-save it as UTF-8 (e.g. iconv -f latin1 -t utf-8), or "
            "check that it is the config and not a binary file") from None
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


def load_layers(path: str | Path, overrides: Mapping[str, Any] | None,
                commandline: Mapping[str, Any] | None,
                resolve: Callable[[Mapping[str, Any], Mapping[str, Any]], ResolvedConfig]
                ) -> ResolvedConfig:
    """``resolve`` of the file at ``path`` with ``overrides`` (``--set``) and then the
    ``commandline`` options applied on top, the latter's keys marked ``"commandline"``."""
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
        elif tomlable(a) != tomlable(b) and prefix not in ignore:
            out.append((prefix, a, b))

    walk("", old.data, new.data)
    return out

