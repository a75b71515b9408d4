"""Independent chains of a one-rung run (``run.chains``): the default, the streams, resume and
workers, and the verdict between chains that flags a stuck one."""

from __future__ import annotations

import numpy as np
import pytest

from tests.runs import TINY, assert_same, invoke, one_error_line, tree, variant
from thermonet import config as cfgmod
from thermonet.analysis.mixing import assess_chains, between_chains, standing_out
from thermonet.errors import ConfigError
from thermonet.io import trace as iotrace
from thermonet.runner import Run, detach_log

#: the tiny run's Gaussian mixture on one rung (tests/configs/tiny.toml without its ladder)
ONE_RUNG = (TINY.replace("adapt_every = 5\n", "").split("[ladder]")[0]
            + "[ladder]\nn_trajectories = 2\n")

#: the last three energies and the last stored parameters of ONE_RUNG as the single-chain
#: engine ran it before chains existed (commit d3e6ec0, whose run has no run.chains key)
BEFORE_CHAINS_ENERGY = ("0x1.b82b3e1fba451p-1", "0x1.2f2240f7bbcc1p+1", "0x1.a6998b353c72ep-1")
BEFORE_CHAINS_THETA = ("0x1.c9ab532896100p+0", "0x1.b475f0b63a40fp-1")


@pytest.fixture
def one_rung(tmp_path):
    p = tmp_path / "one.toml"
    p.write_text(ONE_RUNG)
    return p


def _run(path, out, overrides=None):
    try:
        return Run.create(cfgmod.load(path, overrides), out).run(quiet=True)
    finally:
        detach_log()


# --- the configuration ---------------------------------------------------------------------------

def test_chains_default_to_four_on_one_rung_and_one_on_a_ladder(one_rung):
    cfg = cfgmod.load(one_rung)
    assert cfg["run"]["chains"] == 4 and cfg.sources["run.chains"] == "default"
    ladder = cfgmod.load(one_rung, {"ladder.n_temperatures": 3, "ladder.t_max": 4.0})
    assert ladder["run"]["chains"] == 1
    assert cfgmod.load(one_rung, {"run.chains": 2})["run"]["chains"] == 2
    # the resolved configuration records the number, and reads back to itself
    again = cfgmod.resolve(cfgmod.parse_toml(cfg.to_toml()))
    assert again["run"]["chains"] == 4 and again.sources["run.chains"] == "config"


def test_chains_on_a_ladder_or_the_jax_engine_are_one_line_errors(one_rung, tmp_path):
    res = invoke("run", one_rung, "--out", tmp_path / "r", "--set", "run.chains=3",
                 "--set", "ladder.n_temperatures=3", "--set", "ladder.t_max=4.0")
    line = one_error_line(res)
    assert "run.chains = 3 with a ladder of 3 rungs" in line and "set it to 1" in line
    assert not (tmp_path / "r").exists()
    with pytest.raises(ConfigError, match="run.chains = 2 with engine = 'jax'"):
        cfgmod.load(one_rung, {"run.chains": 2, "run.engine": "jax"})
    assert cfgmod.load(one_rung, {"run.engine": "jax"})["run"]["chains"] == 1


def test_the_plan_counts_every_chain(one_rung):
    from thermonet.config.budget import plan
    from thermonet.testsystems import GaussianMixture

    cfg = cfgmod.load(one_rung)
    arch = GaussianMixture(means=[[-2.0, 0.0], [2.0, 0.5]], widths=[0.5, 0.8])
    # 4 chains x 12 iterations x 2 trajectories x 5 leapfrog steps
    assert "4 chains x 12 iterations x 2 trajectories x L = 5 = 480 gradients" in plan(cfg, arch)


def test_a_run_stored_without_the_key_resumes_as_one_chain(one_rung, tmp_path):
    """A run written before run.chains existed (its configurations lack the key) resumes as
    the one chain it ran, bit for bit, though today's default would be 4."""
    import dataclasses
    import re

    from thermonet.io import checkpoint as ckpt

    _run(one_rung, tmp_path / "straight", {"run.chains": 1})
    old = tmp_path / "old"
    _run(one_rung, old, {"run.chains": 1, "run.n_iterations": 6})
    line = re.compile(r"^chains = 1\b.*\n", re.MULTILINE)
    ck = ckpt.read_checkpoint(old)
    assert len(line.findall(ck.config_toml)) == 1
    ckpt.write_checkpoint(old, dataclasses.replace(ck, config_toml=line.sub("", ck.config_toml)))
    (old / ckpt.CONFIG).write_text(line.sub("", (old / ckpt.CONFIG).read_text()))
    assert cfgmod.load(old / ckpt.CONFIG)["run"]["chains"] == 4     # today's default
    try:
        Run.open(old, n_iterations=12).run(quiet=True)
    finally:
        detach_log()
    assert_same(tree(tmp_path / "straight"), tree(old))


