"""The command line as a user meets it: help, plugin listing, error reporting."""

from __future__ import annotations

import json
from importlib.metadata import EntryPoint

import pytest
from click.testing import CliRunner

from thermonet import registry
from thermonet.cli import COMMANDS, main


def test_help_lists_every_command_with_one_line_help():
    res = CliRunner().invoke(main, ["--help"])
    assert res.exit_code == 0
    for name in COMMANDS:
        line = next((ln for ln in res.output.splitlines() if ln.strip().startswith(name + " ")),
                    None)
        assert line is not None, name
        assert "unavailable" not in line, line          # every command imports
        assert len(line.split(None, 1)) == 2            # has a help text
    for name in COMMANDS:
        sub = CliRunner().invoke(main, [name, "--help"])
        assert sub.exit_code == 0, (name, sub.output)


class _Dist:
    def __init__(self, name):
        self.metadata = {"Name": name}
        self.version = "9.9"


@pytest.fixture
def with_broken_plugin(monkeypatch):
    real = registry._entry_points

    def fake(group):
        eps = real(group)
        if group == "thermonet.samplers":
            ep = EntryPoint("broken.sampler", "no_such_module_abc:Sampler", group)
            eps.append(ep._for(_Dist("brokenpkg")))
        return eps

    monkeypatch.setattr(registry, "_entry_points", fake)
    registry.refresh()
    yield
    registry.refresh()


def test_plugins_lists_builtins_and_reports_broken_ones(with_broken_plugin, caplog):
    res = CliRunner().invoke(main, ["plugins"])
    assert res.exit_code == 0, res.output
    assert "hmc" in res.output and "thermonet 0.1.0" in res.output
    assert "broken.sampler" in res.output and "BROKEN" in res.output
    assert "no_such_module_abc" in res.output
    assert any("broken plugin" in r.message for r in caplog.records)
    data = json.loads(CliRunner().invoke(main, ["plugins", "--json"]).stdout)
    status = {row["name"]: row["status"] for row in data["sampler"]}
    assert status["broken.sampler"] == "broken" and status["hmc"] == "ok"
    assert {row["name"] for row in data["architecture"]} >= {"M1", "M3", "M3*", "mlp"}
    assert {row["name"] for row in data["minimiser"]} >= {"rmin", "fire"}


@pytest.fixture
def with_misbehaving_samplers(monkeypatch):
    real = registry._entry_points

    def fake(group):
        eps = real(group)
        if group == "thermonet.samplers":
            for name, value in (("hot", "tests.test_testing:HotHMC"),
                                ("noinfo", "tests.test_testing:NoInfo")):
                eps.append(EntryPoint(name, value, group)._for(_Dist("badpkg")))
        return eps

    monkeypatch.setattr(registry, "_entry_points", fake)
    registry.refresh()
    yield
    registry.refresh()


@pytest.mark.slow
def test_plugins_check_runs_the_conformance_kit(with_misbehaving_samplers):
    # without --check: the missing Info class is a static contract failure, the biased sampler
    # passes (nothing has run it)
    res = CliRunner().invoke(main, ["plugins", "--role", "sampler", "--json"])
    status = {row["name"]: row for row in json.loads(res.stdout)["sampler"]}
    assert status["noinfo"]["status"] == "broken" and "no Info class" in status["noinfo"]["problem"]
    assert status["hot"]["status"] == "ok"
    res = CliRunner().invoke(main, ["plugins", "--role", "sampler", "--check"])
    assert res.exit_code == 1
    assert "standard errors off" in res.output        # the biased sampler, with the reason
    res = CliRunner().invoke(main, ["plugins", "--role", "sampler", "--check", "--json"])
    status = {row["name"]: row["status"] for row in json.loads(res.stdout)["sampler"]}
    assert status["hmc"] == "ok" and status["hot"] == "broken" and status["noinfo"] == "broken"


def test_a_broken_plugin_does_not_affect_unrelated_runs(with_broken_plugin, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[data]\nname = "none"\n[architecture]\nname = "gaussian"\n'
                   '[init]\nminimise = false\nburn_in = [1]\n'
                   '[sampler]\nname = "hmc"\nn_leapfrog = 3\n[run]\nn_iterations = 2\n')
    res = CliRunner().invoke(main, ["-q", "run", str(cfg), "--out", str(tmp_path / "r")])
    assert res.exit_code == 0, res.output


def test_errors_are_one_line_and_debug_shows_the_traceback(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[ladder]\nt_min = -3\n")
    res = CliRunner().invoke(main, ["run", str(cfg), "--out", str(tmp_path / "r")])
    assert res.exit_code == 1
    assert res.output.strip().splitlines()[-1].startswith("Error: ")
    assert "t_min = -3" in res.output and "Traceback" not in res.output
    res = CliRunner().invoke(main, ["--debug", "run", str(cfg), "--out", str(tmp_path / "r")])
    assert res.exit_code != 0
    assert res.exception is not None and "t_min = -3" in str(res.exception)


def test_run_quiet_prints_nothing_and_the_log_file_keeps_everything(tmp_path):
    import subprocess
    import sys

    cfg = tmp_path / "c.toml"
    cfg.write_text('[data]\nname = "none"\n[architecture]\nname = "gaussian"\n'
                   '[init]\nminimise = false\nburn_in = [1]\n'
                   '[sampler]\nname = "hmc"\nn_leapfrog = 3\n[run]\nn_iterations = 2\n')
    out = subprocess.run([sys.executable, "-m", "thermonet", "run", str(cfg), "--out",
                          str(tmp_path / "r"), "--quiet"], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "" and out.stderr == ""
    assert "run finished at iteration 2" in (tmp_path / "r" / "thermonet.log").read_text()


@pytest.mark.parametrize("command, body", [
    ("run", "GAUSS"), ("evidence", "MACKAY_CONFIG"), ("anneal", "TINY_TOML")])
def test_the_set_syntax_hint_is_one_the_command_accepts(command, body, tmp_path):
    # the hint was sampler.t_max=10, refused since t_max moved to [ladder]
    import re

    import tests.annealing.test_annealing
    import tests.evidence.test_evidence_cli
    import tests.runs
    from thermonet import config as cfgmod

    text = {"GAUSS": tests.runs.TINY,
            "MACKAY_CONFIG": tests.evidence.test_evidence_cli.MACKAY_CONFIG,
            "TINY_TOML": tests.annealing.test_annealing.TINY_TOML}[body]
    cfg = tmp_path / "c.toml"
    cfg.write_text(text)
    res = CliRunner().invoke(main, ["-q", command, str(cfg), "--out", str(tmp_path / "o"),
                                    "--set", "t_max"])
    assert res.exit_code == 1
    (line,) = [ln for ln in res.output.splitlines() if ln.strip()]
    (hint,) = re.findall(r"e\.g\. --set (\S+)$", line)
    overrides = cfgmod.parse_set([hint])
    if command == "run":
        cfgmod.load(cfg, overrides)
    elif command == "evidence":
        from thermonet.evidence import config as evcfg

        evcfg.load(cfg, overrides)
    else:
        from thermonet.annealing import load_config

        load_config(cfg, overrides)
    assert not (tmp_path / "o").exists()
