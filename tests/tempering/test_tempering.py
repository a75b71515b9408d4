"""The tempering engine: the ladder, the swap rule and schemes, replica exchange statistics,
worker independence, and the deprecated forms it replaces."""

from __future__ import annotations

import math

import numpy as np
import pytest

from thermonet.architectures.mlp import M3
from thermonet.errors import ConfigError
from thermonet.priors import BoxPrior
from thermonet.samplers.hmc import HMC
from thermonet.stats import batch_means
from thermonet.tempering import (
    EvenOdd,
    Ladder,
    RandomPairs,
    ReplicaExchange,
    Streams,
    make_scheme,
    make_streams,
)
from thermonet.testsystems import Gaussian, GaussianMixture

Z = 4.0  # tolerance in standard errors


def _close(samples, exact, z=Z):
    m, err = batch_means(samples)
    assert abs(m - exact) < z * err, f"{m} ± {err} vs exact {exact}"
    return m, err


def _chain(sampler, theta0, n, seed):
    rng = np.random.default_rng(seed)
    st = sampler.adapt(sampler.init(theta0), rng, factor=0.5)
    st = sampler.adapt(st, rng, factor=0.9)
    thetas = []
    for i in range(n + 100):
        st, _ = sampler.step(st, rng)
        if i >= 100:
            thetas.append(st.theta.copy())
    return np.array(thetas)


# --- the ladder ---------------------------------------------------------------------------------

def test_table1_ladders_are_expressible():
    t = Ladder.geometric(1e-2, 1e2, 112).temperature_k
    assert t.size == 112 and t[0] == pytest.approx(1e-2) and t[-1] == pytest.approx(1e2)
    np.testing.assert_allclose(t[1:] / t[:-1], (1e4) ** (1 / 111))
    t = Ladder.geometric(10**-1.5, 10**1.5, 84).temperature_k
    assert t.size == 84 and t[-1] == pytest.approx(10**1.5)
    np.testing.assert_allclose(Ladder.geometric(1.0, 8.0, 4).temperature_k, [1, 2, 4, 8])


def test_ladder_is_one_immutable_representation():
    lad = Ladder.from_temperatures([0.5, 1.0, 4.0])
    assert lad.n_temperatures == len(lad) == 3
    np.testing.assert_array_equal(lad.beta_k, [2.0, 1.0, 0.25])
    with pytest.raises(ValueError):
        lad.temperature_k[0] = 9.0
    with pytest.raises(AttributeError):
        lad.temperature_k = np.ones(3)  # type: ignore[misc]
    assert lad == Ladder.from_temperatures((0.5, 1.0, 4.0))
    assert Ladder.single(2.5).temperature_k.tolist() == [2.5]
    assert Ladder.geometric(0.7, 0.7, 1) == Ladder.single(0.7)


@pytest.mark.parametrize("make,match", [
    (lambda: Ladder.geometric(2.0, 1.0, 4), "t_max = 1.0 is below t_min = 2.0"),
    (lambda: Ladder.geometric(-0.1, 1.0, 4), "t_min = -0.1"),
    (lambda: Ladder.geometric(1.0, 1.0, 3), "t_min = t_max = 1.0 with 3 temperatures"),
    (lambda: Ladder.geometric(0.1, 1.0, 0), "n_temperatures = 0"),
    (lambda: Ladder.from_temperatures([1.0, 0.5]), "strictly ascending"),
    (lambda: Ladder.single(0.0), "temperature T = 0.0"),
    (lambda: make_scheme("all"), "swap_scheme = 'all'"),
    (lambda: make_scheme("random-pairs", n_swaps=-1), "n_swaps = -1"),
    (lambda: make_scheme("even-odd", n_swaps=3), "n_swaps = 3 is a setting of"),
])
def test_ladder_and_scheme_errors_are_one_line(make, match):
    with pytest.raises(ConfigError, match=match) as err:
        make()
    assert "\n" not in str(err.value)