# --- the chains ---------------------------------------------------------------------------------

def test_one_chain_is_the_run_before_chains_bit_for_bit(one_rung, tmp_path):
    _run(one_rung, tmp_path / "one", {"run.chains": 1})
    tr = iotrace.read_trace(tmp_path / "one", samples=True)
    assert tr["energy_k"].shape == (12, 1)
    assert tuple(float(e).hex() for e in tr["energy_k"][-3:, 0]) == BEFORE_CHAINS_ENERGY
    assert tuple(float(x).hex() for x in tr["samples_theta"][-1, 0]) == BEFORE_CHAINS_THETA


def test_chain_zero_is_the_one_chain_run_and_the_others_start_elsewhere(one_rung, tmp_path):
    _run(one_rung, tmp_path / "one", {"run.chains": 1})
    _run(one_rung, tmp_path / "three", {"run.chains": 3})
    one = iotrace.read_trace(tmp_path / "one", samples=True)
    three = iotrace.read_trace(tmp_path / "three", samples=True)
    assert three["energy_k"].shape == (12, 3) and three["samples_theta"].shape == (6, 3, 2)
    # chain 0 draws from the first of the seed's streams, as the one chain does
    for name in ("energy_k", "n_accepted_k", "step_size_k", "samples_theta"):
        np.testing.assert_array_equal(three[name][:, :1], one[name])
    # no swaps between chains, and each chain stays in its slot
    assert three["swap_attempted_k"].shape == (12, 0)
    np.testing.assert_array_equal(three["replica_k"], np.tile([0, 1, 2], (12, 1)))
    # every chain its own draws: no two chains share a stored configuration
    theta = three["samples_theta"]
    for a in range(3):
        for b in range(a):
            assert not np.any(np.all(theta[:, a] == theta[:, b], axis=1))


def test_each_chain_draws_its_start_from_its_own_stream():
    from thermonet.priors import BoxPrior
    from thermonet.samplers.hmc import HMC
    from thermonet.tempering import Ladder, ReplicaExchange, make_streams
    from thermonet.testsystems import Gaussian

    arch = Gaussian(n=3, prior_scale=10.0)
    engine = ReplicaExchange(HMC, arch.potential(), Ladder.single(1.0), chains=4,
                             prior=BoxPrior.for_architecture(arch))
    streams = make_streams(11, 4)
    expected = [np.random.Generator(np.random.PCG64(s)).uniform(-1, 1, 3)
                for s in np.random.SeedSequence(11).spawn(5)[:4]]
    drawn = []

    def draw(rng):
        drawn.append(rng.uniform(-1, 1, 3))
        return drawn[-1]

    state = engine.burn_in(draw, streams, blocks=())
    assert len(state.slots) == 4
    for got in expected:
        assert any(np.array_equal(got, d) for d in drawn)
    with pytest.raises(ConfigError, match="chains = 2 on a ladder of 2 rungs"):
        ReplicaExchange(HMC, arch.potential(), Ladder.geometric(1.0, 2.0, 2), chains=2)


def test_chains_do_not_depend_on_the_workers(one_rung, tmp_path):
    _run(one_rung, tmp_path / "w1", {"run.workers": 1})
    _run(one_rung, tmp_path / "w2", {"run.workers": 2})
    assert_same(tree(tmp_path / "w1"), tree(tmp_path / "w2"))


def test_chains_resume_bit_for_bit(one_rung, tmp_path):
    _run(one_rung, tmp_path / "straight", {"run.chains": 3})
    _run(one_rung, tmp_path / "half", {"run.chains": 3, "run.n_iterations": 5})
    try:
        Run.open(tmp_path / "half", n_iterations=12, workers=2).run(quiet=True)
    finally:
        detach_log()
    assert_same(tree(tmp_path / "straight"), tree(tmp_path / "half"))


# --- the verdict between chains -----------------------------------------------------------------

