"""Plugin contract promises: every setting takes effect or is refused; per-parameter arrays."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import numpy as np
import pytest

from thermonet import config as cfgmod
from thermonet import registry, runner
from thermonet.errors import ConfigError, PluginTypeError
from thermonet.priors import BoxPrior
from thermonet.testsystems import Gaussian


class Widths(Gaussian):
    """Per-parameter box widths and masses as arrays (no fan-in trick)."""

    def prior_widths(self):
        return np.arange(1.0, self.n_params + 1.0)

    def masses(self):
        return np.linspace(0.5, 2.0, self.n_params)


class IgnoresPriorScale(Gaussian):
    @property
    def default_prior_scale(self) -> float:  # type: ignore[override]
        return 10.0


class _Dist:
    metadata = {"Name": "contracts"}
    version = "1.0"


@pytest.fixture
def fake_load(monkeypatch):
    real = registry._entry_points

    def fake(group):
        eps = real(group)
        if group == "thermonet.architectures":
            for name, value in (("widths", "tests.test_contracts:Widths"),
                                ("ignores", "tests.test_contracts:IgnoresPriorScale")):
                eps.append(EntryPoint(name, value, group)._for(_Dist()))
        return eps

    monkeypatch.setattr(registry, "_entry_points", fake)
    registry.refresh()
    yield
    registry.refresh()


def test_box_prior_comes_from_the_architectures_widths():
    arch = Widths(4)
    assert np.array_equal(BoxPrior.for_architecture(arch).sigma, [1.0, 2.0, 3.0, 4.0])
    # an explicit scale keeps the paper's c / sqrt(k_i)
    assert np.array_equal(BoxPrior.for_architecture(arch, 6.0).sigma, np.full(4, 6.0))


def test_a_prior_scale_the_architecture_ignores_is_refused(fake_load):
    with pytest.raises(PluginTypeError, match="silently ignore"):
        registry.get_architecture("ignores", n=2, prior_scale=3.0)
    assert registry.get_architecture("gaussian", n=2, prior_scale=3.0).default_prior_scale == 3.0
    assert registry.get_architecture("ignores", n=2).default_prior_scale == 10.0


def _config(mass):
    return cfgmod.resolve({"data": {"name": "none"}, "architecture": {"name": "widths", "n": 3},
                           "init": {"minimise": False, "burn_in": [1]},
                           "sampler": {"name": "hmc", "n_leapfrog": 2, "mass": mass},
                           "run": {"n_iterations": 1}})


def test_runs_take_masses_and_box_from_the_architecture(fake_load):
    comp = runner.build(_config("architecture"))
    assert np.array_equal(comp.engine.masses, np.linspace(0.5, 2.0, 3))
    assert np.array_equal(comp.prior.sigma, [1.0, 2.0, 3.0])
    assert np.array_equal(runner.build(_config("fan_in")).engine.masses, np.ones(3))
    with pytest.raises(ConfigError, match="unit, fan_in or architecture"):
        _config("heavy")


def test_a_data_free_architecture_with_the_default_data_is_refused():
    raw = {"architecture": {"name": "gaussian", "n": 2}, "run": {"n_iterations": 1}}
    with pytest.raises(ConfigError, match='name = "none"'):
        cfgmod.resolve(raw)
    assert cfgmod.resolve({**raw, "data": {"name": "none"}})["data"]["name"] == "none"
