"""SIGINT and SIGTERM during `thermonet evidence` and `thermonet anneal`: one line, exit status
128 + the signal, and the same result after continuing as without the stop.

The signal is sent once the command has saved something (a polled file), in a child process;
Python's KeyboardInterrupt used to end the command with Click's "Aborted!" and exit status 1,
SIGTERM without a word, and a SIGINT that arrived in compiled code was swallowed and the
command ran on to exit 0."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from tests.runs import GAUSSIAN_MODELS, TI_FAST
from thermonet.cli import main

ANNEAL = """
[run]
seed = 3
[data]
name = "D50"
test = "official"
[architecture]
name = "M1"
[anneal]
t_start = 3.0
t_end = 0.01
n_temperatures = 30
n_trajectories = 40
burn_in = 1
patience = 50
n_validation = 100
adapt_every = 2
[sampler]
n_leapfrog = 8
adapt_trajectories = 3
"""

EVIDENCE = ("[evidence]\nseed = 5\nlaplace = false\nrepeats = 2\n[data]\nname = 'none'\n"
            + TI_FAST + GAUSSIAN_MODELS.split("[model.B]")[0])


def _stopped(args: list[str], ready, sig: int, timeout: float = 240.0) -> tuple[int, str]:
    """Run ``thermonet ARGS`` in a child, send ``sig`` once ``ready()``; its status and
    stderr."""
    env = {k: v for k, v in os.environ.items() if k != "THERMONET_MNIST_DIR"}
    proc = subprocess.Popen([sys.executable, "-m", "thermonet", "-q", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    while not ready():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() - t0 < timeout, "never ready"
        time.sleep(0.02)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=timeout)
    return proc.returncode, err


def _one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.slow
def test_evidence_stops_on_sigint_and_continues_to_the_same_numbers(tmp_path, monkeypatch):
    monkeypatch.delenv("THERMONET_MNIST_DIR", raising=False)
    cfg = tmp_path / "ev.toml"
    cfg.write_text(EVIDENCE)
    whole = CliRunner().invoke(main, ["-q", "evidence", str(cfg), "--out", str(tmp_path / "w")])
    assert whole.exit_code == 0, whole.output
    out = tmp_path / "cut"
    # first killed outright (kill -9), then stopped by SIGINT further on
    code, _ = _stopped(["evidence", str(cfg), "--out", str(out)],
                       lambda: any(out.rglob("result.json")), signal.SIGKILL)
    assert code == -signal.SIGKILL
    n_killed = len(list(out.rglob("result.json")))
    code, err = _stopped(["evidence", str(cfg), "--out", str(out)],
                         lambda: len(list(out.rglob("result.json"))) > n_killed, signal.SIGINT)
    assert code == 130, err
    line = _one_line(err)
    assert line.startswith("Stopped: stopped by SIGINT; every computation it finished is kept "
                           f"in {out}") and f"thermonet evidence {cfg} --out {out}" in line
    assert not (out / "summary.json").exists()          # stopped before the end
    again = CliRunner().invoke(main, ["-q", "evidence", str(cfg), "--out", str(out)])
    assert again.exit_code == 0, again.output
    assert (out / "table.txt").read_text() == (tmp_path / "w" / "table.txt").read_text()


@pytest.mark.slow
def test_anneal_stops_on_sigterm_and_resumes_to_the_same_result(tmp_path, monkeypatch):
    from thermonet.annealing import read_anneal
    from thermonet.errors import ThermonetError

    monkeypatch.delenv("THERMONET_MNIST_DIR", raising=False)
    cfg = tmp_path / "an.toml"
    cfg.write_text(ANNEAL)
    whole = CliRunner().invoke(main, ["-q", "anneal", str(cfg), "--out", str(tmp_path / "w")])
    assert whole.exit_code == 0, whole.output
    out = tmp_path / "cut"

    def two_done() -> bool:
        try:
            return read_anneal(out)["n_done"] >= 2
        except (ThermonetError, OSError):
            return False

    code, _ = _stopped(["anneal", str(cfg), "--out", str(out)], two_done, signal.SIGKILL)
    assert code == -signal.SIGKILL
    killed = read_anneal(out)["n_done"]
    code, err = _stopped(["anneal", str(cfg), "--out", str(out), "--resume"],
                         lambda: two_done() and read_anneal(out)["n_done"] > killed,
                         signal.SIGTERM)
    assert code == 143, err
    line = _one_line(err)
    done = read_anneal(out)["n_done"]
    assert killed < done < 30
    assert line == (f"Stopped: stopped by SIGTERM; {out / 'anneal.h5'} holds {done} completed "
                    f"temperature(s); continue with `thermonet anneal {cfg} --out {out} "
                    "--resume`")
    again = CliRunner().invoke(main, ["-q", "anneal", str(cfg), "--out", str(out), "--resume"])
    assert again.exit_code == 0, again.output
    a = json.loads((tmp_path / "w" / "anneal.json").read_text())
    b = json.loads((out / "anneal.json").read_text())
    assert a["best"] == b["best"] and a["stop_reason"] == b["stop_reason"]
