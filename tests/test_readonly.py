"""A run directory on a read-only file system: every command that only reads works, and every
command that would write says so in one line and changes nothing (simulated in-process by
tests/readonly.py, since root ignores ``chmod a-w``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.readonly import read_only
from tests.test_runner import GAUSS
from thermonet.cli import main


def _invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _one_error_line(res) -> str:
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1, res.output
    assert "Traceback" not in res.output
    return lines[0]


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*"))
            if p.is_file()}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("readonly")
    cfg = base / "gauss.toml"
    cfg.write_text(GAUSS)
    res = _invoke("-q", "run", cfg, "--out", base / "R")
    assert res.exit_code == 0, res.output
    return base / "R"


@pytest.mark.parametrize("access_knows", [True, False])
def test_resume_of_a_read_only_run_is_one_line_and_changes_nothing(finished_run, monkeypatch,
                                                                   access_knows):
    before = _snapshot(finished_run)
    read_only(monkeypatch, finished_run, access_knows=access_knows)
    res = _invoke("-q", "resume", finished_run, "--iterations", "20")
    assert res.exit_code == 1, res.output
    line = _one_error_line(res)
    assert "Read-only file system" in line and "not writable" in line
    assert "nothing in it was changed" in line and "cp -r" in line
    monkeypatch.undo()
    assert _snapshot(finished_run) == before


@pytest.mark.parametrize("access_knows", [True, False])
def test_a_read_only_run_can_be_read_and_analyse_says_where_it_cannot_write(
        finished_run, monkeypatch, tmp_path, access_knows):
    cfg = tmp_path / "gauss.toml"
    cfg.write_text(GAUSS)
    other = tmp_path / "other"                      # a second, independent run for compare
    assert _invoke("-q", "run", cfg, "--out", other, "--seed", "9").exit_code == 0
    before = _snapshot(finished_run)
    read_only(monkeypatch, finished_run, access_knows=access_knows)
    read_only(monkeypatch, other, access_knows=access_knows)
    res = _invoke("analyse", finished_run, "--no-test")
    assert res.exit_code == 1, res.output
    line = _one_error_line(res)
    assert str(finished_run / "analysis") in line and "--out" in line
    assert "Read-only file system" in line or "not writable" in line
    # every command that only reads the run works
    for args in (["info", finished_run], ["compare", finished_run, other],
                 ["analyse", finished_run, "--no-test", "--out", tmp_path / "a"],
                 ["export", finished_run, "--out", tmp_path / "r.nc"],
                 ["plot", finished_run, "--kind", "ladder", "--out", tmp_path / "l.png"]):
        res = _invoke(*args)
        assert res.exit_code == 0, (args, res.output)
    assert (tmp_path / "a.csv").is_file() and (tmp_path / "l.png").stat().st_size > 0
    monkeypatch.undo()
    assert _snapshot(finished_run) == before
