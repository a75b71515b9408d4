"""Mixing diagnostics: R-hat and ESS against ArviZ and against theory, restarts and round trips
on hand-built replica paths, the swap barrier on a synthetic trace with known rejection rates,
the verdict, `thermonet compare` on real tiny runs and `thermonet export` through ArviZ."""

from __future__ import annotations

import json
import math
import sys
import warnings

import numpy as np
import pytest
from click.testing import CliRunner

from tests.runs import variant
from thermonet.analysis import analyse, read_analysis, round_trips_per_replica
from thermonet.analysis.compare import compare_runs
from thermonet.analysis.mixing import (
    ESS_MIN,
    MIN_RESTARTS,
    RHAT_MAX,
    assess,
    ess_bulk,
    ess_tail,
    replica_passages,
    rung_acceptance,
    split_rhat,
    swap_barrier,
    verdict,
)
from thermonet.cli import main
from thermonet.errors import ConfigError
from thermonet.io import checkpoint as ckpt
from thermonet.io import trace as iotrace
from thermonet.io.trace import read_trace

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    import arviz as az


def ar1(rng: np.random.Generator, chains: int, n: int, phi: float) -> np.ndarray:
    """Stationary unit-variance AR(1) chains, shape (chains, n)."""
    x = np.empty((chains, n))
    x[:, 0] = rng.normal(size=chains)
    eps = rng.normal(size=(chains, n)) * math.sqrt(1 - phi * phi)
    for t in range(1, n):
        x[:, t] = phi * x[:, t - 1] + eps[:, t]
    return x


def cases() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {"iid": rng.normal(size=(4, 1000)),
            "ar0.5": ar1(rng, 4, 2000, 0.5),
            "ar0.9": ar1(rng, 4, 2000, 0.9),
            "shifted": rng.normal(size=(4, 500)) + 0.5 * np.arange(4)[:, None],
            "odd_length": rng.normal(size=(3, 1001)),
            "ties": rng.integers(0, 5, size=(4, 300)).astype(float),
            "heavy_tail": rng.standard_cauchy(size=(2, 800))}


# --- against ArviZ: the same estimator, so agreement to rounding -----------------------------

@pytest.mark.parametrize("name", list(cases()))
def test_rhat_and_ess_match_arviz(name):
    x = cases()[name]
    assert split_rhat(x) == pytest.approx(float(az.rhat(x, method="rank")), rel=1e-12)
    assert ess_bulk(x) == pytest.approx(float(az.ess(x, method="bulk")), rel=1e-10)
    assert ess_tail(x) == pytest.approx(float(az.ess(x, method="tail")), rel=1e-10)


# --- against theory ----------------------------------------------------------------------------
# Over 100 seeds of 4 chains x 2000 draws, ess_bulk / (n (1 - phi) / (1 + phi)) had mean 0.99,
# 1.00, 1.01 and sd 0.031, 0.061, 0.14 for phi = 0, 0.5, 0.9; split-R-hat had sd 0.00025,
# 0.0008, 0.005 around 1. Tolerances are 4 sd.

@pytest.mark.parametrize("phi,sd_ess,sd_rhat", [(0.0, 0.031, 0.00025), (0.5, 0.061, 0.0008),
                                                (0.9, 0.14, 0.005)])
@pytest.mark.parametrize("seed", [11, 12])
def test_ess_of_ar1_is_n_times_1_minus_rho_over_1_plus_rho(phi, sd_ess, sd_rhat, seed):
    x = ar1(np.random.default_rng(seed), 4, 2000, phi)
    expected = x.size * (1 - phi) / (1 + phi)
    assert ess_bulk(x) / expected == pytest.approx(1.0, abs=4 * sd_ess)
    assert abs(split_rhat(x) - 1.0) < 4 * sd_rhat + 0.002


def test_rhat_sees_shifted_chains_and_a_drifting_single_chain():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(4, 1000)) + np.array([0, 0, 0, 1.0])[:, None]
    assert split_rhat(x) > 1.05          # sqrt(1 + var of split means) = 1.10 on raw values
    drift = rng.normal(size=(1, 1000)) + np.linspace(0, 3, 1000)   # one chain, two halves
    assert split_rhat(drift) > 1.3        # halves 1.5 apart, within-half sd 1.09: 1.39
    assert math.isnan(split_rhat(np.ones((2, 100))))               # constant: undefined
    assert math.isnan(split_rhat(np.zeros((2, 3))))                # too short


