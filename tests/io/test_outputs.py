"""No output path may name a file a thermonet directory keeps (thermonet.io.outputs): every
command that writes a file the user names refuses, in one line, before any work, and changes
nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.runs import TINY as GAUSS
from tests.runs import invoke, one_error_line, snapshot
from thermonet.io import outputs
from thermonet.io.lock import LOCK_NAME


@pytest.fixture(scope="module")
def finished_run(tiny_run, tmp_path_factory) -> Path:
    """A copy of the tiny run of its own (finished: 12 iterations, 4 trace segments)."""
    return Path(shutil.copytree(tiny_run, tmp_path_factory.mktemp("outputs") / "R"))


def _kept_files(run: Path) -> list[Path]:
    segment = sorted((run / "trace").iterdir())[0]
    return [run / "checkpoint.h5", run / "config.toml", run / "thermonet.log",
            run / LOCK_NAME, segment, run / "initialisation.h5"]


def test_export_never_replaces_a_runs_own_files(finished_run):
    before = snapshot(finished_run)
    for target in _kept_files(finished_run):
        res = invoke("export", finished_run, "--out", target)
        assert res.exit_code == 1, (target, res.output)
        line = one_error_line(res)
        assert f"--out {target}" in line and "keeps" in line and "choose another --out" in line
        assert snapshot(finished_run) == before
    assert not (finished_run / "initialisation.h5").exists()
    assert invoke("info", finished_run).exit_code == 0


@pytest.mark.parametrize("command, names", [
    (["mackay", "--hidden", "1", "--restarts", "1"], ["config.toml", "checkpoint.h5", "trace/w"]),
    (["data", "build-embedded"], ["config.toml", "checkpoint.h5", "trace/w.h5"]),
    (["minimise", "--arch", "M1", "--data", "D50"], ["trace/w.npy"]),
    (["baseline", "--arch", "M1", "--data", "D50", "--draws", "2"], ["trace/w.npy"]),
])
def test_every_command_that_writes_a_named_file_refuses_a_runs_own_files(finished_run, command,
                                                                          names, monkeypatch):
    import thermonet.baseline
    import thermonet.data

    def no_work(*args, **kwargs):
        raise AssertionError("worked before checking --out")

    monkeypatch.setattr(thermonet.data, "load_data", no_work)
    monkeypatch.setattr(thermonet.data, "build_embedded", no_work)
    monkeypatch.setattr(thermonet.baseline, "standard_optimisation", no_work)
    before = snapshot(finished_run)
    for name in names:
        res = invoke(*command, "--out", finished_run / name)
        assert res.exit_code == 1, (name, res.output)
        assert "keeps" in one_error_line(res)
    assert snapshot(finished_run) == before


def test_analyse_and_plot_refuse_a_runs_own_files(finished_run):
    before = snapshot(finished_run)
    res = invoke("analyse", finished_run, "--no-test", "--out", finished_run / "trace" / "a")
    assert res.exit_code == 1 and "run's own files" in one_error_line(res)
    res = invoke("plot", finished_run, "--kind", "ladder", "--out",
                  finished_run / "trace" / "f.png")
    assert res.exit_code == 1 and "keeps" in one_error_line(res)
    assert snapshot(finished_run) == before


def test_run_evidence_and_anneal_refuse_a_runs_trace_directory(finished_run, tmp_path):
    before = snapshot(finished_run)
    from tests.annealing.test_annealing import TINY_TOML
    from tests.evidence.test_evidence_cli import MACKAY_CONFIG

    configs = {}
    for name, body in (("run", GAUSS), ("evidence", MACKAY_CONFIG), ("anneal", TINY_TOML)):
        configs[name] = tmp_path / f"{name}.toml"
        configs[name].write_text(body)
    for command in (["run", configs["run"]], ["evidence", configs["evidence"]],
                    ["anneal", configs["anneal"]]):
        res = invoke("-q", *command, "--out", finished_run / "trace")
        assert res.exit_code == 1, (command, res.output)
        assert "keeps" in one_error_line(res)
    assert snapshot(finished_run) == before


def test_the_same_names_outside_a_thermonet_directory_are_the_users(tmp_path):
    (tmp_path / "config.toml").write_text("[run]\n")          # a user's own config
    for name in ("config.toml", "thermonet.log", "checkpoint.h5", "out.nc", "trace/x.h5"):
        assert outputs.owner_of(tmp_path / name) is None, name
    assert outputs.check_output(tmp_path / "config.toml") == tmp_path / "config.toml"


def test_a_path_through_a_link_or_dots_is_recognised(finished_run, tmp_path):
    link = tmp_path / "link"
    link.symlink_to(finished_run)
    for path in (link / "checkpoint.h5", finished_run / "trace" / ".." / "config.toml",
                 link / "trace" / "new.h5", finished_run / "checkpoint.h5.thermonet-tmp"):
        assert outputs.owner_of(path) == finished_run.resolve(), path
    assert outputs.owner_of(finished_run / "analysis.csv") is None


def test_the_workflows_file_names_match_their_constants():
    from thermonet.annealing.store import ANNEAL_H5, ANNEAL_JSON
    from thermonet.evidence.models import CONFIG_NAME
    from thermonet.evidence.run import RESULT_NAME
    from thermonet.evidence.ti.pair import REFERENCE_FILE
    from thermonet.evidence.ti.store import TI_CHECKPOINT

    for name in (CONFIG_NAME, RESULT_NAME, REFERENCE_FILE, TI_CHECKPOINT):
        assert name in outputs.EVIDENCE_FILES
    assert {ANNEAL_H5, ANNEAL_JSON} == set(outputs.ANNEAL_FILES)
