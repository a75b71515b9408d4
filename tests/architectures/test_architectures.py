"""Architectures, parameter layout, priors and the registry."""

from __future__ import annotations

import math
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import numpy as np
import pytest

from thermonet import registry
from thermonet.architectures.mlp import M1, M3, MLP, M3Star
from thermonet.errors import (
    AmbiguousPluginError,
    ConfigError,
    MissingPluginError,
    PluginLoadError,
    PluginTypeError,
)
from thermonet.priors import BoxPrior, GaussianPrior
from thermonet.registry import get_architecture


def test_parameter_counts():
    assert M1().n_params == 10_690 == 257 * 40 + 41 * 10
    assert M3().n_params == 13_970 == 257 * 40 + 2 * 41 * 40 + 41 * 10
    assert M3Star().n_params == 13_970
    assert MLP(5, (3, 4), 2).n_params == 6 * 3 + 4 * 4 + 5 * 2


def test_layout_offsets_of_m3():
    """Baldock & Marzari's released code: W1 [0,10240) b1 [10240,10280) ... bout [13960,13970)."""
    g = M3().param_groups()
    assert g["layer1.weight"] == slice(0, 10240)
    assert g["layer1.bias"] == slice(10240, 10280)
    assert g["layer2.weight"] == slice(10280, 11880)
    assert g["layer3.bias"] == slice(13520, 13560)
    assert g["layer4.weight"] == slice(13560, 13960)
    assert g["layer4.bias"] == slice(13960, 13970)


def test_fan_in_includes_bias():
    k = M3().fan_in()
    assert set(k[:10280]) == {257}
    assert set(k[10280:]) == {41}
    assert set(M1().fan_in()[10280:]) == {41}


def test_box_prior_log_volume_matches_paper():
    """Sum of ln(100/sqrt(k_i)): the paper's 28.960e3 (M3) and 19.946e3 (M1)."""
    assert BoxPrior.for_architecture(M3()).log_volume == pytest.approx(28960.436, abs=5e-4)
    assert BoxPrior.for_architecture(M1()).log_volume == pytest.approx(19945.736, abs=5e-4)
    # M3* uses c = 2000 by default: every ln sigma_i grows by ln 20
    star = BoxPrior.for_architecture(M3Star()).log_volume
    assert star == pytest.approx(28960.436 + 13970 * math.log(20), abs=1e-3)
    assert BoxPrior.for_architecture(M3(), 50.0).log_volume == pytest.approx(
        28960.436 - 13970 * math.log(2), abs=1e-3)


def test_box_membership_is_strict():
    prior = BoxPrior(np.array([2.0, 4.0]))
    assert prior.contains([0.999, -1.999])
    assert not prior.contains([1.0, 0.0])        # on the wall: outside (strict <)
    assert prior.n_outside([1.0, 3.0]) == 2
    assert prior.log_density([0, 0]) == pytest.approx(-math.log(8.0))
    assert prior.log_density([5, 0]) == -np.inf


def test_initial_draws_fill_the_standard_box(rng):
    arch = M3()
    draws = np.stack([arch.initial_draw(rng) for _ in range(50)])
    half = 1 / np.sqrt(arch.fan_in())
    assert np.all(np.abs(draws) <= half)
    # uniform on (-h, h): E|w|/h = 1/2, checked per fan-in group with its standard error
    for kval in (257, 41):
        u = (np.abs(draws) / half)[:, arch.fan_in() == kval].ravel()
        assert abs(u.mean() - 0.5) < 5 * math.sqrt(1 / 12 / u.size)


def test_gaussian_prior_groups_and_gradient(rng):
    arch = M1()
    prior = GaussianPrior.for_architecture(arch, {"weight": 2.0, "layer2.bias": 0.5, "bias": 1.0})
    g = arch.param_groups()
    assert np.all(prior.std[g["layer1.weight"]] == 2.0)
    assert np.all(prior.std[g["layer1.bias"]] == 1.0)
    assert np.all(prior.std[g["layer2.bias"]] == 0.5)
    theta = rng.normal(size=arch.n_params)
    e, grad = prior.energy_and_grad(theta)
    assert e == pytest.approx(np.sum(theta**2 / (2 * prior.std**2)))
    i = 10685
    h = 1e-6
    tp, tm = theta.copy(), theta.copy()
    tp[i] += h
    tm[i] -= h
    assert grad[i] == pytest.approx((prior.energy(tp) - prior.energy(tm)) / (2 * h), rel=1e-6)
    # normalised: log density of a 1-D N(0, s^2) at 0
    one = GaussianPrior(np.array([0.5]))
    assert one.log_density([0.0]) == pytest.approx(-math.log(math.sqrt(2 * math.pi) * 0.5))
    with pytest.raises(ConfigError, match="no Gaussian prior width"):
        GaussianPrior.for_architecture(arch, {"weight": 1.0})
    with pytest.raises(ConfigError, match="unknown prior group"):
        GaussianPrior.for_architecture(arch, {"layer9.weight": 1.0, "default": 1})