def _ar1(rng, n, mean, sd, phi):
    x = np.empty(n)
    x[0] = rng.normal(0.0, 1.0)
    for t in range(1, n):
        x[t] = phi * x[t - 1] + np.sqrt(1 - phi * phi) * rng.normal()
    return mean + sd * x


def _four_chains(stuck_width=None, n=2000, seed=3):
    """Four chains (n, 4) of an energy and of a weight width: AR(1) draws around the same
    means, or with chain 2's width at ``stuck_width`` (the issue's robot-arm seed 1)."""
    rng = np.random.default_rng(seed)
    energy = np.stack([_ar1(rng, n, 100.0, 5.0, 0.5) for _ in range(4)], axis=1)
    width = np.stack([_ar1(rng, n, 0.48, 0.03, 0.5) for _ in range(4)], axis=1)
    if stuck_width is not None:
        width[:, 2] = _ar1(rng, n, stuck_width, 0.03, 0.5)
    return energy, width


def _trace(energy):
    n, c = energy.shape
    return {"iteration": np.arange(1, n + 1), "energy_k": energy,
            "n_accepted_k": np.ones((n, c), np.int64)}


def test_a_planted_stuck_chain_is_flagged_and_named():
    energy, width = _four_chains(stuck_width=1.55)
    mx = assess_chains(_trace(energy), 1.0, n_trajectories=1,
                       observables={"width[layer1.weight]": width})
    assert not mx.verdict.mixed
    (reason,) = mx.verdict.reasons
    assert reason.startswith("split R-hat") and "of width[layer1.weight] between 4 chains" in reason
    assert "chain 2 stands out (width[layer1.weight] 1.55 against 0.479-0.481 in the others)" \
        in reason
    # the energy alone, in which the chains agree, would not have shown it
    assert between_chains({"energy": energy})[0] is None


def test_four_well_mixed_chains_pass_and_rhat_is_arviz_rank_rhat():
    import arviz

    energy, width = _four_chains()
    mx = assess_chains(_trace(energy), 1.0, n_trajectories=1,
                       observables={"width[layer1.weight]": width})
    assert mx.verdict.mixed, mx.verdict
    assert mx.verdict.reasons[0].startswith("max split R-hat")
    # the R-hat between chains is ArviZ's rank-normalised split R-hat (Vehtari et al. 2021)
    from thermonet.analysis.convergence import split_rhat

    r = split_rhat(energy.T)
    assert r == pytest.approx(float(arviz.rhat(energy.T)), rel=1e-12)
    failure, _ = between_chains({"energy": energy}, rhat_max=0.0)
    assert failure is not None and failure.startswith(f"split R-hat {r:.2f} of energy")
    # ESS over the four chains: 4 x 2000 AR(1) draws, phi = 0.5 -> 8000 (1 - phi)/(1 + phi)
    assert mx.diagnostics["ess_bulk"][0] == pytest.approx(8000 / 3, rel=0.15)


def test_the_chain_that_stands_out_is_the_one_shifted():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 300))
    for c in range(5):
        shifted = x.copy()
        shifted[c] += 3.0
        assert standing_out(shifted) == c
        shifted[c] -= 6.0
        assert standing_out(shifted) == c


def test_a_frozen_chain_fails_by_name():
    energy, _ = _four_chains()
    tr = _trace(energy)
    tr["n_accepted_k"][:, 1] = 0
    mx = assess_chains(tr, 1.0, n_trajectories=1)
    assert not mx.verdict.mixed and "chain 1 accepts 0.00" in mx.verdict.reasons


def test_well_mixed_chains_of_a_gaussian_pass_and_agree_with_its_energy(tmp_path):
    """Four chains of E = |w|^2 / 2 in 2-d at T = 1: <E> = n T / 2 = 1, mixed."""
    import thermonet as tn

    p = tmp_path / "g.toml"
    p.write_text("""
[run]
seed = 2
n_iterations = 600
checkpoint_every = 600
sample_every = 0
discard = 0.1
[data]
name = "none"
[architecture]
name = "gaussian"
n = 2
prior_scale = 40.0
[init]
minimise = false
burn_in = [10]
[sampler]
name = "hmc"
n_leapfrog = 5
step_size = 0.5
""")
    _run(p, tmp_path / "g")
    rec = tn.open_run(tmp_path / "g")
    assert rec.n_chains == 4
    assert rec.verdict.mixed, rec.verdict
    assert "between 4 chains (energy)" in str(rec.verdict)
    e = np.asarray(rec.kept["energy_k"], dtype=np.float64)
    from thermonet.analysis.ladder import series_stats

    errs = [series_stats(e[:, c])[1] for c in range(4)]
    se = float(np.sqrt(np.sum(np.square(errs)))) / 4
    assert abs(e.mean() - 1.0) < 4 * se


