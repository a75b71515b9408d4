"""MPI for the workflows: ``thermonet baseline`` and ``thermonet evidence`` under
``mpiexec -n 2`` and ``-n 3`` give bit for bit the numbers of one process on threads, and an
error in one rank's task ends every rank with one report, keeping what was stored.

Like tests/parallel/test_mpi.py these start ``mpiexec`` as a subprocess and skip with the reason when
mpi4py or mpiexec is missing.
"""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from click.testing import CliRunner

from tests.parallel.test_mpi import ROOT, launch, mpiexec, run_on_threads  # noqa: F401 (a fixture)
from tests.runs import GAUSSIAN_MODELS, TI_FAST
from thermonet.cli import main

#: a few short minimisations of M1 on D50, evaluated on the official test set
BASELINE = ["baseline", "--arch", "M1", "--data", "D50", "--test", "official", "--draws", "5",
            "--seed", "3", "--set", "max_steps=200", "--json"]

#: two exact Gaussian models, one minimum each, 2 repeats, the convergence report and Laplace:
#: 2 minimisations, 2 references, 2 Laplace and 16 TI runs (blocks of 6, 6, 4 over 3 ranks)
EVIDENCE = "[evidence]\nseed = 2\nrepeats = 2\n[data]\nname = 'none'\n" + TI_FAST + GAUSSIAN_MODELS


def _untimed(obj):
    """``obj`` without its wall-clock times (``seconds``, ``*_s``, ``*_seconds``): every other
    number must agree bit for bit."""
    if isinstance(obj, dict):
        return {k: _untimed(v) for k, v in obj.items()
                if not (k == "seconds" or k.endswith(("_s", "_seconds")))}
    if isinstance(obj, list):
        return [_untimed(v) for v in obj]
    return obj


@pytest.fixture(scope="module")
def baseline_threads(tmp_path_factory):
    out = tmp_path_factory.mktemp("baseline") / "kept.npy"
    res = CliRunner().invoke(main, ["-q", *BASELINE, "--workers", "2", "--out", str(out)])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout), np.load(out)


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [2, 3])
def test_baseline_under_mpi_is_bit_identical_to_threads(mpiexec, baseline_threads,  # noqa: F811
                                                        tmp_path, ranks):
    out = tmp_path / "kept.npy"
    res = launch(mpiexec, ranks, ["-q", *BASELINE, "--out", out])
    assert res.returncode == 0, res.stderr
    summary, kept = baseline_threads
    lines = res.stdout.splitlines()
    assert len(lines) == 1                        # rank 0 alone prints
    got = json.loads(lines[0])
    assert got["n_draws"] == 5 and len(got["draws"]["train_energy"]) == 5
    assert _untimed({**got, "out": None}) == _untimed({**summary, "out": None})
    assert np.array_equal(np.load(out), kept) and kept.shape[0] == got["n_kept"] > 0


@pytest.fixture(scope="module")
def evidence_threads(tmp_path_factory):
    """The reference: one process on 2 threads (a fresh summary per test: they edit it)."""
    base = tmp_path_factory.mktemp("evidence")
    (base / "ev.toml").write_text(EVIDENCE)
    res = CliRunner().invoke(main, ["-q", "evidence", str(base / "ev.toml"), "--out",
                                    str(base / "threads"), "--workers", "2", "--json"])
    assert res.exit_code in (0, 3), res.output
    return base / "ev.toml", res.exit_code, res.stdout


def _numbers(summary: dict) -> list[float]:
    out = []
    for r in summary["rows"]:
        out += [x["log_integral"] for x in r["repeats"]]
        out += [v["log_integral"] for v in r["convergence"]["variants"]]
        out += [r["energy0"], r["laplace"]["log_integral"]]
    return out


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [2, 3])
def test_evidence_under_mpi_is_bit_identical_to_threads(mpiexec, evidence_threads,  # noqa: F811
                                                        tmp_path, ranks):
    config, status, printed = evidence_threads
    summary = json.loads(printed)
    out = tmp_path / "mpi"
    res = launch(mpiexec, ranks, ["-q", "evidence", config, "--out", out, "--json"])
    assert res.returncode == status, res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) == 1                        # rank 0 alone prints
    got = json.loads(lines[0])
    assert len(_numbers(got)) == 2 * (2 + 6 + 2)
    assert _numbers(got) == _numbers(summary)
    assert got["config"]["evidence"].pop("workers") == 1    # threads: 2, never in a result
    summary["config"]["evidence"].pop("workers")
    assert _untimed(got) == _untimed(summary)
    stored = json.loads((out / "summary.json").read_text())
    assert _untimed(stored)["rows"] == _untimed(got)["rows"]
    # every task's files are there, once
    runs = sorted(p.parent.relative_to(out).as_posix() for p in out.glob("ti/*/*/*/result.json"))
    assert len(runs) == 16 and len(set(runs)) == 16


@pytest.mark.mpi
def test_an_error_in_a_ti_task_on_one_rank_ends_every_rank_and_keeps_the_rest(
        mpiexec, evidence_threads, tmp_path):  # noqa: F811
    config, status, printed = evidence_threads
    summary = json.loads(printed)
    out = tmp_path / "fault"
    # rank 1 of 2 holds tasks 11-20 of the last phase (TI runs); its 3rd TI run raises
    res = launch(mpiexec, 2, ["-q", "evidence", config, "--out", out, "--json"],
                  script=[str(ROOT / "tests" / "mpi_fault.py"), "ti", 3])
    assert res.returncode == 1, res.stderr
    assert res.stderr.count("FloatingPointError: injected in TI on rank 1") == 1
    assert "raised on MPI rank 1" in res.stderr
    assert "MPI_Abort" not in res.stderr          # every rank knew: no abort was needed
    assert res.stdout == ""
    done = list(out.glob("ti/*/*/*/result.json"))
    assert 2 <= len(done) < 16                    # what finished is stored ...
    again = CliRunner().invoke(main, ["-q", "evidence", str(config), "--out", str(out),
                                      "--json"])
    assert again.exit_code == status, again.output  # ... and a re-run completes the rest
    assert _numbers(json.loads(again.stdout)) == _numbers(summary)


@pytest.mark.mpi
def test_analyse_under_mpi_is_bit_identical_to_threads(mpiexec, tmp_path,  # noqa: F811
                                                       monkeypatch):
    # the official 10,000 test images rather than full MNIST's 60,000-image complement: seconds
    monkeypatch.delenv("THERMONET_MNIST_DIR", raising=False)
    run = run_on_threads(tmp_path / "run")      # 8 temperatures, 3 stored samples each after discard
    res = CliRunner().invoke(main, ["analyse", str(run), "--out", str(tmp_path / "threads"),
                                    "--workers", "2"])
    assert res.exit_code == 0, res.output
    mpi = launch(mpiexec, 2, ["analyse", run, "--out", tmp_path / "mpi"])
    assert mpi.returncode == 0, mpi.stderr
    for name in (".csv", "_pairs.csv"):
        threads = (tmp_path / f"threads{name}").read_text()
        assert (tmp_path / f"mpi{name}").read_text() == threads    # every digit
    rows = list(csv.DictReader((tmp_path / "threads.csv").read_text().splitlines()))
    assert len(rows) == 8 and all(np.isfinite(float(r[key])) for r in rows for key in (
        "test_energy", "test_error", "predictive_test_energy_per_point"))  # samples evaluated
    printed = [line for line in mpi.stdout.splitlines() if not line.startswith("wrote")]
    assert printed == [line for line in res.stdout.splitlines() if not line.startswith("wrote")]
    assert len(printed) > 8                     # rank 0 alone prints the table, once
