"""The worked third-party architecture of docs/plugins.md, discovered through real entry-point
metadata (a dist-info directory on sys.path, exactly what ``pip install`` creates)."""

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
