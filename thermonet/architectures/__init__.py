"""Built-in architectures. Look them up by name with :func:`get_architecture`."""

from __future__ import annotations

from typing import Any

from thermonet.api import Architecture


def get_architecture(name: str, **options: Any) -> Architecture:
    """Build the architecture registered as ``name`` (``M1``, ``M3``, ``M3*``, ``mlp``, ...).

    ``options`` are passed to its constructor, e.g.
    ``get_architecture("mlp", hidden=[100], output_activation="logistic")``.
    """
    from thermonet import registry

    cls = registry.load("architecture", name)
    try:
        return cls(**options)
    except TypeError as err:
        from thermonet.errors import ConfigError

        raise ConfigError(f"architecture {name!r} rejected its options {options}: {err}") from None


__all__ = ["get_architecture"]