def test_engine_errors():
    pot = Gaussian(n=1).potential()
    with pytest.raises(ConfigError, match="n_trajectories = 0"):
        ReplicaExchange(HMC, pot, Ladder.single(), n_trajectories=0)
    with pytest.raises(ConfigError, match="workers = 0"):
        ReplicaExchange(HMC, pot, Ladder.single(), workers=0)
    re = ReplicaExchange(HMC, pot, Ladder.geometric(1, 2, 3))
    with pytest.raises(ConfigError, match="3 slots; the streams have 2"):
        re.step(re.init(np.zeros(1)), make_streams(0, 2))


def test_streams_are_spawned_from_one_seed_slots_then_swap():
    s = make_streams(11, 3)
    assert isinstance(s, Streams) and len(s.slots) == 3 and len(s.all()) == 4
    seq = np.random.SeedSequence(11).spawn(4)
    for gen, child in zip(s.all(), seq, strict=True):
        assert gen.random() == np.random.Generator(np.random.PCG64(child)).random()


def test_every_slot_gets_the_one_config_object():
    cfg = HMC.Config(n_leapfrog=7)
    re = ReplicaExchange(HMC, Gaussian(n=1).potential(), Ladder.geometric(1, 4, 3),
                         sampler_config=cfg)
    assert all(s.config is cfg for s in re.samplers)
    assert [s.temperature for s in re.samplers] == re.ladder.temperature_k.tolist()


# --- the swap rule ------------------------------------------------------------------------------

def test_swap_rule_satisfies_detailed_balance_by_enumeration():
    """Two replicas at beta_0 > beta_1 over a discrete set of energies: the swap move leaves
    the product of Boltzmann distributions invariant, and satisfies detailed balance."""
    energies = np.array([0.0, 0.3, 1.1, 2.5, 4.0])
    re = ReplicaExchange(HMC, Gaussian(n=1).potential(), Ladder.from_temperatures([0.5, 2.0]))
    b0, b1 = re.ladder.beta_k
    n = energies.size
    pi = np.exp(-b0 * energies[:, None] - b1 * energies[None, :]).ravel()
    pi /= pi.sum()
    P = np.zeros((n * n, n * n))
    rng = np.random.default_rng(6)
    for a in range(n):
        for b in range(n):
            # acceptance probability of the implementation, measured through _try_swap
            slots = [re.samplers[0].init(np.zeros(1))._replace(energy=energies[a]),
                     re.samplers[1].init(np.zeros(1))._replace(energy=energies[b])]
            trials = 4000
            acc = sum(re._try_swap(list(slots), np.arange(2), 0, rng) for _ in range(trials))
            p_acc = min(1.0, math.exp((b0 - b1) * (energies[a] - energies[b])))
            assert abs(acc / trials - p_acc) < Z * math.sqrt(p_acc * (1 - p_acc) / trials) + 1e-12
            P[a * n + b, b * n + a] += p_acc
            P[a * n + b, a * n + b] += 1 - p_acc
    np.testing.assert_allclose(pi @ P, pi, atol=1e-15)
    flow = pi[:, None] * P
    np.testing.assert_allclose(flow, flow.T, atol=1e-15)


def test_even_odd_sweep_attempts_disjoint_pairs():
    re = ReplicaExchange(HMC, Gaussian(n=1).potential(), Ladder.geometric(1, 2, 6),
                         sampler_config=HMC.Config(n_leapfrog=2), swap=EvenOdd())
    streams = re.make_streams(10)
    st = re.init(np.zeros(1))
    seen = set()
    for _ in range(40):
        st, info = re.step(st, streams)
        pattern = tuple(info.swap_attempted_k)
        assert pattern in {(1, 0, 1, 0, 1), (0, 1, 0, 1, 0)}
        seen.add(pattern)
    assert len(seen) == 2


def test_random_pairs_draw_k_uniform_pairs_from_the_swap_stream():
    rng, ref = np.random.default_rng(3), np.random.default_rng(3)
    assert list(RandomPairs().pairs(4, rng)) == list(ref.integers(0, 4, size=5))
    assert list(RandomPairs(2).pairs(4, rng)) == list(ref.integers(0, 4, size=2))