# --- what reads a run of several chains ----------------------------------------------------------

ARM = variant("arm", run="""
    seed = 1
    n_iterations = 12
    sample_every = 3
    discard = 0.25
    chains = 2
""")


@pytest.fixture(scope="module")
def arm_chains(tmp_path_factory):
    """Two runs of two chains each of a small hierarchical regression."""
    root = tmp_path_factory.mktemp("arm_chains")
    (root / "arm.toml").write_text(ARM)
    for seed in (1, 2):
        _run(root / "arm.toml", root / f"s{seed}", {"run.seed": seed})
    return root


def test_the_record_pools_every_chain(arm_chains):
    import thermonet as tn
    from thermonet.analysis.prediction import sample_outputs

    rec = tn.open_run(arm_chains / "s1")
    assert rec.n_chains == 2 and rec.ladder.n_temperatures == 1
    tr = iotrace.read_trace(arm_chains / "s1", samples=True)
    its = tr["samples_iteration"]
    keep = its >= rec.first_kept_iteration
    both = rec.samples()
    np.testing.assert_array_equal(both, np.concatenate([tr["samples_theta"][keep, 0],
                                                        tr["samples_theta"][keep, 1]]))
    np.testing.assert_array_equal(rec.samples(chain=1), tr["samples_theta"][keep, 1])
    with pytest.raises(ConfigError, match="chain 2 of .*expected 0 to 1"):
        rec.samples(chain=2)
    # the predictive averages the networks of both chains
    pred = rec.predict("test")
    out = sample_outputs(rec.architecture(), both, rec.data().test)
    assert pred.n_samples == both.shape[0] == 2 * int(keep.sum())
    np.testing.assert_allclose(pred.arrays["f_mean"], out.mean(axis=0), rtol=1e-12)
    # the verdict compares the chains' energies and every hyperparameter's width
    obs = rec.chain_observables()
    assert list(obs) == ["width[layer1.weight]", "width[layer1.bias]", "width[layer2.weight]",
                         "width[noise]"]
    h = np.asarray(rec.kept["hyper_k"])
    np.testing.assert_array_equal(obs["width[noise]"], 1.0 / np.sqrt(h[:, :, 3]))
    assert "between 2 chains" in str(rec.verdict)