# --- restarts and round trips ------------------------------------------------------------------

def replicas(positions: list[list[int]]) -> np.ndarray:
    """replica_k rows from rows of pos[replica] = slot."""
    return np.argsort(np.array(positions), axis=1)


def test_restarts_and_round_trips_on_a_hand_built_path():
    pos = [[0, 1, 2],     # replica 0 cold, replica 2 hot
           [1, 0, 2],     # replica 1 cold
           [2, 0, 1],     # replica 0 hot
           [1, 2, 0],     # replica 2 cold after hot: restart (no trip: never cold before)
           [0, 2, 1],     # replica 0 cold: restart and trip
           [0, 2, 1],     # staying there counts once
           [1, 0, 2],     # replica 1 cold after hot: restart and trip
           [1, 2, 0]]     # replica 2 cold again after hot: restart and trip
    p = replica_passages(replicas(pos))
    assert p.restarts.tolist() == [1, 1, 2]
    assert p.round_trips.tolist() == [1, 1, 1]
    assert round_trips_per_replica(replicas(pos)).tolist() == [1, 1, 1]
    assert replica_passages(replicas(pos[:4])).restarts.tolist() == [0, 0, 1]
    assert replica_passages(np.zeros((5, 1), int)).restarts.tolist() == [0]
    assert replica_passages(np.zeros((0, 3), int)).round_trips.tolist() == [0, 0, 0]


# --- swap barrier and rung acceptance ----------------------------------------------------------

def test_swap_barrier_on_known_rejection_rates():
    rng = np.random.default_rng(5)
    n, r = 20_000, np.array([0.2, 0.5, 0.9])
    attempted = (rng.random((n, 3)) < 0.5).astype(int)
    accepted = attempted * (rng.random((n, 3)) >= r)
    s = swap_barrier(attempted, accepted)
    binomial = np.sqrt(r * (1 - r) / attempted.sum(axis=0))
    assert np.all(np.abs(s.rejection - r) < 4 * binomial)
    assert s.rejection_err == pytest.approx(binomial, rel=0.1)      # independent swaps
    assert s.barrier == pytest.approx(s.rejection.sum(), rel=1e-15)
    assert abs(s.barrier - r.sum()) < 4 * s.barrier_err
    assert s.barrier_err == pytest.approx(np.sqrt(np.sum(binomial ** 2)), rel=0.1)
    cut = swap_barrier(attempted, accepted * np.array([1, 0, 1]))
    assert cut.rejection[1] == 1.0 and math.isnan(cut.rejection_err[1])


def test_rung_acceptance_error_and_flags():
    rng = np.random.default_rng(2)
    n, p = 5000, np.array([0.0, 0.02, 0.5, 0.99])
    acc = rng.binomial(4, p, size=(n, 4))
    ra = rung_acceptance(acc, 4)
    assert ra.acceptance[0] == 0.0 and math.isnan(ra.error[0])     # never a silent +-0
    se = np.sqrt(p * (1 - p) / (4 * n))
    assert np.all(np.abs(ra.acceptance[1:] - p[1:]) < 4 * se[1:])
    assert ra.error[1:] == pytest.approx(se[1:], rel=0.1)
    assert ra.frozen.tolist() == [True, True, False, False]
    assert ra.timid.tolist() == [False, False, False, True]
    assert ra.n_trajectories.tolist() == [4 * n] * 4
    # per-rung counts (a slow band): each rung divided by its own count
    per = rung_acceptance(acc * np.array([1, 1, 2, 1]), [4, 4, 8, 4])
    assert np.array_equal(per.acceptance, ra.acceptance)
    assert per.n_trajectories.tolist() == [4 * n, 4 * n, 8 * n, 4 * n]


# --- the verdict -------------------------------------------------------------------------------

