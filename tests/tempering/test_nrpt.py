"""Non-reversible parallel tempering, the prior rung and ladder adaptation: exactness on
analytic targets, invariance by enumeration, equalised rejection, reproducibility."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from tests.runs import ADAPTED_LADDER, variant
from thermonet import config as cfgmod
from thermonet.errors import ConfigError
from thermonet.priors import BoxPrior
from thermonet.runner import Run, detach_log
from thermonet.samplers.hmc import HMC
from thermonet.stats import batch_means
from thermonet.tempering import DeterministicEvenOdd, Ladder, ReplicaExchange, make_scheme
from thermonet.tempering.ladder_adaptation import (
    cumulative_barrier,
    equalised_betas,
    rejection_rates,
)
from thermonet.tempering.warmup import adapt_ladder
from thermonet.testsystems import Gaussian

Z = 4.5  # tolerance in standard errors


def _engine(ladder, *, n=4, stiffness=(1.0, 2.0, 4.0, 8.0), scale=30.0, n_leapfrog=6):
    arch = Gaussian(n, stiffness=list(stiffness), prior_scale=scale)
    prior = BoxPrior.for_architecture(arch)
    return ReplicaExchange(HMC, arch.potential(), ladder, prior=prior, swap=DeterministicEvenOdd(),
                           sampler_config=HMC.Config(n_leapfrog=n_leapfrog, step_size=0.2)), arch


# --- the scheme ---------------------------------------------------------------------------------

def test_deo_alternates_even_and_odd_pairs_by_iteration_and_draws_only_the_tests():
    scheme = make_scheme("deo")
    rng, ref = np.random.default_rng(0), np.random.default_rng(0)
    assert list(scheme.pairs(5, rng, 2)) == [0, 2, 4]
    assert list(scheme.pairs(5, rng, 7)) == [1, 3]
    assert rng.bit_generator.state == ref.bit_generator.state
    with pytest.raises(ConfigError, match="iteration"):
        list(scheme.pairs(5, rng, None))
    re, _ = _engine(Ladder.geometric(0.5, 4.0, 5))
    streams = re.make_streams(2)
    st = re.init(np.zeros(4))
    for i in range(1, 7):
        st, info = re.step(st, streams, iteration=i)
        assert tuple(info.swap_attempted_k) == ((1, 0, 1, 0) if i % 2 == 0 else (0, 1, 0, 1))


def test_even_and_odd_sweeps_each_leave_the_product_distribution_invariant():
    """Three replicas over a discrete set of energies: the transition matrix of the even sweep
    and of the odd sweep (with the engine's own acceptance) keep prod_k exp(-beta_k E_k)."""
    energies = np.array([0.0, 0.4, 1.3, 3.0])
    beta = np.array([2.0, 0.7, 0.0])            # the hottest rung is the prior (beta = 0)
    m = energies.size
    states = list(itertools.product(range(m), repeat=3))
    index = {s: i for i, s in enumerate(states)}
    pi = np.array([math.exp(-sum(beta[k] * energies[s[k]] for k in range(3))) for s in states])
    pi /= pi.sum()
    for pairs in ([0], [1]):                    # even sweep at even iterations, odd at odd
        P = np.zeros((len(states), len(states)))
        for s in states:
            dist = {s: 1.0}
            for j in pairs:
                new: dict[tuple[int, ...], float] = {}
                for t, p in dist.items():
                    a = min(1.0, math.exp((beta[j] - beta[j + 1])
                                          * (energies[t[j]] - energies[t[j + 1]])))
                    swapped = list(t)
                    swapped[j], swapped[j + 1] = t[j + 1], t[j]
                    new[tuple(swapped)] = new.get(tuple(swapped), 0.0) + p * a
                    new[t] = new.get(t, 0.0) + p * (1 - a)
                dist = new
            for t, p in dist.items():
                P[index[s], index[t]] += p
        np.testing.assert_allclose(pi @ P, pi, atol=1e-15)


# --- exactness with a prior rung ----------------------------------------------------------------

def test_nrpt_with_a_prior_rung_samples_every_rung_exactly():
    """<E> = n T / 2 at the finite rungs (the box is far away), and <E> = sum k a^2 / 6 at
    T = inf (uniform in the box |w_i| < a): the prior rung's draws and the swaps with it are
    exact."""
    ladder = Ladder.geometric(0.2, 3.0, 5).with_prior_rung()
    re, arch = _engine(ladder, scale=16.0)
    streams = re.make_streams(11)
    st = re.burn_in(arch.initial_draw, streams, blocks=(20,))
    energies = []
    for i in range(1, 4001):
        st, info = re.step(st, streams, iteration=i)
        if i > 200:
            energies.append(info.energy_k)
    e = np.array(energies)
    k = np.array([1.0, 2.0, 4.0, 8.0])
    a = 8.0                                     # half-width = prior_scale / 2
    for j, t in enumerate(ladder.temperature_k[:-1]):
        m, err = batch_means(e[:, j])
        assert abs(m - 2.0 * t) < Z * err, (t, m, err)
    m, err = batch_means(e[:, -1])
    assert abs(m - k.sum() * a * a / 6) < Z * err
    # replicas regenerated at the top reach the bottom: restarts happen
    assert re.samplers[-1].temperature == math.inf


def test_a_prior_rung_needs_a_prior():
    arch = Gaussian(2)
    with pytest.raises(ConfigError, match="needs a proper prior"):
        ReplicaExchange(HMC, arch.potential(), Ladder.geometric(1, 2, 2).with_prior_rung())


def test_ladders_accept_inf_only_as_the_hottest_rung_above_a_finite_one():
    assert Ladder.from_temperatures([0.5, 1.0, math.inf]).beta_k[-1] == 0.0
    for bad in ([math.inf], [1.0, math.inf, 2.0], [1.0, math.nan]):
        with pytest.raises(ConfigError):
            Ladder.from_temperatures(bad)


# --- ladder adaptation --------------------------------------------------------------------------

def _reference_rejection(beta, n_dims, rng, draws=400_000):
    """1 - E[min(1, exp((b_j - b_{j+1})(E_j - E_{j+1})))] for independent draws of an unboxed
    n-D Gaussian at each rung (E ~ chi^2_n / (2 beta)); an independent NumPy reference."""
    out = []
    for bj, bk in itertools.pairwise(beta):
        ej = rng.chisquare(n_dims, draws) / (2 * bj)
        ek = rng.chisquare(n_dims, draws) / (2 * bk)
        out.append(1.0 - np.mean(np.minimum(1.0, np.exp((bj - bk) * (ej - ek)))))
    return np.array(out)


def test_barrier_helpers_on_known_numbers():
    assert np.allclose(rejection_rates([10, 0, 4], [7, 0, 4]), [0.3, 1.0, 0.0])
    lam = cumulative_barrier([4.0, 2.0, 1.0, 0.5], [0.1, 0.2, 0.3])
    assert np.allclose(lam, [0.6, 0.5, 0.3, 0.0])
    # equal rejection already: nothing moves; an anchor stays put
    beta = np.array([8.0, 4.0, 2.0, 1.0, 0.5])
    assert np.allclose(equalised_betas(beta, [0.2] * 4), beta)
    moved = equalised_betas(beta, [0.6, 0.1, 0.1, 0.6], anchors=[2])
    assert moved[2] == beta[2] and moved[0] == 8.0 and moved[-1] == 0.5


def test_ladder_adaptation_equalises_rejection_and_recovers_the_barrier():
    """An unboxed 4-D Gaussian from 0.05 to 20: a geometric ladder is already optimal for a
    scale-free target, so start from a distorted one; after adaptation the exact per-pair
    rejection rates (computed independently for the new ladder) are equal to within a few
    percent, and the measured barrier matches the exact one."""
    distorted = np.array([0.05, 0.055, 0.07, 0.1, 0.3, 1.5, 6.0, 20.0])
    re, arch = _engine(Ladder.from_temperatures(distorted), stiffness=(1.0,) * 4, scale=1e4)
    streams = re.make_streams(4)
    st = re.burn_in(arch.initial_draw, streams, blocks=(10,))
    st, rounds = adapt_ladder(re, st, streams, rounds=6, first_length=16)
    ref_rng = np.random.default_rng(99)
    before = _reference_rejection(1 / distorted, 4, ref_rng)
    after = _reference_rejection(re.ladder.beta_k, 4, ref_rng)
    assert before.std() / before.mean() > 0.5          # the start was far from equal
    assert after.std() / after.mean() < 0.08, after
    assert re.ladder.temperature_k[0] == 0.05 and re.ladder.temperature_k[-1] == 20.0
    # the last round's measured barrier against the exact barrier of the ladder it ran on
    last = rounds[-1]
    exact = _reference_rejection(1 / np.array(last["temperatures"]), 4, ref_rng).sum()
    n_att = last["iterations"] / 2                      # each pair every other iteration
    err = math.sqrt(sum(r * (1 - r) / n_att for r in last["rejection"]))
    # the reference is itself a mean of 400,000 draws of a quantity in [0, 1] per pair
    ref_err = 0.5 * math.sqrt(len(last["rejection"]) / 400_000)
    assert abs(last["barrier"] - exact) < Z * math.hypot(err, ref_err), (last["barrier"], exact)


# --- in a run -----------------------------------------------------------------------------------

RUN = variant("gaussian_3d", run="""
    seed = 8
    n_iterations = 30
    checkpoint_every = 10
""", sampler="n_leapfrog = 4", ladder=ADAPTED_LADDER)


@pytest.fixture
def nrpt_cfg(tmp_path):
    path = tmp_path / "nrpt.toml"
    path.write_text(RUN)
    return path


def _tree(run_dir):
    import h5py

    out = {}
    for path in sorted(run_dir.rglob("*.h5")):
        with h5py.File(path) as fh:
            fh.visititems(lambda name, obj, p=path: out.__setitem__(
                (p.name, name), obj[()]) if hasattr(obj, "shape") else None)
    return out


def test_an_adapted_run_records_its_rounds_and_resumes_bit_for_bit(nrpt_cfg, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    run = Run.create(cfgmod.load(nrpt_cfg), a).run()
    rounds = run.counters["ladder_rounds"]
    assert [r["iterations"] for r in rounds] == [4, 8, 16]
    t = run.components.engine.ladder.temperature_k
    assert t[0] == 0.1 and t[-1] == math.inf and 1.0 in t          # the anchor held
    Run.create(cfgmod.load(nrpt_cfg, {"run.n_iterations": 10}), b).run()
    detach_log()
    Run.open(b, n_iterations=30, workers=2).run()
    detach_log()
    ta, tb = _tree(a), _tree(b)
    assert ta.keys() == tb.keys()
    for key in ta:
        assert np.array_equal(ta[key], tb[key]), key


def test_the_prior_rung_is_not_flagged_for_accepting_every_draw(nrpt_cfg, tmp_path):
    from click.testing import CliRunner

    from thermonet.cli import main

    Run.create(cfgmod.load(nrpt_cfg), tmp_path / "r").run()
    detach_log()
    out = CliRunner().invoke(main, ["info", str(tmp_path / "r")]).output
    assert "verdict" in out and "rung 5 accepts" not in out     # slot 5 is T = inf
    line = next(ln for ln in out.splitlines() if ln.startswith("ladder"))
    assert "adapted in 3 warm-up rounds (28 iterations)" in line and line.count("->") == 2
    # the ELE expectation is that of this run's own rejection rates and length
    from thermonet.analysis import summarise
    from thermonet.analysis.ideal_exchange import ideal_passages
    from thermonet.analysis.mixing import swap_barrier
    from thermonet.io.trace import read_trace

    s = summarise(tmp_path / "r")
    tr = read_trace(tmp_path / "r")
    start = s["discarded_iterations"]
    r = swap_barrier(tr["swap_attempted_k"][start:], tr["swap_accepted_k"][start:]).rejection
    assert s["ideal_passages"] == ideal_passages(r, 30 - start).to_dict()
    assert "local-exploration efficiency" in out


def test_the_barrier_plot_draws_the_measured_rejection(nrpt_cfg, tmp_path):
    from thermonet.io.trace import read_trace
    from thermonet.plotting import plot

    run = Run.create(cfgmod.load(nrpt_cfg), tmp_path / "r").run()
    detach_log()
    fig = plot("barrier", tmp_path / "r", tmp_path / "b.png")
    assert (tmp_path / "b.png").stat().st_size > 0
    tr = read_trace(tmp_path / "r")
    start = int(0.2 * tr["iteration"].shape[0])               # run.discard default
    att = tr["swap_attempted_k"][start:].sum(axis=0)
    acc = tr["swap_accepted_k"][start:].sum(axis=0)
    lam = np.sum(1.0 - acc / att)
    cumulative = fig.axes[1].lines[0].get_ydata()
    assert cumulative[0] == pytest.approx(lam, rel=1e-12) and cumulative[-1] == 0.0
    assert run.components.engine.ladder.beta_k[-1] == 0.0


def test_the_flow_plot_stacks_the_measured_fractions(nrpt_cfg, tmp_path):
    from thermonet.analysis.replica_flow import replica_flow
    from thermonet.io.trace import read_trace
    from thermonet.plotting import plot

    Run.create(cfgmod.load(nrpt_cfg), tmp_path / "r").run()
    detach_log()
    fig = plot("flow", tmp_path / "r", tmp_path / "f.png")
    assert (tmp_path / "f.png").stat().st_size > 0
    tr = read_trace(tmp_path / "r")
    flow = replica_flow(tr["replica_k"][int(0.2 * tr["iteration"].shape[0]):])
    cold, _, hot = fig.axes[0].collections[:3]
    # the top edge of the first band is the cold fraction; the last band ends at 1
    top = cold.get_paths()[0].vertices[:, 1]
    assert np.allclose(np.sort(np.unique(np.round(top, 12))),
                       np.sort(np.unique(np.round(np.r_[0.0, flow.from_cold], 12))))
    assert np.allclose(flow.from_cold + flow.unlabelled + flow.from_hot, 1.0)


def test_per_rung_masses_from_warm_up_match_the_scales_and_keep_the_chain_exact():
    """A Gaussian with stiffness 1..100: the masses estimated at rung T approach k_i / T (the
    inverse variances), and sampling with them keeps <E> = n T / 2 at every finite rung."""
    from thermonet.tempering.warmup import adapt_masses

    k = np.array([1.0, 10.0, 100.0])
    ladder = Ladder.geometric(0.5, 4.0, 4).with_prior_rung()
    re, arch = _engine(ladder, n=3, stiffness=tuple(k), scale=40.0)
    streams = re.make_streams(5)
    st = re.burn_in(arch.initial_draw, streams, blocks=(20,))
    st = adapt_masses(re, st, streams, n_iterations=1500)
    for j, t in enumerate(ladder.temperature_k[:-1]):
        # 1500 correlated draws: the softest direction's variance has an effective sample of
        # tens, so each mass is good to a factor 1.6; the claim is the scale across two decades
        ratio = re.samplers[j].masses / (k / t)
        assert np.all(np.abs(np.log(ratio)) < np.log(1.6)), (t, ratio)
    energies = []
    for i in range(1, 4001):
        st, info = re.step(st, streams, iteration=1500 + i)
        energies.append(info.energy_k)
    e = np.array(energies)
    for j, t in enumerate(ladder.temperature_k[:-1]):
        m, err = batch_means(e[:, j])
        assert abs(m - 1.5 * t) < Z * err, (t, m, err)


def test_per_rung_masses_are_checkpointed_and_resume_bit_for_bit(nrpt_cfg, tmp_path):
    cfg = tmp_path / "m.toml"
    cfg.write_text(nrpt_cfg.read_text().replace("adapt_rounds = 3", "adapt_rounds = 2\n"
                                                "adapt_masses = 20"))
    a, b = tmp_path / "a", tmp_path / "b"
    run = Run.create(cfgmod.load(cfg), a).run()
    detach_log()
    masses = np.stack(run.components.engine.masses_k)
    assert masses.shape == (6, 3) and not np.allclose(masses, 1.0)
    from thermonet.io.checkpoint import read_checkpoint

    assert np.array_equal(read_checkpoint(a).masses_k, masses)
    Run.create(cfgmod.load(cfg, {"run.n_iterations": 10}), b).run()
    detach_log()
    Run.open(b, n_iterations=30).run()
    detach_log()
    ta, tb = _tree(a), _tree(b)
    assert ta.keys() == tb.keys()
    for key in ta:
        assert np.array_equal(ta[key], tb[key]), key


def test_a_rung_that_stops_accepting_is_flagged_in_the_progress(tmp_path):
    """A potential far stiffer than the step size allows (one adaptation round cannot reach
    dt ~ 1e-3): every trajectory is rejected, and the progress record names the rungs (never
    the prior rung, which always accepts)."""
    cfg = tmp_path / "f.toml"
    cfg.write_text(RUN.replace("adapt_rounds = 3", "adapt_rounds = 0")
                   .replace("burn_in = [3]", "burn_in = []")
                   .replace("prior_scale = 12.0", "prior_scale = 12.0\nstiffness = 1e6")
                   .replace("n_leapfrog = 4", "n_leapfrog = 4\nstep_size = 5.0\n"
                            "adapt_trajectories = 1\nadapt_max_rounds = 1"))
    reports = []
    Run.create(cfgmod.load(cfg), tmp_path / "r").run(reports.append)
    detach_log()
    last = reports[-1]
    assert 0 in last.frozen and 5 not in last.frozen
    assert all(r.frozen == () for r in reports[:19])             # not before a full window