def test_a_one_rung_ladder_draws_nothing_from_the_swap_stream():
    re = ReplicaExchange(HMC, Gaussian(n=1).potential(), Ladder.single(0.5),
                         sampler_config=HMC.Config(n_leapfrog=3), n_trajectories=2)
    streams = re.make_streams(4)
    before = streams.swap.bit_generator.state
    st, info = re.step(re.init(np.zeros(1)), streams)
    assert streams.swap.bit_generator.state == before
    assert info.swap_attempted_k.shape == (0,) and info.energy_k.shape == (1,)
    # and it is exactly the sampler's own chain on the slot's stream
    hmc = HMC(Gaussian(n=1).potential(), temperature=0.5, n_leapfrog=3)
    rng = make_streams(4, 1).slots[0]
    ref = hmc.init(np.zeros(1))
    for _ in range(2):
        ref, _ = hmc.step(ref, rng)
    assert np.array_equal(ref.theta, st.slots[0].theta) and ref.energy == st.slots[0].energy


# --- statistics and determinism --------------------------------------------------------------

@pytest.mark.slow
def test_replica_exchange_recovers_mode_weights_where_hmc_is_stuck():
    """Well-separated two-mode mixture: mode weights at T are ∝ pi_j^(1/T) s_j."""
    arch = GaussianMixture(means=[[-4.0], [4.0]], widths=[0.5, 0.5], weights=[0.3, 0.7],
                           prior_scale=20.0)
    pot, prior = arch.potential(), BoxPrior.for_architecture(arch)
    # plain HMC at T = 0.5 from the minor mode never leaves it (barrier ~ 32/T)
    s = HMC(pot, prior=prior, temperature=0.5, n_leapfrog=10, step_size=0.2)
    assert np.all(_chain(s, np.array([-4.0]), 1500, seed=7) < 0)
    re = ReplicaExchange(HMC, pot, Ladder.geometric(0.5, 64.0, 10), prior=prior,
                         n_trajectories=2,
                         sampler_config=HMC.Config(n_leapfrog=10, step_size=0.2))
    streams = re.make_streams(8)
    st = re.init(np.array([-4.0]))
    xs = []
    for it in range(6000):
        st, _ = re.step(st, streams)
        if it >= 500:
            xs.append([sl.theta[0] for sl in st.slots[:3]])
    xs = np.array(xs)
    for k in range(3):
        _close(xs[:, k] > 0, arch.mode_weights(re.ladder.temperature_k[k])[1])


def test_replica_exchange_result_does_not_depend_on_workers(d50):
    """A run of M3 on D50 with a small ladder: identical for 1 and 2 workers."""
    arch = M3()
    prior = BoxPrior.for_architecture(arch)
    finals = []
    for workers in (1, 2):
        re = ReplicaExchange(HMC, arch.potential(d50), Ladder.geometric(0.1, 10.0, 4),
                             prior=prior, n_trajectories=2, workers=workers,
                             sampler_config=HMC.Config(n_leapfrog=10, step_size=0.02))
        streams = re.make_streams(9)
        theta0 = np.stack([arch.initial_draw(np.random.default_rng(k)) for k in range(4)])
        st = re.init(theta0)
        st = re.adapt(st, streams, factor=0.5)
        infos = []
        for _ in range(5):
            st, info = re.step(st, streams)
            infos.append(info)
        finals.append((st, infos))
    (a, ia), (b, ib) = finals
    for sa, sb in zip(a.slots, b.slots, strict=True):
        assert np.array_equal(sa.theta, sb.theta) and sa.energy == sb.energy
        assert sa.step_size == sb.step_size
    for x, y in zip(ia, ib, strict=True):
        for fx, fy in zip(x, y, strict=True):
            assert np.array_equal(fx, fy)
    assert np.array_equal(a.replica_k, b.replica_k)
    assert sum(int(i.n_accepted_k.sum()) for i in ia) > 0


