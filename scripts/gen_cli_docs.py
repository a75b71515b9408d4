#!/usr/bin/env python
"""Regenerate docs/cli.md from the Click help texts. Usage, from the repository root:

    python scripts/gen_cli_docs.py [--check]

With --check, exit 1 (and write nothing) when docs/cli.md is out of date.
"""

from __future__ import annotations

import pathlib
import sys

from thermonet.cli._docs import render

path = pathlib.Path(__file__).resolve().parent.parent / "docs" / "cli.md"
text = render()
if "--check" in sys.argv[1:]:
    ok = path.exists() and path.read_text(encoding="utf-8") == text
    print("docs/cli.md is up to date" if ok else "docs/cli.md is out of date: run "
          "python scripts/gen_cli_docs.py")
    sys.exit(0 if ok else 1)
path.write_text(text, encoding="utf-8")
print(f"wrote {path} ({len(text.splitlines())} lines)")
