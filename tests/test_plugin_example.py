"""The worked third-party plugins of docs/plugins.md (architecture, minimiser, integrator),
discovered through real entry-point metadata (a dist-info directory on sys.path, exactly what
``pip install`` creates)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs" / "plugins.md"


def _code_block(marker: str) -> str:
    """The fenced python block that follows ``<!-- marker -->`` in docs/plugins.md."""
    text = DOCS.read_text()
    m = re.search(rf"<!-- {marker} -->\s*```python\n(.*?)```", text, re.S)
    assert m, f"no code block marked {marker} in {DOCS}"
    return m.group(1)


def test_documented_architecture_plugin_is_discovered_and_correct(tmp_path):
    pkg = tmp_path / "quartic_arch"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(_code_block("example-architecture"))
    dist = tmp_path / "quartic_arch-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: quartic-arch\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[thermonet.architectures]\nquartic_arch.well = quartic_arch:QuarticWell\n")
    script = textwrap.dedent("""
        import numpy as np
        from thermonet import registry
        from thermonet.registry import get_architecture
        spec = registry.available("architecture")["quartic_arch.well"]
        assert spec.distribution == "quartic-arch", spec
        arch = get_architecture("quartic_arch.well", n=3, a=2.0)
        pot = arch.potential()
        theta = np.array([0.5, -1.0, 2.0])
        e, g = pot.energy_and_grad(theta)
        assert abs(e - np.sum(2.0 * theta**4 - theta**2)) < 1e-12, e
        h = 1e-6
        fd = [(pot.energy(theta + h * np.eye(3)[i]) - pot.energy(theta - h * np.eye(3)[i]))
              / (2 * h) for i in range(3)]
        assert np.allclose(g, fd, rtol=1e-6), (g, fd)
        assert arch.fan_in().tolist() == [1, 1, 1]
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "ok"


def _install(tmp_path, package, block, group, entry):
    pkg = tmp_path / package
    pkg.mkdir()
    (pkg / "__init__.py").write_text(_code_block(block))
    dist = tmp_path / f"{package}-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[{group}]\n{entry}\n")
    return {**os.environ, "PYTHONPATH": str(tmp_path)}


def test_documented_minimiser_plugin_passes_the_kit_and_finds_the_minimum(tmp_path):
    env = _install(tmp_path, "sd_halving", "example-minimiser", "thermonet.minimisers",
                   "sd.halving = sd_halving:SteepestDescent")
    check = subprocess.run([sys.executable, "-m", "thermonet", "plugins", "--role", "minimiser",
                            "--check"], capture_output=True, text=True, env=env)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "sd.halving" in check.stdout and "BROKEN" not in check.stdout
    script = textwrap.dedent("""
        import numpy as np
        from thermonet import registry
        from thermonet.testsystems import Gaussian
        pot = Gaussian(3, stiffness=[1.0, 5.0, 20.0], centre=[1.0, -2.0, 0.5]).potential()
        res = registry.get_minimiser("sd.halving").minimise(pot, np.zeros(3))
        assert res.converged and np.allclose(res.theta, [1.0, -2.0, 0.5], atol=1e-6), res
        try:
            registry.get_minimiser("sd.halving", growth=0.5)
        except Exception as err:
            assert type(err).__name__ == "ConfigError" and "growth" in str(err), err
        else:
            raise AssertionError("growth = 0.5 was accepted")
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


def test_documented_integrator_plugin_integrates_a_line_exactly(tmp_path):
    env = _install(tmp_path, "quad", "example-integrator", "thermonet.integrators",
                   "quad.trapezoid = quad:Trapezoid2")
    script = textwrap.dedent("""
        import numpy as np
        from thermonet import registry
        rule = registry.load("integrator", "quad.trapezoid")()
        lam = np.array([0.0, 0.1, 0.35, 0.7, 1.0])
        res = rule.integrate(lam, 3.0 * lam - 1.0)
        assert abs(res.value - 0.5) < 1e-14, res
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr
