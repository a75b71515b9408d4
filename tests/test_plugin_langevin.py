"""The out-of-tree sampler plugin ``plugins/thermonet-langevin`` (``thermonet_langevin.sd``), installed
with ``pip install -e plugins/thermonet-langevin`` and found through real entry-point metadata.

Skipped when the plugin is not installed, except under CI (``CI`` set), where a missing plugin
is a failure: CI must install it. Its own statistical tests live in
``plugins/thermonet-langevin/tests``; here: discovery, the contract check of
``thermonet.registry.load``, and a replica-exchange run with it as the inner sampler.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.runs import variant
from thermonet import registry
from thermonet.api import Sampler
from thermonet.priors import BoxPrior
from thermonet.stats import batch_means
from thermonet.tempering import Ladder, ReplicaExchange, make_scheme
from thermonet.testsystems import Gaussian

NAME = "thermonet_langevin.sd"
DIST = "thermonet-langevin"
Z = 4.0


@pytest.fixture(scope="module")
def spec():
    registry.refresh()
    found = registry.available("sampler").get(NAME)
    if found is None:
        msg = (f"sampler plugin {NAME!r} is not installed: run "
               "`pip install -e plugins/thermonet-langevin`")
        if os.environ.get("CI"):
            pytest.fail(msg + " (CI must install it)")
        pytest.skip(msg)
    return found


def test_discovered_through_entry_point_metadata(spec):
    assert spec.role == "sampler"
    assert spec.value == "thermonet_langevin:StochasticDynamics"
    dist = md.distribution(DIST)
    assert spec.distribution == dist.metadata["Name"] == DIST
    assert spec.version == dist.version
    assert NAME not in registry.conflicts("sampler")


def test_listing_imports_no_plugin_code(spec):
    """``available`` reads metadata only; ``thermonet plugins --json`` lists it as fine."""
    script = ("import sys; from thermonet import registry; "
              f"assert {NAME!r} in registry.available('sampler'); "
              "assert 'thermonet_langevin' not in sys.modules, 'imported on listing'; "
              "print('ok')")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr

    from click.testing import CliRunner

    from thermonet.cli.plugins import plugins

    result = CliRunner().invoke(plugins, ["--role", "sampler", "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r for r in json.loads(result.output)["sampler"]}
    assert rows[NAME]["status"] == "ok" and rows[NAME]["distribution"] == DIST


def test_load_validates_the_contract(spec):
    cls = registry.load("sampler", NAME)
    registry.validate("sampler", cls, spec)                  # raises PluginTypeError if broken
    assert issubclass(cls, Sampler) and cls.api_version == 2
    for field in ("step_size", "n_leapfrog", "persistence", "wall", "runaway"):
        assert field in cls.Config.__dataclass_fields__
    assert {"energy", "step_size", "momentum"} <= set(cls.State._fields)
    assert {"is_accepted", "log_accept_ratio", "energy_change", "is_divergent", "in_box",
            "step_size", "energy_after"} <= set(cls.Info._fields)
    # it overrides the exchange hook: its momenta persist between updates
    assert cls.take_configuration is not Sampler.take_configuration


def test_inside_replica_exchange_on_a_gaussian(spec):
    """RE with ``sampler = "thermonet_langevin.sd"`` on a 3-D Gaussian in a box over 4 temperatures: every
    slot has <E> = d T / 2 and equilibrium momenta <K> = d T / 2 (the exchanges hand momenta
    over rescaled by sqrt(T / T_donor)), and the swaps happen."""
    arch = Gaussian(n=3, stiffness=[1.0, 4.0, 9.0], prior_scale=40.0)
    cls = registry.load("sampler", NAME)
    re = ReplicaExchange(cls, arch.potential(), Ladder.from_temperatures([0.25, 0.5, 1.0, 2.0]),
                         prior=BoxPrior.for_architecture(arch), n_trajectories=5,
                         sampler_config=cls.Config(step_size=0.3, persistence=0.9),
                         swap=make_scheme("random-pairs"))
    assert all(type(s) is cls for s in re.samplers)
    streams = re.make_streams(20190410)
    st = re.init(np.zeros(3))
    st = re.adapt(st, streams, factor=0.5)
    e_k, k_k, swaps = [], [], 0
    for it in range(3200):
        st, info = re.step(st, streams)
        swaps += int(info.swap_accepted_k.sum())
        if it >= 200:
            e_k.append(info.energy_k)
            k_k.append([re.samplers[k].inv_mass @ sl.momentum**2 / 2
                        for k, sl in enumerate(st.slots)])
    e_k, k_k = np.array(e_k), np.array(k_k)
    assert swaps > 3000
    for k, t in enumerate(re.temperatures):
        for series in (e_k[:, k], k_k[:, k]):
            m, err = batch_means(series)
            assert abs(m - 1.5 * t) < Z * err, (k, t, m, err)


#: the tiny run with the plugin's sampler, a longer burn-in and 10 trajectories per iteration
RUN_CONFIG = variant("tiny", replace={
    "burn_in = [3]": "burn_in = [20]",
    'name = "hmc"\nn_leapfrog = 5\nstep_size = 0.3':
        'name = "thermonet_langevin.sd"\nstep_size = 0.2\npersistence = 0.95\nwall = "reflect"',
    "n_trajectories = 2": "n_trajectories = 10",
})


def test_run_with_the_plugin_resumes_bit_for_bit(spec, tmp_path):
    """Through the runner (a TOML config naming ``thermonet_langevin.sd``): a run stopped at iteration 6
    and resumed to 12 equals a straight run, momenta included (they are part of the state)."""
    from thermonet import config as cfgmod
    from thermonet.io import checkpoint as ckpt
    from thermonet.io import trace as iotrace
    from thermonet.runner import Run, detach_log

    cfg = tmp_path / "sd.toml"
    cfg.write_text(RUN_CONFIG)
    straight, half = tmp_path / "straight", tmp_path / "half"
    try:
        Run.create(cfgmod.load(cfg), straight).run(quiet=True)
        Run.create(cfgmod.load(cfg, {"run.n_iterations": 6}), half).run(quiet=True)
        detach_log()
        Run.open(half, n_iterations=12).run(quiet=True)
    finally:
        detach_log()
    a, b = ckpt.read_checkpoint(straight), ckpt.read_checkpoint(half)
    assert a.iteration == b.iteration == 12 and a.rng_states == b.rng_states
    assert "momentum" in a.slots and a.slots.keys() == b.slots.keys()
    for field in a.slots:
        assert np.array_equal(a.slots[field], b.slots[field]), field
    assert np.any(a.slots["momentum"] != 0)
    ta, tb = iotrace.read_trace(straight, samples=True), iotrace.read_trace(half, samples=True)
    assert ta.keys() == tb.keys()
    for key in ta:
        assert np.array_equal(ta[key], tb[key]), key


def _moments(sampler, n, seed, observe):
    rng = np.random.default_rng(seed)
    state = sampler.init(np.full(sampler.potential.n_params, 0.1))
    rows = []
    for _ in range(n):
        state, _ = sampler.step(state, rng)
        rows.append(observe(state))
    return np.array(rows[n // 20:])


def test_stochastic_dynamics_on_regression_networks(spec):
    """The plugin on ``mlp-regression`` potentials (fixed hyperparameters: it does no Gibbs).
    Without data the target is the Gaussian prior tempered by T, so E[w_i^2] = T sigma_i^2
    per group exactly; with data (tanh network, Gaussian noise) its moments equal the
    built-in HMC's on the same potential. Both within Z combined batch-means errors."""
    from thermonet.architectures.regression import RegressionMLP
    from thermonet.samplers.hmc import HMC

    cls = registry.load("sampler", NAME)
    t = 2.0
    arch = RegressionMLP(1, [2], 1, noise_std=1.0, hierarchical=False, weight_std=0.7,
                         output_bias_std=1.5)
    free = arch.potential(x=np.empty((0, 1)), y=np.empty((0, 1)))
    sd = cls(free, temperature=t, step_size=0.3, n_leapfrog=3, persistence=0.9)
    w2 = _moments(sd, 12000, 3, lambda s: s.theta ** 2)
    # w1 (2), b1 (2): 0.7^2; w2 (2): 0.7^2 / H with H = 2 hidden units; b2: 1.5^2
    var = np.array([0.49] * 4 + [0.49 / 2] * 2 + [2.25])
    for i in range(arch.n_params):
        m, err = batch_means(w2[:, i])
        assert abs(m - t * var[i]) < Z * err, (i, m, t * var[i], err)

    rng = np.random.default_rng(4)
    x = rng.uniform(-2, 2, size=(12, 1))
    y = np.tanh(1.5 * x) + 0.2 * rng.normal(size=(12, 1))
    data_arch = RegressionMLP(1, [2], 1, noise_std=0.3, hierarchical=False, weight_std=1.0,
                              output_bias_std=1.0)
    pot = data_arch.potential(x=x, y=y)

    def observe(s):
        return [pot.half_sse(s.theta), s.energy]

    sd = cls(pot, temperature=t, step_size=0.05, n_leapfrog=5, persistence=0.9)
    hmc = HMC(pot.copy(), temperature=t, step_size=0.1, n_leapfrog=10, step_size_jitter=0.3)
    a, b = _moments(sd, 12000, 5, observe), _moments(hmc, 12000, 6, observe)
    for j in range(2):
        (ma, ea), (mb, eb) = batch_means(a[:, j]), batch_means(b[:, j])
        assert abs(ma - mb) < Z * math.hypot(ea, eb), (j, ma, mb, ea, eb)
    # the energy the plugin carries is the regression potential's own, step after step
    state, rng = sd.init(np.full(pot.n_params, 0.1)), np.random.default_rng(9)
    for _ in range(20):
        state, _ = sd.step(state, rng)
        assert state.energy == pytest.approx(pot.energy(state.theta), rel=1e-12)
