"""More transitions at a band of rungs: the counts, the configuration's checks, exactness on
an analytic ladder, and a run whose acceptance, cost and resume account for the band."""

from __future__ import annotations

import numpy as np
import pytest

from thermonet import config as cfgmod
from thermonet.analysis import summarise
from thermonet.errors import ConfigError
from thermonet.io.trace import read_trace
from thermonet.priors import BoxPrior
from thermonet.runner import Run, detach_log
from thermonet.samplers.hmc import HMC
from thermonet.stats import batch_means
from thermonet.tempering import DeterministicEvenOdd, Ladder, ReplicaExchange
from thermonet.tempering.ladder import trajectories_from_settings, trajectories_per_rung
from thermonet.testsystems import Gaussian

Z = 4.5  # tolerance in standard errors


def test_counts_per_rung():
    t = [0.1, 0.5, 1.0, 2.0, np.inf]
    assert trajectories_per_rung(t, 2).tolist() == [2, 2, 2, 2, 2]
    assert trajectories_per_rung(t, 2, (0.5, 1.0), 9).tolist() == [2, 9, 9, 2, 2]
    assert trajectories_per_rung(t, 2, (0.5, 1.0), 0).tolist() == [2, 2, 2, 2, 2]
    # a resolved configuration of a run made before the band existed
    assert trajectories_from_settings({"n_trajectories": 3}, t).tolist() == [3] * 5
    assert trajectories_from_settings({"n_trajectories": 1, "slow_band": [1.5, 3.0],
                                       "slow_band_trajectories": 4}, t).tolist() == \
        [1, 1, 1, 4, 1]


@pytest.mark.parametrize(("band", "n", "match"), [
    ([1.0, 2.0], 0, "expected both or neither"),
    ([], 5, "expected both or neither"),
    ([2.0, 1.0], 5, "T_low <= T_high"),
    ([1.0, 2.0], 1, "at least n_trajectories = 2"),
    ([1.0], 5, "expected both or neither"),
])
def test_bad_bands_are_one_line_errors(band, n, match):
    raw = {"ladder": {"temperatures": [0.5, 1.0, 2.0], "n_trajectories": 2,
                      "slow_band": band, "slow_band_trajectories": n},
           "data": {"name": "none"}, "architecture": {"name": "gaussian"}}
    with pytest.raises(ConfigError, match=match) as err:
        cfgmod.resolve(raw)
    assert "\n" not in str(err.value)


def test_a_ladder_with_a_band_samples_every_rung_exactly():
    """<E> = n T / 2 at every finite rung whether it runs 1 or 5 transitions per iteration,
    and the band's rungs do run 5 (their accepted counts exceed 1)."""
    arch = Gaussian(4, stiffness=[1.0, 2.0, 4.0, 8.0], prior_scale=30.0)
    ladder = Ladder.geometric(0.2, 3.0, 5)
    re = ReplicaExchange(HMC, arch.potential(), ladder, prior=BoxPrior.for_architecture(arch),
                         swap=DeterministicEvenOdd(), n_trajectories=1, band=(0.3, 1.0),
                         band_trajectories=5,
                         sampler_config=HMC.Config(n_leapfrog=6, step_size=0.2))
    assert re.n_trajectories_k.tolist() == [1, 5, 5, 1, 1]
    streams = re.make_streams(5)
    st = re.burn_in(arch.initial_draw, streams, blocks=(20,))
    energies, accepted = [], []
    for i in range(1, 3001):
        st, info = re.step(st, streams, iteration=i)
        if i > 200:
            energies.append(info.energy_k)
            accepted.append(info.n_accepted_k)
    e, acc = np.array(energies), np.array(accepted)
    assert acc[:, 1].max() > 1 and acc[:, 0].max() <= 1
    for j, t in enumerate(ladder.temperature_k):
        m, err = batch_means(e[:, j])
        assert abs(m - 2.0 * t) < Z * err, (t, m, err)


RUN = """
[run]
seed = 4
n_iterations = 12
checkpoint_every = 4
[data]
name = "none"
[architecture]
name = "gaussian"
n = 3
[init]
minimise = false
burn_in = [2]
[sampler]
name = "hmc"
n_leapfrog = 3
[ladder]
temperatures = [0.2, 0.5, 1.0, 2.0]
swap_scheme = "deo"
n_trajectories = 2
slow_band = [0.4, 1.0]
slow_band_trajectories = 6
"""


def test_a_run_with_a_band_reports_per_rung_acceptance_and_resumes_exactly(tmp_path):
    cfg = tmp_path / "band.toml"
    cfg.write_text(RUN)
    Run.create(cfgmod.load(cfg), tmp_path / "a").run()
    detach_log()
    Run.create(cfgmod.load(cfg, {"run.n_iterations": 4}), tmp_path / "b").run()
    detach_log()
    Run.open(tmp_path / "b", n_iterations=12).run()
    detach_log()
    ta, tb = read_trace(tmp_path / "a"), read_trace(tmp_path / "b")
    for key in ta:
        assert np.array_equal(ta[key], tb[key]), key
    s = summarise(tmp_path / "a")
    start = s["discarded_iterations"]
    n_acc = ta["n_accepted_k"][start:]
    assert n_acc[:, 1:3].max() > 2                        # the band ran more than 2
    expect = n_acc.sum(axis=0) / (len(n_acc) * np.array([2, 6, 6, 2]))
    assert np.allclose(s["acceptance"], expect, rtol=1e-12)
    assert max(s["acceptance"]) <= 1.0
