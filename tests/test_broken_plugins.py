"""Deliberately broken architecture plugins: an energy that is NaN, a gradient of the wrong
shape, a potential that raises (at once, or only after many calls) or that changes the
parameters it is given. Each ends in one line naming the plugin, never a traceback and never a
run that exits 0."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import numpy as np
import pytest
from click.testing import CliRunner

from thermonet import registry
from thermonet.cli import main
from thermonet.testsystems import Gaussian, GaussianPotential


class _Broken(GaussianPotential):
    mode = ""
    calls = 0

    def energy(self, theta):
        return self.energy_and_grad(theta)[0]

    def energy_and_grad(self, theta, grad_out=None):
        type(self).calls += 1
        e, g = super().energy_and_grad(theta, None)
        if grad_out is not None:
            grad_out[:] = g
            g = grad_out
        if self.mode == "nan":
            return float("nan"), g
        if self.mode == "shape":
            return e, np.zeros(len(theta) + 1)
        if self.mode == "raises":
            raise RuntimeError("boom inside the plugin")
        if self.mode == "raises-later" and type(self).calls > 50:
            raise ZeroDivisionError("late\nboom")
        if self.mode == "mutates":
            theta += 1.0
        return e, g


def _architecture(mode: str) -> type:
    potential = type(f"Potential_{mode}", (_Broken,), {"mode": mode, "calls": 0})

    class Broken(Gaussian):
        name = f"broken-{mode}"

        def potential(self, data=None, **options):
            return potential(self.stiffness, self.centre)

    Broken.__name__ = Broken.__qualname__ = f"Broken_{mode.replace('-', '_')}"
    return Broken


MODES = ("nan", "shape", "raises", "raises-later", "mutates")
for _mode in MODES:
    globals()[f"Broken_{_mode.replace('-', '_')}"] = _architecture(_mode)


class _Dist:
    metadata = {"Name": "broken-plugins"}
    version = "0.1"


@pytest.fixture
def broken(monkeypatch):
    real = registry._entry_points

    def fake(group):
        eps = real(group)
        if group == "thermonet.architectures":
            eps += [EntryPoint(f"broken-{m}", f"tests.test_broken_plugins:Broken_"
                               f"{m.replace('-', '_')}", group)._for(_Dist()) for m in MODES]
        return eps

    monkeypatch.setattr(registry, "_entry_points", fake)
    registry.refresh()
    yield
    registry.refresh()


CONFIG = """
[run]
seed = 5
n_iterations = 30
checkpoint_every = 10
[data]
name = "none"
[architecture]
name = "ARCH"
n = 3
[init]
minimise = false
burn_in = [3]
[sampler]
name = "hmc"
n_leapfrog = 5
step_size = 0.3
[ladder]
n_temperatures = 2
t_min = 0.5
t_max = 8.0
"""


@pytest.mark.parametrize("mode, expected", [
    ("nan", "energy at an initial draw is nan"),
    ("shape", "gradient at an initial draw has shape (4,)"),
    ("raises", "raised RuntimeError: boom inside the plugin at an initial draw"),
    ("mutates", "energy_and_grad changed its input theta"),
    ("raises-later", "broken-raises-later' (broken-plugins 0.1, tests.test_broken_plugins:"
                     "Broken_raises_later) raised ZeroDivisionError: late boom (at "),
])
def test_a_broken_architecture_plugin_is_one_line_naming_it(broken, tmp_path, mode, expected):
    cfg = tmp_path / "c.toml"
    cfg.write_text(CONFIG.replace("ARCH", f"broken-{mode}"))
    res = CliRunner().invoke(main, ["-q", "run", str(cfg), "--out", str(tmp_path / "r")])
    assert res.exit_code == 1, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in res.output, res.output
    assert expected in lines[0], lines[0]
    if mode == "raises-later":
        assert "bug in the plugin" in lines[0] and "test_broken_plugins.py:" in lines[0]
    else:
        assert not (tmp_path / "r" / "checkpoint.h5").exists()


def test_a_built_in_plugins_failure_is_not_blamed_on_a_plugin(broken, tmp_path):
    # thermonet's own bugs keep their traceback: blame names only third-party code, even
    # with third-party plugins loaded
    cfg = tmp_path / "c.toml"
    cfg.write_text(CONFIG.replace("ARCH", "broken-nan"))
    CliRunner().invoke(main, ["-q", "run", str(cfg), "--out", str(tmp_path / "r")])
    assert registry._loaded                                   # a plugin was loaded
    scope = {"__name__": "a_user_script", "np": np, "Gaussian": Gaussian}
    exec("def f():\n    try:\n        Gaussian(2).potential().energy_and_grad(np.zeros(5))\n"
         "    except ValueError as err:\n        return err\n", scope)
    err = scope["f"]()
    assert isinstance(err, ValueError) and registry.blame(err.__traceback__) is None
