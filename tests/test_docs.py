"""The generated reference pages match the code, and the docs' links point at real files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from thermonet.cli.docgen import render, render_config

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("page,render_page", [("cli.md", render), ("config.md", render_config)])
def test_generated_page_is_up_to_date(page, render_page):
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    assert text == render_page(), (f"docs/{page} is out of date with the code; run "
                                   "python scripts/gen_cli_docs.py")


def test_cli_reference_covers_every_command():
    from thermonet.cli import COMMANDS

    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    for name in COMMANDS:
        assert f"`thermonet {name}`" in text, name
    assert "unavailable" not in text      # no command failed to import while generating


def test_config_reference_lists_every_key():
    from thermonet import config as cfg

    text = (ROOT / "docs" / "config.md").read_text(encoding="utf-8")
    for schema in (cfg.RUN_KEYS, cfg.DATA_KEYS, cfg.PRIOR_KEYS, cfg.INIT_KEYS,
                   cfg.SAMPLER_RUNNER_KEYS, cfg.LADDER_KEYS):
        for key in schema:
            assert f"| `{key}` |" in text, key
    for key in ("n_leapfrog", "wall", "n_temperatures", "swap_scheme", "max_steps", "dt_max"):
        assert f"| `{key}` |" in text, key


def _markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("md", _markdown_files(), ids=lambda p: p.name)
def test_relative_links_resolve(md):
    text = md.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" in target or target.startswith("mailto:"):
            continue
        assert (md.parent / target).exists(), f"{md.name} links to missing {target}"


def test_baseline_config_keys_are_documented():
    from thermonet.cli.baseline import BASELINE_KEYS

    text = (ROOT / "docs" / "minimisers.md").read_text(encoding="utf-8")
    for key in BASELINE_KEYS:
        assert f"| `{key}` |" in text, key


def test_cli_page_does_not_depend_on_commands_run_before(tmp_path):
    # A subcommand run through its own group (not `thermonet ...`) caches a help option named
    # only --help (Click caches it per command object); the page must still show the names
    # the real command line uses. (tests/test_data.py runs `data build-embedded` this way.)
    from click.testing import CliRunner

    from thermonet.cli.data import data

    sub = data.get_command(None, "build-embedded")
    sub._help_option = None          # as in a fresh process (earlier tests may have built it)
    CliRunner().invoke(data, ["build-embedded", "--out", str(tmp_path / "missing" / "x.h5")])
    assert sub._help_option is not None and sub._help_option.opts == ["--help"]
    assert (ROOT / "docs" / "cli.md").read_text(encoding="utf-8") == render()
