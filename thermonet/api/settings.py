"""Plugin settings: build a plugin's ``Config`` dataclass and check its values.

Every plugin group (samplers, minimisers, integrators) keeps its settings in a frozen dataclass
``Config``. :func:`build_config` builds one from keyword settings with a did-you-mean for an
unknown key; the ``check_*`` helpers are meant for ``Config.__post_init__`` and raise
:class:`thermonet.errors.ConfigError`, whose one-line message the command line prints without
a traceback (any other exception from a plugin is shown as a traceback: it is a bug).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import numbers
from typing import Any, NoReturn

import numpy as np

from thermonet.errors import ConfigError


def build_config(config_cls: type, settings: dict[str, Any], what: str) -> Any:
    """Instantiate the frozen dataclass ``config_cls`` from ``settings`` with clear errors.

    Unknown keys get a did-you-mean suggestion; the dataclass's ``__post_init__`` validates
    values.
    """
    fields = {f.name for f in dataclasses.fields(config_cls)}
    for key in settings:
        if key not in fields:
            close = difflib.get_close_matches(key, sorted(fields), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"unknown setting {key!r} for {what}{hint} Valid settings: "
                              f"{', '.join(sorted(fields))}")
    return config_cls(**settings)


def fail(owner: str, key: str, value: Any, expected: str) -> NoReturn:
    """Raise the one-line :class:`ConfigError` for a bad setting ``owner.key = value``."""
    raise ConfigError(f"{owner} setting {key} = {value!r}; expected {expected}. "
                      f"Fix it with --set {key}=<value> or {key}=<value> in Python.")


def check_real(cfg: Any, owner: str, key: str, *, lo: float | None = None,
               lo_open: bool = True, hi: float | None = None, hi_open: bool = True,
               allow_inf: bool = False, expected: str) -> None:
    """Check that ``cfg.<key>`` is a real number in the given range; store it as float."""
    value = getattr(cfg, key)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        fail(owner, key, value, expected)
    v = float(value)
    bad = math.isnan(v) or (math.isinf(v) and not allow_inf)
    if lo is not None:
        bad = bad or (v <= lo if lo_open else v < lo)
    if hi is not None:
        bad = bad or (v >= hi if hi_open else v > hi)
    if bad:
        fail(owner, key, value, expected)
    object.__setattr__(cfg, key, v)


def check_int(cfg: Any, owner: str, key: str, *, minimum: int, expected: str) -> None:
    """Check that ``cfg.<key>`` is an integer >= ``minimum``; store it as int."""
    value = getattr(cfg, key)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        # accept integral floats such as 1e3 from a config file
        if isinstance(value, float) and value.is_integer() and value >= minimum:
            object.__setattr__(cfg, key, int(value))
            return
        fail(owner, key, value, expected)
    object.__setattr__(cfg, key, int(value))


def check_bool(cfg: Any, owner: str, key: str) -> None:
    """Check that ``cfg.<key>`` is a boolean (not a string such as "True")."""
    value = getattr(cfg, key)
    if not isinstance(value, (bool, np.bool_)):
        fail(owner, key, value, "true or false")
    object.__setattr__(cfg, key, bool(value))


__all__ = ["build_config", "check_bool", "check_int", "check_real", "fail"]