def test_export_info_analyse_and_compare_see_every_chain(arm_chains, tmp_path):
    import thermonet as tn
    from thermonet.analysis import read_analysis
    from thermonet.analysis.compare import compare_runs

    rec = tn.open_run(arm_chains / "s1")
    idata = rec.to_inference_data("test")
    energy = idata.posterior["energy"]
    assert energy.sizes["chain"] == 2 and energy.sizes["temperature"] == 1
    np.testing.assert_array_equal(energy.values[:, :, 0], np.asarray(rec.kept["energy_k"]).T)
    assert idata.posterior_predictive["f"].sizes["chain"] == 2
    assert idata.attrs["n_chains"] == 2

    res = invoke("info", arm_chains / "s1")
    assert res.exit_code == 0, res.output
    rows = [ln for ln in res.output.splitlines() if ln.startswith(("   0 ", "   1 "))]
    assert len(rows) == 2
    assert "hyper      chain 1:" in res.output

    res = invoke("analyse", arm_chains / "s1")
    assert res.exit_code == 0, res.output
    a = read_analysis(arm_chains / "s1" / "analysis.h5")
    assert a.table["n_samples"][0] == rec.samples().shape[0]
    np.testing.assert_array_equal(a.series["sample_chain"],
                                  np.repeat([0, 1], rec.samples().shape[0] // 2))
    assert a.table["train_energy"][0] == pytest.approx(
        np.asarray(rec.kept["energy_k"]).mean(), rel=1e-12)

    c = compare_runs([arm_chains / "s1", arm_chains / "s2"])
    e = [np.asarray(tn.open_run(arm_chains / f"s{s}").kept["energy_k"]) for s in (1, 2)]
    from thermonet.analysis.convergence import chain_diagnostics

    d = chain_diagnostics(np.stack([x[:, [j]] for x in e for j in range(2)]))
    np.testing.assert_allclose(c["train_energy"]["rhat"], d["rhat"], rtol=1e-12)


def test_scale_factor_widths_are_compared_between_chains(tmp_path):
    """Neal's (1993) scale factors are coordinates of the state: the verdict compares each
    group's width exp(-u_g/2) of the stored samples between the chains."""
    import thermonet as tn

    p = tmp_path / "scale.toml"
    p.write_text(ARM.replace('hidden = [3]', 'hidden = [3]\nparameterisation = "scale"')
                 .replace("sample_every = 3", "sample_every = 1"))
    _run(p, tmp_path / "s")
    rec = tn.open_run(tmp_path / "s")
    obs = rec.chain_observables()
    assert list(obs) == ["width[noise]", "width[layer1.weight]", "width[layer1.bias]",
                         "width[layer2.weight]"]
    tr = iotrace.read_trace(tmp_path / "s", samples=True)
    keep = tr["samples_iteration"] >= rec.first_kept_iteration
    u = tr["samples_theta"][keep][:, :, -3:]              # (S, chains, groups): the log precisions
    np.testing.assert_allclose(obs["width[layer1.bias]"], np.exp(-0.5 * u[:, :, 1]), rtol=1e-15)
    assert obs["width[layer1.bias]"].shape == (int(keep.sum()), 2)


def test_compare_counts_chains_and_takes_the_chain_as_its_unit(arm_chains):
    """2 runs of 2 chains: R-hat and ESS between the 4 chains, and the header says so; the
    log-evidence statistics (one log Z per run) do not apply to one-rung runs."""
    import json

    import arviz

    import thermonet as tn

    res = invoke("compare", arm_chains / "s1", arm_chains / "s2", "--json")
    assert res.exit_code == 0, res.output
    c = json.loads(res.stdout)
    assert c["n_chains"] == 4 and c["chains_per_run"] == [2, 2]
    e = [np.asarray(tn.open_run(arm_chains / f"s{s}").kept["energy_k"]) for s in (1, 2)]
    x = np.stack([run[:, j] for run in e for j in range(2)])            # (4 chains, draws)
    assert c["n_draws"] == x.shape[1]
    assert c["train_energy"]["ess_bulk"][0] == pytest.approx(
        float(arviz.ess(x, method="bulk")), rel=1e-10)
    assert c["log_evidence"] is None
    res = invoke("compare", arm_chains / "s1", arm_chains / "s2")
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[0].startswith(
        f"2 runs (4 chains), {x.shape[1]} draws per chain of the training energy")


def _halves_rhat(x):
    """Rank-normalised split R-hat of one chain (Vehtari et al. 2021: the larger of the
    bulk and folded R-hat of its two halves), from SciPy's ranks and normal quantiles
    (ArviZ refuses a single chain)."""
    from scipy.stats import norm, rankdata

    n = x.size // 2
    halves = np.stack([x[:n], x[x.size - n:]])

    def rhat(a):
        z = norm.ppf((rankdata(a).reshape(a.shape) - 0.375) / (a.size + 0.25))
        within = z.var(axis=1, ddof=1).mean()
        between = n * z.mean(axis=1).var(ddof=1)
        return np.sqrt(((n - 1) * within + between) / (n * within))

    return max(rhat(halves), rhat(np.abs(halves - np.median(halves))))


def test_info_gives_each_chain_its_own_split_rhat(arm_chains):
    """Each chain's row carries the rank-normalised split R-hat of its own energy (its two
    halves), computed here independently."""
    import json

    import thermonet as tn

    rec = tn.open_run(arm_chains / "s1")
    e = np.asarray(rec.kept["energy_k"], dtype=np.float64)
    want = [_halves_rhat(e[:, c]) for c in range(2)]
    assert all(np.isfinite(want))
    s = json.loads(invoke("info", arm_chains / "s1", "--json").stdout)
    np.testing.assert_allclose(s["chain_rhat"], want, rtol=1e-12)
    res = invoke("info", arm_chains / "s1")
    assert res.exit_code == 0, res.output
    head = next(ln for ln in res.output.splitlines() if ln.startswith("chain "))
    assert head.split() == ["chain", "T", "accept", "dt", "<E>", "R-hat(E)"]   # no swaps
    rows = [ln for ln in res.output.splitlines() if ln.startswith(("   0 ", "   1 "))]
    assert [ln.split()[-1] for ln in rows] == [f"{r:.3f}" for r in want]


def test_analyse_takes_the_heat_capacity_of_the_chains_as_chains(arm_chains):
    """C = Var(E)/T^2 pooled over the chains; its error from each chain's own
    autocorrelation-aware error of (E - <E>)^2, combined (tests/reference.py computes it
    independently)."""
    import thermonet as tn
    from tests import reference as ref
    from thermonet.analysis import analyse

    rec = tn.open_run(arm_chains / "s2")
    e = np.asarray(rec.kept["energy_k"], dtype=np.float64)          # (n, 2 chains)
    a = analyse(arm_chains / "s2", test=False, predictive=False)
    want_c, want_err, _ = ref.heat_capacity_of_chains(e, float(rec.temperatures[0]))
    assert a.table["heat_capacity"][0] == pytest.approx(want_c, rel=1e-12)
    assert a.table["heat_capacity_err"][0] == pytest.approx(want_err, rel=1e-9)


def test_analyse_gives_the_errors_and_widths_of_the_chains_as_chains(arm_chains):
    """The per-sample error columns and the hyperparameters' widths of a run of several
    chains: each chain summarised on its own (no autocorrelation across one chain's end and
    the next one's start), then joined (tests/reference.py, independently)."""
    import thermonet as tn
    from tests import reference as ref
    from thermonet.analysis import analyse

    rec = tn.open_run(arm_chains / "s1")
    a = analyse(arm_chains / "s1", predictive=False)
    err = np.asarray(a.series["train_error"])[:, 0].reshape(2, -1).T    # (n, 2 chains)
    want, want_err = ref.mean_of_chains(err)
    # errors: tau from an FFT against the reference's direct sums, equal to rounding
    assert a.table["train_error"][0] == pytest.approx(want, rel=1e-12)
    assert a.table["train_error_err"][0] == pytest.approx(want_err, rel=1e-9)
    h = np.asarray(rec.kept["hyper_k"], dtype=np.float64)                 # (n, 2 chains, 4)
    hyp = a.meta["hyperparameters"]
    for j in range(h.shape[2]):
        want, want_err = ref.mean_of_chains(1.0 / np.sqrt(h[:, :, j]))
        assert hyp["width"][0][j] == pytest.approx(want, rel=1e-12)
        assert hyp["width_err"][0][j] == pytest.approx(want_err, rel=1e-9)


def test_chains_stats_measures_no_autocorrelation_across_chains():
    """Two constant chains at different values: each has no spread, so the mean's error is
    0; joined end to end they would read as one series with a step and a large error."""
    from thermonet.analysis.ladder import chains_stats, series_stats

    x = np.column_stack([np.zeros(50), np.ones(50)])
    assert chains_stats(x) == (0.5, 0.0, 1.0)
    assert series_stats(np.concatenate([x[:, 0], x[:, 1]]))[1] > 0.1
    rng = np.random.default_rng(4)
    y = rng.normal(size=(400, 3))
    assert chains_stats(y[:, :1]) == series_stats(y[:, 0])
    from tests import reference as ref

    m, e, _ = chains_stats(y)
    assert (m, e) == pytest.approx(ref.mean_of_chains(y), rel=1e-12)


def test_the_progress_of_chains_names_chains_and_shows_no_swap_rate(one_rung, tmp_path):
    from thermonet.cli.options import RunProgress as ProgressLine
    from thermonet.runner import RunProgress

    reports = []
    try:
        Run.create(cfgmod.load(one_rung, {"run.n_iterations": 3}), tmp_path / "r").run(
            reports.append)
    finally:
        detach_log()
    assert [r.unit for r in reports] == ["chain"] * 3
    assert all(np.isnan(r.swap_acceptance) for r in reports)    # chains never swap

    class Stream:
        text = ""

        def isatty(self):
            return True

        def write(self, s):
            self.text += s

        def flush(self):
            pass

    out = Stream()
    ProgressLine(stream=out)(RunProgress(30, 30, 0, 0.5, float("nan"), 1.0, (3,), "chain"))
    assert "FROZEN: chain 3 accepted nothing" in out.text and "swap" not in out.text
    out = Stream()
    ProgressLine(stream=out)(RunProgress(30, 30, 0, 0.5, 0.4, 1.0, (1, 2)))
    assert "FROZEN: slots 1, 2 accepted nothing" in out.text and "swap 0.40" in out.text