def test_verdict_strings():
    n = 100
    acc = rung_acceptance(np.tile([0, 0, 1, 1], (n, 1)) * np.array([1, 1, 1, 0])[None]
                          + np.array([0, 0, 0, 1]) * (np.arange(n) % 2)[:, None], 2)
    v = verdict([0.01, 0.1, 1.0, 10.0], restarts=0, round_trips=0, acceptance=acc,
                rhat=[1.31, 1.0, 1.0, 1.0])
    assert not v.mixed
    assert v.reasons == ["0 restarts", "rungs 0-1 accept 0.00",
                         "split R-hat 1.31 at T = 0.01 (> 1.05)"]
    assert str(v).startswith("not mixed: 0 restarts; rungs 0-1 accept 0.00; split R-hat 1.31 "
                             "at T = 0.01 (> 1.05); flagged: rungs 0, 1 accepted 0 of 200 "
                             "trajectories")
    ok = verdict([0.01, 0.1, 1.0], restarts=24, round_trips=9, elapsed_s=24 / 6.2 * 3600,
                 rhat=[1.01, 1.0, 1.0], ess_bulk=[500, 400, 300])
    assert ok.mixed and str(ok) == ("mixed: 24 restarts (6.2/h), 9 round trips, max split "
                                    "R-hat 1.01, min bulk ESS 300")
    # the minimum of restarts, and of bulk ESS, are conditions (their defaults and settable)
    few = verdict([1.0, 2.0], restarts=19, round_trips=5)
    assert not few.mixed and few.reasons == [f"19 restarts (fewer than {MIN_RESTARTS})"]
    assert verdict([1.0, 2.0], restarts=5, round_trips=5, min_restarts=5).mixed
    low = verdict([1.0, 2.0], restarts=30, round_trips=10, ess_bulk=[50.0, 300.0])
    assert not low.mixed and low.reasons == [f"bulk ESS 50 at T = 1 (fewer than {ESS_MIN:g})"]
    assert verdict([1.0, 2.0], restarts=30, round_trips=10, ess_bulk=[50.0, 300.0],
                   ess_min=40).mixed
    # split R-hat decides; as a flag only on request
    stuck = verdict([1.0, 2.0], restarts=30, round_trips=6, ess_bulk=[300.0, 300.0],
                    rhat=[2.11, 1.0])
    assert not stuck.mixed and stuck.reasons == ["split R-hat 2.11 at T = 1 (> 1.05)"]
    flagged = verdict([1.0, 2.0], restarts=30, round_trips=6, rhat=[2.11, 1.0],
                      rhat_decides=False)
    assert flagged.mixed and flagged.flags == ["split R-hat 2.11 at T = 1 (this run's halves)"]
    trips = verdict([1.0, 2.0], restarts=3, round_trips=0)
    assert not trips.mixed and trips.reasons == ["0 round trips (3 restarts)"]
    one = verdict([1.0], rhat=[1.2], rhat_decides=False)
    assert one.mixed and one.reasons[0].startswith("no check failed in this one chain")
    assert str(one) != "mixed: -"


def write_run(d, n: int, accepted: np.ndarray, replica: np.ndarray, temps: list[float],
              seed: int = 0) -> None:
    """A synthetic run; ``seed`` tells runs apart (compare refuses one run twice)."""
    k = len(temps)
    rng = np.random.default_rng(0)
    rows = {"iteration": list(range(1, n + 1)), "energy_k": list(rng.normal(size=(n, k))),
            "n_accepted_k": list(accepted), "n_divergent_k": [np.zeros(k, int)] * n,
            "step_size_k": [np.full(k, 0.1)] * n,
            "swap_attempted_k": [np.ones(k - 1, int)] * n,
            "swap_accepted_k": [np.ones(k - 1, int)] * n, "replica_k": list(replica)}
    iotrace.write_segment(d, f"u{seed}", rows, [])
    # a short synthetic trace: the rules under test here are not the ESS minimum
    toml = (f"[run]\nseed = {seed}\nn_iterations = {n}\ndiscard = 0.0\nmin_ess = 0\nmin_restarts = 1\n"
            "[data]\nname = \"none\"\n"
            "[architecture]\nname = \"gaussian\"\n[ladder]\nn_trajectories = 1\n")
    ckpt.write_checkpoint(d, ckpt.Checkpoint(
        iteration=n, run_uuid=f"u{seed}", config_toml=toml, config_sources={}, plugins={},
        rng_states=[], slots={"step_size": np.full(k, 0.1)}, replica_k=replica[-1],
        temperatures=np.array(temps), counters={"elapsed_s": 3600.0}))


