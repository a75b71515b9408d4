"""The adaptive local budget: the allocation rule in exact numbers, the online autocorrelation
against the analysis' own estimator, exactness (Gaussian and mixture targets, a discrete
system by enumeration), and a run that records, resumes and parallelises it exactly."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from click.testing import CliRunner

from tests.runs import run_copying_warmup_checkpoints, variant
from thermonet import config as cfgmod
from thermonet.analysis import summarise
from thermonet.analysis.local_exploration import lag1_autocorrelation, lag1_pairs
from thermonet.cli import main
from thermonet.errors import ConfigError
from thermonet.io import checkpoint as ckpt
from thermonet.io.trace import read_trace
from thermonet.priors import BoxPrior
from thermonet.runner import Run, detach_log
from thermonet.samplers.hmc import HMC
from thermonet.stats import batch_means
from thermonet.tempering import DeterministicEvenOdd, Ladder, ReplicaExchange
from thermonet.tempering.local_budget import allocate, lag1_sums, rho1
from thermonet.tempering.warmup import WarmUp
from thermonet.testsystems import Gaussian, GaussianMixture

Z = 4.5  # tolerance in standard errors


# --- the allocation rule ------------------------------------------------------------------------

def test_allocation_equalises_the_autocorrelation_at_the_same_total():
    """Weights n / -ln rho: 2 / ln 2 and 2 / ln 4, i.e. 2 : 1 of a total of 4 -> 8/3 and 4/3,
    rounded by largest remainder to 3 and 1; the prior rung (not sampled) keeps its 2."""
    out = allocate([0.5, 0.25, math.nan], [2, 2, 2], [True, True, False], lo=1, hi=16)
    assert out.tolist() == [3, 1, 2]
    # one trajectory keeps rho^(1/2) at both rungs; the new counts give 0.5^1.5 and 0.25^0.5
    assert out.dtype == np.int64


def test_allocation_bounds_clipping_and_unmeasured_rungs():
    # rho 0.9 weighs 1/-ln 0.9 = 9.49, rho 0.1 weighs 0.434: 4 * 4 = 16 shared 15.3 : 0.7,
    # the bound hi = 8 caps the first and water-filling gives the rest to the others
    out = allocate([0.9, 0.1, 0.1, 0.1], [4, 4, 4, 4], [True] * 4, lo=2, hi=8)
    assert out.tolist() == [8, 3, 3, 2] and out.sum() == 16
    # rho <= 0 and rho -> 1 are clipped into RHO_RANGE, so both get finite weights
    out = allocate([-0.3, 1.0], [3, 3], [True, True], lo=1, hi=100)
    assert out.sum() == 6 and out.tolist() == [1, 5]
    # an unmeasured rung (NaN) keeps its count and is left out of the total
    out = allocate([0.5, math.nan, 0.5], [2, 7, 2], [True, True, True], lo=1, hi=16)
    assert out.tolist() == [2, 7, 2]
    with pytest.raises(ConfigError, match="1 <= lo <= hi"):
        allocate([0.5], [1], [True], lo=3, hi=2)


@pytest.mark.parametrize("swaps_first", [False, True])
def test_online_autocorrelation_is_the_analysis_estimator(swaps_first):
    """Random energies and replica permutations: the pair sums give, per rung, exactly the
    autocorrelation :mod:`thermonet.analysis.local_exploration` computes from the trace."""
    rng = np.random.default_rng(3)
    n, k = 60, 5
    energy = rng.normal(size=(n, k)).cumsum(axis=0) + np.arange(k)
    replica = np.array([rng.permutation(k) for _ in range(n)])
    sums = np.zeros((k, 6))
    for t in range(1, n):
        lag1_sums(sums, energy[t - 1], replica[t - 1], energy[t], replica[t],
                  swaps_first=swaps_first)
    rung, before, after = lag1_pairs(energy, replica, swaps_first=swaps_first)
    got = rho1(sums)
    for j in range(k):
        b, a = before[rung == j], after[rung == j]
        ref, _ = lag1_autocorrelation(b, a, float(np.mean(np.r_[b, a])))
        assert got[j] == pytest.approx(ref, rel=1e-10, abs=1e-12)
    assert np.all(sums[:, 0] == n - 1)


# --- exactness ----------------------------------------------------------------------------------

def test_per_rung_counts_keep_the_product_distribution_by_enumeration():
    """Three replicas on four energy levels: Metropolis moves on a ring at each rung, run
    ``n_k`` times as the allocation chose, then a deo sweep (even, then odd). The one-iteration
    transition matrices keep prod_k exp(-beta_k E_k) exactly."""
    energies = np.array([0.0, 0.4, 1.3, 3.0])
    beta = np.array([2.0, 0.7, 0.2])
    m = energies.size
    counts = allocate([0.8, 0.3, 0.05], [2, 2, 2], [True] * 3, lo=1, hi=8)
    assert counts.tolist() == [4, 1, 1]

    def local(b):
        p = np.zeros((m, m))
        for i in range(m):
            for j in ((i - 1) % m, (i + 1) % m):
                p[i, j] = 0.5 * min(1.0, math.exp(-b * (energies[j] - energies[i])))
            p[i, i] = 1.0 - p[i].sum()
        return p

    moves = [np.linalg.matrix_power(local(b), int(n)) for b, n in zip(beta, counts, strict=True)]
    states = list(itertools.product(range(m), repeat=3))
    index = {s: i for i, s in enumerate(states)}
    pi = np.array([math.exp(-sum(beta[k] * energies[s[k]] for k in range(3))) for s in states])
    pi /= pi.sum()
    move = np.zeros((len(states), len(states)))
    for s, t in itertools.product(states, states):
        move[index[s], index[t]] = np.prod([moves[k][s[k], t[k]] for k in range(3)])
    for pair in (0, 1):
        swap = np.zeros_like(move)
        for s in states:
            a = min(1.0, math.exp((beta[pair] - beta[pair + 1])
                                  * (energies[s[pair]] - energies[s[pair + 1]])))
            t = list(s)
            t[pair], t[pair + 1] = s[pair + 1], s[pair]
            swap[index[s], index[tuple(t)]] += a
            swap[index[s], index[s]] += 1 - a
        step = move @ swap
        np.testing.assert_allclose(pi @ step, pi, atol=1e-15)
        assert np.max(np.abs(step - np.eye(len(states)))) > 0.1     # it does move


def _warm(re, streams, st, iterations, bounds):
    warm = WarmUp(re, budget_iterations=iterations, budget_bounds=bounds)
    st, ws = warm.run(st, streams, warm.start())
    assert ws.iteration == warm.planned_iterations == iterations
    return st, ws.records[-1]


@pytest.mark.slow
def test_the_adaptive_budget_keeps_the_mixture_mode_weights_exact():
    """The two-mode mixture of the tempering tests (modes at +-4, weights 0.3 : 0.7), one
    step size on T in [0.5, 64]: the warm-up gives the rungs that renew their energy worst
    the most trajectories at the same total, and the three coldest rungs still hold the exact mode weights."""
    arch = GaussianMixture(means=[[-4.0], [4.0]], widths=[0.5, 0.5], weights=[0.3, 0.7],
                           prior_scale=20.0)
    re = ReplicaExchange(HMC, arch.potential(), Ladder.geometric(0.5, 64.0, 10),
                         prior=BoxPrior.for_architecture(arch), n_trajectories=2,
                         swap=DeterministicEvenOdd(),
                         sampler_config=HMC.Config(n_leapfrog=10, step_size=0.2))
    streams = re.make_streams(8)
    st = re.init(np.array([-4.0]))
    st, record = _warm(re, streams, st, 400, (1, 8))
    counts = re.n_trajectories_k
    assert counts.sum() == 20 and counts.min() < counts.max()
    assert counts.tolist() == record["trajectories"] and record["measured_with"] == [2] * 10
    rho = np.array(record["rho1"])
    assert counts[np.argmax(rho)] == counts.max() and counts[np.argmin(rho)] == counts.min()
    xs = []
    for it in range(1, 4001):
        st, _ = re.step(st, streams, iteration=400 + it)
        if it > 500:
            xs.append([sl.theta[0] for sl in st.slots[:3]])
    xs = np.array(xs)
    for k in range(3):
        m, err = batch_means(xs[:, k] > 0)
        exact = arch.mode_weights(re.ladder.temperature_k[k])[1]
        assert abs(m - exact) < Z * err, (k, m, err, exact)


def test_the_adaptive_budget_keeps_a_gaussian_ladder_with_a_prior_rung_exact():
    """<E> = n T / 2 at the finite rungs and sum k a^2 / 6 at the prior rung, with the counts
    the warm-up chose (bounds [1, 6] around 3 per rung)."""
    k = np.array([1.0, 2.0, 4.0, 8.0])
    arch = Gaussian(4, stiffness=list(k), prior_scale=16.0)
    ladder = Ladder.geometric(0.2, 3.0, 5).with_prior_rung()
    re = ReplicaExchange(HMC, arch.potential(), ladder, prior=BoxPrior.for_architecture(arch),
                         swap=DeterministicEvenOdd(), n_trajectories=3,
                         sampler_config=HMC.Config(n_leapfrog=2, step_size=0.15))
    streams = re.make_streams(11)
    st = re.burn_in(arch.initial_draw, streams, blocks=(20,))
    st, record = _warm(re, streams, st, 300, (1, 6))
    counts = re.n_trajectories_k
    assert counts[:-1].sum() == 15 and counts[-1] == 3 and record["rho1"][-1] is None
    energies = []
    for i in range(1, 4001):
        st, info = re.step(st, streams, iteration=300 + i)
        if i > 200:
            energies.append(info.energy_k)
    e = np.array(energies)
    for j, t in enumerate(ladder.temperature_k[:-1]):
        m, err = batch_means(e[:, j])
        assert abs(m - 2.0 * t) < Z * err, (t, m, err)
    m, err = batch_means(e[:, -1])
    assert abs(m - k.sum() * 8.0 ** 2 / 6) < Z * err


# --- a run ----------------------------------------------------------------------------------

RUN = variant("gaussian_3d", run="""
    seed = 4
    n_iterations = 10
    checkpoint_every = 3
