#!/usr/bin/env python
"""Regenerate docs/cli.md and docs/config.md from the code.

docs/cli.md comes from the Click help texts, docs/config.md from the config schema and the
built-in plugins' settings. Usage, from the repository root:

    python scripts/gen_cli_docs.py [--check]

With --check, exit 1 (and write nothing) when either page is out of date.
"""

from __future__ import annotations

import pathlib
import sys

from thermonet import registry
from thermonet.cli.docgen import render, render_config

root = pathlib.Path(__file__).resolve().parent.parent
# the pages document this source tree: register the built-ins its setup.cfg declares where the
# installed entry-point metadata lags behind it (an editable install made from an older tree),
# exactly as the test suite does (tests/source_plugins.py), so both see the same plugins
sys.path.insert(0, str(root))
from tests.source_plugins import with_source_plugins  # noqa: E402

registry._entry_points = with_source_plugins(registry._entry_points)
registry.refresh()
docs = root / "docs"
pages = {docs / "cli.md": render(), docs / "config.md": render_config()}
if "--check" in sys.argv[1:]:
    stale = [p.name for p, text in pages.items()
             if not p.exists() or p.read_text(encoding="utf-8") != text]
    print(f"out of date: {', '.join(stale)}; run python scripts/gen_cli_docs.py" if stale
          else "docs/cli.md and docs/config.md are up to date")
    sys.exit(1 if stale else 0)
for path, text in pages.items():
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path} ({len(text.splitlines())} lines)")
