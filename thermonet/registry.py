"""Plugin discovery and loading through entry points.

Four roles, one entry-point group each:

=============  ===========================  =================================
role           group                        base class
=============  ===========================  =================================
sampler        ``thermonet.samplers``       ``thermonet.api.Sampler``
minimiser      ``thermonet.minimisers``     ``thermonet.api.Minimiser``
integrator     ``thermonet.integrators``    ``thermonet.api.Integrator``
architecture   ``thermonet.architectures``  ``thermonet.api.Architecture``
=============  ===========================  =================================

thermonet's own plugins register through the same groups (see ``setup.cfg``), so they go
through exactly the path a third party's do.

* :func:`available` reads entry-point metadata only: it imports no plugin code, and not Numba.
* :func:`load` imports one plugin and checks it against its role's contract.
* A plugin that fails to import raises :class:`~thermonet.errors.PluginLoadError` only when it is
  requested; listing reports it (``thermonet plugins``) without failing anything else.
* Two distributions registering one name is an :class:`~thermonet.errors.AmbiguousPluginError`
  naming both, raised when that name is requested.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata as md
import logging
import math
from dataclasses import dataclass
from typing import Any

from thermonet.errors import (
    AmbiguousPluginError,
    MissingPluginError,
    PluginLoadError,
    PluginTypeError,
)

log = logging.getLogger("thermonet.plugins")

ROLES: dict[str, str] = {
    "sampler": "thermonet.samplers",
    "minimiser": "thermonet.minimisers",
    "integrator": "thermonet.integrators",
    "architecture": "thermonet.architectures",
}

#: base class of each role, as "module:attr" (imported only when a plugin is loaded)
BASES: dict[str, str] = {
    "sampler": "thermonet.api:Sampler",
    "minimiser": "thermonet.api:Minimiser",
    "integrator": "thermonet.api:Integrator",
    "architecture": "thermonet.api:Architecture",
}

#: the contract versions this thermonet understands
SUPPORTED_API_VERSIONS = frozenset({1, 2})

#: classes a plugin of each role must define (checked on load)
REQUIRED_CLASSES: dict[str, tuple[str, ...]] = {
    "sampler": ("Config", "State", "Info"),
    "minimiser": ("Config",),
}


@dataclass(frozen=True)
class PluginSpec:
    """One registered plugin, from metadata only."""

    role: str
    name: str
    value: str  # "module:attr"
    distribution: str | None
    version: str | None

    def describe(self) -> str:
        dist = f"{self.distribution} {self.version}" if self.distribution else "unknown"
        return f"{self.role} {self.name!r} ({dist}, {self.value})"

    def as_dict(self) -> dict[str, Any]:
        return {"role": self.role, "name": self.name, "value": self.value,
                "distribution": self.distribution, "version": self.version}


def _check_role(role: str) -> str:
    if role not in ROLES:
        raise MissingPluginError(f"unknown plugin role {role!r}; expected one of "
                                 f"{', '.join(ROLES)}")
    return ROLES[role]


def _entry_points(group: str) -> list[Any]:
    """Entry points of ``group``; a seam the tests replace with fake EntryPoints."""
    return list(md.entry_points(group=group))


def _dist_of(ep: Any) -> tuple[str | None, str | None]:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return None, None
    name = dist.metadata["Name"] if dist.metadata is not None else None
    return name, dist.version


@functools.cache
def _discover(role: str) -> dict[str, tuple[PluginSpec, ...]]:
    group = _check_role(role)
    found: dict[str, list[PluginSpec]] = {}
    for ep in _entry_points(group):
        dist, version = _dist_of(ep)
        spec = PluginSpec(role, ep.name, ep.value, dist, version)
        same = found.setdefault(ep.name, [])
        # The same distribution seen twice (e.g. an editable install plus a build dir) is
        # one registration, not a conflict.
        if not any(s.value == spec.value and s.distribution == spec.distribution for s in same):
            same.append(spec)
    return {name: tuple(specs) for name, specs in sorted(found.items())}


def available(role: str) -> dict[str, PluginSpec]:
    """Registered plugins of ``role`` by name (metadata only; nothing is imported).

    A name claimed by several distributions maps to the first one; :func:`conflicts` lists
    them, and :func:`load` refuses such a name.
    """
    return {name: specs[0] for name, specs in _discover(role).items()}


def conflicts(role: str) -> dict[str, tuple[PluginSpec, ...]]:
    """Names of ``role`` registered by more than one distribution."""
    return {name: specs for name, specs in _discover(role).items() if len(specs) > 1}


def refresh() -> None:
    """Forget cached discovery and loads (e.g. after ``pip install`` in a live session)."""
    _discover.cache_clear()
    load.cache_clear()


def _import(value: str) -> Any:
    module, _, attr = value.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split(".") if attr else []:
        obj = getattr(obj, part)
    return obj


@functools.cache
def load(role: str, name: str) -> type[Any]:
    """Import the plugin ``name`` of ``role``, check its contract and return its class."""
    specs = _discover(role).get(name)
    if not specs:
        names = ", ".join(available(role)) or "none"
        raise MissingPluginError(
            f"no {role} named {name!r}; available: {names}. {role.capitalize()}s come from the "
            f"{ROLES[role]!r} entry-point group: is the package that provides {name!r} "
            "installed in this environment?")
    if len(specs) > 1:
        who = " and ".join(f"{s.distribution or '?'} {s.version or ''} ({s.value})".strip()
                           for s in specs)
        raise AmbiguousPluginError(
            f"{role} name {name!r} is registered by more than one distribution: {who}; "
            "uninstall one of them")
    spec = specs[0]
    try:
        obj = _import(spec.value)
    except Exception as err:
        raise PluginLoadError(f"{spec.describe()} failed to import: "
                              f"{type(err).__name__}: {err}") from err
    validate(role, obj, spec)
    _loaded[spec.value.partition(":")[0]] = spec
    return obj


#: module of every plugin loaded, by name ("pkg.module" -> its spec), for :func:`blame`
_loaded: dict[str, PluginSpec] = {}


def blame(tb: Any) -> tuple[PluginSpec, str] | None:
    """The third-party plugin in whose code the traceback ``tb`` ends, and where
    (``file:line in function``); None if it ends in no plugin outside thermonet (a built-in
    plugin's failure is thermonet's own bug, which keeps its traceback)."""
    modules = {module: spec for module, spec in _loaded.items()
               if module.partition(".")[0] != "thermonet"}
    found = None
    while tb is not None:
        frame = tb.tb_frame
        name = str(frame.f_globals.get("__name__", ""))
        # the entry point's module or a module below it
        spec = next((s for m, s in modules.items() if name == m or name.startswith(m + ".")),
                    None)
        if spec is not None:
            found = (spec, f"{frame.f_code.co_filename}:{tb.tb_lineno} in "
                           f"{frame.f_code.co_name}")
        tb = tb.tb_next
    return found


def validate(role: str, obj: Any, spec: PluginSpec | None = None) -> None:
    """Check ``obj`` against the contract of ``role``; raise PluginTypeError if it fails."""
    what = spec.describe() if spec else f"{role} {obj!r}"
    try:
        base = _import(BASES[role])
    except (ImportError, AttributeError):  # role whose contract is not defined yet
        raise PluginTypeError(f"{what}: thermonet {role} plugins are not supported by this "
                              "version of thermonet") from None
    if not (isinstance(obj, type) and issubclass(obj, base)):
        raise PluginTypeError(f"{what} is not a subclass of {BASES[role].replace(':', '.')}")
    version = getattr(obj, "api_version", None)
    if version not in SUPPORTED_API_VERSIONS:
        raise PluginTypeError(f"{what} declares api_version {version!r}; this thermonet "
                              f"supports {sorted(SUPPORTED_API_VERSIONS)}")
    for attr in REQUIRED_CLASSES.get(role, ()):
        if not isinstance(getattr(obj, attr, None), type):
            raise PluginTypeError(f"{what} has no {attr} class; a {role} plugin defines "
                                  f"{', '.join(REQUIRED_CLASSES[role])} (docs/plugins.md)")


def check_all(role: str) -> dict[str, str | None]:
    """Load every plugin of ``role``; map name -> None (fine) or the reason it is broken.

    Used by ``thermonet plugins``; imports every plugin of the role.
    """
    status: dict[str, str | None] = {}
    for name in _discover(role):
        try:
            load(role, name)
            status[name] = None
        except (PluginLoadError, PluginTypeError, AmbiguousPluginError) as err:
            status[name] = str(err)
            log.warning("broken plugin: %s", err)
    return status


# --- lookup by name for users -------------------------------------------------------------------

def get_architecture(name: str, **options: Any) -> Any:
    """Build the architecture registered as ``name`` (``M1``, ``M3``, ``M3*``, ``mlp``, ...).

    ``options`` are passed to its constructor, e.g.
    ``get_architecture("mlp", hidden=[100], output_activation="logistic")``.

    Every option must take effect: an architecture given ``prior_scale`` must report it as its
    ``default_prior_scale`` (the box prior is built from that), or this raises rather than run
    with a box the user did not ask for.
    """
    from thermonet.errors import ConfigError

    cls = load("architecture", name)
    options = {k: (list(v) if isinstance(v, tuple) else v) for k, v in options.items()}
    try:
        arch = cls(**options)
    except TypeError as err:
        raise ConfigError(f"architecture {name!r} rejected its options {options}: {err}") from None
    scale = options.get("prior_scale")
    if scale is not None and float(getattr(arch, "default_prior_scale", math.nan)) != float(scale):
        raise PluginTypeError(
            f"architecture {name!r} accepted prior_scale = {scale!r} but reports "
            f"default_prior_scale = {getattr(arch, 'default_prior_scale', None)!r}, so its box "
            "prior would silently ignore the setting; the plugin must return the prior_scale it "
            "was given from default_prior_scale (docs/plugins.md, 'Architectures')")
    return arch


def get_sampler(name: str) -> type:
    """The sampler class registered as ``name`` (``hmc``, or a plugin's); build it with
    ``cls(potential, prior=..., temperature=..., **settings)`` or hand it to
    :class:`thermonet.tempering.ReplicaExchange`."""
    return load("sampler", name)


def get_minimiser(name: str, **settings: Any) -> Any:
    """A minimiser registered as ``name`` (``rmin``, ``fire``, or a plugin's), built with
    ``settings`` (its ``Config`` fields)."""
    return load("minimiser", name)(**settings)