def test_mlp_validation_messages():
    with pytest.raises(ConfigError, match="output_activation = 'relu'"):
        MLP(output_activation="relu")
    with pytest.raises(ConfigError, match="positive integers"):
        MLP(hidden=(40, 0))
    with pytest.raises(ConfigError, match="prior scale c = -1.0"):
        BoxPrior.for_architecture(M3(), -1.0)


# --- registry ---------------------------------------------------------------------------------

def test_builtins_are_registered_through_entry_points():
    names = registry.available("architecture")
    assert {"M1", "M3", "M3*", "M3star", "mlp"} <= set(names)
    assert names["M3"].distribution == "thermonet"
    assert type(get_architecture("M3*")) is M3Star
    assert type(get_architecture("M3star")) is M3Star
    a = get_architecture("mlp", hidden=[20], output_activation="logistic")
    assert a.n_params == 257 * 20 + 21 * 10 and a.prior_scale == 2000.0


def test_every_declared_builtin_loads_under_its_name(source_tree_plugins):
    """Each entry point of setup.cfg is found by the registry as thermonet's and passes its
    role's contract check (regression: mlp-regression and hmc-gibbs)."""
    roles = {group: role for role, group in registry.ROLES.items()}
    assert "mlp-regression" in source_tree_plugins["thermonet.architectures"]
    assert "hmc-gibbs" in source_tree_plugins["thermonet.samplers"]
    for group, names in source_tree_plugins.items():
        if group not in roles:
            continue
        found = registry.available(roles[group])
        for name, value in names.items():
            assert found[name].distribution == "thermonet" and found[name].value == value
            cls = registry.load(roles[group], name)
            assert f"{cls.__module__}:{cls.__qualname__}" == value, name


class _FakeDist:
    def __init__(self, name, version="1.0"):
        self.metadata = {"Name": name}
        self.version = version


def _fake_ep(name, value, group, dist):
    ep = EntryPoint(name, value, group)
    return ep._for(_FakeDist(dist)) if hasattr(ep, "_for") else ep


@pytest.fixture
def fake_entry_points(monkeypatch):
    """Replace entry-point discovery by a controlled list (per group)."""
    table: dict[str, list] = {}

    def fake(group):
        return list(table.get(group, []))

    monkeypatch.setattr(registry, "_entry_points", fake)
    registry.refresh()
    yield table
    registry.refresh()


def test_missing_plugin_message_lists_available(fake_entry_points):
    grp = "thermonet.architectures"
    fake_entry_points[grp] = [_fake_ep("M3", "thermonet.architectures.mlp:M3", grp, "thermonet")]
    with pytest.raises(MissingPluginError, match=r"no architecture named 'M9'; available: M3"):
        registry.load("architecture", "M9")


def test_broken_and_wrong_type_plugins_are_reported_not_fatal(fake_entry_points):
    grp = "thermonet.architectures"
    fake_entry_points[grp] = [
        _fake_ep("M3", "thermonet.architectures.mlp:M3", grp, "thermonet"),
        _fake_ep("bad.import", "no_such_module_xyz:Thing", grp, "badpkg"),
        _fake_ep("bad.type", "collections:OrderedDict", grp, "badpkg"),
    ]
    status = registry.check_all("architecture")
    assert status["M3"] is None
    assert "failed to import" in status["bad.import"] and "no_such_module_xyz" in status["bad.import"]
    assert "not a subclass" in status["bad.type"]
    with pytest.raises(PluginLoadError):
        registry.load("architecture", "bad.import")
    with pytest.raises(PluginTypeError):
        registry.load("architecture", "bad.type")
    assert registry.load("architecture", "M3") is M3     # unaffected


def test_two_distributions_claiming_one_name(fake_entry_points):
    grp = "thermonet.architectures"
    fake_entry_points[grp] = [
        _fake_ep("net", "thermonet.architectures.mlp:M3", grp, "alpha"),
        _fake_ep("net", "thermonet.architectures.mlp:M1", grp, "beta"),
    ]
    with pytest.raises(AmbiguousPluginError, match="alpha.*beta"):
        registry.load("architecture", "net")
    assert "net" in registry.conflicts("architecture")


def test_listing_plugins_imports_neither_numba_nor_plugins():
    code = ("import sys, thermonet, thermonet.registry as r; r.available('architecture'); "
            "bad = [m for m in sys.modules if m == 'numba' or m.startswith('thermonet.architectures')"
            " or m.startswith('thermonet.kernels')]; print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_command_line_imports_no_kernel_before_a_command_runs():
    """`thermonet resume` pins the checkpoint's BLAS backend before any kernel is imported
    (importing one fixes the process's backend): the CLI modules must not import them."""
    import thermonet.cli as cli

    modules = sorted(p.stem for p in Path(cli.__file__).parent.glob("*.py")
                     if not p.stem.startswith("_"))
    assert "run" in modules and "evidence" in modules
    code = ("import sys, importlib; "
            f"[importlib.import_module('thermonet.cli.' + m) for m in {modules!r}]; "
            "bad = [m for m in sys.modules if m == 'numba' or m.startswith('thermonet.kernels')]; "
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
