"""Every configuration in sample_runs/ is valid, and the README's quickstart runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from thermonet import config as cfgmod
from thermonet.cli import main

ALL = sorted((Path(__file__).resolve().parents[1] / "sample_runs").glob("*.toml"))
BASELINES = [p for p in ALL if p.stem.startswith("baseline_")]
#: configs of other commands (thermonet anneal / evidence), checked by their own tests
OTHER_COMMANDS = [p for p in ALL if p.stem.startswith(("anneal_", "evidence_"))]


def test_robot_arm_recipe_has_rasmussens_settings():
    cfg = cfgmod.load(Path(__file__).resolve().parents[1] / "sample_runs" / "robot_arm.toml")
    assert cfg["architecture"]["name"] == "mlp-regression"
    assert (cfg["architecture"]["hyper_width"], cfg["architecture"]["hyper_shape"]) == (0.05,
                                                                                       0.5)
    sc = cfg.configs["sampler"]
    assert (sc.n_leapfrog, sc.window, sc.persistence) == (200, 20, 0.95)   # Rasmussen's
    assert sc.fixed_hyper_transitions == cfg["init"]["burn_in"][0] == 10    # his first phase


def test_robot_arm_neal1993_has_his_section_3_2_settings():
    """Neal (1993) Sec. 3.2: scale factors in the HMC state, noise unknown with s0 = m0 =
    0.1, 500 trajectories of 1000 leapfrog steps, the last 250 networks averaged."""
    cfg = cfgmod.load(Path(__file__).resolve().parents[1] / "sample_runs"
                      / "robot_arm_neal1993.toml")
    arch = cfg["architecture"]
    assert (arch["parameterisation"], arch["hierarchical"], arch["hidden"]) == ("scale", True,
                                                                               [16])
    assert arch["noise_std"] is None and (arch["noise_width"], arch["noise_shape"]) == (0.1, 0.1)
    sc = cfg.configs["sampler"]
    assert (sc.n_leapfrog, sc.window, sc.persistence) == (1000, 0, 0.0)   # plain HMC
    run = cfg["run"]
    assert (run["n_iterations"], run["discard"], run["sample_every"]) == (500, 0.5, 1)
    quick = cfgmod.load(Path(__file__).resolve().parents[1] / "sample_runs"
                        / "robot_arm_quick.toml")
    full = cfgmod.load(Path(__file__).resolve().parents[1] / "sample_runs" / "robot_arm.toml")
    assert quick["architecture"] == full["architecture"]
    assert quick["run"]["n_iterations"] < full["run"]["n_iterations"]


SAMPLE_RUNS = [p for p in ALL if p not in BASELINES and p not in OTHER_COMMANDS]


def test_there_are_sample_runs():
    names = {p.stem for p in SAMPLE_RUNS}
    assert {"quickstart", "fig3_M3_D50", "fig3_M3_D500", "fig3_M3_D5000",
            "fig4_M3star_D500"} <= names
    for stem in list(names):
        if stem.startswith("fig"):
            full = stem.removesuffix("_quick").removesuffix("_medium")
            assert full in names, stem                      # every variant has its full run
            assert full + "_quick" in names, stem           # and a quick one
    baselines = {p.stem for p in BASELINES}
    for d in ("D50", "D500", "D5000"):
        assert {f"baseline_M3_{d}", f"baseline_M3_{d}_quick"} <= baselines


@pytest.mark.parametrize("path", SAMPLE_RUNS, ids=lambda p: p.stem)
def test_sample_run_config_is_valid(path):
    cfg = cfgmod.load(path)
    assert cfg["run"]["n_iterations"] >= 1


def test_table1_settings_in_the_full_configs():
    by_name = {p.stem: cfgmod.load(p) for p in SAMPLE_RUNS}
    for d in ("D50", "D500", "D5000"):
        ladder = by_name[f"fig3_M3_{d}"]["ladder"]
        assert (ladder["n_temperatures"], ladder["t_min"], ladder["t_max"]) == (112, 1e-2, 1e2)
        assert ladder["n_trajectories"] == 10
        assert by_name[f"fig3_M3_{d}"]["sampler"]["n_leapfrog"] == 100
        assert by_name[f"fig3_M3_{d}"].configs["sampler"].n_leapfrog == 100
        assert by_name[f"fig3_M3_{d}"]["data"]["name"] == d
    ladder = by_name["fig4_M3star_D500"]["ladder"]
    assert ladder["n_temperatures"] == 84 == by_name["fig4_M3star_D500"].ladder.n_temperatures
    assert ladder["t_min"] == pytest.approx(10**-1.5)
    assert ladder["t_max"] == pytest.approx(10**1.5)
    assert by_name["fig4_M3star_D500"]["architecture"]["name"] == "M3*"


@pytest.mark.slow
def test_quickstart_runs_at_tiny_size(tmp_path):
    out = tmp_path / "q"
    res = CliRunner().invoke(main, ["-q", "run", str(SAMPLE_RUNS[0].parent / "quickstart.toml"), "--out", str(out),
                                    "--set", "run.n_iterations=3", "--set", "init.burn_in=[2]",
                                    "--set", "ladder.adapt_rounds=1",
                                    "--set", "ladder.adapt_round_length=2",
                                    "--set", "ladder.adapt_masses=3",
                                    "--set", "ladder.retune_iterations=3",
                                    "--set", "sampler.warmup_transitions=3"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(main, ["info", str(out), "--json"])
    assert res.exit_code == 0 and '"iterations": 3' in res.output


@pytest.mark.parametrize("path", BASELINES, ids=lambda p: p.stem)
def test_baseline_config_is_valid(path):
    res = CliRunner().invoke(main, ["baseline", "--config", str(path), "--help"])
    assert res.exit_code == 0, res.output


def test_baseline_config_errors_and_a_tiny_run(tmp_path):
    bad = tmp_path / "b.toml"
    bad.write_text("[baseline]\narch = 'M3'\ndrwas = 3\n")
    res = CliRunner().invoke(main, ["baseline", "--config", str(bad)])
    assert res.exit_code == 2 and "did you mean 'draws'" in res.output
    quick = next(p for p in BASELINES if p.stem == "baseline_M3_D50_quick")
    res = CliRunner().invoke(main, ["-q", "baseline", "--config", str(quick), "--draws", "2",
                                    "--test", "official", "--json"])
    assert res.exit_code == 0, res.output
    import json

    out = json.loads(res.stdout)
    assert out["n_draws"] == 2
