"""The built-in plugins this source tree declares, registered where the installed entry-point
metadata lags behind setup.cfg (an editable install made from an older tree).

Kept free of pytest so that scripts/gen_cli_docs.py can use it with only the lint extra
installed, as CI's gate step does.
"""

from __future__ import annotations

import configparser
import importlib.metadata as md
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def source_entry_points(setup_cfg: Path = ROOT / "setup.cfg") -> dict[str, dict[str, str]]:
    """The thermonet entry points declared in this source tree's setup.cfg: group -> name ->
    "module:attr"."""
    cp = configparser.ConfigParser()
    cp.optionxform = str  # type: ignore[assignment,method-assign]   # names are case-sensitive
    cp.read(setup_cfg)
    out: dict[str, dict[str, str]] = {}
    for group, text in cp.items("options.entry_points"):
        if group.startswith("thermonet."):
            out[group] = dict((s.strip() for s in line.split("=", 1))
                              for line in text.strip().splitlines() if "=" in line)
    return out


def with_source_plugins(real: Any) -> Any:
    """An entry-point lookup (the registry's ``_entry_points`` seam) that adds to ``real``'s
    every built-in this tree's setup.cfg declares and ``real`` lacks, as the ``thermonet``
    distribution (what ``pip install -e .`` would record)."""
    declared = source_entry_points()
    try:
        dist = md.distribution("thermonet")
    except md.PackageNotFoundError:
        dist = None

    def lookup(group: str) -> list:
        eps = list(real(group))
        have = {ep.name for ep in eps}
        for name, value in declared.get(group, {}).items():
            if name not in have:
                ep = md.EntryPoint(name, value, group)
                eps.append(ep._for(dist) if dist is not None and hasattr(ep, "_for") else ep)
        return eps

    return lookup


def cli_with_source_plugins() -> None:
    """``thermonet`` with this tree's built-ins registered; for tests that run the command
    line in a subprocess: ``python -c "from tests.source_plugins import cli_with_source_plugins as
    m; m()" run ...``."""
    from thermonet import registry
    from thermonet.cli import main

    registry._entry_points = with_source_plugins(registry._entry_points)
    registry.refresh()
    main()
