"""Configurations: one schema engine (:mod:`thermonet.config.schema`) shared by every workflow,
and the run configuration built on it (:mod:`thermonet.config.run`).

The names below are the package's public surface; ``thermonet.config.resolve`` and the other
pre-package paths keep working.
"""

from __future__ import annotations

from thermonet.config.run import (
    DATA_KEYS,
    DEFAULT_NAMES,
    INIT_KEYS,
    LADDER_KEYS,
    PLUGIN_SECTIONS,
    PRIOR_KEYS,
    RUN_KEYS,
    SAMPLER_RUNNER_KEYS,
    SECTIONS,
    RunConfig,
    build_plugin_configs,
    load,
    resolve,
    translate_legacy,
)
from thermonet.config.schema import (
    REQUIRED,
    ResolvedConfig,
    SchemaEntry,
    apply_overrides,
    check_value,
    coerce_for_field,
    diff,
    TOMLDecodeError,
    parse_set,
    parse_toml,
    plugin_defaults,
    plugin_settings,
    read_toml,
    resolve_section,
    suggest,
    toml_value,
    tomlable,
    type_name,
)

__all__ = [
    "DATA_KEYS", "DEFAULT_NAMES", "INIT_KEYS", "LADDER_KEYS", "PLUGIN_SECTIONS", "PRIOR_KEYS",
    "REQUIRED", "RUN_KEYS", "SAMPLER_RUNNER_KEYS", "SECTIONS", "ResolvedConfig", "RunConfig",
    "SchemaEntry", "apply_overrides", "build_plugin_configs", "check_value", "coerce_for_field",
    "TOMLDecodeError", "diff", "load", "parse_set", "parse_toml", "plugin_defaults", "plugin_settings", "read_toml", "resolve",
    "resolve_section", "suggest", "toml_value", "tomlable", "translate_legacy", "type_name",
]