def test_a_rung_that_never_accepts_is_loud_in_analyse_and_info(tmp_path):
    n = 40
    # replicas swap every iteration: 0 and 1 alternate ends, so restarts happen
    replica = np.array([[0, 1], [1, 0]] * (n // 2))
    accepted = np.tile([0, 1], (n, 1))
    write_run(tmp_path, n, accepted, replica, [1.0, 2.0])
    a = analyse(tmp_path)
    assert a.table["acceptance"].tolist() == [0.0, 1.0]
    assert np.isnan(a.table["acceptance_err"]).all()
    assert not a.meta["mixed"]
    # (the first reason: 40 draws of noise may also fail split R-hat)
    assert a.meta["verdict"]["reasons"][0] == "rung 0 accepts 0.00"
    assert any("rung 0 accepted 0 of 40 trajectories" in f for f in a.meta["verdict"]["flags"])
    assert a.meta["restarts"] == 39 and a.meta["restarts_per_replica"] == [19, 20]
    res = CliRunner().invoke(main, ["analyse", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "<- accepted none" in res.output
    assert "verdict    not mixed: rung 0 accepts 0.00" in res.output
    res = CliRunner().invoke(main, ["info", str(tmp_path)])
    assert "verdict    not mixed: rung 0 accepts 0.00" in res.output
    s = json.loads(CliRunner().invoke(main, ["info", str(tmp_path), "--json"]).stdout)
    assert s["mixed"] is False and s["restarts"] == 39
    b = read_analysis(tmp_path / "analysis.h5")
    assert b.meta["verdict"] == a.meta["verdict"]


# --- compare and export on real tiny runs ------------------------------------------------------

GAUSS = variant("gaussian_2d", run="n_iterations = 120")


@pytest.fixture(scope="module")
def tiny_runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("compare")
    cfg = d / "g.toml"
    cfg.write_text(GAUSS)
    out = {}
    for name, extra in (("a", ["--seed", "1"]), ("b", ["--seed", "2"]),
                        ("ladder", ["--set", "ladder.n_temperatures=4"]),
                        ("leapfrog", ["--set", "sampler.n_leapfrog=4"]),
                        ("started", ["--seed", "3", "--set", "init.burn_in=[2]"])):
        res = CliRunner().invoke(main, ["-q", "run", str(cfg), "--out", str(d / name), *extra])
        assert res.exit_code == 0, res.output
        out[name] = d / name
    return out


def test_compare_two_runs(tiny_runs):
    a, b = tiny_runs["a"], tiny_runs["b"]
    res = CliRunner().invoke(main, ["compare", str(a), str(b), "--json"])
    assert res.exit_code == 0, res.output
    c = json.loads(res.stdout)
    chains = []
    for d in (a, b):
        e = read_trace(d)["energy_k"]
        chains.append(e[math.floor(0.2 * len(e)):])
    x = np.stack(chains)
    assert c["n_draws"] == x.shape[1] == 96
    for k in range(3):
        assert c["train_energy"]["rhat"][k] == pytest.approx(split_rhat(x[:, :, k]), rel=1e-14)
        assert c["train_energy"]["ess_bulk"][k] == pytest.approx(
            float(az.ess(x[:, :, k], method="bulk")), rel=1e-10)
    assert "test_energy" not in c                          # no analysis.h5 yet
    res = CliRunner().invoke(main, ["compare", str(a), str(b)])
    assert res.exit_code == 0 and res.output.strip().splitlines()[-1].startswith("verdict    ")


def test_compare_uses_test_series_of_analysis_files(tiny_runs, tmp_path):
    rng = np.random.default_rng(9)
    series = {}
    for i, key in enumerate(("a", "b")):
        an = analyse(tiny_runs[key], test=False)
        an.series = {"test_energy": rng.normal(size=(12, 3)) + 2.0 * i,
                     "test_error": rng.random((12, 3))}
        series[key] = an.series
        an.to_hdf5(tiny_runs[key] / "analysis.h5")
    try:
        c = json.loads(CliRunner().invoke(
            main, ["compare", str(tiny_runs["a"]), str(tiny_runs["b"]), "--json"]).stdout)
    finally:
        for key in ("a", "b"):
            (tiny_runs[key] / "analysis.h5").unlink()
    x = np.stack([series["a"]["test_energy"], series["b"]["test_energy"]])
    assert c["test_energy"]["n_draws"] == 12
    assert c["test_energy"]["rhat"][1] == pytest.approx(split_rhat(x[:, :, 1]), rel=1e-14)
    assert min(c["test_energy"]["rhat"]) > 1.05                # shifted by 2 sd: seen
    assert any(f.startswith("test_energy R-hat") for f in c["verdict"]["flags"])


def test_compare_refuses_other_ladders_and_configs(tiny_runs):
    a = str(tiny_runs["a"])
    res = CliRunner().invoke(main, ["compare", a, str(tiny_runs["ladder"])])
    assert res.exit_code == 1
    assert len(res.output.strip().splitlines()) == 1
    assert "another ladder" in res.output and "4 temperatures" in res.output
    res = CliRunner().invoke(main, ["compare", a, str(tiny_runs["leapfrog"])])
    assert res.exit_code == 1 and "sampler.n_leapfrog = 3 vs 4" in res.output
    res = CliRunner().invoke(main, ["compare", a])
    assert res.exit_code == 1 and "at least two" in res.output
    # a different start is a different chain of the same posterior: compared, not refused
    res = CliRunner().invoke(main, ["compare", a, str(tiny_runs["started"]), "--json"])
    assert res.exit_code == 0, res.output
    assert len(json.loads(res.stdout)["train_energy"]["rhat"]) == 3


def test_compare_refuses_one_run_given_twice_a_copy_or_the_same_seed(tiny_runs, tmp_path):
    import shutil

    a = tiny_runs["a"]
    copy = tmp_path / "copy"
    shutil.copytree(a, copy)
    same_seed = tmp_path / "same-seed"
    cfg = tmp_path / "g.toml"
    cfg.write_text(GAUSS)
    res = CliRunner().invoke(main, ["-q", "run", str(cfg), "--out", str(same_seed),
                                    "--seed", "1"])
    assert res.exit_code == 0, res.output
    for other, expected in ((a, "are the same run directory"),
                            (tmp_path / ".." / tmp_path.name / "copy", "is a copy of"),
                            (same_seed, "with the same run.seed as")):
        res = CliRunner().invoke(main, ["compare", str(a), str(tiny_runs["b"]), str(other)])
        assert res.exit_code == 1, (other, res.output)
        (line,) = res.output.strip().splitlines()
        assert expected in line and "expected independent runs" in line and "Traceback" \
            not in res.output


def test_export_round_trips_through_arviz(tiny_runs, tmp_path):
    out = tmp_path / "a.nc"
    res = CliRunner().invoke(main, ["export", str(tiny_runs["a"]), "--out", str(out)])
    assert res.exit_code == 0, res.output
    idata = az.from_netcdf(out)
    tr = read_trace(tiny_runs["a"])
    kept = slice(24, None)              # the run's discard: 0.2 of 120 iterations
    energy = idata.posterior["energy"]
    assert energy.dims == ("chain", "draw", "temperature")
    assert energy.shape == (1, 96, 3)
    assert np.array_equal(energy.values[0], tr["energy_k"][kept])
    assert np.array_equal(idata.sample_stats["iteration"].values[0], tr["iteration"][kept])
    assert np.array_equal(idata.sample_stats["replica"].values[0], tr["replica_k"][kept])
    assert np.array_equal(idata.sample_stats["swap_accepted"].values[0],
                          tr["swap_accepted_k"][kept])
    assert np.array_equal(idata.sample_stats["acceptance"].values[0],
                          tr["n_accepted_k"][kept] / 1.0)
    assert list(idata.posterior["temperature"].values) == ["T=0.5", "T=1.41", "T=4"]
    assert idata.posterior["T"].values == pytest.approx([0.5, 2 ** 0.5, 4.0])
    assert not list(tmp_path.glob("*.tmp"))


def test_export_without_arviz_is_one_line(tiny_runs, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "arviz", None)
    res = CliRunner().invoke(main, ["export", str(tiny_runs["a"]), "--out",
                                    str(tmp_path / "a.nc")])
    assert res.exit_code == 1 and "pip install" in res.output
    assert len(res.output.strip().splitlines()) == 1
    with pytest.raises(ConfigError, match="thermonet\\[arviz\\]"):
        from thermonet.analysis.export import inference_data
        inference_data(tiny_runs["a"])


def test_assess_matches_its_parts(tiny_runs):
    tr = read_trace(tiny_runs["a"])
    m = assess(tr, [0.5, 2 ** 0.5, 4.0], n_trajectories=1, start=24)
    # passages after the discard only
    assert m.passages.restarts.tolist() == \
        replica_passages(tr["replica_k"][24:]).restarts.tolist()
    assert m.diagnostics["rhat"][0] == pytest.approx(split_rhat(tr["energy_k"][24:, 0]))
    assert m.verdict.mixed == (m.passages.restarts.sum() >= MIN_RESTARTS
                               and m.passages.round_trips.sum() > 0
                               and not m.acceptance.frozen.any()
                               and np.nanmax(m.diagnostics["rhat"]) <= RHAT_MAX
                               and np.nanmin(m.diagnostics["ess_bulk"]) >= ESS_MIN)


def test_a_run_without_production_iterations_is_not_called_mixed(tiny_runs):
    empty = assess({"iteration": np.zeros(0, np.int64)}, [0.5, 1.0, np.inf], n_trajectories=1,
                   start=0)
    assert not empty.verdict.mixed and str(empty.verdict) == (
        "not mixed: no production iterations yet")
    tr = read_trace(tiny_runs["a"])
    rows = len(tr["iteration"])
    all_discarded = assess(tr, [0.5, 2 ** 0.5, 4.0], n_trajectories=1, start=rows)
    assert str(all_discarded.verdict) == "not mixed: no production iterations kept"


def test_ess_per_hour_is_the_ess_over_the_used_iterations_share_of_the_time(tmp_path):
    from thermonet.analysis.pipeline import ess_per_hour, summarise
    from thermonet.io.checkpoint import read_checkpoint

    got = ess_per_hour([100.0, 50.0], n_used=80, n_iterations=100, elapsed_s=360.0)
    assert np.allclose(got, [100.0 / 0.08, 50.0 / 0.08])          # 0.08 h for the used 80
    assert np.all(np.isnan(ess_per_hour([1.0], 80, 100, None)))
    cfg = tmp_path / "c.toml"
    cfg.write_text('[data]\nname = "none"\n[architecture]\nname = "gaussian"\n'
                   '[init]\nminimise = false\nburn_in = [2]\n[run]\nn_iterations = 50\n'
                   '[ladder]\nn_temperatures = 2\nt_min = 0.5\nt_max = 1.0\n')
    from thermonet import config as cfgmod
    from thermonet.runner import Run, detach_log

    Run.create(cfgmod.load(cfg), tmp_path / "r").run()
    detach_log()
    s = summarise(tmp_path / "r")
    ck = read_checkpoint(tmp_path / "r")
    used = ck.iteration - s["discarded_iterations"]
    hours = ck.counters["elapsed_s"] * used / ck.iteration / 3600
    assert np.allclose(s["ess_bulk_per_hour"], np.asarray(s["ess_bulk"]) / hours)


def test_a_frozen_rung_in_one_run_makes_compare_not_mixed(tmp_path):
    """Two runs with restarts and R-hat near 1 (the same energies): mixed. The same pair with
    rung 1 of the second run accepting nothing: not mixed, the reason naming that run and
    rung, exactly the rule of `info` and `analyse`."""
    n = 40
    replica = np.array([[0, 1, 2], [1, 0, 2], [1, 2, 0], [2, 1, 0], [2, 0, 1], [0, 2, 1]] * 7)[:n]
    moving = (np.arange(n)[:, None] + np.arange(3)[None]) % 2     # every rung accepts 0.5
    stuck = moving.copy()
    stuck[:, 1] = 0
    for seed, (name, accepted) in enumerate((("a", moving), ("b", moving), ("c", stuck))):
        (tmp_path / name).mkdir()
        write_run(tmp_path / name, n, accepted, replica, [1.0, 2.0, 4.0], seed=seed)
    healthy = compare_runs([tmp_path / "a", tmp_path / "b"])
    assert healthy["verdict"]["mixed"], healthy["verdict"]
    c = compare_runs([tmp_path / "a", tmp_path / "c"])
    assert c["verdict"]["mixed"] is False
    assert c["verdict"]["reasons"] == [f"{tmp_path / 'c'}: rung 1 accepts 0.00"]
    assert c["acceptance"][str(tmp_path / "c")] == [0.5, 0.0, 0.5]
    own = analyse(tmp_path / "c").meta["verdict"]["reasons"]
    assert own[0] == "rung 1 accepts 0.00"                   # the single-run rule, same words
    res = CliRunner().invoke(main, ["compare", str(tmp_path / "a"), str(tmp_path / "c")])
    assert res.exit_code == 0, res.output
    assert f"verdict    not mixed: {tmp_path / 'c'}: rung 1 accepts 0.00" in res.output


def test_a_key_an_older_run_lacks_counts_as_its_default():
    from thermonet.analysis.compare import config_difference

    new = {"ladder": {"n_trajectories": 2, "slow_band": [], "slow_band_trajectories": 0},
           "init": {"minimise": True}}
    old = {"ladder": {"n_trajectories": 2}, "init": {"minimise": False}}
    assert config_difference(old, new) is None               # defaults, and a free section
    banded = {"ladder": {"n_trajectories": 2, "slow_band": [1.0, 2.0],
                         "slow_band_trajectories": 9}}
    assert config_difference(old, banded) == "ladder.slow_band = '(unset)' vs [1.0, 2.0]"
    assert config_difference({"x": {"y": 1}}, {"x": {}}) == "x.y = 1 vs '(unset)'"


def test_compare_reports_the_hyperparameters_widths(tmp_path):
    """Two hmc-gibbs runs of a small regression network (seeds 1 and 2): compare holds one
    R-hat and ESS per recorded hyperparameter, of its width 1/sqrt(precision), equal to the
    diagnostics of the traces' hyper_k read here; the names are the model's."""
    from thermonet import config as cfgmod
    from thermonet.analysis.convergence import chain_diagnostics
    from thermonet.runner import Run, detach_log

    toml = tmp_path / "arm.toml"
    toml.write_text(variant("arm", run="""
        seed = 1
        n_iterations = 30
        sample_every = 10
        discard = 0.2
    """))
    for seed in (1, 2):
        Run.create(cfgmod.load(toml, {"run.seed": seed}), tmp_path / f"s{seed}").run()
        detach_log()
    c = compare_runs([tmp_path / "s1", tmp_path / "s2"])
    assert c["hyperparameters"] == ["layer1.weight", "layer1.bias", "layer2.weight", "noise"]
    h = [iotrace.read_trace(tmp_path / f"s{seed}")["hyper_k"][6:] for seed in (1, 2)]
    assert h[0].shape[1] == 4           # run.chains: each run's 4 chains are 4 chains here
    for j, name in enumerate(c["hyperparameters"]):
        d = chain_diagnostics(np.stack([1.0 / np.sqrt(x[:, [k], j]) for x in h
                                        for k in range(x.shape[1])]))
        assert c[f"width:{name}"]["n_draws"] == 24
        np.testing.assert_allclose(c[f"width:{name}"]["rhat"], d["rhat"], rtol=1e-12)
        np.testing.assert_allclose(c[f"width:{name}"]["ess_bulk"], d["ess_bulk"], rtol=1e-12)
    res = CliRunner().invoke(main, ["compare", str(tmp_path / "s1"), str(tmp_path / "s2")])
    assert res.exit_code == 0, res.output
    assert "hyperparameter widths" in res.output and "noise R-hat" in res.output
