"""A run directory on a read-only file system: every command that only reads works, and every
command that would write says so in one line and changes nothing (simulated in-process by
tests/readonly.py, since root ignores ``chmod a-w``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.readonly import read_only
from tests.runs import TINY as GAUSS
from tests.runs import invoke, one_error_line, snapshot


@pytest.fixture(scope="module")
def finished_run(tiny_run, tmp_path_factory) -> Path:
    """A copy of the tiny run of its own (finished: 12 iterations, 4 trace segments)."""
    return Path(shutil.copytree(tiny_run, tmp_path_factory.mktemp("readonly") / "R"))


@pytest.mark.parametrize("access_knows", [True, False])
def test_resume_of_a_read_only_run_is_one_line_and_changes_nothing(finished_run, monkeypatch,
                                                                   access_knows):
    before = snapshot(finished_run)
    read_only(monkeypatch, finished_run, access_knows=access_knows)
    res = invoke("-q", "resume", finished_run, "--iterations", "20")
    assert res.exit_code == 1, res.output
    line = one_error_line(res)
    assert "Read-only file system" in line and "not writable" in line
    assert "nothing in it was changed" in line and "cp -r" in line
    monkeypatch.undo()
    assert snapshot(finished_run) == before


@pytest.mark.parametrize("access_knows", [True, False])
def test_a_read_only_run_can_be_read_and_analyse_says_where_it_cannot_write(
        finished_run, monkeypatch, tmp_path, access_knows):
    cfg = tmp_path / "gauss.toml"
    cfg.write_text(GAUSS)
    other = tmp_path / "other"                      # a second, independent run for compare
    assert invoke("-q", "run", cfg, "--out", other, "--seed", "9").exit_code == 0
    before = snapshot(finished_run)
    read_only(monkeypatch, finished_run, access_knows=access_knows)
    read_only(monkeypatch, other, access_knows=access_knows)
    res = invoke("analyse", finished_run, "--no-test")
    assert res.exit_code == 1, res.output
    line = one_error_line(res)
    assert str(finished_run / "analysis") in line and "--out" in line
    assert "Read-only file system" in line or "not writable" in line
    # every command that only reads the run works
    for args in (["info", finished_run], ["compare", finished_run, other],
                 ["analyse", finished_run, "--no-test", "--out", tmp_path / "a"],
                 ["export", finished_run, "--out", tmp_path / "r.nc"],
                 ["plot", finished_run, "--kind", "ladder", "--out", tmp_path / "l.png"]):
        res = invoke(*args)
        assert res.exit_code == 0, (args, res.output)
    assert (tmp_path / "a.csv").is_file() and (tmp_path / "l.png").stat().st_size > 0
    monkeypatch.undo()
    assert snapshot(finished_run) == before
