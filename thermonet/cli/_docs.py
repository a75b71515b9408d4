"""The CLI reference (docs/cli.md), generated from the Click help texts.

``python scripts/gen_cli_docs.py`` rewrites docs/cli.md; the test suite checks that the
committed file equals what this module renders, so the reference never drifts from the code.
"""

from __future__ import annotations

import click

HEADER = """# Command-line reference

Generated from the commands' own `--help` texts by `python scripts/gen_cli_docs.py`
(do not edit by hand; the test suite fails when this page and the code disagree).
Every command accepts `-h/--help`. Library errors are one line on stderr with exit code 1;
`thermonet --debug COMMAND ...` shows the traceback instead.
"""


def _help_text(cmd: click.Command, path: list[str]) -> str:
    ctx = click.Context(cmd, info_name=" ".join(path), terminal_width=100, max_content_width=100,
                        help_option_names=["-h", "--help"])
    return cmd.get_help(ctx)


def _walk(cmd: click.Command, path: list[str], out: list[str], level: int) -> None:
    title = " ".join(path)
    out.append(f"{'#' * level} `{title}`\n")
    out.append("```text\n" + _help_text(cmd, path).rstrip() + "\n```\n")
    if isinstance(cmd, click.Group):
        ctx = click.Context(cmd, info_name=title)
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is not None and not getattr(sub, "hidden", False):
                _walk(sub, [*path, name], out, min(level + 1, 4))


def render() -> str:
    """The whole reference as Markdown."""
    from thermonet.cli import main

    out = [HEADER]
    _walk(main, ["thermonet"], out, 2)
    return "\n".join(out)
