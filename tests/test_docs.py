"""The generated reference pages match the code, the docs' links point at real files, every
page is reachable from the index, and the README fits one screen."""

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
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


@pytest.mark.parametrize("md", _markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
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
    # the real command line uses. (tests/data/test_data.py runs `data build-embedded` this way.)
    from click.testing import CliRunner

    from thermonet.cli.data import data

    sub = data.get_command(None, "build-embedded")
    sub._help_option = None          # as in a fresh process (earlier tests may have built it)
    CliRunner().invoke(data, ["build-embedded", "--out", str(tmp_path / "missing" / "x.h5")])
    assert sub._help_option is not None and sub._help_option.opts == ["--help"]
    assert (ROOT / "docs" / "cli.md").read_text(encoding="utf-8") == render()


def _links(md: Path) -> list[Path]:
    """The local Markdown pages that md links to (anchors and external links dropped)."""
    text = md.read_text(encoding="utf-8")
    out = []
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" not in target and target.endswith(".md"):
            out.append((md.parent / target).resolve())
    return out


def _doc_pages() -> set[Path]:
    return {p.resolve() for p in (ROOT / "docs").rglob("*.md")}


def test_every_docs_page_is_reachable_from_the_index_by_links():
    seen, todo = set(), [(ROOT / "docs" / "index.md").resolve()]
    while todo:
        page = todo.pop()
        if page in seen or not page.exists():
            continue
        seen.add(page)
        todo.extend(_links(page))
    missing = sorted(str(p.relative_to(ROOT)) for p in _doc_pages() - seen)
    assert not missing, f"pages no link chain from docs/index.md reaches: {missing}"


def test_every_docs_page_is_in_the_site_navigation():
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = text[text.index("\nnav:"):]
    listed = {(ROOT / "docs" / m).resolve() for m in re.findall(r"([\w./-]+\.md)\s*$", nav, re.M)}
    assert listed <= _doc_pages(), sorted(map(str, listed - _doc_pages()))
    missing = sorted(str(p.relative_to(ROOT)) for p in _doc_pages() - listed)
    assert not missing, f"pages missing from the nav of mkdocs.yml: {missing}"


def test_readme_fits_one_screen():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 80, f"README.md has {len(lines)} lines; at most 80"
    long = [i + 1 for i, ln in enumerate(lines) if len(ln) > 100]
    assert not long, f"README.md lines over 100 characters: {long}"


def test_readme_links_the_newcomers_tasks():
    # own data, predict, compare models, resume: one click from the README
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    for page in ("docs/tutorials/own-data.md", "docs/predict.md",
                 "docs/tutorials/compare-architectures.md", "docs/howto/resume.md",
                 "docs/index.md"):
        assert f"]({page})" in text, page


def _readme_command(number: int) -> str:
    """README set-up command `number` (1 or 2), its continuation lines joined."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(.*?)```", text, flags=re.S).group(1)
    commands = re.split(r"^# \d\. .*$", block, flags=re.M)[1:]
    assert len(commands) == 2, "README's set-up block holds two commands"
    return " ".join(commands[number - 1].replace("\\\n", " ").split())


def test_ci_runs_readme_command_two_verbatim():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    ci_joined = " ".join(ci.replace("\\\n", " ").split())
    command = _readme_command(2)
    assert command in ci_joined, command
    assert command.endswith("scripts/test")         # the one place the pytest line lives
    assert "pytest" not in ci.replace("the pytest line", "")


def test_ci_builds_the_site_strictly():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^[^#\n]*mkdocs build --strict", ci, re.M)
    assert ".[lint,docs]" in ci


def test_performance_page_is_a_summary():
    n = len((ROOT / "docs" / "performance.md").read_text(encoding="utf-8").splitlines())
    assert n <= 300, f"docs/performance.md has {n} lines; dated entries go to docs/lab/"


def test_status_cells_are_short():
    for line in (ROOT / "docs" / "status.md").read_text(encoding="utf-8").splitlines():
        if not line.startswith("| ") :
            continue
        for cell in line.strip().strip("|").split("|"):
            words = re.sub(r"\]\([^)]*\)", "]", cell).split()
            assert len(words) <= 25, cell


def _hooks():
    import importlib.util

    spec = importlib.util.spec_from_file_location("mkdocs_hooks",
                                                  ROOT / "scripts" / "mkdocs_hooks.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("module", ["thermonet", "thermonet.api"])
def test_api_reference_documents_every_public_name(module):
    import importlib

    page = (ROOT / "docs" / "reference" / "api.md").read_text(encoding="utf-8")
    assert f"<!-- api: {module} -->" in page
    text = _hooks().api_markdown(module)
    for name in importlib.import_module(module).__all__:
        if name.startswith("__"):
            continue
        assert re.search(rf"^::: [\w.]+\.{re.escape(name)}$", text, re.M), name