""", sampler="n_leapfrog = 1", ladder="""
    temperatures = [0.2, 0.5, 1.0, 2.0, 6.0]
    prior_rung = true
    swap_scheme = "deo"
    n_trajectories = 2
    local_budget = "adaptive"
    local_budget_iterations = 7
    local_budget_bounds = [1, 5]
""")


def _state(run_dir):
    ck = ckpt.read_checkpoint(run_dir)
    return {"rng": ck.rng_states, "replica": ck.replica_k, "slots": ck.slots,
            "budget": ck.counters.get("local_budget"), "warmup": ck.counters.get("warmup"),
            "trace": read_trace(run_dir, samples=True)}


def _assert_same(a, b):
    assert a["rng"] == b["rng"] and a["budget"] == b["budget"]
    assert a["warmup"] is None and b["warmup"] is None
    assert np.array_equal(a["replica"], b["replica"])
    for name in a["slots"]:
        assert np.array_equal(a["slots"][name], b["slots"][name]), name
    for name in a["trace"]:
        assert np.array_equal(a["trace"][name], b["trace"][name]), name


def test_a_run_records_its_budget_resumes_from_any_warm_up_checkpoint_and_ignores_workers(
        tmp_path, monkeypatch):
    cfg = tmp_path / "budget.toml"
    cfg.write_text(RUN)
    Run.create(cfgmod.load(cfg), tmp_path / "a").run()
    detach_log()
    straight = _state(tmp_path / "a")
    budget = straight["budget"]
    assert budget["iterations"] == 7 and budget["measured_with"] == [2] * 6
    counts = np.array(budget["trajectories"])
    assert counts[:-1].sum() == 10 and counts[-1] == 2 and counts.min() < counts.max()
    # the analysis reads the frozen counts: acceptance per trajectory at each rung
    s = summarise(tmp_path / "a")
    kept = straight["trace"]["n_accepted_k"][s["discarded_iterations"]:]
    np.testing.assert_allclose(s["acceptance"], kept.sum(axis=0) / (len(kept) * counts),
                               rtol=1e-12)
    assert np.all(straight["trace"]["n_accepted_k"] <= counts)
    info = CliRunner().invoke(main, ["info", str(tmp_path / "a")]).output
    assert (f"local budget {counts[:-1].min()}-{counts[:-1].max()} trajectories per swap round, "
            "chosen from rho1 over 7 warm-up iterations (total 10, as uniform)") in info
    # two workers: the same chain
    Run.create(cfgmod.load(cfg, {"run.workers": 2}), tmp_path / "two").run()
    detach_log()
    _assert_same(straight, _state(tmp_path / "two"))
    # a copy of the run at every warm-up checkpoint (what a kill -9 right after it leaves)
    snapshots = run_copying_warmup_checkpoints(cfgmod.load(cfg), tmp_path / "copied", tmp_path,
                                               monkeypatch)
    assert [(p["stage"], p["done"]) for _, p in snapshots] == [("budget", 0), ("budget", 3),
                                                                 ("budget", 6)]
    for n, (where, _) in enumerate(snapshots):
        Run.open(where, workers=1 + n % 2).run()
        detach_log()
        _assert_same(straight, _state(where))
    # stopped in production after the warm-up: resumes with the frozen counts
    Run.create(cfgmod.load(cfg, {"run.n_iterations": 4}), tmp_path / "b").run()
    detach_log()
    Run.open(tmp_path / "b", n_iterations=10).run()
    detach_log()
    _assert_same(straight, _state(tmp_path / "b"))


def test_adaptive_budget_and_a_slow_band_are_one_line_errors():
    raw = {"ladder": {"temperatures": [0.5, 1.0, 2.0], "local_budget": "adaptive",
                      "slow_band": [1.0, 2.0], "slow_band_trajectories": 4},
           "data": {"name": "none"}, "architecture": {"name": "gaussian"}}
    with pytest.raises(ConfigError, match="remove slow_band") as err:
        cfgmod.resolve(raw)
    assert "\n" not in str(err.value)
    raw = {"ladder": {"temperatures": [0.5, 1.0], "local_budget": "more"},
           "data": {"name": "none"}, "architecture": {"name": "gaussian"}}
    with pytest.raises(ConfigError, match="uniform, adaptive"):
        cfgmod.resolve(raw)
    raw["ladder"] = {"temperatures": [0.5, 1.0], "local_budget_bounds": [4, 2]}
    with pytest.raises(ConfigError, match="1 <= lo <= hi"):
        cfgmod.resolve(raw)
