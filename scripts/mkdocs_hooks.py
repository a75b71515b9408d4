"""mkdocs hook: fills the API reference page from the packages' ``__all__``.

docs/reference/api.md holds markers ``<!-- api: MODULE -->``; each is replaced, at build
time, by one mkdocstrings block per public name of MODULE, so the page can never miss a name
that the package exports (``mkdocs build --strict`` fails on a name it cannot document).
"""

from __future__ import annotations

import importlib
import re

MARKER = re.compile(r"<!-- api: ([\w.]+) -->")


def public_path(module: str, name: str) -> str:
    """Where mkdocstrings finds ``module.name``: its defining module, cut at a private part."""
    obj = getattr(importlib.import_module(module), name)
    if isinstance(obj, type(importlib)):             # a submodule
        return obj.__name__
    home = getattr(obj, "__module__", module) or module
    parts = home.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_"):
            parts = parts[:i]
            break
    return ".".join(parts) + "." + name


def api_markdown(module: str) -> str:
    """One heading and one mkdocstrings block per name in ``module.__all__``."""
    mod = importlib.import_module(module)
    blocks = []
    for name in mod.__all__:
        if name.startswith("__"):
            continue
        blocks.append(f"::: {public_path(module, name)}\n"
                      "    options:\n"
                      "      show_root_heading: true\n"
                      "      show_root_full_path: false\n"
                      "      heading_level: 3\n")
    return "\n".join(blocks)


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Expand the API markers of a page (mkdocs calls this for every page)."""
    return MARKER.sub(lambda m: api_markdown(m.group(1)), markdown)
