"""thermonet.testing: the built-ins pass the conformance kit, and broken plugins are caught.

Each broken plugin below differs from a correct one by exactly one defect, so a kit that
failed to check that promise would let it through.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pytest

from thermonet import registry, testing
from thermonet.api import Descent, Walk
from thermonet.samplers.hmc import HMC
from thermonet.testsystems import Gaussian, GaussianPotential


@pytest.mark.parametrize("role, name", [(r, n) for r in ("sampler", "minimiser", "architecture",
                                                         "integrator")
                                        for n in registry.available(r)])
def test_every_installed_plugin_passes(role, name):
    testing.check(role, registry.load(role, name))


# --- samplers -----------------------------------------------------------------------------------

class HotHMC(HMC):
    """Samples at twice its temperature: the <E> = nT/2 check must see it."""

    name: ClassVar[str] = "hot"

    def __init__(self, potential: Any, *, temperature: float = 1.0, **kw: Any) -> None:
        super().__init__(potential, temperature=2 * temperature, **kw)


class GlobalRandomHMC(HMC):
    """Draws from NumPy's global generator: not reproducible from the rng it is given."""

    name: ClassVar[str] = "global"

    def step(self, state, rng):
        return super().step(state, np.random.default_rng(np.random.randint(1 << 30)))


class NoInfo(HMC):
    name: ClassVar[str] = "noinfo"
    Info: ClassVar[Any] = None


@pytest.mark.parametrize("cls, words", [(HotHMC, "standard errors off"),
                                        (GlobalRandomHMC, "same state and seed differ"),
                                        (NoInfo, "no Info class")])
def test_broken_samplers_are_caught(cls, words):
    with pytest.raises(testing.ConformanceError, match=words):
        testing.check_sampler(cls)


# --- minimisers ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class GDConfig:
    step_size: float = 0.1
    max_steps: int = 5000
    grad_tol: float = 1e-6
    respect_box: bool = False
    dt_min: float = 1e-12


class GradientDescent(Descent):
    """Steepest descent on the shared driver: a third party's rule in a few lines."""

    name: ClassVar[str] = "gd"
    Config: ClassVar[type] = GDConfig

    def step(self, walk: Walk, state: Any) -> Any:
        walk.p.fill(0.0)                 # no inertia: the trial is theta - dt^2/2 grad
        e_new, ok = walk.trial()
        if ok and e_new < walk.energy:
            walk.accept()
        else:
            walk.dt *= 0.5
        return state


class StartStaysPut(GradientDescent):
    name: ClassVar[str] = "stays"

    def step(self, walk: Walk, state: Any) -> Any:
        walk.dt *= 0.5
        return state


def test_a_descent_rule_on_the_shared_driver_passes_and_finds_the_minimum():
    testing.check_minimiser(GradientDescent)
    pot = Gaussian(3, stiffness=[1.0, 2.0, 3.0], centre=[0.5, -1.0, 2.0]).potential()
    res = GradientDescent().minimise(pot, np.zeros(3))
    assert res.converged and np.allclose(res.theta, [0.5, -1.0, 2.0], atol=1e-6)
    assert res.n_grad_evals >= res.n_steps // 2 + 1


def test_a_minimiser_that_does_not_move_is_caught():
    with pytest.raises(testing.ConformanceError, match="from the minimum"):
        testing.check_minimiser(StartStaysPut)


# --- architectures ------------------------------------------------------------------------------

class WrongGradientPotential(GaussianPotential):
    def energy_and_grad(self, theta, grad_out=None):
        e, g = super().energy_and_grad(theta, grad_out)
        g *= 1.001
        return e, g


class WrongGradient(Gaussian):
    def potential(self, data=None, **options):
        return WrongGradientPotential(self.stiffness, self.centre)


class IgnoresPriorScale(Gaussian):
    @property
    def default_prior_scale(self) -> float:  # type: ignore[override]
        return 10.0


def test_broken_architectures_are_caught():
    with pytest.raises(testing.ConformanceError, match="finite differences"):
        testing.check_architecture(WrongGradient, {"n": 3})
    with pytest.raises(testing.ConformanceError, match="ignore the setting"):
        testing.check_architecture(IgnoresPriorScale, {"n": 3, "prior_scale": 4.0})
    testing.check_architecture(Gaussian, {"n": 3, "prior_scale": 4.0})
