"""``tn.open_run``: a run read back (its fields against the storage layer read directly), the
one discard default, and ``thermonet export`` built on it (one chain per run, the run's discard
applied, readable temperature labels, the prior rung left out)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from click.testing import CliRunner

from tests.runs import variant
from thermonet.analysis.mixing import assess
from thermonet.cli import main
from thermonet.config import RUN_KEYS, parse_toml
from thermonet.errors import CheckpointError, ConfigError
from thermonet.io.checkpoint import read_checkpoint
from thermonet.io.trace import read_trace

az = pytest.importorskip("arviz")

GAUSS = variant("gaussian_2d", ladder="prior_rung = true",
                run="n_iterations = 50\nsample_every = 5\ndiscard = 0.3")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("record")
    cfg = d / "g.toml"
    cfg.write_text(GAUSS)
    out = {}
    for name, extra in (("a", ["--seed", "1"]), ("b", ["--seed", "2"]),
                        ("short", ["--seed", "3", "--set", "run.n_iterations=40"]),
                        ("other", ["--seed", "4", "--set", "ladder.t_max=8.0"])):
        res = CliRunner().invoke(main, ["-q", "run", str(cfg), "--out", str(d / name), *extra])
        assert res.exit_code == 0, res.output
        out[name] = d / name
    return out


def test_open_run_fields_are_the_stored_ones(runs):
    import thermonet as tn

    rec = tn.open_run(runs["a"])
    ck = read_checkpoint(runs["a"])
    tr = read_trace(runs["a"], samples=True)
    assert rec.iterations == ck.iteration == 50 and rec.run_uuid == ck.run_uuid
    assert rec.config == parse_toml(ck.config_toml)
    assert np.array_equal(rec.ladder.temperature_k, ck.temperatures)
    assert rec.ladder.has_prior_rung and rec.temperatures[-1] == math.inf
    assert rec.discard == 0.3 and rec.start == 15 and rec.n_kept == 35
    for name, a in tr.items():
        if not name.startswith("samples"):
            assert np.array_equal(rec.trace[name], a), name
            assert np.array_equal(rec.kept[name], a[15:]), name
    assert rec.first_kept_iteration == int(tr["iteration"][15]) == 16
    keep = tr["samples_iteration"] >= 16
    assert np.array_equal(rec.sample_iterations(), tr["samples_iteration"][keep])
    assert np.array_equal(rec.samples(slot=1), tr["samples_theta"][keep][:, 1])
    assert np.array_equal(rec.samples(), tr["samples_theta"][keep][:, 0])   # no T = 1: lowest
    m = assess(tr, ck.temperatures, n_trajectories=1, start=15,
               elapsed_s=ck.counters["elapsed_s"])
    assert str(rec.verdict) == str(m.verdict)
    assert rec.trace["energy_k"].flags.writeable is False


def test_info_and_compare_read_through_the_record(runs):
    import thermonet as tn
    from thermonet.analysis.compare import compare_runs
    from thermonet.analysis.pipeline import summarise

    rec = tn.open_run(runs["a"])
    s = summarise(runs["a"])
    assert s["discarded_iterations"] == 15
    assert np.allclose(s["mean_energy"], rec.kept["energy_k"].mean(axis=0), rtol=1e-15)
    c = compare_runs([runs["a"], runs["b"]], discard=0.5)
    assert c["discard"] == [0.5, 0.5] and c["n_draws"] == 25


def test_discard_default_lives_in_the_schema(runs, monkeypatch):
    import thermonet.analysis.run_reader as reader
    import thermonet.analysis.run_record as rr

    stored = reader.stored_config
    monkeypatch.setattr(reader, "stored_config", lambda ck, d: {
        k: v for k, v in stored(ck, d).items() if k != "run"})
    rec = rr.open_run(runs["a"])
    assert rec.discard == RUN_KEYS["discard"][0] == rr.default_discard()
    assert rec.start == math.floor(RUN_KEYS["discard"][0] * 50)


def test_open_run_refusals_are_one_line(runs, tmp_path):
    import thermonet as tn

    with pytest.raises(CheckpointError, match="no checkpoint at .*; is this a thermonet run"):
        tn.open_run(tmp_path / "nothing")
    with pytest.raises(ConfigError, match=r"discard = 1.5; expected a fraction in \[0, 1\)"):
        tn.open_run(runs["a"], discard=1.5)
    rec = tn.open_run(runs["a"])
    with pytest.raises(ConfigError, match="temperature 3 is not on the ladder") as err:
        rec.slot(3.0)
    assert "T=0.5, T=1.41, T=4, T=inf" in str(err.value) and "\n" not in str(err.value)
    assert rec.slot(4.0004) == 2 and rec.slot(math.inf) == 3
    with pytest.raises(ConfigError, match="data-free run"):
        rec.predict("test")
    assert rec.with_discard(0.5).start == 25 and rec.with_discard(None) is rec


def test_temperature_labels_are_readable_and_distinct():
    from thermonet.analysis.run_record import temperature_label

    assert temperature_label([0.1465903234772428, 1.0, np.inf]) == ["T=0.147", "T=1", "T=inf"]
    assert temperature_label([1.0, 1.0001, 1.0002]) == ["T=1", "T=1.0001", "T=1.0002"]


def test_export_every_chain_with_the_discard_and_labels(runs, tmp_path):
    out = tmp_path / "two.nc"
    res = CliRunner().invoke(main, ["export", str(runs["a"]), str(runs["b"]), str(runs["short"]),
                                    "--out", str(out)])
    assert res.exit_code == 0, res.output
    idata = az.from_netcdf(out)
    e = idata.posterior["energy"]
    # 3 chains; each after its own discard (35, 35 and 28 kept), cut to the shortest's 28
    assert e.shape == (3, 28, 3)
    assert list(e["temperature"].values) == ["T=0.5", "T=1.41", "T=4"]   # prior rung out
    assert idata.posterior["T"].values == pytest.approx([0.5, 2 ** 0.5, 4.0])
    for c, name in enumerate(("a", "b", "short")):
        tr = read_trace(runs[name])
        kept = tr["energy_k"][math.floor(0.3 * len(tr["iteration"])):, :3]
        assert np.array_equal(e.values[c], kept[-28:])
        assert np.array_equal(idata.sample_stats["iteration"].values[c],
                              tr["iteration"][-28:])
    assert list(idata.sample_stats["swap_accepted"]["pair"].values) == [
        "T=0.5|T=1.41", "T=1.41|T=4", "T=4|T=inf"]
    summary = az.summary(idata, var_names=["energy"])
    assert list(summary.index) == ["energy[T=0.5]", "energy[T=1.41]", "energy[T=4]"]
    assert np.isfinite(summary["r_hat"]).all()
    assert idata.attrs["n_chains"] == 3 and "left out" in idata.attrs["prior_rung"]


def test_export_means_match_info(runs, tmp_path):
    from thermonet.analysis.pipeline import summarise

    out = tmp_path / "a.nc"
    res = CliRunner().invoke(main, ["export", str(runs["a"]), "--out", str(out)])
    assert res.exit_code == 0 and "one chain" in res.output
    idata = az.from_netcdf(out)
    means = idata.posterior["energy"].mean(dim=("chain", "draw")).values
    assert np.allclose(means, summarise(runs["a"])["mean_energy"][:3], rtol=1e-14)
    res = CliRunner().invoke(main, ["export", str(runs["a"]), "--discard", "0", "--out",
                                    str(out)])
    assert res.exit_code == 0
    assert az.from_netcdf(out).posterior["energy"].shape == (1, 50, 3)


def test_export_refuses_chains_of_other_ladders_or_copies(runs, tmp_path):
    for other, words in ((runs["other"], "another ladder"), (runs["a"], "a copy of")):
        res = CliRunner().invoke(main, ["export", str(runs["a"]), str(other), "--out",
                                        str(tmp_path / "x.nc")])
        assert res.exit_code == 1
        (line,) = res.output.strip().splitlines()
        assert words in line
