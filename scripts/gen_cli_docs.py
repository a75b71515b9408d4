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

from thermonet.cli.docgen import render, render_config

docs = pathlib.Path(__file__).resolve().parent.parent / "docs"
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
